// hloc's files for matching (h5.hpp) and the public readers of superpoint_rt/match.hpp (feature_names,
// read_matches).
#include "match/h5.hpp"

#include <filesystem>
#include <limits>
#include <mutex>

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

// h5py's `path in group`: every component of `path` exists (H5Lexists needs the parents to exist).
bool path_exists(hid_t file, const std::string& path) {
  for (std::size_t slash = path.find('/');; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    if (part.empty() || H5Lexists(file, part.c_str(), H5P_DEFAULT) <= 0) return false;
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

// The dims of a dataset whose values are numbers (float or integer), checked against `rank` and `max_values`.
std::vector<hsize_t> numeric_dims(hid_t ds, int rank, std::int64_t max_values, const std::string& where) {
  Hid type(H5Dget_type(ds), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) invalid(where + ": not a numeric dataset");
  Hid space(H5Dget_space(ds), H5Sclose);
  const int r = H5Sget_simple_extent_ndims(space.get());
  if (r != rank) invalid(where + ": " + std::to_string(r) + " dimensions (expected " + std::to_string(rank) + ")");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "cannot read the shape", where);
  long double values = 1;
  for (hsize_t d : dims) values *= static_cast<long double>(d);
  if (values > static_cast<long double>(max_values))
    invalid(where + ": " + std::to_string(static_cast<unsigned long long>(values)) + " values (at most " +
            std::to_string(max_values) + ")");
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

}  // namespace

namespace {

Hid open_features(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorKind::NotFound, "features file not found: " + path);
  std::lock_guard lock(util::h5::lock());
  return util::h5::open_file(path, H5F_ACC_RDONLY);
}

}  // namespace

FeatureReader::FeatureReader(const std::string& path) : path_(path), file_(open_features(path)) {
  std::lock_guard lock(util::h5::lock());
  names_ = util::h5::dataset_parents(file_.get(), path);
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
  const auto dims = numeric_dims(ds.get(), 2, kMaxRecordValues, where + " descriptors");
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
  using util::h5::Hid;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorKind::NotFound, "matches file not found: " + path);
  std::lock_guard lock(util::h5::lock());
  Hid f = util::h5::open_file(path, H5F_ACC_RDONLY);
  // hloc find_pair: the pair, its reverse, then the older "_" separator in both orders.
  const std::string forms[4] = {names_to_pair(name0, name1), names_to_pair(name1, name0),
                                names_to_pair(name0, name1, "_"), names_to_pair(name1, name0, "_")};
  int found = -1;
  for (int i = 0; i < 4 && found < 0; ++i)
    if (matching::detail::path_exists(f.get(), forms[i])) found = i;
  if (found < 0)
    throw Error(ErrorKind::NotFound, path + ": no pair (" + name0 + ", " + name1 +
                                         ") in either order (matched with another list of pairs?)");
  const std::string& key = forms[found];
  const std::string where = path + " [" + key + "]";
  Hid m = matching::detail::open_dataset(f.get(), key + "/matches0", where);
  Hid s = matching::detail::open_dataset(f.get(), key + "/matching_scores0", where);
  const auto n = matching::detail::numeric_dims(m.get(), 1, matching::detail::kMaxRecordValues, where + " matches0")[0];
  const auto ns = matching::detail::numeric_dims(s.get(), 1, matching::detail::kMaxRecordValues, where + " scores")[0];
  if (ns != n)
    throw Error(ErrorKind::InvalidArgument,
                where + ": " + std::to_string(n) + " matches0 but " + std::to_string(ns) + " matching_scores0");
  std::vector<std::int32_t> m0(n);
  if (n)
    util::h5::check(H5Dread(m.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, m0.data()), "cannot read", where);
  const std::vector<float> s0 = matching::detail::read_floats(s.get(), n, where);
  PairMatches out;
  const bool reverse = found % 2 == 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (m0[i] == -1) continue;  // hloc: np.where(matches != -1)
    const auto a = static_cast<std::int32_t>(i);
    out.pairs.push_back(reverse ? std::array<std::int32_t, 2>{m0[i], a} : std::array<std::int32_t, 2>{a, m0[i]});
    out.scores.push_back(s0[i]);
  }
  return out;
}

}  // namespace superpoint_rt
