// superpoint-rt: LightGlue (Lindenberger, Sarlin, Pollefeys, ICCV 2023), the learned matcher of cvg/LightGlue's
// lightglue/lightglue.py, in C++: exactly the steps cvg's code runs on a CPU, for any cvg checkpoint (SuperPoint,
// input_dim 256; DISK and ALIKED, 128 with input_proj), from cvg's .pth files or the Hugging Face safetensors of
// ETH-CVG/lightglue_superpoint (docs/MATCHING.md, "LightGlue").
//
// What runs, as cvg's LightGlue._forward on the CPU: keypoints normalised by the image size ((kpt - size / 2) /
// (max(size) / 2)); descriptors through input_proj; the learnable Fourier positional encoding (cos and sin of a
// projection of the keypoints, applied to queries and keys as a rotary embedding); n_layers (9) layers of self- and
// cross-attention (4 heads) with their feed-forward blocks; after each layer but the last, early exit when the share
// of confident points exceeds depth_confidence, and point pruning of the points whose matchability is low and
// confidence high (width_confidence; on the CPU cvg prunes at every keypoint count); the log double-softmax
// assignment with matchability of the layer it stopped at; filter_matches (mutual best, score above
// filter_threshold). Attention runs in tiles with an online softmax: memory grows with the keypoints, not their
// square.
//
// Exactness: float32 throughout, in another summation order than torch's (matrix products on oneDNN, exp and erf as
// polynomials of our own): matches0 equal to PyTorch's on at least 99.8 % of the keypoints at full depth, the same
// stop layer, matching scores within 1e-3 (tests/lightglue/).
//
// Thread-safety: a LightGlue is immutable after construction; match() and prepare() may be called from any number of
// threads at once. A call uses up to LightGlueOptions::threads OpenMP threads on the process's compute thread; with
// threads = 1 it runs on the calling thread instead, so that one-thread calls of several threads run at once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/params.hpp"

namespace superpoint_rt {

/// One image's features, caller-owned: n keypoints (x, y) in pixels (hloc's and cvg's convention) and their
/// descriptors, n x dim row-major float32; the image size they were found in (cvg's image_size, [W, H]). A size of
/// 0 x 0 takes cvg's fallback: 1 + the extent of the keypoints.
struct LightGlueFeatures {
  const float* keypoints = nullptr;    // n x 2
  const float* descriptors = nullptr;  // n x dim
  std::size_t n = 0;
  int dim = 0;
  float width = 0, height = 0;
};

/// cvg's LightGlue.default_conf values that change a match (the network's shape comes from the weights). The
/// defaults here are THE defaults; the names and ranges are lightglue_param_specs()'s.
struct LightGlueOptions {
  /// Early exit: stop after a layer when more than this share of the points is confident; -1 (any value <= 0) = off
  /// (cvg's depth_confidence, default 0.95).
  double depth_confidence = 0.95;
  /// Point pruning: drop points that are confident and unmatchable (matchability <= 1 - this); -1 (<= 0) = off
  /// (cvg's width_confidence, default 0.99).
  double width_confidence = 0.99;
  /// A match's score must exceed this (cvg's filter_threshold, default 0.1).
  double filter_threshold = 0.1;
  /// OpenMP threads of one call; 0 = all cores.
  int threads = 0;
  /// Cancellation (e.g. a deadline): when set, called before each layer and before the assignment, on the thread
  /// that runs them (the caller's with threads = 1, else the process's compute thread); when it returns true the
  /// call stops there and throws LightGlueCancelled. A layer is the unit of work between two calls (its self and
  /// cross blocks: about 1 / 9 of a full pass). Must not throw.
  std::function<bool()> cancel;
  /// Throws Error(InvalidArgument) naming the field and its range (lightglue_param_specs()), NaN included;
  /// threads < 0.
  void validate() const;
};

/// LightGlue's match-time parameters (depth_confidence, width_confidence, filter_threshold: cvg's names) in the form
/// of the request parameter table: the CLI flags (--depth-confidence, ...), the HTTP query fields of
/// /v1/match?matcher=lightglue and the docs derive their names and ranges from it; defaults: LightGlueOptions{}.
std::span<const ParamSpec> lightglue_param_specs() noexcept;
/// Sets one of them from its text form (a decimal number). Throws Error(InvalidArgument) naming the parameter, the
/// value and the allowed range, or an unknown name.
void set_lightglue_param_text(LightGlueOptions& o, std::string_view name, std::string_view value);
/// A parameter's value in `o` (for /v1/info and answers). Throws Error(InvalidArgument) for an unknown name.
double lightglue_param_value(const LightGlueOptions& o, std::string_view name);

/// Thrown by LightGlue::match when LightGlueOptions::cancel asked it to stop: an Error of kind Overloaded, told apart
/// by its type (the HTTP server answers it with 504). `layers_done()`: the layers that had run.
class LightGlueCancelled : public Error {
 public:
  LightGlueCancelled(const std::string& message, int layers_done)
      : Error(ErrorKind::Overloaded, message), layers_done_(layers_done) {}
  int layers_done() const noexcept { return layers_done_; }

