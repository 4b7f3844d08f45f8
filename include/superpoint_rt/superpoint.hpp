// superpoint-rt: the SuperPoint model (SPEC §2-§5).
//
// Typical use:
//   auto model = superpoint_rt::SuperPoint::from_pretrained({.model = "magic-leap-community/superpoint"});
//   superpoint_rt::Features f = model.run(superpoint_rt::ImageInput::file("image.jpg"));
//
// Thread-safety: a SuperPoint object may be shared by any number of threads. Decoding, resizing and
// post-processing run on the calling thread (a single JPEG request's decode may borrow a second compute thread while
// the network is idle; list calls use their workers); the network runs one request at a time on the model's compute
// threads (Options::threads). close() may be called from any thread; calls that start after it throw Error(Closed),
// calls in flight finish first. SuperPoint is a cheap handle: copies share one model.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/features.hpp"
#include "superpoint_rt/image.hpp"

namespace superpoint_rt {

/// One image to process: a file path, encoded bytes (caller-owned, valid for the call), a caller-owned pixel view,
/// or a decoded Image.
struct ImageInput {
  struct Path {
    std::string path;
  };
  struct Bytes {
    std::span<const std::uint8_t> data;
    std::string name = "<memory>";  // used in error messages
  };
  std::variant<Path, Bytes, ImageView, const Image*> source;

  static ImageInput file(std::string path) { return {Path{std::move(path)}}; }
  static ImageInput bytes(std::span<const std::uint8_t> data, std::string name = "<memory>") {
    return {Bytes{data, std::move(name)}};
  }
  static ImageInput pixels(const ImageView& view) { return {view}; }
  static ImageInput image(const Image& image) { return {&image}; }
  /// A short description for error messages: the path, the bytes' name, or "<pixels WxH>".
  std::string describe() const;
};

/// What from_pretrained / warmup prepares so that the first real call of each variant is as fast as later calls
/// (seed "warmup_variants"). Default: sizes 1920x1080, 1600x900, 1280x720, 640x480; nms radii 4 and 0; JPEG and
/// PNG decoders; 4 list workers. The 640x480 network frame is always prepared at load; `network_sizes` adds other
/// frames (e.g. {1024, 768} for hloc:superpoint_aachen on 4:3 photos): each has its own network plan (its primitives;
/// the weights, ~20 MB in fp32, and the activations live in what all plans share), kept in a least-recently-used
/// cache of 8 plans.
struct WarmupSpec {
  std::vector<std::pair<int, int>> sizes{{1920, 1080}, {1600, 900}, {1280, 720}, {640, 480}};  // (width, height)
  std::vector<std::pair<int, int>> network_sizes{};  // network frames (width, height) to plan and run once
  std::vector<int> nms_radii{4, 0};
  std::vector<std::string> decoders{"jpeg", "png"};  // jpeg png gif bmp webp tiff pnm
  int num_workers = 4;

