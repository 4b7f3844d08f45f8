// Reading hloc's HDF5 files for a structure-from-motion import (src/sfm/): the feature file of
// hloc/extract_features.py (and of `superpoint-rt extract --output F.h5`, layout in batch.hpp) and the match file of
// hloc/match_features.py: one group per pair named by hloc's names_to_pair(name0, name1) = name0 + "/" + name1 with
// '/' in each name replaced by '-', holding
//   matches0          (N0,) integer (hloc: int16), for each keypoint of name0 the index of its match in name1 or -1
//   matching_scores0  (N0,) float (hloc: float16), the score of each keypoint's match (0 where none)
// Lookups follow hloc's utils/io.py find_pair: the pair, the reversed pair, then both with the old "_" separator.
//
// These files come from outside (a user can hand any HDF5 file): every shape, type and value range is checked BEFORE
// memory is allocated for a dataset, against the sizes named below, and a violation is an Error naming the file,
// the dataset and what was expected. HDF5 itself parses the file (libhdf5).
//
// Thread-safety: hold hdf5_mutex() (batch/hdf5.hpp) for the lifetime of a reader and while calling it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "batch/hdf5.hpp"

namespace superpoint_rt::batch {

/// The most keypoints one image of a feature file may have (2^22; SuperPoint's densest frame, 8192 x 8192 at
/// nms_radius 0, has fewer). A larger dataset is refused before it is read.
inline constexpr std::uint64_t kMaxFileKeypoints = std::uint64_t{1} << 22;
/// The largest image side an image_size dataset may state.
inline constexpr std::int64_t kMaxFileImageSide = std::int64_t{1} << 20;

/// hloc's utils/parsers.py names_to_pair: name0 + separator + name1, '/' in the names replaced by '-'.
std::string names_to_pair(const std::string& name0, const std::string& name1, char separator = '/');

/// One image of a feature file.
struct FileKeypoints {
  std::vector<float> xy;  // N x 2, [x, y] as stored (hloc's pixel convention: the centre of the top-left pixel is 0)
  bool half = false;      // stored as float16 (the values in `xy` are those halves, exactly)
  std::int64_t width = 0, height = 0;  // image_size
};

/// A feature file opened for reading.
class FeatureFile {
 public:
  /// Error(Io) when the file cannot be opened as HDF5.
  explicit FeatureFile(std::string path);
  const std::string& path() const { return path_; }
  /// The image names (list_h5_names), sorted.
  std::vector<std::string> names() const;
  /// Whether `name` is an image of the file (a group with a keypoints dataset).
  bool has(const std::string& name) const;
  /// keypoints ((N, 2) float16/32/64, N <= kMaxFileKeypoints, finite) and image_size ((2,) integer, each side in
  /// [1, kMaxFileImageSide]) of one image. Error(NotFound) for a name the file does not have, Error(InvalidArgument)
  /// naming the dataset for a wrong shape, type or value.
  FileKeypoints read(const std::string& name) const;

 private:
  std::string path_;
  Hid file_;
};

/// One pair of a match file, as hloc's get_matches returns it.
struct FileMatches {
  /// K x 2 keypoint indices [i0, i1] into the keypoints of (name0, name1) as asked, rows in ascending order of the
  /// stored direction's first index (hloc: np.where(matches0 != -1), flipped when the pair was stored reversed).
  std::vector<std::uint32_t> pairs;
  /// K scores (matching_scores0 of those rows) as float, when asked for.
  std::vector<float> scores;
  /// The scores' stored type was float16 (hloc compares a threshold in that type: see sfm::filter_by_score).
  bool scores_half = false;
};

/// A match file opened for reading.
class MatchFile {
 public:
  /// Error(Io) when the file cannot be opened as HDF5.
  explicit MatchFile(std::string path);
  const std::string& path() const { return path_; }
  /// hloc's find_pair: the group holding (name0, name1) and whether it is stored reversed (as (name1, name0)), or
  /// nothing.
  std::optional<std::pair<std::string, bool>> find(const std::string& name0, const std::string& name1) const;
  /// The matches of (name0, name1), whose images have n0 and n1 keypoints. matches0 must be 1-D integer of the
  /// stored first image's length with values in [-1, n of the other image); matching_scores0 (read when
  /// `with_scores`) 1-D float of the same length. Error(NotFound) when the pair is not in the file (hloc: "Could not
  /// find pair ... Maybe you matched with a different list of pairs?"), Error(InvalidArgument) naming the dataset for
  /// a wrong shape, type or value.
  FileMatches read(const std::string& name0, const std::string& name1, std::size_t n0, std::size_t n1,
                   bool with_scores) const;

 private:
  std::string path_;
  Hid file_;
};

}  // namespace superpoint_rt::batch
