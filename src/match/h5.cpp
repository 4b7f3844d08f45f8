// hloc's files (h5.hpp) and the public readers of superpoint_rt/match.hpp (feature_names, read_matches).
#include "match/h5.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>
#include <utility>

#include "batch/batch.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/half.hpp"
#include "util/hdf5.hpp"

namespace superpoint_rt {
namespace matching::detail {
namespace {

namespace fs = std::filesystem;
using util::h5::check;
using util::h5::Hid;
using util::h5::io_error;

[[noreturn]] void invalid(const std::string& m) {
  throw Error(ErrorKind::InvalidArgument, m);
}

// h5py's `path in group`: every component of `path` exists (H5Lexists needs the parents to exist). Only hard links
// count: hloc's files have no others, and following a soft or external link from a file given to us would open other
// files on the disk (an external link names any path) or loop.
bool path_exists(hid_t file, const std::string& path) {
  for (std::size_t slash = path.find('/');; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    if (part.empty() || H5Lexists(file, part.c_str(), H5P_DEFAULT) <= 0) return false;
    H5L_info_t info;
    if (H5Lget_info(file, part.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD) return false;
    if (slash == std::string::npos) return true;
  }
}

// Whether `type` is IEEE binary16 (h5py's float16), which is widened here exactly rather than by HDF5's generic
// conversion.
bool is_half(hid_t type) {
  if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2) return false;
  std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  return spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && H5Tget_ebias(type) == 15 &&
         H5Tget_order(type) == H5T_ORDER_LE;
}

// Whether the product of `dims` is over `max_values`; `text` gets the shape and the product for a message (without
// overflow: the product is only formed while it fits 64 bits).
bool too_many(const hsize_t* dims, int rank, std::int64_t max_values, std::string& text) {
  std::uint64_t values = 1;
  bool overflow = false;
  std::string shape;
  for (int i = 0; i < rank; ++i) {
    shape += (i ? ", " : "") + std::to_string(dims[i]);
    overflow = overflow || __builtin_mul_overflow(values, std::uint64_t{dims[i]}, &values);
  }
  if (std::find(dims, dims + rank, hsize_t{0}) != dims + rank) values = 0, overflow = false;
  text = (overflow ? std::string("over 2^64") : std::to_string(values)) + " values (at most " +
         std::to_string(max_values) + ") in shape (" + shape + ")";
  return overflow || values > static_cast<std::uint64_t>(max_values);
}

// The dims of a dataset whose values are numbers (float or integer), checked against `rank` and `max_values`, before
// anything is allocated for them. Also checked: the stored value is at most kMaxValueBytes (numpy's widest, float128:
// HDF5's conversion buffers grow with it), the values are stored in this file (no external raw-data files or virtual
// dataset sources, which name other files on the disk), and a chunked dataset's chunk holds at most `max_values`
// values (HDF5 allocates a whole chunk to read a filtered one, whatever the dataset's size).
std::vector<hsize_t> numeric_dims(hid_t ds, int rank, std::int64_t max_values, const std::string& where) {
  Hid type(H5Dget_type(ds), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) invalid(where + ": not a numeric dataset");
  const std::size_t value_bytes = H5Tget_size(type.get());
  if (value_bytes < 1 || value_bytes > kMaxValueBytes)
    invalid(where + ": values of " + std::to_string(value_bytes) + " bytes (1.." + std::to_string(kMaxValueBytes) +
            ")");
  Hid space(H5Dget_space(ds), H5Sclose);
  const int r = H5Sget_simple_extent_ndims(space.get());
  if (r != rank) invalid(where + ": " + std::to_string(r) + " dimensions (expected " + std::to_string(rank) + ")");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "cannot read the shape", where);
  std::string text;
  if (too_many(dims.data(), rank, max_values, text)) invalid(where + ": " + text);
  Hid dcpl(H5Dget_create_plist(ds), H5Pclose);
  if (!dcpl.ok()) io_error("cannot read the storage properties", where);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT && layout != H5D_CHUNKED)
    invalid(where + ": not stored in the file (virtual dataset or unknown layout)");
  if (H5Pget_external_count(dcpl.get()) != 0) invalid(where + ": its values are stored in external files");
  // HDF5 1.10 trusts the stored sizes of a dataset's values: an unfiltered chunk stored in fewer bytes than its shape
  // needs was copied past its buffer by H5Dread (fuzz_h5, fuzz/regressions/h5/crash-498b5c1a...: a 505-byte chunk of
  // 16 x 8 float32). So the bytes stored must be those the shape needs: a compact dataset's (in its object header)
  // at least every value's, an unfiltered chunk's exactly a whole chunk's (a filtered chunk is decoded into a buffer
  // of the chunk's size). too_many() bounded the counts: no overflow below.
  auto product = [](const hsize_t* d, int n) {
    std::uint64_t v = 1;
    for (int i = 0; i < n; ++i) v *= d[i];
    return v;
  };
  if (layout == H5D_COMPACT) {
    const std::uint64_t stored = H5Dget_storage_size(ds), need = product(dims.data(), rank) * value_bytes;
    if (stored < need)
      invalid(where + ": compact storage holds " + std::to_string(stored) + " bytes, its shape needs " +
              std::to_string(need));
  }
  if (layout == H5D_CHUNKED) {
    hsize_t chunk[H5S_MAX_RANK];
    const int cr = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk);
    if (cr < 1 || cr > H5S_MAX_RANK) invalid(where + ": unreadable chunk shape");
    if (too_many(chunk, cr, max_values, text)) invalid(where + ": chunks of " + text);
    if (H5Pget_nfilters(dcpl.get()) == 0) {
      hsize_t chunks = 0;
      check(H5Dget_num_chunks(ds, space.get(), &chunks), "cannot count the chunks", where);
      if (chunks > kMaxCheckedChunks)
        invalid(where + ": " + std::to_string(chunks) + " unfiltered chunks (at most " +
                std::to_string(kMaxCheckedChunks) + ")");
      const std::uint64_t need = product(chunk, cr) * value_bytes;
      for (hsize_t i = 0; i < chunks; ++i) {
        hsize_t stored = 0;
        haddr_t addr = 0;
        unsigned mask = 0;
        check(H5Dget_chunk_info(ds, space.get(), i, nullptr, &mask, &addr, &stored), "cannot read a chunk's index",
              where);
        if (stored != need)
          invalid(where + ": an unfiltered chunk stored in " + std::to_string(stored) + " bytes (its shape needs " +
                  std::to_string(need) + ")");
      }
    }
  }
  // The values must be in the file (issue 32: a 3,736-byte file declared (1, 2^27) descriptors, all of them HDF5's
  // fill value, and matching them took 10 GB): every value's bytes are stored, or for a filtered (compressed)
  // dataset at most kMaxFilterRatio times what is stored. The declared sizes of a file are then bounded by its size.
  {
    const std::uint64_t declared = product(dims.data(), rank) * value_bytes;
    const std::uint64_t stored = H5Dget_storage_size(ds);
    const bool filtered = layout == H5D_CHUNKED && H5Pget_nfilters(dcpl.get()) > 0;
    if (declared > (filtered ? stored * kMaxFilterRatio : stored))
      invalid(where + ": declares " + std::to_string(declared) + " bytes of values but stores " +
              std::to_string(stored) + (filtered ? " compressed" : "") +
              " (values that are not in the file are refused, not read as the fill value)");
  }
  return dims;
}