  static WarmupSpec defaults() { return {}; }
  /// The default call (radius 4, descriptors) on a 640x480 image only.
  static WarmupSpec minimal() { return {{{640, 480}}, {}, {4}, {}, 0}; }
  /// The defaults plus every nms radius 0..32 and every decoder.
  static WarmupSpec all();
  /// Nothing at all.
  static WarmupSpec none() { return {{}, {}, {}, {}, 0}; }
};

/// Options of from_pretrained.
struct Options {
  /// A local directory with config.json + model.safetensors, or a Hugging Face repo id ("org/name").
  std::string model = "magic-leap-community/superpoint";
  /// Branch, tag or commit for a repo id; empty = "main".
  std::string revision;
  /// Hub cache directory; empty = $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
  std::string cache_dir;
  /// Never use the network (also when $HF_HUB_OFFLINE=1): a missing file is a NotFound error naming it.
  bool local_files_only = false;
  /// "cpu" (default) or "cuda" / "cuda:N" when built with CUDA.
  std::string device = "cpu";
  /// Compute threads of the network; 0 = all cores.
  int threads = 0;
  /// "fp32" (default; bit-exact with the reference). The CPU backend also offers "bf16" and "int8" (docs/BENCHMARKS.md
  /// gives their speed and fidelity).
  std::string precision = "fp32";
  /// precision "int8" only: the images whose fp32 activations set the int8 quantisation ranges, each decoded and
  /// resized exactly like a request with the default Params. Choose a few images like the ones the model will see.
  /// Empty = the built-in calibration (six synthetic 640x480 pictures). Read during from_pretrained only: bytes
  /// and pixel views must stay valid until it returns. Giving images with another precision is InvalidArgument.
  std::vector<ImageInput> calibration;
  /// Decoder limit: images with more pixels are refused before their pixels are decoded.
  std::int64_t max_pixels = kDefaultMaxPixels;
  /// Memory budget in MiB for the network plans, the pooled request buffers and the requests in flight together
  /// (docs/LIMITS.md): a request is admitted from its image header, before its pixels are decoded, when its
  /// estimate fits; otherwise it waits for requests in flight (up to 30 s), then fails with Error(Overloaded).
  /// 0 = half this machine's memory (or of the container's limit).
  std::int64_t memory_budget_mb = 0;
  /// Network-frame limit: a request whose frame (its resize rule applied to the image: resize, resize_max) has more
  /// pixels is refused with Error(TooLarge) naming the limit, before any resize plan, network plan or buffer of that
  /// frame is made (an explicit resize before the image is decoded). The memory a frame costs grows with its pixels
  /// (the network's workspace: about 230-250 bytes per frame pixel at fp32, docs/LIMITS.md).
  /// Params::kMinNetworkPixels .. Params::kMaxNetworkPixels; `superpoint-rt serve` defaults to
  /// largest_preset_frame_pixels() (1600 x 1600).
  std::int64_t max_frame_pixels = Params::kMaxNetworkPixels;
  /// Warm-up at load time.
  WarmupSpec warmup = WarmupSpec::defaults();
  /// Print loading and warm-up progress to stderr.
  bool verbose = false;
};

/// One precision on this CPU (precisions_on_this_cpu(), ModelInfo::precisions, `superpoint-rt info` and `bench`):
/// whether the engine runs it here, its forward time against fp32's on this kind of CPU, and what it costs in
/// quality by the homography protocol of bench/quality.py (docs/BENCHMARKS.md, "Choosing a precision").
struct PrecisionReport {
  std::string precision;    // "fp32", "bf16" or "int8"
  bool runs = false;        // the engine accepts it on this CPU (after the SUPERPOINT_RT_ISA cap)
  double time_vs_fp32 = 0;  // its 640x480 forward time / fp32's at 2 threads on this kind of CPU; 0 = unknown
  bool measured = false;    // time_vs_fp32 was measured on this kind of CPU (false: expected, see basis)
  std::string basis;        // the kind of CPU and the run behind time_vs_fp32, or why the precision does not run
  std::string quality;      // against fp32: keypoint F1, homography accuracy, MMA, repeatability (or "exact")
};

/// fp32, bf16 and int8 on this CPU, in that order (from the CPU's units; no model is loaded).
std::vector<PrecisionReport> precisions_on_this_cpu();
/// The precision that runs fastest on this CPU ("fp32", "bf16" or "int8"): the one with the smallest known
/// time_vs_fp32 among those that run (bf16 only where it measured faster than fp32).
std::string fastest_precision_on_this_cpu();

/// Where the weights came from and what runs them (for `superpoint-rt info`, Python model.config, HTTP /v1/info).
struct ModelInfo {
  std::string model;                        // as given in Options
  std::string revision;                     // the commit for hub models (empty for local dirs)
  std::string weights_dir;                  // the directory that was loaded
  std::string source;                       // "local", "cache" or "download"
  std::string backend;                      // e.g. "onednn"
  std::string device;                       // e.g. "cpu"
  std::string precision;                    // e.g. "fp32"
  std::string calibration;                  // int8: "built-in (6 synthetic 640x480 images)" or "N images"; else ""
  int threads = 0;                          // compute threads in use
  std::string cpu_features;                 // e.g. "avx512f avx512bw avx2 fma" (the kernels selected at run time)
  std::string cpu_units;                    // e.g. "AVX2 yes, FMA yes, AVX-512 no, VNNI no, AVX512-BF16 no, AMX no"
  std::string fastest_precision;            // fastest_precision_on_this_cpu(), e.g. "int8"
  std::vector<PrecisionReport> precisions;  // precisions_on_this_cpu()
  std::string plan;                         // per-layer algorithm choice of the backend
  std::map<std::string, double> warmup_s;   // seconds per warm-up step
};

/// Bytes that one keypoint of Features holds: its (x, y) and score as float32, and `descriptor_dim` float32 values.
constexpr std::int64_t features_bytes_per_keypoint(int descriptor_dim) noexcept {
  return 3 * 4 + 4 * static_cast<std::int64_t>(descriptor_dim);
}

/// What one run(image, params) call claims of the model's memory budget (Options::memory_budget_mb, docs/LIMITS.md
/// "Memory budget"), estimated from the image's header before anything is decoded: the worst case of the request.
struct MemoryEstimate {
  std::int64_t host_bytes = 0;       // the request's own buffers, the Features it returns included
  std::int64_t workspace_bytes = 0;  // its network frame's workspace (claims of the same workspace do not add up)
  std::int64_t max_keypoints = 0;    // the most keypoints it can return: every pixel of the score map inside the
                                     // border (max_keypoints -1, keypoint_threshold 0), or max_keypoints when fewer
  int descriptor_dim = 0;            // float32 values per keypoint's descriptor (0 with return_descriptors false)
  std::int64_t budget_bytes = 0;     // the budget's limit
};

class Engine;  // internal

/// A part of a model's memory budget held by the caller for buffers of its own that outlive a call: what an HTTP
/// server holds for a request's body and its encoded answer until the answer is sent (SuperPoint::claim_memory).
/// Move-only; destroying it (or reset()) gives the bytes back. It keeps the budget alive, not the model. Not
/// thread-safe itself (one owner), but claims on one model may be taken and returned from any threads.
class MemoryClaim {
 public:
  MemoryClaim() noexcept;
  ~MemoryClaim();
  MemoryClaim(MemoryClaim&& other) noexcept;
  MemoryClaim& operator=(MemoryClaim&& other) noexcept;
  MemoryClaim(const MemoryClaim&) = delete;
  MemoryClaim& operator=(const MemoryClaim&) = delete;

