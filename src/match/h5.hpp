// Internal: hloc's files for matching: reading descriptors from a features.h5 (hloc's extract_features layout,
// src/batch/batch.hpp) and writing matches.h5 part files (hloc's match_features layout).
//
// Thread-safety: every function takes the process-wide HDF5 lock (util/hdf5.hpp); a FeatureReader or MatchPartWriter
// is for one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "superpoint_rt/match.hpp"
#include "util/hdf5.hpp"

namespace superpoint_rt::matching::detail {

/// At most this many descriptor values (float32) in one record, checked from its header before it is read:
/// 512 MiB, twice 307200 keypoints (the most an extraction gives) of dim 256.
inline constexpr std::int64_t kMaxRecordValues = std::int64_t{1} << 27;

/// The descriptors of one image, widened to float32 as hloc's loader does (.float()) and transposed from hloc's
/// (dim, n) to rows (n, dim): the layout of Features, so that the file path and the in-memory match() run the same
/// GEMM (oneDNN rounds a transposed operand's products in another order).
struct DescriptorRecord {
  std::vector<float> values;  // n x dim
  std::size_t n = 0;
  int dim = 0;
  DescriptorsView view() const { return {values.data(), n, dim, false}; }
  std::size_t bytes() const { return values.size() * sizeof(float); }
};

/// Reads <name>/descriptors from a features file that stays open.
class FeatureReader {
 public:
  /// Throws Error(NotFound) for a missing file, Error(Io) for one HDF5 cannot open.
  explicit FeatureReader(const std::string& path);
  ~FeatureReader();
  FeatureReader(const FeatureReader&) = delete;
  FeatureReader& operator=(const FeatureReader&) = delete;

  const std::string& path() const { return path_; }
  /// Image names (hloc list_h5_names), sorted.
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const;
  /// (dim, n) of the record, from its header. Throws Error(InvalidArgument) for a record that is not a 2-D numeric
  /// dataset of dim 1..kMaxDescriptorDim and at most kMaxRecordValues values, naming the file and the image.
  std::pair<int, std::size_t> shape(const std::string& name) const;
  /// The record (after the checks of shape()); float16 is widened exactly, other numeric types as HDF5 converts them.
  DescriptorRecord read(const std::string& name) const;

 private:
  std::string path_;
  util::h5::Hid file_;
  std::vector<std::string> names_;
  std::set<std::string> name_set_;
};

/// Pair keys (group paths of pairs, hloc's names_to_pair) already in a matches file and its part files.
std::set<std::string> existing_pairs(const std::string& output);
/// Whether (name0, name1) is in `keys` in any of hloc's four forms (find_unique_new_pairs).
bool has_pair(const std::set<std::string>& keys, const std::string& name0, const std::string& name1);

/// Collects matched pairs and writes them to part files <output>.parts/part-*.h5 (batch.hpp's crash-safe scheme):
/// group names_to_pair(name0, name1) with matches0 (N0,) int16 and matching_scores0 (N0,) float16, as hloc's
/// writer_fn.
class MatchPartWriter {
 public:
  explicit MatchPartWriter(std::string output);
  /// Keeps the pair in memory. Throws Error(InvalidArgument) for an index over int16 (the caller checks first).
  void add(const std::string& name0, const std::string& name1, const Matches& m);
  /// Writes what was added since the last commit to a new part file; returns the pairs written.
  std::size_t commit();
  std::size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    std::string key;
    std::vector<std::int16_t> matches0;
    std::vector<std::uint16_t> scores0;  // float16 bits
  };
  std::string output_;
  std::size_t seq_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace superpoint_rt::matching::detail