// Reads `n` values of a numeric dataset as float32 (float16 widened exactly; others converted by HDF5).
std::vector<float> read_floats(hid_t ds, std::size_t n, const std::string& where) {
  std::vector<float> out(n);
  if (n == 0) return out;
  Hid type(H5Dget_type(ds), H5Tclose);
  if (is_half(type.get())) {
    std::vector<std::uint16_t> h(n);
    check(H5Dread(ds, type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, h.data()), "cannot read", where);
    for (std::size_t i = 0; i < n; ++i) out[i] = util::half_to_float(h[i]);
  } else {
    check(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "cannot read", where);
  }
  return out;
}

Hid open_dataset(hid_t file, const std::string& path, const std::string& where) {
  if (!path_exists(file, path)) throw Error(ErrorKind::NotFound, where + ": no dataset " + path);
  Hid ds(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) invalid(where + ": " + path + " is not a dataset");
  return ds;
}

// A dataset that a well-formed record has: missing, the file is malformed (InvalidArgument), not the record absent.
Hid open_required(hid_t file, const std::string& path, const std::string& where) {
  if (!path_exists(file, path)) invalid(where + ": no dataset " + path);
  return open_dataset(file, path, where);
}

H5T_class_t type_class(hid_t ds) {
  Hid type(H5Dget_type(ds), H5Tclose);
  return H5Tget_class(type.get());
}

