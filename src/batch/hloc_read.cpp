// Reading hloc feature and match files (hloc_read.hpp): every dataset's shape and type is checked before its memory
// is allocated.
#include "batch/hloc_read.hpp"

#include <cmath>
#include <utility>

#include "batch/batch.hpp"

namespace superpoint_rt::batch {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::InvalidArgument, where + ": " + what);
}

/// Whether every link of the '/'-separated `path` exists (H5Lexists needs each parent to exist first).
bool path_exists(hid_t file, const std::string& path) {
  if (path.empty()) return false;
  std::size_t at = 0;
  while (true) {
    const std::size_t slash = path.find('/', at);
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && prefix.back() != '/' && H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    at = slash + 1;
  }
}

/// An open dataset with its type class, element size and shape.
struct Dataset {
  Hid ds{-1, H5Dclose};
  H5T_class_t type_class = H5T_NO_CLASS;
  std::size_t type_size = 0;
  std::vector<hsize_t> dims;
};

Dataset open_dataset(hid_t file, const std::string& path, const std::string& where) {
  Dataset d;
  d.ds = Hid(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!d.ds.ok()) bad(where, "not a dataset");
  Hid type(H5Dget_type(d.ds.get()), H5Tclose);
  Hid space(H5Dget_space(d.ds.get()), H5Sclose);
  if (!type.ok() || !space.ok()) bad(where, "unreadable type or shape");
  d.type_class = H5Tget_class(type.get());
  d.type_size = H5Tget_size(type.get());
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > 8 || H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE) bad(where, "not an array");
  d.dims.resize(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), d.dims.data(), nullptr) < 0) bad(where, "unreadable shape");
  return d;
}

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

