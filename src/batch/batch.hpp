// Batch extraction at scale (issue 6): image listing, sharding, hloc-compatible HDF5 feature files, merging, the
// per-run report. Used by `superpoint-rt extract --output features.h5`, `superpoint-rt merge` and the Python
// superpoint_rt.extract_folder.
//
// Feature-file layout (hloc's hloc/extract_features.py, read by hloc's list_h5_names / get_keypoints): one group
// per image keyed by its path relative to the image root with POSIX separators ("a/b.jpg" is group "b.jpg" inside
// group "a"); datasets
//   keypoints   (N, 2)   float32 (float16 with as_half), hloc's pixel convention (p + 0.5) * s - 0.5 where p is the
//                         integer network-frame position and s = original / 640x480 as float32; attribute
//                         "uncertainty" (float64 scalar) = hloc SuperPoint.detection_noise (2.0) * mean(s)
//   scores      (N,)     float32 / float16
//   descriptors (256, N) float32 / float16 (transposed, as hloc stores them)
//   image_size  (2,)     int64 (width, height)
//
// Crash safety: HDF5 1.10 updates metadata in place, so a process killed while it writes can leave a file no
// reader opens. A run therefore never writes into a file that holds finished work: each chunk of finished images
// goes to a new "part" file <output>.parts/part-*.h5 written under a temporary name, flushed and renamed (atomic on
// POSIX); when the last chunk starts, the old output and the parts are merged into <output>.tmp, the last chunk's
// images are written straight into it as they come (no part file for them), and at the end it is renamed over
// <output> and the parts are removed. A run killed at any moment leaves <output> (the previous complete state) and
// complete part files, each readable by h5py/hloc; `extract --skip-existing` (or `merge`) folds them in. A run killed
// during its last chunk loses only that chunk, which the next run computes again.
//
// Thread-safety: Debian's HDF5 is built without thread-safety, so every function here that touches HDF5 holds one
// process-wide lock; separate runs may go on in parallel threads (their HDF5 writes take turns). A PartWriter is
// for one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "superpoint_rt/superpoint.hpp"

namespace superpoint_rt::batch {

/// One image of a batch: `name` is the hloc key (POSIX path relative to the image root), `path` the file to read.
struct ImageEntry {
  std::string name;
  std::string path;
};

/// Where the images come from.
struct ListSpec {
  /// Files and folders. A folder is walked recursively; names are relative to it (or to `image_root` when set).
  /// A file's name is its path relative to `image_root` when set, else its file name; a missing file is listed
  /// (it fails in the run, alone).
  std::vector<std::string> inputs;
  /// A text file with one image per line, relative to `image_root` (default: the current directory), as hloc's
  /// --image_list; empty lines and lines starting with '#' are ignored.
  std::string image_list;
  std::string image_root;
  /// fnmatch(3) patterns a folder's files must match (against the relative path when the pattern has a '/', else
  /// the file name; '*' matches '/' too). Empty = the common image extensions, case-insensitive.
  std::vector<std::string> globs;
};

/// The sorted (by name), duplicate-free list. Throws Error(NotFound) for a missing image list, Error(InvalidArgument)
/// for two inputs with the same name or a name outside image_root.
std::vector<ImageEntry> list_images(const ListSpec& spec);

/// Parses "i/n" (0 <= i < n <= 1000000). Throws Error(InvalidArgument) naming `option` (the caller's spelling of
/// the shard option) and the value.
std::pair<int, int> parse_shard(const std::string& text, const std::string& option = "--shard");
/// The images of shard i of n: every n-th image of the sorted list starting at i (round robin, so that shards of a
/// folder sorted by name get similar image sizes). The union of all shards is the list, with no overlap.
std::vector<ImageEntry> shard(const std::vector<ImageEntry>& images, int index, int count);

/// Names of the images in a feature file, as hloc's list_h5_names: the parent group of every dataset, without the
/// leading '/'. Sorted. Throws Error(Io) when the file cannot be read.
std::vector<std::string> list_h5_names(const std::string& path);

/// Values of one image as they are stored (exposed for tests and the Python binding).
struct HlocFeatures {
  std::vector<float> keypoints;    // N x 2, hloc convention
  std::vector<float> scores;       // N
  std::vector<float> descriptors;  // 256 x N (empty without descriptors)
  std::int64_t width = 0, height = 0;
  double uncertainty = 0;
};
/// hloc's values of one result: keypoints in hloc's convention ((p + 0.5) * scales - 0.5, scales = float32(original
/// / network size)) whatever the convention `f` was computed in (`output`, the request's), descriptors transposed.
HlocFeatures to_hloc(const Features& f, OutputConvention output = OutputConvention::Hf);

namespace detail {
class Merger;  // h5.cpp
}

/// Writes part files: add() keeps the image in memory, commit() writes everything added since the last commit to a
/// new part file atomically (see the file comment). The end of a run: start_final() begins the merge of the parts
/// and the output's existing images into <output>.tmp (merge_h5 with overwrite and include_existing), which then
/// takes the images added before and after it directly (they win over a name already there); finish() renames it
/// over the output. Starting the merge before the last images are computed overlaps its copies with their forwards.
class PartWriter {
 public:
  PartWriter(std::string parts_dir, bool as_half, OutputConvention output = OutputConvention::Hf);
  ~PartWriter();  // removes <output>.tmp of a merge that was started and not finished
  void add(const std::string& name, const Features& f);
  /// Returns the number of images committed. Not after start_final().
  std::size_t commit();
  std::size_t pending() const { return pending_.size(); }
  void start_final(const std::vector<std::string>& parts, const std::string& output);
  bool finishing() const { return final_ != nullptr; }
  /// After start_final(). Returns the number of images in the output.
  std::size_t finish();