bool stored_as_half(hid_t ds) {
  Hid type(H5Dget_type(ds), H5Tclose);
  return is_half(type.get());
}

Hid open_hdf5(const std::string& path, const char* what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorKind::NotFound, std::string(what) + " file not found: " + path);
  std::lock_guard lock(util::h5::lock());
  return util::h5::open_file(path, H5F_ACC_RDONLY);
}

}  // namespace

FeatureReader::FeatureReader(const std::string& path) : FeatureReader(open_hdf5(path, "features"), path) {}

FeatureReader::FeatureReader(Hid file, std::string path, std::int64_t max_values)
    : path_(std::move(path)), file_(std::move(file)), max_values_(std::min(max_values, kMaxRecordValues)) {
  std::lock_guard lock(util::h5::lock());
  names_ = util::h5::dataset_parents(file_.get(), path_);
  name_set_.insert(names_.begin(), names_.end());
}

FeatureReader::~FeatureReader() {
  std::lock_guard lock(util::h5::lock());
  file_.close();
}

bool FeatureReader::has(const std::string& name) const {
  return name_set_.count(name) != 0;
}

std::pair<int, std::size_t> FeatureReader::shape(const std::string& name) const {
  std::lock_guard lock(util::h5::lock());
  const std::string where = path_ + " [" + name + "]";
  Hid ds = open_dataset(file_.get(), name + "/descriptors", where);
  const auto dims = numeric_dims(ds.get(), 2, max_values_, where + " descriptors");
  if (dims[0] < 1 || dims[0] > static_cast<hsize_t>(kMaxDescriptorDim))
    invalid(where + ": descriptors of dim " + std::to_string(dims[0]) + " (hloc's layout is (dim, keypoints), dim 1.." +
            std::to_string(kMaxDescriptorDim) + ")");
  return {static_cast<int>(dims[0]), static_cast<std::size_t>(dims[1])};
}

DescriptorRecord FeatureReader::read(const std::string& name) const {
  const auto [dim, n] = shape(name);
  std::lock_guard lock(util::h5::lock());
  const std::string where = path_ + " [" + name + "]";
  Hid ds = open_dataset(file_.get(), name + "/descriptors", where);
  const std::vector<float> dim_major = read_floats(ds.get(), static_cast<std::size_t>(dim) * n, where + " descriptors");
  DescriptorRecord r;
  r.values.resize(dim_major.size());
  const auto d = static_cast<std::size_t>(dim);
  for (std::size_t k = 0; k < d; ++k)
    for (std::size_t i = 0; i < n; ++i) r.values[i * d + k] = dim_major[k * n + i];
  r.n = n;
  r.dim = dim;
  return r;
}

KeypointRecord FeatureReader::keypoints(const std::string& name) const {
  std::lock_guard lock(util::h5::lock());
  const std::string where = path_ + " [" + name + "]";
  KeypointRecord r;
  {
    const std::string w = where + " keypoints";
    Hid ds = open_dataset(file_.get(), name + "/keypoints", where);
    const auto dims = numeric_dims(ds.get(), 2, max_values_, w);
    if (type_class(ds.get()) != H5T_FLOAT) invalid(w + ": not a float dataset");
    if (dims[1] != 2)
      invalid(w + ": shape (" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + "), expected (N, 2)");
    r.half = stored_as_half(ds.get());
    r.xy = read_floats(ds.get(), static_cast<std::size_t>(dims[0]) * 2, w);
    for (std::size_t i = 0; i < r.xy.size(); ++i)
      if (!std::isfinite(r.xy[i])) invalid(w + ": keypoint " + std::to_string(i / 2) + " is not finite");
  }
  const std::string w = where + " image_size";
  Hid ds = open_required(file_.get(), name + "/image_size", where);
  const auto dims = numeric_dims(ds.get(), 1, 2, w);
  if (type_class(ds.get()) != H5T_INTEGER || dims[0] != 2) invalid(w + ": expected two integers (width, height)");
  std::int64_t wh[2] = {0, 0};
  check(H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, wh), "cannot read", w);
  if (wh[0] < 1 || wh[1] < 1 || wh[0] > kMaxImageSide || wh[1] > kMaxImageSide)
    invalid(w + ": [" + std::to_string(wh[0]) + ", " + std::to_string(wh[1]) + "] is not a (width, height) in [1, " +
            std::to_string(kMaxImageSide) + "]");
  r.width = wh[0];
  r.height = wh[1];
  // hloc's keypoints lie on the image (pixel centres at integers: [-0.5, side - 0.5]); half a pixel more is allowed,
  // and float16's rounding of the side (hloc stores them as float16: half a unit of 2^-10 relative at most). Others
  // would be drawn or used far off it (issue 32: plot-matches looped 1e15 times on a keypoint at (1e15, 20)).
  const double mx = 1.0 + static_cast<double>(r.width) / 1024, my = 1.0 + static_cast<double>(r.height) / 1024;
  for (std::size_t i = 0; i < r.xy.size(); i += 2) {
    const double x = r.xy[i], y = r.xy[i + 1];
    if (!(x >= -mx && x <= static_cast<double>(r.width) - 1 + mx && y >= -my &&
          y <= static_cast<double>(r.height) - 1 + my))
      invalid(where + " keypoints: keypoint " + std::to_string(i / 2) + " at (" + std::to_string(x) + ", " +
              std::to_string(y) + ") lies outside its image_size " + std::to_string(r.width) + "x" +
              std::to_string(r.height));
  }
  return r;
}

