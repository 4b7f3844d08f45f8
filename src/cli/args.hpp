// Strict command-line parsing: every value is checked and a bad one is reported with the flag, the value and the
// allowed range (exit code 2), never clamped or silently ignored.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "superpoint_rt/match.hpp"
#include "superpoint_rt/params.hpp"
#include "superpoint_rt/superpoint.hpp"

namespace superpoint_rt::cli {

/// Thrown for bad command-line arguments; main() prints it and exits with code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Walks argv; flags may be given as "--flag value" or "--flag=value".
class ArgReader {
 public:
  ArgReader(int argc, char** argv, int first);
  bool done() const { return i_ >= static_cast<int>(args_.size()); }
  /// The next token; sets `flag` (without "=value") and whether it is a flag.
  std::string next();
  /// The value of the flag just read (from "=value" or the next token).
  std::string value(const std::string& flag);
  int int_value(const std::string& flag, long long lo, long long hi, const std::string& range);
  /// Whether the flag just read carried "=value".
  bool has_value() const;

 private:
  std::vector<std::string> args_;
  int i_;
  std::string pending_;
  bool has_pending_ = false;
};

/// The options shared by the commands that load a model: --weights --revision --cache-dir --local-files-only
/// --threads --precision --calibration --max-pixels --max-frame-pixels --verbose. Returns true when `flag` was one of
/// them.
/// --calibration FILE|FOLDER (repeatable) adds int8 calibration images (Options::calibration).
bool parse_model_flag(ArgReader& args, const std::string& flag, Options& options);
/// The per-request parameters of the table (superpoint_rt/params.hpp): --preset --max-keypoints
/// --keypoint-threshold --nms-radius --resize --resize-max --resize-force --interpolation --grayscale --bgr
/// --no-descriptors ...
bool parse_param_flag(ArgReader& args, const std::string& flag, Params& params);
/// The per-request flags with their ranges and help, one per line, from the parameter table (for --help texts).
std::string param_flags_help();
/// Validates params, turning the library's message into a UsageError that names the flag.
void check_params(const Params& params);

/// Model options with the CLI defaults: weights from $SUPERPOINT_RT_WEIGHTS when set, else the hub repo; a minimal
/// warm-up (a command-line run processes its images once).
Options default_cli_options();

/// The matcher's parameters of the table (superpoint_rt/match.hpp match_param_specs): --conf --ratio --distance,
/// --mutual / --no-mutual. Returns true when `flag` was one of them.
bool parse_match_flag(ArgReader& args, const std::string& flag, MatchParams& params);
/// Their flags with ranges and help, one per line (for --help texts).
std::string match_flags_help();
/// LightGlue's match-time flags from lightglue_param_specs() (--depth-confidence, --width-confidence,
/// --filter-threshold): true when `flag` is one (its value read and set), false otherwise; UsageError for a bad value.
bool parse_lightglue_flag(ArgReader& args, const std::string& flag, LightGlueOptions& options);
/// Their help lines (flag, what, range, default), one per line.
std::string lightglue_flags_help();

/// A progress bar on stderr when it is a terminal (rewritten in place), plain lines every 10 s otherwise:
/// "progress: 3/10 images  1.50 img/s  ETA 0:00:05" (`items` = "images", `rate_unit` = "img/s").
class Progress {
 public:
  Progress(bool enabled, std::string items, std::string rate_unit = "img/s");
  void update(std::size_t done, std::size_t total, double seconds);

 private:
  bool enabled_, tty_;
  std::string items_, rate_unit_;
  double last_print_ = -1e9;
};

/// Draws keypoints (green discs with a dark rim) over the image and writes a PNG.
void write_keypoint_plot(const std::string& path, const Image& image, const Features& f);

/// glibc heap settings for long runs (serve, extract): at most 4 malloc arenas and a fixed 256 KiB mmap threshold
/// unless MALLOC_ARENA_MAX / MALLOC_MMAP_THRESHOLD_ are set (args.cpp says why).
void bound_heap_growth();

}  // namespace superpoint_rt::cli
