// The memory every plan of one backend shares while it runs, and how a plan lays its buffers out in it.
//
// A plan (Executor) keeps only what belongs to its shape: primitives and reordered weights. Its activations,
// scratchpads, reorder buffers and outputs are blocks of ONE workspace owned by the backend, bound when the plan
// runs: executors of a backend run one at a time (Workspace::Lease), so the workspace is as large as the largest plan
// in use, not the sum over every frame size that was ever planned (issue 19: 8 cached plans of ~715 bytes per frame
// pixel each took a 10-photo folder of different sizes to 4.4 GB).
//
// Inside a plan, MemoryPlan gives each block an offset such that blocks whose lifetimes (the steps that touch
// them) overlap never share bytes: the ping-pong arenas of the old design become whatever the live set needs at the
// busiest step.
//
// Thread-safety: Workspace is thread-safe (one lease at a time; add_user / remove_user from any thread).
// MemoryPlan is a plain value used while a plan is built.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace superpoint_rt::backend {

class Workspace {
 public:
  Workspace() = default;
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  /// A plan that needs `bytes` while it runs now exists (its constructor) / no longer exists (its destructor).
  /// remove_user shrinks the mapping to the largest need among the plans that remain (the pages past it go back to
  /// the system at once), waiting for a run in progress to end.
  void add_user(std::size_t bytes);
  void remove_user(std::size_t bytes);

  /// Exclusive use of the workspace for one run; the bytes stay valid (and untouched by other plans) while it lives.
  class Lease {
   public:
    std::byte* data() const noexcept { return data_; }

   private:
    friend class Workspace;
    Lease(std::unique_lock<std::mutex> lock, std::byte* data) : lock_(std::move(lock)), data_(data) {}
    std::unique_lock<std::mutex> lock_;
    std::byte* data_;
  };
  /// Waits for the run in progress (if any), then grows the mapping to at least `bytes`. Growing keeps the pages
  /// already touched (mremap), so a slightly larger frame faults in only the difference. Throws std::bad_alloc
  /// when the system refuses the memory.
  Lease acquire(std::size_t bytes);

  /// Bytes mapped now (resident once touched). Does not wait for a run.
  std::size_t mapped_bytes() const { return mapped_.load(std::memory_order_relaxed); }

 private:
  void resize_locked(std::size_t bytes);  // run_mu_ held

  mutable std::mutex run_mu_;  // held by a Lease, and while the mapping changes
  std::byte* data_ = nullptr;
  std::atomic<std::size_t> mapped_{0};  // written under run_mu_
  mutable std::mutex users_mu_;
  std::map<std::size_t, int> users_;  // bytes -> number of plans that need that many
};

/// Offsets for the blocks of one plan from their lifetimes (first and last step that touches them).
class MemoryPlan {
 public:
  /// A new block of `bytes` (its lifetime grows with use()); returns its id.
  int add(std::size_t bytes);
  /// Grows block `id` to at least `bytes` (blocks shared by shapes of different sizes, e.g. stripe buffers).
  void grow(int id, std::size_t bytes);
  /// Step `step` touches block `id`.
  void use(int id, int step);
  /// Assigns every used block an offset (multiple of `align`) so that no two blocks with overlapping lifetimes
  /// overlap in memory: largest block first, each at the lowest offset free of the blocks it conflicts with.
  /// Returns the bytes the plan needs.
  std::size_t place(std::size_t align = 64);
  std::size_t offset(int id) const { return blocks_[static_cast<std::size_t>(id)].offset; }
  std::size_t bytes(int id) const { return blocks_[static_cast<std::size_t>(id)].bytes; }
  /// The largest sum of the sizes of the blocks live at one step: a lower bound of place()'s result.
  std::size_t peak_live_bytes() const;

 private:
  struct Block {
    std::size_t bytes = 0;
    int first = -1, last = -1;  // steps; first < 0: never used
    std::size_t offset = 0;
  };
  std::vector<Block> blocks_;
};

}  // namespace superpoint_rt::backend
