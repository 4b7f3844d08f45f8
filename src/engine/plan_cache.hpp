// The engine's plans, cached by size (one file for both kinds, and for the memory they hold):
//   ResizePlans   Pillow resize plans per (source size, network frame): coefficient tables, O(in_w + in_h)
//   NetworkPlans  one backend executor per network frame and lane. A plan holds its primitives; its weights
//                 (~20 MB fp32) are shared by the plans that want the same layout, and its activations live in its
//                 lane's workspace, which every plan of the lane's slot shares and which is as large as the largest
//                 such plan that has run and is still cached (backend/workspace.hpp). So a folder of photos of 10
//                 different sizes costs 10 small plans and one workspace per lane in use, not 10 workspaces.
// Both are bounded least-recently-used caches; docs/LIMITS.md lists the bounds.
//
// Thread-safety: both are thread-safe. A plan handed out stays valid while its holder keeps it (shared_ptr), even
// when the cache evicts it meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "backend/backend.hpp"
#include "image/resize.hpp"

namespace superpoint_rt::engine {

class ResizePlans {
 public:
  static constexpr std::size_t kMaxPlans = 32;
  static constexpr std::size_t kMaxBytes = std::size_t{64} << 20;

  /// The plan for in_w x in_h -> out_w x out_h, built when missing (outside the lock: a large plan takes a while).
  /// A plan over kMaxBytes alone is used without being cached. Throws TooLarge as image::ResizePlan does (extreme
  /// aspect ratios), leaving nothing behind.
  std::shared_ptr<const image::ResizePlan> get(int in_w, int in_h, int out_w, int out_h);
  void clear();

 private:
  using Key = std::tuple<int, int, int, int>;  // in_w, in_h, out_w, out_h
  struct Entry {
    std::shared_ptr<const image::ResizePlan> plan;
    std::uint64_t used = 0;
  };
  std::mutex mu_;
  std::map<Key, Entry> plans_;
  std::uint64_t clock_ = 0;
  std::size_t bytes_ = 0;  // sum of the cached plans' ResizePlan::bytes
};

/// Which executor of a frame: Full runs on the backend's threads in workspace slot 0 (a single request); Half0 and
/// Half1 run on half of them (at least one), in slots 0 and 1, two forwards side by side (list requests: engine.hpp).
enum class Lane { Full, Half0, Half1 };

class NetworkPlans {
 public:
  /// At most this many network plans stay cached (the one asked for is always kept).
  static constexpr std::size_t kMaxPlans = 8;

  explicit NetworkPlans(backend::Backend& backend) : backend_(backend) {}

  /// The executor for the frame (width x height) and lane, planned when missing (outside the lock; concurrent
  /// requests for another frame are not held up). Evicts the least recently used plans beyond kMaxPlans.
  std::shared_ptr<backend::Executor> get(int width, int height, Lane lane = Lane::Full);
  /// Whether the frame's plan for the lane is cached (get() would not plan it).
  bool cached(int width, int height, Lane lane) const;
  /// The workspace slot of a lane (backend::PlanOptions::slot).
  static int slot_of(Lane lane) { return lane == Lane::Half1 ? 1 : 0; }
  /// What get() plans for the frame and lane: the lane's threads (Full: the backend's; a half lane: half of them,
  /// at least one) and its slot.
  backend::PlanOptions options_of(int width, int height, Lane lane) const;
  /// Bytes the network holds now: the backend's workspace and weights plus every cached plan's own bytes.
  std::size_t resident_bytes() const;
  /// The workspace a request of this frame claims (memory_budget.hpp): the cached plan's workspace_bytes(), else
  /// the frame's pixels times the most a cached plan of at least kRatePixels needs per frame pixel
  /// (kDefaultBytesPerPixel when none is cached), and at least the workspace of any smaller cached frame. Plans
  /// differ by precision and ISA, which are the backend's and the same for all, by size and by lane: a frame's need
  /// is the sum over workspace slots of its largest cached plan in each (lanes run side by side in two slots).
  std::size_t workspace_claim(int width, int height) const;
  /// Frames from 256 x 256 pixels give the per-pixel rate of workspace_claim: below, fixed costs dominate.
  static constexpr double kRatePixels = 256.0 * 256.0;
  /// The rate with no such plan cached: above every fp32 / bf16 / int8 rate measured from 256 x 256 to 4096 x 4096
  /// at 1 and 2 threads on Zen 4 (225-561 bytes per frame pixel, bench_forward --frame WxH).
  static constexpr double kDefaultBytesPerPixel = 600.0;
  /// Drops every cached plan (holders keep theirs).
  void clear();

 private:
  struct Entry {
    std::shared_ptr<backend::Executor> executor;
    std::uint64_t used = 0;
  };
  backend::Backend& backend_;
  mutable std::mutex mu_;
  std::map<std::tuple<int, int, Lane>, Entry> plans_;  // by (width, height, lane)
  std::uint64_t clock_ = 0;
};

}  // namespace superpoint_rt::engine