MatchReader::MatchReader(const std::string& path) : MatchReader(open_hdf5(path, "matches"), path) {}

MatchReader::MatchReader(Hid file, std::string path, std::int64_t max_values)
    : path_(std::move(path)), file_(std::move(file)), max_values_(std::min(max_values, kMaxRecordValues)) {}

MatchReader::~MatchReader() {
  std::lock_guard lock(util::h5::lock());
  file_.close();
}

std::optional<std::pair<std::string, bool>> MatchReader::find(const std::string& name0,
                                                              const std::string& name1) const {
  std::lock_guard lock(util::h5::lock());
  // hloc utils/io.py find_pair: names_to_pair both ways, then names_to_pair_old (separator "_") both ways.
  for (const char* sep : {"/", "_"})
    for (const bool reversed : {false, true}) {
      std::string key = reversed ? names_to_pair(name1, name0, sep) : names_to_pair(name0, name1, sep);
      if (path_exists(file_.get(), key + "/matches0")) return std::make_pair(std::move(key), reversed);
    }
  return std::nullopt;
}

MatchRecord MatchReader::read(const std::string& name0, const std::string& name1, bool with_scores,
                              const std::optional<std::array<std::size_t, 2>>& sizes) const {
  std::lock_guard lock(util::h5::lock());
  const auto found = find(name0, name1);
  if (!found)
    throw Error(ErrorKind::NotFound, path_ + ": no pair (" + name0 + ", " + name1 + ") in either order (group " +
                                         names_to_pair(name0, name1) + "; matched with another list of pairs?)");
  const auto& [key, reversed] = *found;
  const std::string where = path_ + " [" + key + "]", wm = where + " matches0";
  Hid m = open_dataset(file_.get(), key + "/matches0", where);
  const auto n = static_cast<std::size_t>(numeric_dims(m.get(), 1, max_values_, wm)[0]);
  if (type_class(m.get()) != H5T_INTEGER) invalid(wm + ": not an integer dataset");
  // The stored direction: matches0 has one entry per keypoint of the group's first image, indices into the other.
  const std::string& other_name = reversed ? name0 : name1;
  std::int64_t other = std::numeric_limits<std::int32_t>::max();  // unknown: any index of the result's type
  if (sizes) {
    const std::size_t first = (*sizes)[reversed ? 1 : 0];
    other = static_cast<std::int64_t>((*sizes)[reversed ? 0 : 1]);
    if (n != first)
      invalid(wm + ": shape (" + std::to_string(n) + ",), expected (" + std::to_string(first) +
              ",): one entry per keypoint of " + (reversed ? name1 : name0));
  }
  std::vector<std::int64_t> m0(n);
  if (n) check(H5Dread(m.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, m0.data()), "cannot read", wm);
  MatchRecord out;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < n; ++i) {
    if (m0[i] == -1) continue;  // hloc: np.where(matches != -1)
    if (m0[i] < 0 || m0[i] >= other)
      invalid(wm + ": entry " + std::to_string(i) + " = " + std::to_string(m0[i]) +
              " is neither -1 nor a keypoint index of " + other_name +
              (sizes ? " (it has " + std::to_string(other) + ")" : std::string()));
    rows.push_back(i);
    const auto a = static_cast<std::int32_t>(i), b = static_cast<std::int32_t>(m0[i]);
    // hloc: np.flip(matches, -1) when the pair was stored reversed.
    out.matches.pairs.push_back(reversed ? std::array<std::int32_t, 2>{b, a} : std::array<std::int32_t, 2>{a, b});
  }
  if (with_scores) {
    const std::string ws = where + " matching_scores0";
    Hid s = open_required(file_.get(), key + "/matching_scores0", where);
    const auto ns = static_cast<std::size_t>(numeric_dims(s.get(), 1, max_values_, ws)[0]);
    if (ns != n)
      invalid(ws + ": " + std::to_string(ns) + " entries, expected (" + std::to_string(n) + ",) as matches0");
    out.scores_half = stored_as_half(s.get());
    const std::vector<float> all = read_floats(s.get(), n, ws);
    out.matches.scores.reserve(rows.size());
    for (const std::size_t i : rows) out.matches.scores.push_back(all[i]);
  }
  return out;
}

