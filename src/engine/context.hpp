// A request's scratch (Context) and the pool that lends it (ContextPool), so that steady-state requests do not grow
// the heap. Memory (issue 19 §2):
//   * the pool keeps at most kWarmContexts contexts "warm": they keep their buffers between requests, given back
//     only beyond kContextKeepBytes (the hloc preset on a 16000 x 8000 PNG used to leave its 4-bytes-per-source-pixel
//     float plane in the pool, 0.9 GB per pooled context);
//   * any other context (concurrent requests, list pipelines) gives back its source-stage buffers once its network
//     input is ready, and everything when the request ends: a list keeps ~10 requests in flight, and the buffers
//     each had used at some stage (decode, resize, scores, descriptor map) made the in-flight memory ~10x one
//     request's (measured: a 10-photo folder at 490 MB resident against 256 MB for its largest photo alone).
//
// Thread-safety: a Context is used by one request at a time; ContextPool is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "image/resize.hpp"
#include "image/resize_float.hpp"
#include "post/post.hpp"

namespace superpoint_rt::engine {

/// Bytes a warm pooled context keeps after a request (its buffers' capacities, largest given back first).
inline constexpr std::size_t kContextKeepBytes = std::size_t{64} << 20;
/// Contexts the pool keeps warm: one, what a request running alone reuses (measured with 2: a 10-photo folder
/// extraction peaked 26 MB higher, the second warm context's buffers, at no measurable speed gain).
inline constexpr std::size_t kWarmContexts = 1;
/// Contexts the pool keeps.
inline constexpr std::size_t kPooledContexts = 16;

struct Context {
  std::array<std::vector<std::uint8_t>, 3> planes;  // resized 8-bit planes (1 or 3 used)
  std::array<std::vector<std::uint8_t>, 3> source;  // float views rounded to 8 bits, source resolution
  image::ResizeScratch resize;
  image::ResizeScratch resize2;               // the second task's of a two-thread JPEG decode (image::ParallelFor)
  std::array<std::vector<float>, 3> fplanes;  // resized planes in [0, 1] as floats (the non-Pillow paths)
  std::vector<float> fsource;                 // one source plane as float32 (cv2 / kornia resize input)
  image::FloatResizeScratch fresize;
  std::vector<float> input;             // the normalised network input, frame_h x frame_w
  std::vector<std::uint8_t> cell_mark;  // post::normalize_sampled_cells scratch
  std::vector<float> heat;              // step 6's scores, 8 Hc x 8 Wc
  std::vector<float> dense;             // the descriptor head's output, Hc x Wc x D (a copy: the executor's is reused)
  post::NmsScratch nms_scratch;
  std::vector<post::Keypoint> keypoints;
  bool warm = false;  // lent warm by the pool: keeps its buffers for the next request

  /// Bytes its buffers hold (capacities).
  std::size_t bytes();
  /// Gives back the buffers an earlier, larger request grew (more capacity than their last use), then the largest
  /// until at most `keep` bytes remain: what a warm context keeps is what the last request needed, not the most any
  /// request ever needed (a server's resident size would otherwise follow its history).
  void trim(std::size_t keep);
  /// The network input is ready: a context that is not warm gives back its decode and resize buffers.
  void input_ready();
};

class ContextPool {
 public:
  /// A pooled context, warm ones first, or a new one.
  std::unique_ptr<Context> acquire();
  /// Pools `ctx` (at most kPooledContexts; others are freed): warm (trimmed to kContextKeepBytes) while fewer than
  /// kWarmContexts pooled contexts are, else emptied.
  void release(std::unique_ptr<Context> ctx);
  /// Bytes the pooled contexts hold.
  std::size_t pooled_bytes() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Context>> pooled_;
  std::size_t bytes_ = 0;  // sum of the pooled contexts' bytes()
};

}  // namespace superpoint_rt::engine
