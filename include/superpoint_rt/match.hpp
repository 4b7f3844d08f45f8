// superpoint-rt: nearest-neighbour matching of descriptors, exactly as hloc's matchers/nearest_neighbor.py, in
// memory and over hloc's files (features.h5 + pairs.txt -> matches.h5, as hloc's match_features.py), and the pair
// lists of hloc's pairs_from_*.py.
//
// What "exactly" means (docs/MATCHING.md): the similarity is desc0 . desc1 in float32 (a oneDNN GEMM; descriptors
// stored as float16 are widened to float32 first, as hloc's loader does); the best and second-best similarity of every
// row and column; distances 2 (1 - sim) in float32 compared squared (d1 <= ratio^2 d2, d1 <= distance^2, the squares
// rounded to float32 as torch does); the ratio test is off when either side has one descriptor; the mutual check
// keeps i -> j only when j's best is i, and leaves matching_scores0 as they were (hloc does not zero them). An exact
// tie of similarities goes to the lowest index (torch.topk leaves it unspecified). Summation order differs from
// torch's GEMM, so a similarity may differ in its last bit: matches can differ from hloc's only where two candidates
// are within that rounding (a near-tie), or a distance lies within it of a threshold.
//
// Thread-safety: every function here is re-entrant; match() may be called from any number of threads. A call uses
// up to MatchOptions::threads OpenMP threads (nested inside an OpenMP parallel region it runs on one).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "superpoint_rt/features.hpp"
#include "superpoint_rt/lightglue.hpp"
#include "superpoint_rt/params.hpp"

namespace superpoint_rt {

// ---- the matcher's parameters --------------------------------------------------------------------------------------

/// The matcher's parameters as given: a configuration of hloc's match_features.confs and explicit overrides (unset =
/// the configuration's value). The names, ranges and help live in one table (match_param_specs()); the CLI flags
/// (--conf, --ratio, --distance, --no-mutual), the HTTP query fields and the Python keywords derive from it.
struct MatchParams {
  std::string conf = "NN-mutual";  // NN-mutual, NN-ratio, NN-superpoint (hloc's names)
  std::optional<double> ratio;     // ratio test threshold in [0, 1] (0 = off, as hloc's None)
  std::optional<double> distance;  // distance threshold in [0, 2] (0 = off, as hloc's None)
  std::optional<bool> mutual;      // mutual nearest-neighbour check
  /// Throws Error(InvalidArgument) naming the parameter, its value and the allowed range (NaN included).
  void validate() const;
};

/// The effective matcher settings (hloc's NearestNeighbor conf): configuration values + overrides.
struct MatchOptions {
  double ratio_threshold = 0;     // hloc ratio_threshold; 0 = off
  double distance_threshold = 0;  // hloc distance_threshold (Euclidean distance of unit vectors); 0 = off
  bool mutual_check = true;       // hloc do_mutual_check
  int threads = 0;                // OpenMP threads of one match() call; 0 = all cores
  /// Throws Error(InvalidArgument) for a threshold outside its range or NaN, or threads < 0.
  void validate() const;
};

/// conf's values + the overrides, validated.
MatchOptions resolve(const MatchParams& params);

/// One configuration of hloc's match_features.confs that the nearest-neighbour matcher implements.
struct MatchConf {
  std::string_view name;    // e.g. "NN-mutual"
  std::string_view output;  // hloc's conf["output"], e.g. "matches-NN-mutual" (default file name stem)
  MatchOptions options;
};
/// NN-mutual, NN-ratio (ratio 0.8), NN-superpoint (distance 0.7), all with the mutual check, as hloc defines them.
std::span<const MatchConf> match_confs() noexcept;
/// The configuration `name`, or nullptr.
const MatchConf* find_match_conf(std::string_view name) noexcept;

/// The matcher's parameters (conf, ratio, distance, mutual) in the form of the request parameter table.
std::span<const ParamSpec> match_param_specs() noexcept;
/// Sets one matcher parameter from its text form (CLI, query string): decimal numbers, true/false/1/0. Throws
/// Error(InvalidArgument) naming the parameter, the value and the allowed range, or an unknown name.
void set_match_param_text(MatchParams& p, std::string_view name, std::string_view value);
/// Sets one matcher parameter from a typed value (the language bindings). Throws Error(TypeMismatch) for a value of
/// the wrong type, Error(InvalidArgument) as the text form.
void set_match_param(MatchParams& p, std::string_view name, const ParamValue& value);

// ---- matching in memory --------------------------------------------------------------------------------------------

/// Descriptors of one image, caller-owned, float32: `n` descriptors of `dim` values. Row-major n x dim
/// (`dim_major` = false: Features::descriptors), or dim x n (`dim_major` = true: how hloc's features.h5 stores them).
struct DescriptorsView {
  const float* data = nullptr;
  std::size_t n = 0;
  int dim = 0;
  bool dim_major = false;