std::set<std::string> existing_pairs(const std::string& output) {
  std::set<std::string> keys;
  std::error_code ec;
  std::vector<std::string> files = batch::part_files(output);
  if (fs::exists(output, ec)) files.push_back(output);
  std::lock_guard lock(util::h5::lock());
  for (const auto& f : files) {
    Hid h = util::h5::open_file(f, H5F_ACC_RDONLY);
    for (auto& k : util::h5::dataset_parents(h.get(), f)) keys.insert(std::move(k));
  }
  return keys;
}

bool has_pair(const std::set<std::string>& keys, const std::string& a, const std::string& b) {
  return keys.count(names_to_pair(a, b)) || keys.count(names_to_pair(b, a)) || keys.count(names_to_pair(a, b, "_")) ||
         keys.count(names_to_pair(b, a, "_"));
}

MatchPartWriter::MatchPartWriter(std::string output) : output_(std::move(output)) {}

void MatchPartWriter::add(const std::string& name0, const std::string& name1, const Matches& m) {
  Pending p;
  p.key = names_to_pair(name0, name1);
  p.matches0.resize(m.matches0.size());
  p.scores0.resize(m.scores0.size());
  for (std::size_t i = 0; i < m.matches0.size(); ++i) {
    if (m.matches0[i] > std::numeric_limits<std::int16_t>::max())
      invalid("matches of " + p.key + ": index " + std::to_string(m.matches0[i]) + " does not fit hloc's int16");
    p.matches0[i] = static_cast<std::int16_t>(m.matches0[i]);  // hloc: .short()
    p.scores0[i] = util::float_to_half(m.scores0[i]);          // hloc: .half()
  }
  pending_.push_back(std::move(p));
}

std::size_t MatchPartWriter::commit() {
  if (pending_.empty()) return 0;
  std::lock_guard lock(util::h5::lock());
  util::h5::write_part_file(output_ + ".parts", seq_++, [&](hid_t file, const std::string& tmp) {
    Hid lcpl = util::h5::intermediate_groups();
    Hid f16(util::h5::make_f16_type(), H5Tclose);
    for (const auto& p : pending_) {
      const std::string where = tmp + " [" + p.key + "]";
      Hid g(H5Gcreate2(file, p.key.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!g.ok()) io_error("cannot create group", where);
      const std::vector<hsize_t> dims{p.matches0.size()};
      util::h5::write_dataset(g.get(), "matches0", H5T_STD_I16LE, H5T_NATIVE_INT16, dims, p.matches0.data(), where);
      util::h5::write_dataset(g.get(), "matching_scores0", f16.get(), f16.get(), dims, p.scores0.data(), where);
    }
  });
  const std::size_t n = pending_.size();
  pending_.clear();
  return n;
}

}  // namespace matching::detail

std::vector<std::string> feature_names(const std::string& path) {
  return matching::detail::FeatureReader(path).names();
}

PairMatches read_matches(const std::string& path, const std::string& name0, const std::string& name1) {
  return matching::detail::MatchReader(path).read(name0, name1, true).matches;
}

}  // namespace superpoint_rt
