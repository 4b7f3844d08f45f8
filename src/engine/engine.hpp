// The request path (SPEC §2) behind every interface. Backend-agnostic: it talks to backend::Backend/Executor only.
//
// A request runs in three stages:
//   prepare      (calling or worker thread): decode -> channel pick -> resize -> v / 255  into a pooled Context; a
//                single request's JPEG decode may also use the calling thread's OpenMP team (host_parallel)
//   network      (calling thread, under the network lock): forward -> scores -> a copy of the descriptor map
//   postprocess  (calling thread, or a worker for lists): NMS -> top-k -> descriptors, without the lock
// so that list requests prepare the next images and post-process the last one while the network runs.
//
// Thread-safety: every public method may be called concurrently. close() waits for calls in flight.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "backend/backend.hpp"
#include "image/decode_internal.hpp"
#include "image/resize.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/params.hpp"
#include "superpoint_rt/superpoint.hpp"

namespace superpoint_rt {

namespace engine {
class ThreadPool;
struct Context;
}  // namespace engine

class Engine {
 public:
  explicit Engine(const Options& options);
  ~Engine();

  Features run(const ImageInput& image, const Params& params);
  std::vector<std::variant<Features, Error>> run_each(std::span<const ImageInput> images, const Params& params,
                                                      int num_workers, bool stop_at_first_error);
  std::map<std::string, double> warmup(const WarmupSpec& spec);
  void close();
  bool closed() const noexcept { return closed_.load(); }
  const ModelInfo& info() const noexcept { return info_; }
  /// The worker pool of list requests, grown to at least `workers` threads (one pool for the engine's life).
  engine::ThreadPool& worker_pool(int workers);
  const model::ModelConfig& config() const noexcept { return weights_config_; }

 private:
  struct Prepared;
  std::unique_ptr<engine::Context> acquire_context();
  void release_context(std::unique_ptr<engine::Context> ctx);
  std::shared_ptr<const image::ResizePlan> resize_plan(int in_w, int in_h, int out_w, int out_h);
  backend::Executor& executor_for(int width, int height);  // holds executor_mu_
  // may_split: a single request (run()) may decode a JPEG on two threads (host_parallel).
  Prepared prepare(const ImageInput& image, const ResolvedParams& params, bool may_split = false);
  // A two-thread image::ParallelFor when the network is idle and no other request splits, else an empty one
  // (serial). `taken` = the caller must clear host_split_busy_ when its decode is done.
  image::ParallelFor host_parallel(bool& taken);
  std::vector<backend::CalibrationPlane> calibration_planes(const std::vector<ImageInput>& images);
  // finish = network (steps 5-6 and a copy of the descriptor map, under the network lock) + postprocess (7-12).
  void network(Prepared& prepared, const ResolvedParams& params, bool reuse_network_output);
  Features postprocess(Prepared& prepared, const ResolvedParams& params);
  Features finish(Prepared& prepared, const ResolvedParams& params, bool reuse_network_output = false);
  void log(const std::string& msg) const;

  Options options_;
  ModelInfo info_;
  model::ModelConfig weights_config_;
  std::unique_ptr<backend::Backend> backend_;
  struct CachedExecutor {
    std::unique_ptr<backend::Executor> executor;
    std::uint64_t used = 0;
  };
  std::mutex executor_mu_;  // the network runs one request at a time; guards executors_
  std::map<std::pair<int, int>, CachedExecutor> executors_;  // per network frame (width, height)
  std::uint64_t executor_clock_ = 0;

  std::mutex contexts_mu_;
  std::vector<std::unique_ptr<engine::Context>> contexts_;

  std::mutex plans_mu_;
  using PlanKey = std::tuple<int, int, int, int>;  // in_w, in_h, out_w, out_h
  std::map<PlanKey, std::shared_ptr<const image::ResizePlan>> plans_;
  std::uint64_t plan_clock_ = 0;
  std::map<PlanKey, std::uint64_t> plan_used_;  // same keys as plans_
  std::size_t plan_bytes_ = 0;                  // sum of the cached plans' ResizePlan::bytes

  std::mutex pool_mu_;
  std::unique_ptr<engine::ThreadPool> pool_;

  std::atomic<bool> host_split_busy_{false};  // a request is decoding on two threads (host_parallel)

  std::mutex warm_mu_;
  std::set<std::string> warmed_;

  mutable std::shared_mutex life_mu_;  // shared by calls, exclusive by close()
  std::atomic<bool> closed_{false};
};

}  // namespace superpoint_rt
