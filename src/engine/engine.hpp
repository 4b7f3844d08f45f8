// The request path (SPEC §2) behind every interface. Backend-agnostic: it talks to backend::Backend/Executor only.
//
// A request runs in three stages:
//   prepare      (calling, worker or lane thread; prepare.cpp): the image's header -> its network frame -> admission
//                under the memory budget -> decode -> channel pick -> resize -> v / 255 into a pooled Context. One
//                function per kind of request: the fused JPEG decode + Pillow resize (hf JPEG bytes), the Pillow
//                8-bit resize of decoded or caller pixels (hf), the float resizes of the hloc / LightGlue presets. A
//                single request's JPEG decode may also use the compute thread's OpenMP team (host_parallel)
//   network      (under its lane's network lock; a Full forward on the compute thread: on_compute): forward ->
//                scores -> a copy of the descriptor map
//   postprocess  (the same thread, or a worker): NMS -> top-k -> descriptors, without the lock
// so that list requests prepare the next images and post-process the last one while the network runs.
//
// Lanes (plan_cache.hpp), where they cost little memory (list_lanes(), decided at load): a single request alone
// runs its forward on every thread (Lane::Full, the calling thread). A list runs two forwards side by side instead,
// each on half the threads (Half0 / Half1, one lane thread each, each its own workspace); each image is prepared,
// run and post-processed on the thread of whichever lane is free first, so that the host work slows both lanes
// alike. The last one runs Full instead where the other lane is about to be free anyway (lane_clock.hpp). No forward
// then waits at a barrier for a thread that the host work (decode, resize, post-processing) has taken from it, so the
// cores stay as busy as the forward alone keeps them (issue 21 item 5). Every lane gives the same bits. (Concurrent
// single requests, a server's clients, taking the half lanes when they meet others in the network stage measured slower
// than one Full forward at a time: 75.7-76.8 ms per image, and 76.3-76.6 taking whichever lane frees first,
// against 72.0-72.5; int8, 4 clients, AMD Zen 4.)
//
// Memory: the plans (plan_cache.hpp), the pooled contexts (context.hpp) and the requests in flight share one
// budget (memory_budget.hpp): a request is admitted before it allocates anything but its header.
//
// Thread-safety: every public method may be called concurrently. close() waits for calls in flight.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "backend/backend.hpp"
#include "engine/context.hpp"
#include "engine/lane_clock.hpp"
#include "engine/memory_budget.hpp"
#include "engine/plan_cache.hpp"
#include "image/decode_internal.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/params.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/compute_thread.hpp"

namespace superpoint_rt {

namespace engine {
class ThreadPool;
}  // namespace engine

class Engine {
 public:
  explicit Engine(const Options& options);
  ~Engine();

  Features run(const ImageInput& image, const Params& params);
  /// What run(image, params) claims of the memory budget, from the image's header (SuperPoint::estimate_memory).
  MemoryEstimate estimate(const ImageInput& image, const Params& params);
  /// With `sink`, each result goes there in input order as soon as it is collected and the returned vector holds
  /// only placeholders (SuperPoint::run_each with a ResultSink).
  std::vector<std::variant<Features, Error>> run_each(std::span<const ImageInput> images, const Params& params,
                                                      int num_workers, bool stop_at_first_error,
                                                      const SuperPoint::ResultSink* sink = nullptr);
  std::map<std::string, double> warmup(const WarmupSpec& spec);
  void close();
  bool closed() const noexcept { return closed_.load(); }
  const ModelInfo& info() const noexcept { return info_; }
  const model::ModelConfig& config() const noexcept { return weights_config_; }
  /// The worker pool of list requests, grown to at least `workers` threads (one pool for the engine's life). Lists
  /// in lanes do not use it: each lane thread prepares its own images.
  engine::ThreadPool& worker_pool(int workers);
  /// Lists run two forwards side by side on half the threads each (decided at load: engine.cpp).
  bool list_lanes() const noexcept { return lanes_; }
  /// The thread of a half lane (Half0 or Half1), made on first use and shared by every list.
  engine::ThreadPool& lane_thread(engine::Lane lane);
  /// The memory budget (its limit, and what it accounts for now and at most so far).
  const engine::MemoryBudget& memory_budget() const noexcept { return *budget_; }
  engine::MemoryBudget& memory_budget() noexcept { return *budget_; }