 private:
  int layers_done_;
};

/// The result of one pair, in cvg's form.
struct LightGlueMatches {
  std::vector<std::int32_t> matches0;        // n0: index in image 1 or -1 (cvg's matches0)
  std::vector<std::int32_t> matches1;        // n1: index in image 0 or -1
  std::vector<float> scores0;                // n0: cvg's matching_scores0 (the mutual best's probability, 0 otherwise)
  std::vector<float> scores1;                // n1
  int stop = 0;                              // layers run (cvg's "stop")
  std::vector<std::int32_t> prune0, prune1;  // cvg's prune0 / prune1: layers each point took part in

  /// The matched pairs (i, matches0[i]) in increasing i (cvg's "matches").
  std::vector<std::array<std::int32_t, 2>> pairs() const;
  std::size_t count() const;
};

/// Where the weights come from (LightGlue's constructor).
struct LightGlueLoad {
  std::string revision;   // a Hugging Face repo's revision (empty = main)
  std::string cache_dir;  // the Hugging Face cache (empty = HF_HUB_CACHE and the rest, as the SuperPoint model)
  bool local_files_only = false;
};

class LightGlue {
 public:
  /// An image's first-layer input (projected descriptors, normalised keypoints, positional encoding), computed once
  /// for all the pairs the image is in. Immutable; shareable between threads.
  struct Prepared;

  /// Loads the weights: a cvg .pth file (torch.save of the state dict, read without running any pickle code:
  /// src/model/pth.hpp), a .safetensors file in either layout (cvg's names or transformers'), a folder holding
  /// model.safetensors (and config.json), or a Hugging Face repo id such as "ETH-CVG/lightglue_superpoint" (through
  /// the same hub code and cache as the SuperPoint weights). Throws Error(NotFound) for a missing file or repo,
  /// Error(Model) naming the missing or mis-shaped tensor, Error(Io) for the network.
  explicit LightGlue(const std::string& weights, const LightGlueLoad& load = {});
  ~LightGlue();
  LightGlue(LightGlue&&) noexcept;
  LightGlue& operator=(LightGlue&&) noexcept;

  /// Matches image 0 against image 1. Throws Error(InvalidArgument) for a descriptor dim other than input_dim(), a
  /// null pointer with n > 0, a non-finite keypoint or size, or bad options.
  LightGlueMatches match(const LightGlueFeatures& image0, const LightGlueFeatures& image1,
                         const LightGlueOptions& options = {}) const;
  std::shared_ptr<const Prepared> prepare(const LightGlueFeatures& image, int threads = 0) const;
  LightGlueMatches match(const Prepared& image0, const Prepared& image1, const LightGlueOptions& options = {}) const;

  /// An upper bound of the bytes one match(image0, image1, options) call on n0 and n1 keypoints holds at once with
  /// `threads` threads (0 = all cores): both images' prepared inputs, the layers' state, each thread's attention
  /// and assignment blocks, oneDNN's packing of the matrix products and the result. Linear in n0 + n1: attention
  /// and the assignment run in tiles (each thread's block of the assignment holds a few dozen rows of n1). For a
  /// caller's memory budget (the HTTP server's /v1/match?matcher=lightglue).
  std::size_t memory_bound(std::size_t n0, std::size_t n1, int threads) const noexcept;

  int input_dim() const noexcept;       // the descriptors' dim (256 SuperPoint, 128 DISK / ALIKED)
  int descriptor_dim() const noexcept;  // the network's width (256)
  int num_layers() const noexcept;      // 9
  int num_heads() const noexcept;       // 4
  /// The file the weights came from, and their key layout: "cvg" or "transformers".
  const std::string& source() const noexcept;
  const std::string& layout() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// An hloc matcher configuration for LightGlue (hloc's match_features.confs "superpoint+lightglue",
/// "disk+lightglue", "aliked+lightglue").
struct LightGlueConf {
  const char* name;      // hloc's conf name
  const char* features;  // cvg's features name ("superpoint", "disk", "aliked")
  const char* output;    // hloc's conf["output"], e.g. "matches-superpoint-lightglue"
  int input_dim;         // the descriptors' dim the weights must take
};
/// The three confs, or nullptr for another name.
const LightGlueConf* find_lightglue_conf(const std::string& name) noexcept;

/// The weights a conf uses when none are named: cvg's checkpoint in torch's hub cache, where cvg's code downloads
/// it ($TORCH_HOME, else $XDG_CACHE_HOME/torch, else ~/.cache/torch; then hub/checkpoints/
/// <features>_lightglue_v0-1_arxiv.pth), if it is there; else, for superpoint+lightglue, the Hugging Face repo
/// ETH-CVG/lightglue_superpoint. Throws Error(NotFound) naming where it looked.
std::string default_lightglue_weights(const LightGlueConf& conf);

}  // namespace superpoint_rt