  bool held() const noexcept;
  std::int64_t bytes() const noexcept;  // 0 when not held
  void reset() noexcept;

 private:
  friend class SuperPoint;
  struct State;
  std::unique_ptr<State> state_;
};

class SuperPoint {
 public:
  /// Loads the weights (local dir, hub cache or download), builds the network plan and runs the warm-up.
  /// Throws NotFound / Io / Model / InvalidArgument errors.
  static SuperPoint from_pretrained(const Options& options = {});

  /// One image, one result. Throws InvalidArgument for bad params, NotFound/Io/DecodeError/UnsupportedFormat/
  /// TooLarge for bad inputs, Closed after close().
  Features run(const ImageInput& image, const Params& params = {}) const;

  /// Several images, results in input order. `num_workers` threads decode and resize the next images while the
  /// network runs the current one (0 = everything on the calling thread). Where lists run two forwards side by side
  /// (int8 on two or more threads: docs/PYTHON.md), each of those two threads decodes its own images instead, and
  /// num_workers (> 0) only sets how many images are read and queued ahead (num_workers + 1). The first failing image
  /// throws; use run_each for per-image errors.
  std::vector<Features> run(std::span<const ImageInput> images, const Params& params = {}, int num_workers = 4) const;

  /// Like run(span) but never throws for a single image: each result is either Features or the Error it raised.
  /// Invalid params or a closed model still throw.
  std::vector<std::variant<Features, Error>> run_each(std::span<const ImageInput> images, const Params& params = {},
                                                      int num_workers = 4) const;

  /// Receives one result of a streamed list: the image's index in the list and its Features or the Error it raised.
  using ResultSink = std::function<void(std::size_t index, std::variant<Features, Error>&& result)>;
  /// Like run_each above, but hands each result to `sink` instead of returning them: in input order, on the calling
  /// thread, as soon as that image and every earlier one are done (while the network runs the next ones). A list of
  /// any length then holds the results of a few images at a time (about 2 * num_workers + 3), not of the whole list.
  /// An exception from `sink` stops the list: the images in flight finish, then it propagates.
  void run_each(std::span<const ImageInput> images, const Params& params, int num_workers,
                const ResultSink& sink) const;

  /// What run(image, params) would claim of the memory budget, from the image's header (nothing is decoded, nothing
  /// is admitted). Throws as run() does for bad params, an unreadable header and a frame over max_frame_pixels.
  MemoryEstimate estimate_memory(const ImageInput& image, const Params& params = {}) const;

  /// Claims `bytes` of the memory budget for the caller's own buffers if they fit now, beside the requests and
  /// claims in flight and what the engine holds; an empty claim when they do not fit now (nothing waits). Throws
  /// Error(Overloaded) naming `what` when they could never fit, Error(Closed) after close().
  MemoryClaim claim_memory(std::int64_t bytes, const std::string& what) const;

  /// Prepares more variants; steps that are already prepared are skipped. Returns seconds per step that ran.
  std::map<std::string, double> warmup(const WarmupSpec& spec) const;

  /// Releases the network, buffers and threads. Idempotent. Later calls throw Error(Closed).
  void close();
  bool closed() const noexcept;

  const ModelInfo& info() const;

  SuperPoint() = default;  // an empty handle: every call throws Closed

 private:
  explicit SuperPoint(std::shared_ptr<Engine> e) : engine_(std::move(e)) {}
  std::shared_ptr<Engine> engine_;
};

/// The memory budget, in bytes, of an engine whose Options::memory_budget_mb is `memory_budget_mb`: that many MiB,
/// or for 0 half this machine's physical memory (half the container's limit when that is smaller).
std::int64_t memory_budget_bytes(std::int64_t memory_budget_mb);

/// The library version, e.g. "0.1.0".
const char* version() noexcept;

}  // namespace superpoint_rt