  static DescriptorsView of(const Features& f) { return {f.descriptors.data(), f.size(), f.descriptor_dim, false}; }
};

/// The result of matching image 0 against image 1, in hloc's form.
struct Matches {
  /// n0 entries: the index in image 1 of keypoint i's match, or -1 (hloc matches0).
  std::vector<std::int32_t> matches0;
  /// n0 entries: hloc matching_scores0 in float32, (sim + 1) / 2 of i's nearest neighbour where the ratio and
  /// distance tests pass, else 0. As in hloc, the mutual check does not zero a score: read scores through matches0.
  std::vector<float> scores0;

  /// The matched pairs (i, matches0[i]) for matches0[i] >= 0, in increasing i (hloc's get_matches).
  std::vector<std::array<std::int32_t, 2>> pairs() const;
  /// Their scores, in the same order.
  std::vector<float> pair_scores() const;
  /// The number of matched pairs.
  std::size_t count() const;
};

/// Matches descriptors0 against descriptors1 (hloc NearestNeighbor). Throws Error(InvalidArgument) for different
/// dims, a null pointer with n > 0, or bad options. n0 or n1 = 0 gives n0 entries of -1 and 0 (hloc returns D
/// entries there, an artefact of its code).
Matches match(const DescriptorsView& descriptors0, const DescriptorsView& descriptors1,
              const MatchOptions& options = {});
/// Matches the descriptors of two extracted images. Throws Error(InvalidArgument) when either has no descriptors
/// (run with return_descriptors = true).
Matches match(const Features& a, const Features& b, const MatchOptions& options = {});

// ---- pair lists (hloc pairs.txt) -----------------------------------------------------------------------------------

/// One pair of image names.
using ImagePair = std::pair<std::string, std::string>;

/// Every unordered pair of `names`, (names[i], names[j]) for i < j in the order given (hloc pairs_from_exhaustive).
std::vector<ImagePair> pairs_exhaustive(std::span<const std::string> names);

/// A video or sequential capture in the order of `names`: each image with the next `window` (>= 1); with
/// `quadratic`, also (i, i + 2^k) for every 2^k > window inside the sequence (COLMAP's quadratic overlap, as
/// hloc's pairs_from_sequential); with `loop_stride` > 0, loop closure: every loop_stride-th image (0, s, 2s, ...) is
/// paired with every other such key frame that the window did not already pair it with. Throws
/// Error(InvalidArgument) for window < 1 or loop_stride < 0.
std::vector<ImagePair> pairs_sequential(std::span<const std::string> names, int window, bool quadratic = false,
                                        int loop_stride = 0);

/// The pairs in order of first appearance with (j, i) after (i, j) and repeats dropped (hloc's
/// find_unique_new_pairs, which keeps them in a set).
std::vector<ImagePair> unique_pairs(std::span<const ImagePair> pairs);

/// Limits of a pairs file (checked while reading, before anything is stored).
inline constexpr std::size_t kMaxPairNameBytes = 4096;          // one image name (PATH_MAX)
inline constexpr std::size_t kMaxPairs = std::size_t{1} << 27;  // pairs in one file (134 M)

/// Parses a pairs file's text as hloc's parse_retrieval: lines end at '\n', "\r\n" or '\r' (hloc reads in text mode:
/// Python's universal newlines), empty lines are skipped, every other line is exactly two names separated by Python's
/// str.split() whitespace. Throws Error(InvalidArgument) naming `what`, the line and the rule broken
/// (also a name over kMaxPairNameBytes or more than kMaxPairs pairs).
std::vector<ImagePair> parse_pairs(std::string_view text, const std::string& what = "<pairs>");
/// Reads and parses a pairs file. Throws Error(NotFound / Io) for the file, as parse_pairs for its contents.
std::vector<ImagePair> read_pairs(const std::string& path);
/// Writes `pairs` as hloc does ("name0 name1" lines joined by '\n', no newline after the last), atomically (a
/// temporary file renamed over `path`). Throws Error(InvalidArgument) for a name that is empty or holds whitespace
/// (the format could not read it back), Error(Io) for the file.
void write_pairs(const std::string& path, std::span<const ImagePair> pairs);

// ---- hloc's files: features.h5 + pairs -> matches.h5 ---------------------------------------------------------------

/// hloc's names_to_pair: name0 and name1 with '/' replaced by '-', joined by `separator` ("/" = the group path of the
/// pair in matches.h5; hloc's older files used "_").
std::string names_to_pair(std::string_view name0, std::string_view name1, std::string_view separator = "/");

/// Limits of a feature file's records (checked from the dataset's header, before its values are read).
inline constexpr std::int64_t kMaxMatchKeypoints = 32767;  // hloc stores matches0 as int16
inline constexpr int kMaxDescriptorDim = 4096;

/// A matching run over files, as hloc's match_features.main(conf, pairs, features, matches=...).
struct MatchFilesConfig {
  std::string features;      // features.h5 (hloc's layout: <name>/descriptors, (D, N), float16 or float32)
  std::string features_ref;  // features of the second image of every pair; empty = `features` (hloc features_ref)
  std::string pairs;         // pairs.txt
  std::string output;        // matches.h5
  MatchOptions options;      // the nearest-neighbour matcher's (its `threads` serves LightGlue too)
  /// LightGlue instead of the nearest-neighbour matcher (hloc's "superpoint+lightglue", "disk+lightglue",
  /// "aliked+lightglue"): each image's keypoints, image_size and descriptors are read and its first-layer input
  /// prepared once for all its pairs; matches0 and matching_scores0 are cvg's.
  std::shared_ptr<const LightGlue> lightglue;
  LightGlueOptions lightglue_options;
  /// hloc's overwrite: match every listed pair again and replace its group; otherwise pairs already in the output
  /// (either order, either separator) are skipped, as hloc does.
  bool overwrite = false;
  /// Descriptors kept in memory at once (MiB of float32). Pairs are ordered so that every image is read once when
  /// all fit; otherwise in tiles of images that fit.
  std::size_t cache_mb = 2048;
  /// Called after every pair written with (pairs done, pairs to do, seconds since start).
  std::function<void(std::size_t, std::size_t, double)> on_progress;
};

/// What a matching run did.
struct MatchFilesReport {
  std::size_t listed = 0;       // pairs in the file
  std::size_t unique = 0;       // after dropping repeats and reversed repeats
  std::size_t skipped = 0;      // already in the output
  std::size_t matched = 0;      // matched and written in this run
  std::size_t images_read = 0;  // feature records read (equal to the images involved when they fit the cache)
  std::size_t matches = 0;      // matched keypoint pairs written in this run
  double seconds = 0;
  std::string json() const;
};

/// Matches every pair of `config.pairs` and writes hloc's matches.h5: one group per pair named
/// names_to_pair(name0, name1), with matches0 (N0,) int16 (-1 = none) and matching_scores0 (N0,) float16. Finished
/// pairs go to part files (<output>.parts/) that are merged into the output at the end (written as <output>.tmp and
/// renamed); a run that was killed leaves the output as it was plus complete part files, which the next run counts
/// as done and merges. Throws Error(NotFound) for a missing file or a pair's image missing from the features,
/// Error(InvalidArgument) for a malformed pairs file, descriptor dims that differ, or a second image with more than
/// kMaxMatchKeypoints keypoints, Error(Io) for unreadable or unwritable HDF5 (the message names the file and image).
MatchFilesReport match_files(const MatchFilesConfig& config);

/// hloc's get_matches: the matched pairs (i in name0, j in name1) of a pair in a matches file and their scores,
/// found as hloc's find_pair does (the pair, its reverse, then the old "_" separator; a reversed pair's columns are
/// swapped). Throws Error(NotFound) when no form of the pair is in the file, Error(InvalidArgument) for a group
/// whose matches0 is not 1-D integer with entries -1 or >= 0, or whose matching_scores0 is missing or of another
/// length, Error(Io) for the file.
struct PairMatches {
  std::vector<std::array<std::int32_t, 2>> pairs;
  std::vector<float> scores;  // the stored values (float16 ones widened exactly)
};
PairMatches read_matches(const std::string& path, const std::string& name0, const std::string& name1);

/// The image names of a features file (hloc list_h5_names), sorted.
std::vector<std::string> feature_names(const std::string& path);

}  // namespace superpoint_rt
