// Batch extraction: hloc feature files in HDF5 (writing part files, listing, merging). See batch.hpp for the layout
// and the crash-safety scheme.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "batch/batch.hpp"
#include "util/file.hpp"
#include "util/half.hpp"
#include "util/hdf5.hpp"

namespace superpoint_rt::batch {
namespace fs = std::filesystem;
namespace {

using util::h5::check;
using util::h5::create_file;
using util::h5::Hid;
using util::h5::io_error;
using util::h5::open_file;
using util::h5::write_dataset;

void write_floats(hid_t group, const char* name, const std::vector<float>& v, std::vector<hsize_t> dims, bool half,
                  const std::string& where) {
  if (!half) return write_dataset(group, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, v.data(), where);
  std::vector<std::uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = util::float_to_half(v[i]);
  Hid f16(util::h5::make_f16_type(), H5Tclose);
  write_dataset(group, name, f16.get(), f16.get(), dims, h.data(), where);
}

/// One image group as hloc writes it (extract_features.py: create_group(name), one dataset per prediction, the
/// "uncertainty" attribute on keypoints).
void write_group(hid_t file, const std::string& name, const HlocFeatures& h, bool half, const std::string& path) {
  const std::string where = path + " [" + name + "]";
  Hid lcpl = util::h5::intermediate_groups();
  Hid g(H5Gcreate2(file, name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g.ok()) io_error("cannot create group", where);
  const hsize_t n = h.scores.size();
  write_floats(g.get(), "keypoints", h.keypoints, {n, 2}, half, where);
  {
    Hid ds(H5Dopen2(g.get(), "keypoints", H5P_DEFAULT), H5Dclose);
    Hid space(H5Screate(H5S_SCALAR), H5Sclose);
    Hid attr(H5Acreate2(ds.get(), "uncertainty", H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!attr.ok()) io_error("cannot create attribute uncertainty", where);
    check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &h.uncertainty), "cannot write attribute", where);
  }
  write_floats(g.get(), "scores", h.scores, {n}, half, where);
  if (!h.descriptors.empty()) write_floats(g.get(), "descriptors", h.descriptors, {256, n}, half, where);
  const std::int64_t size[2] = {h.width, h.height};
  write_dataset(g.get(), "image_size", H5T_STD_I64LE, H5T_NATIVE_INT64, {2}, size, where);
}

}  // namespace

std::vector<std::string> list_h5_names(const std::string& path) {
  std::lock_guard lock(util::h5::lock());
  Hid f = open_file(path, H5F_ACC_RDONLY);
  return util::h5::dataset_parents(f.get(), path);
}

namespace detail {

/// A merge in progress: <output>.tmp holds the output's existing images (include_existing) and those of `inputs` (in
/// order; with `overwrite` the later source wins), takes further groups through write(), and finish() renames it
/// over <output>. Destroyed unfinished, it removes <output>.tmp. Each call holds the HDF5 lock.
class Merger {
 public:
  Merger(const std::vector<std::string>& inputs, const std::string& output, bool overwrite, bool include_existing)
      : output_(output), tmp_(output + ".tmp") {
    std::lock_guard lock(util::h5::lock());
    const bool existing = include_existing && fs::exists(output);
    // Check everything before writing anything: every source readable, no duplicate unless overwrite.
    std::map<std::string, std::string> source_of;  // name -> file
    if (existing)
      for (auto& n : list_h5_names(output)) source_of[n] = output;
    std::vector<std::vector<std::string>> names(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (fs::exists(output) && fs::equivalent(inputs[i], output))
        throw Error(ErrorKind::InvalidArgument, "merge: the input " + inputs[i] + " is the output");
      names[i] = list_h5_names(inputs[i]);
      for (const auto& n : names[i]) {
        auto [it, inserted] = source_of.emplace(n, inputs[i]);
        if (!inserted && !overwrite)
          throw Error(ErrorKind::InvalidArgument, "merge: image '" + n + "' is in both " + it->second + " and " +
                                                      inputs[i] + " (use --overwrite to keep the later one)");
        it->second = inputs[i];
      }
    }
    std::error_code ec;
    fs::remove(tmp_, ec);
    try {
      if (existing) {
        fs::copy_file(output, tmp_, fs::copy_options::overwrite_existing, ec);
        if (ec) io_error("cannot copy to " + tmp_ + " (" + ec.message() + ")", output);
      }
      dst_.emplace(existing ? open_file(tmp_, H5F_ACC_RDWR) : create_file(tmp_));
      if (existing)
        for (auto& n : util::h5::dataset_parents(dst_->get(), tmp_)) present_.insert(n);
      Hid lcpl = util::h5::intermediate_groups();
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        Hid src = open_file(inputs[i], H5F_ACC_RDONLY);
        for (const auto& n : names[i]) {
          replace(n);
          check(H5Ocopy(src.get(), n.c_str(), dst_->get(), n.c_str(), H5P_DEFAULT, lcpl.get()), "cannot copy " + n,
                inputs[i]);
        }
      }
    } catch (...) {
      remove_tmp();
      throw;
    }
  }
  Merger(const Merger&) = delete;
  Merger& operator=(const Merger&) = delete;
  ~Merger() {
    if (!done_) remove_tmp();
  }

  /// One more image (it replaces one of the same name).
  void write(const std::string& name, const HlocFeatures& h, bool half) {
    std::lock_guard lock(util::h5::lock());
    replace(name);
    write_group(dst_->get(), name, h, half, tmp_);
    util::start_writeback(tmp_);
  }

