// Internal: hloc's files. Reading a features.h5 (hloc's extract_features layout, src/batch/batch.hpp): descriptors for
// matching, keypoints and image sizes for the COLMAP export (src/sfm/); reading a matches.h5 (hloc's match_features
// layout: one group per pair named names_to_pair(name0, name1), holding matches0 and matching_scores0) as hloc's
// find_pair + get_matches; writing matches.h5 part files.
//
// These files come from outside (a user can hand any HDF5 file): every dataset's type and shape is checked from its
// header BEFORE memory is allocated for it, against the limits named below, and a violation is an Error naming the
// file, the image or pair and the dataset. HDF5 itself parses the file (libhdf5).
//
// Thread-safety: every function takes the process-wide HDF5 lock (util/hdf5.hpp); a FeatureReader, MatchReader or
// MatchPartWriter is for one thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "superpoint_rt/match.hpp"
#include "util/hdf5.hpp"

namespace superpoint_rt::matching::detail {

/// At most this many descriptor values (float32) in one record, checked from its header before it is read:
/// 512 MiB, twice 307200 keypoints (the most an extraction gives) of dim 256.
inline constexpr std::int64_t kMaxRecordValues = std::int64_t{1} << 27;
/// The largest image side an image_size dataset may state.
inline constexpr std::int64_t kMaxImageSide = std::int64_t{1} << 20;
/// The widest stored value (bytes) of a numeric dataset: numpy's float128 / h5py's 16-byte floats.
inline constexpr std::size_t kMaxValueBytes = 16;
/// At most this many chunks in an unfiltered chunked dataset, each of whose stored size is checked before a read
/// (h5.cpp numeric_dims; HDF5 1.10 looks each chunk up by its index, so the check's time grows faster than the count).
/// hloc, h5py's defaults and our batch extraction write feature datasets contiguous.
inline constexpr std::uint64_t kMaxCheckedChunks = 4096;
/// A filtered (compressed) dataset declares at most this many times the bytes it stores: deflate's largest expansion
/// (about 1032:1, zlib's zlib_tech.html), the widest of the filters libhdf5 reads here.
inline constexpr std::uint64_t kMaxFilterRatio = 1032;

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

/// The keypoints of one image as stored, and its image_size.
struct KeypointRecord {
  std::vector<float> xy;               // n x 2, [x, y] (hloc's convention: the centre of the top-left pixel is 0)
  bool half = false;                   // stored as float16 (the values in `xy` are those halves, exactly)
  std::int64_t width = 0, height = 0;  // image_size
  std::size_t size() const { return xy.size() / 2; }
};

/// Reads <name>/descriptors from a features file that stays open.
class FeatureReader {
 public:
  /// Throws Error(NotFound) for a missing file, Error(Io) for one HDF5 cannot open.
  explicit FeatureReader(const std::string& path);
  /// A features file HDF5 has open (the path constructor's, or util::h5::open_image's: a file image in memory, as the
  /// fuzz harness fuzz/fuzz_h5.cpp reads); `path` names it in messages. `max_values` lowers the per-dataset limit
  /// (at most kMaxRecordValues: the harness keeps each execution small).
  FeatureReader(util::h5::Hid file, std::string path, std::int64_t max_values = kMaxRecordValues);
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
  /// <name>/keypoints ((n, 2) float16/32/64, at most kMaxRecordValues values, every value finite and on the image:
  /// x within 1 + width / 1024 of [0, width - 1], y likewise) and <name>/image_size ((2,) integer (width, height), each
  /// in [1, kMaxImageSide]). Throws Error(NotFound) for an image without keypoints, Error(InvalidArgument) naming the
  /// file, the image and the dataset for a wrong type, shape or value.
  KeypointRecord keypoints(const std::string& name) const;

 private:
  std::string path_;
  util::h5::Hid file_;
  std::int64_t max_values_;
  std::vector<std::string> names_;
  std::set<std::string> name_set_;
};

/// One pair of a matches file as hloc's get_matches gives it, and the stored type of its scores.
struct MatchRecord {
  PairMatches matches;       // (i in name0, j in name1) in increasing stored row; scores only when asked for
  bool scores_half = false;  // matching_scores0 is float16 (hloc compares a threshold in that type)
};

/// Reads pairs from a matches file that stays open.
class MatchReader {
 public:
  /// Throws Error(NotFound) for a missing file, Error(Io) for one HDF5 cannot open.
  explicit MatchReader(const std::string& path);
  /// A matches file HDF5 has open; `path` and `max_values` as FeatureReader's.
  MatchReader(util::h5::Hid file, std::string path, std::int64_t max_values = kMaxRecordValues);
  ~MatchReader();
  MatchReader(const MatchReader&) = delete;
  MatchReader& operator=(const MatchReader&) = delete;

  /// hloc's find_pair: the group of (name0, name1) and whether it is stored reversed (as (name1, name0)), trying the
  /// pair, its reverse, then both with the old "_" separator; nothing when no form has a matches0.
  std::optional<std::pair<std::string, bool>> find(const std::string& name0, const std::string& name1) const;
  /// The pair's matches (hloc's get_matches: the rows of matches0 other than -1, columns swapped when the group is
  /// reversed), with matching_scores0 of those rows when `with_scores`. matches0 must be a 1-D integer dataset (at
  /// most kMaxRecordValues entries) whose entries are -1 or an index >= 0; when `sizes` gives the keypoint counts of
  /// (name0, name1), it must have one entry per keypoint of its group's first image and its indices must be keypoints
  /// of the other. matching_scores0 must be 1-D numeric of matches0's length. Throws Error(NotFound) when no form of
  /// the pair is in the file, Error(InvalidArgument) naming the file, the group and the dataset otherwise.
  MatchRecord read(const std::string& name0, const std::string& name1, bool with_scores,
                   const std::optional<std::array<std::size_t, 2>>& sizes = std::nullopt) const;

 private:
  std::string path_;
  util::h5::Hid file_;
  std::int64_t max_values_;
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