 private:
  struct Prepared;
  struct Source;
  struct Decoded;
  // --- prepare (prepare.cpp) ---
  // Steps 1-4 of `src` admitted under `ticket` (admitted here, waiting, when empty). may_split: a single request
  // (run()) may decode a JPEG on two threads (host_parallel).
  Prepared prepare(Source src, const ResolvedParams& params, engine::MemoryBudget::Ticket ticket = {},
                   bool may_split = false);
  // Step 0: the encoded bytes of a path or a Bytes input (read, not decoded), or the caller's pixels.
  Source source_of(const ImageInput& input) const;
  // What the request will hold, from its header (memory_budget.hpp): its host buffers and its frame's workspace.
  engine::MemoryBudget::Claim claim_of(const Source& src, const ResolvedParams& params) const;
  // The fused JPEG decode + Pillow resize of one plane (hf JPEG bytes); false when it does not apply (the general
  // path then decodes the file).
  bool prepare_fused_jpeg(const Source& src, const ResolvedParams& rp, bool may_split, Prepared& p);
  // Steps 1-2 of the other kinds: decode, the source planes the resize reads.
  void prepare_decoded(const Source& src, const ResolvedParams& rp, Prepared& p, Decoded& d);
  // Step 3 (and 4 for one plane) by interpolation: Pillow's 8-bit resize (hf), cv2 / kornia float resizes
  // (hloc / LightGlue).
  void resize_pillow(const Decoded& d, Prepared& p);
  void resize_float(const ResolvedParams& rp, const Decoded& d, Prepared& p);
  // Step 4 for three resized planes: HF's luma (grayscale) or kornia's (LightGlue).
  void luma_input(const ResolvedParams& rp, Prepared& p);
  // A two-thread image::ParallelFor when the network is idle and no other request splits, else an empty one
  // (serial). `taken` = the caller must clear host_split_busy_ when its decode is done.
  image::ParallelFor host_parallel(bool& taken);
  std::vector<backend::CalibrationPlane> calibration_planes(const std::vector<ImageInput>& images);

  // --- network and postprocess (engine.cpp) ---
  // finish = network (steps 5-6 and a copy of the descriptor map, under the network lock) + postprocess (7-12).
  void network(Prepared& prepared, const ResolvedParams& params, bool reuse_network_output,
               engine::Lane lane = engine::Lane::Full);
  Features postprocess(Prepared& prepared, const ResolvedParams& params);
  Features finish(Prepared& prepared, const ResolvedParams& params, bool reuse_network_output = false);
  void release(Prepared& prepared);  // returns its context to the pool and its claim to the budget
  void log(const std::string& msg) const;

  // Whether the network's OpenMP regions open on the process's compute thread (util/compute_thread.hpp): where the
  // backend runs on two threads or more (its load, plans and Full-lane forwards, host_parallel's split decode). The
  // half lanes run one thread each and open no team.
  bool on_compute_thread_ = false;
  template <class F>
  auto on_compute(F&& f) -> decltype(f()) {
    return on_compute_thread_ ? util::on_compute(std::forward<F>(f)) : f();
  }

  Options options_;
  ModelInfo info_;
  model::ModelConfig weights_config_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<engine::NetworkPlans> networks_;
  engine::ResizePlans resize_plans_;
  engine::ContextPool contexts_;
  std::unique_ptr<engine::MemoryBudget> budget_;
  // Per workspace slot: one forward at a time per slot (the Full lane and Half0 share slot 0).
  std::array<std::mutex, backend::kWorkspaceSlots> network_mu_;
  // Lists' lanes (engine.cpp run_each): one thread per half lane, made on first use; only with two or more threads,
  // and where both lanes' workspaces fit in kLanesMemoryFactor times the single forward's (decided at load).
  static constexpr double kLanesMemoryFactor = 2.0;
  bool lanes_ = false;
  engine::LaneClock lane_clock_;

  std::mutex pool_mu_;
  std::unique_ptr<engine::ThreadPool> pool_;
  std::array<std::unique_ptr<engine::ThreadPool>, 2> lane_threads_;  // Half0, Half1; guarded by pool_mu_ like pool_
  // Each list's rank in the worker pool and the lane threads (ThreadPool::submit): lists started earlier go first.
  std::atomic<std::uint64_t> next_list_rank_{0};

  std::atomic<bool> host_split_busy_{false};  // a request is decoding on two threads (host_parallel)

  std::mutex warm_mu_;
  std::set<std::string> warmed_;

  mutable std::shared_mutex life_mu_;  // shared by calls, exclusive by close()
  std::atomic<bool> closed_{false};
};

}  // namespace superpoint_rt