  /// Closes <output>.tmp and renames it over <output>. Returns the number of images in it.
  std::size_t finish() {
    {
      std::lock_guard lock(util::h5::lock());
      check(dst_->close(), "cannot close", tmp_);
    }
    util::rename_into_place(tmp_, output_);
    done_ = true;
    return present_.size();
  }

 private:
  void replace(const std::string& n) {  // the caller holds the lock
    if (!present_.insert(n).second) check(H5Ldelete(dst_->get(), n.c_str(), H5P_DEFAULT), "cannot replace " + n, tmp_);
  }
  void remove_tmp() noexcept {
    std::lock_guard lock(util::h5::lock());
    dst_.reset();
    std::error_code ec;
    fs::remove(tmp_, ec);
  }

  std::string output_, tmp_;
  std::optional<Hid> dst_;
  std::set<std::string> present_;  // the images in <output>.tmp
  bool done_ = false;
};

}  // namespace detail

HlocFeatures to_hloc(const Features& f, OutputConvention output) {
  HlocFeatures h;
  h.height = f.image_size[0];
  h.width = f.image_size[1];
  // hloc: scales = (original_size / size).astype(np.float32), size = the network input; Features::scale is that.
  const float s[2] = {f.scale[0], f.scale[1]};
  const double frame[2] = {static_cast<double>(f.network_size[1]), static_cast<double>(f.network_size[0])};
  const double orig[2] = {static_cast<double>(h.width), static_cast<double>(h.height)};
  const std::size_t n = f.size();
  h.keypoints.resize(2 * n);
  for (std::size_t i = 0; i < n; ++i)
    for (int c = 0; c < 2; ++c) {
      const float k = f.keypoints[2 * i + c];
      if (output == OutputConvention::Hloc) {  // already (kp + .5) * scales - .5
        h.keypoints[2 * i + c] = k;
        continue;
      }
      // Recover the integer network position p (hf: float32(p / frame * W); lightglue: (p + .5) / (frame / W) - .5),
      // then apply hloc's (kp + .5) * scales - .5 in float32 as numpy does.
      const double pd = output == OutputConvention::Hf ? static_cast<double>(k) * frame[c] / orig[c]
                                                       : (static_cast<double>(k) + 0.5) * frame[c] / orig[c] - 0.5;
      const float p = static_cast<float>(std::nearbyint(pd));
      h.keypoints[2 * i + c] = (p + 0.5f) * s[c] - 0.5f;
    }
  h.scores = f.scores;
  if (f.has_descriptors) {
    const std::size_t d = static_cast<std::size_t>(f.descriptor_dim);
    h.descriptors.resize(d * n);
    // In blocks of 16 keypoints: each output row gets a whole cache line at a time, and the block's 16 input rows
    // stay in L1 (element by element, every store went to another row n floats away: 1.5 ms per 2000 keypoints).
    constexpr std::size_t kBlock = 16;
    for (std::size_t i0 = 0; i0 < n; i0 += kBlock) {
      const std::size_t i1 = std::min(n, i0 + kBlock);
      for (std::size_t k = 0; k < d; ++k)
        for (std::size_t i = i0; i < i1; ++i) h.descriptors[k * n + i] = f.descriptors[i * d + k];
    }
  }
  // hloc: uncertainty = getattr(model, "detection_noise", 1) * scales.mean(); SuperPoint.detection_noise = 2.0;
  // np.mean of float32 is float32, the product with a Python float is float64 (numpy 1.x).
  const float mean = (s[0] + s[1]) / 2.0f;
  h.uncertainty = 2.0 * static_cast<double>(mean);
  return h;
}

PartWriter::PartWriter(std::string parts_dir, bool as_half, OutputConvention output)
    : dir_(std::move(parts_dir)), as_half_(as_half), output_(output) {}

void PartWriter::add(const std::string& name, const Features& f) {
  if (final_)
    final_->write(name, to_hloc(f, output_), as_half_);
  else
    pending_.emplace_back(name, to_hloc(f, output_));
}

std::size_t PartWriter::commit() {
  if (final_) throw Error(ErrorKind::Internal, "PartWriter::commit after start_final");
  if (pending_.empty()) return 0;
  std::lock_guard lock(util::h5::lock());
  util::h5::write_part_file(dir_, seq_++, [&](hid_t file, const std::string& tmp) {
    for (const auto& [name, h] : pending_) write_group(file, name, h, as_half_, tmp);
  });
  const std::size_t n = pending_.size();
  pending_.clear();
  return n;
}

std::vector<std::string> part_files(const std::string& output) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(output + ".parts", ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".h5") out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t merge_h5(const std::vector<std::string>& inputs, const std::string& output, bool overwrite,
                     bool include_existing) {
  return detail::Merger(inputs, output, overwrite, include_existing).finish();
}

PartWriter::~PartWriter() = default;

void PartWriter::start_final(const std::vector<std::string>& parts, const std::string& output) {
  final_ = std::make_unique<detail::Merger>(parts, output, /*overwrite=*/true, /*include_existing=*/true);
  for (const auto& [name, h] : pending_) final_->write(name, h, as_half_);
  pending_.clear();
}

std::size_t PartWriter::finish() {
  if (!final_) throw Error(ErrorKind::Internal, "PartWriter::finish without start_final");
  const std::size_t n = final_->finish();
  final_.reset();
  return n;
}

}  // namespace superpoint_rt::batch