 private:
  std::string dir_;
  bool as_half_;
  OutputConvention output_;
  std::size_t seq_ = 0;
  std::vector<std::pair<std::string, HlocFeatures>> pending_;
  std::unique_ptr<detail::Merger> final_;  // after start_final()
};

/// Copies every image of `inputs` (in order) into `output`, written as <output>.tmp and renamed over it. When
/// `include_existing` and `output` exists, its images come first. A name in two sources throws
/// Error(InvalidArgument) naming both, unless `overwrite` (the later source wins). Returns the number of images in
/// the output.
std::size_t merge_h5(const std::vector<std::string>& inputs, const std::string& output, bool overwrite,
                     bool include_existing);

/// The part files of an output (<output>.parts/*.h5), sorted.
std::vector<std::string> part_files(const std::string& output);

/// How the caller spells the options of a batch run, so that the one set of checks (prepare, run) names them as the
/// user wrote them.
struct Spelling {
  const char* caller;     // the command or function, the start of every message
  const char* no_images;  // the message when neither inputs nor an image list are given
  const char* shard;
  const char* skip_existing;
  const char* overwrite;
  const char* as_half;
  const char* output;
};
/// `superpoint-rt extract`.
inline constexpr Spelling kCliSpelling{"extract",   "no images given",     "--shard", "--skip-existing", "--overwrite",
                                       "--as-half", "--output FEATURES.h5"};
/// superpoint_rt.extract_folder / BatchExtractor.extract.
inline constexpr Spelling kPythonSpelling{
    "extract_folder", "no images given (images or image_list)", "shard", "skip_existing", "overwrite", "as_half",
    "output"};

/// A batch run.
struct RunConfig {
  std::string output;    // features .h5 (empty: only per-image files through on_result)
  bool as_half = false;  // float16 datasets
  bool skip_existing = false;
  bool overwrite = false;            // start from an empty output (removes the old file and its parts)
  int workers = 2;                   // decode/resize threads ahead of the network
  std::size_t chunk = 8;             // images per part file (and per on_progress call)
  std::string report;                // report path; empty = <output>.report.json (no report without output)
  std::string shard;                 // "i/n" for the report
  Spelling spelling = kCliSpelling;  // for the messages of prepare() and run()
  /// Called for every image processed (after it is committed to a part file); may throw Error to fail the image.
  std::function<void(const ImageEntry&, const Features&)> on_result;
  /// Called after every chunk with (images finished, images to do, seconds since start).
  std::function<void(std::size_t, std::size_t, double)> on_progress;
};

struct Failure {
  std::string name, path, error;
};

struct Report {
  std::size_t total = 0;      // images listed (in this shard)
  std::size_t skipped = 0;    // already in the output (--skip-existing)
  std::size_t processed = 0;  // extracted and written
  std::vector<Failure> failed;
  double seconds = 0;
  double images_per_s = 0;  // processed / seconds
  std::string output, shard;
  /// JSON text of the report.
  std::string json() const;
};

/// The checks of a batch run's options, done here once for the CLI and the Python binding (messages in
/// config.spelling): some images given (inputs or an image list), skip_existing and overwrite not both, neither
/// (nor as_half) without an output, the shard "i/n", an existing output (or its part files) only with skip_existing
/// or overwrite. Then lists the images and keeps those of the shard; sets config.shard. Throws
/// Error(InvalidArgument) for the options and the listing (list_images), Error(NotFound) for a missing image list.
std::vector<ImageEntry> prepare(const ListSpec& list, const std::string& shard, RunConfig& config);

/// Throws Error(InvalidArgument) when config.output (or a part file of it) exists and neither skip_existing nor
/// overwrite is set: a run never clobbers finished work silently. prepare() checks it early; run() again.
void check_existing_output(const RunConfig& config);

/// Runs the model over `images`, writes `config.output` crash-safely, writes the report. Per-image failures go to
/// the report; the run continues. Throws Error for failures of the output itself (Io) or an existing output
/// without skip_existing / overwrite (InvalidArgument).
Report run(const SuperPoint& model, const std::vector<ImageEntry>& images, const Params& params,
           const RunConfig& config);

}  // namespace superpoint_rt::batch