/// Reads the whole dataset converted to `mem_type` into `out`, which the caller sized from the checked shape.
template <class T>
void read_all(const Dataset& d, hid_t mem_type, std::vector<T>& out, const std::string& where) {
  if (!out.empty() && H5Dread(d.ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    io_error("cannot read (or convert) the dataset", where);
}

}  // namespace

std::string names_to_pair(const std::string& name0, const std::string& name1, char separator) {
  std::string a = name0, b = name1;
  for (char& c : a)
    if (c == '/') c = '-';
  for (char& c : b)
    if (c == '/') c = '-';
  return a + separator + b;
}

// ---- FeatureFile ------------------------------------------------------------------------------------------------

FeatureFile::FeatureFile(std::string path) : path_(std::move(path)), file_(open_h5(path_, H5F_ACC_RDONLY)) {}

std::vector<std::string> FeatureFile::names() const {
  return list_h5_names(path_);
}

bool FeatureFile::has(const std::string& name) const {
  return path_exists(file_.get(), name + "/keypoints");
}

FileKeypoints FeatureFile::read(const std::string& name) const {
  const std::string where = path_ + " [" + name + "]";
  if (!has(name)) throw Error(ErrorKind::NotFound, where + ": no such image (no keypoints dataset)");
  FileKeypoints out;
  {
    const std::string w = where + "/keypoints";
    const Dataset d = open_dataset(file_.get(), name + "/keypoints", w);
    if (d.type_class != H5T_FLOAT) bad(w, "not a float array");
    if (d.dims.size() != 2 || d.dims[1] != 2) bad(w, "shape " + shape_text(d.dims) + ", expected (N, 2)");
    if (d.dims[0] > kMaxFileKeypoints)
      bad(w, std::to_string(d.dims[0]) + " keypoints, more than the limit " + std::to_string(kMaxFileKeypoints));
    out.half = d.type_size == 2;
    out.xy.resize(static_cast<std::size_t>(d.dims[0]) * 2);
    read_all(d, H5T_NATIVE_FLOAT, out.xy, w);
    for (std::size_t i = 0; i < out.xy.size(); ++i)
      if (!std::isfinite(out.xy[i])) bad(w, "keypoint " + std::to_string(i / 2) + " is not finite");
  }
  {
    const std::string w = where + "/image_size";
    if (!path_exists(file_.get(), name + "/image_size")) bad(where, "no image_size dataset");
    const Dataset d = open_dataset(file_.get(), name + "/image_size", w);
    if (d.type_class != H5T_INTEGER) bad(w, "not an integer array");
    if (d.dims.size() != 1 || d.dims[0] != 2) bad(w, "shape " + shape_text(d.dims) + ", expected (2,)");
    std::vector<std::int64_t> wh(2);
    read_all(d, H5T_NATIVE_INT64, wh, w);
    for (const std::int64_t v : wh)
      if (v < 1 || v > kMaxFileImageSide)
        bad(w, "[" + std::to_string(wh[0]) + ", " + std::to_string(wh[1]) + "] is not a (width, height) in [1, " +
                   std::to_string(kMaxFileImageSide) + "]");
    out.width = wh[0];
    out.height = wh[1];
  }
  return out;
}

// ---- MatchFile --------------------------------------------------------------------------------------------------

MatchFile::MatchFile(std::string path) : path_(std::move(path)), file_(open_h5(path_, H5F_ACC_RDONLY)) {}

std::optional<std::pair<std::string, bool>> MatchFile::find(const std::string& name0, const std::string& name1) const {
  // hloc utils/io.py find_pair: names_to_pair both ways, then names_to_pair_old (separator "_") both ways.
  for (const char sep : {'/', '_'})
    for (const bool reversed : {false, true}) {
      const std::string key = reversed ? names_to_pair(name1, name0, sep) : names_to_pair(name0, name1, sep);
      if (path_exists(file_.get(), key + "/matches0")) return std::make_pair(key, reversed);
    }
  return std::nullopt;
}

FileMatches MatchFile::read(const std::string& name0, const std::string& name1, std::size_t n0, std::size_t n1,
                            bool with_scores) const {
  const auto found = find(name0, name1);
  if (!found)
    throw Error(ErrorKind::NotFound, path_ + ": no matches for the pair (" + name0 + ", " + name1 + ") (group " +
                                         names_to_pair(name0, name1) +
                                         "); was the file matched with another list of pairs?");
  const auto& [key, reversed] = *found;
  // The stored direction: matches0 has one entry per keypoint of its first image.
  const std::size_t first = reversed ? n1 : n0, second = reversed ? n0 : n1;
  const std::string w = path_ + " [" + key + "/matches0]";
  const Dataset d = open_dataset(file_.get(), key + "/matches0", w);
  if (d.type_class != H5T_INTEGER) bad(w, "not an integer array");
  if (d.dims.size() != 1 || d.dims[0] != first)
    bad(w, "shape " + shape_text(d.dims) + ", expected (" + std::to_string(first) + ",): one entry per keypoint of " +
               (reversed ? name1 : name0));
  std::vector<std::int64_t> m(first);
  read_all(d, H5T_NATIVE_INT64, m, w);
  FileMatches out;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i] == -1) continue;
    if (m[i] < 0 || static_cast<std::uint64_t>(m[i]) >= second)
      bad(w, "entry " + std::to_string(i) + " = " + std::to_string(m[i]) + " is neither -1 nor a keypoint index of " +
                 (reversed ? name0 : name1) + " (it has " + std::to_string(second) + ")");
    rows.push_back(i);
  }
  out.pairs.resize(2 * rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto a = static_cast<std::uint32_t>(rows[k]), b = static_cast<std::uint32_t>(m[rows[k]]);
    out.pairs[2 * k] = reversed ? b : a;  // hloc: np.flip(matches, -1) when the pair was stored reversed
    out.pairs[2 * k + 1] = reversed ? a : b;
  }
  if (with_scores) {
    const std::string ws = path_ + " [" + key + "/matching_scores0]";
    if (!path_exists(file_.get(), key + "/matching_scores0")) bad(ws, "missing");
    const Dataset s = open_dataset(file_.get(), key + "/matching_scores0", ws);
    if (s.type_class != H5T_FLOAT) bad(ws, "not a float array");
    if (s.dims.size() != 1 || s.dims[0] != first)
      bad(ws, "shape " + shape_text(s.dims) + ", expected (" + std::to_string(first) + ",) as matches0");
    std::vector<float> all(first);
    read_all(s, H5T_NATIVE_FLOAT, all, ws);
    out.scores.resize(rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k) out.scores[k] = all[rows[k]];
    out.scores_half = s.type_size == 2;
  }
  return out;
}

}  // namespace superpoint_rt::batch
