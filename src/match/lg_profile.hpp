// Internal: where LightGlue's time goes, stage by stage (lightglue.cpp), for the speed work of docs/MATCHING.md.
//
// With SUPERPOINT_RT_LIGHTGLUE_PROFILE set (to anything but "" or "0") when the process starts matching, every
// stage of every match() adds its time to a process-wide table, and the process prints the table to stderr when it
// exits (thread milliseconds and shares). Unset, a stage costs one test of a flag read once.
//
// Units: thread time. A stage timed inside a per-thread task (attention tiles) adds its own duration; a stage timed
// around work that the whole OpenMP team runs (the linear layers, the assignment) adds its duration times the team's
// size, so that the shares add up to the team's time.
#pragma once

#include <chrono>
#include <cstdint>

namespace superpoint_rt::lightglue::detail {

enum class Stage : int {
  LinearProduct,      // the linear layers' sgemm
  LinearPass,         // their bias and the element-wise step after each (rotary, LayerNorm + GELU, residual, copies)
  AttentionLogits,    // self attention's q k^T tiles
  SoftmaxRows,        // the online softmax over rows (self attention and image 0's side of the cross block)
  AttentionValues,    // the rows' products with the values (self attention and image 0's side of the cross block)
  CrossLogits,        // the cross block's sim tiles
  SoftmaxColumns,     // the cross block's column softmax and the rescale of its accumulated values
  CrossColumnValues,  // image 1's side: the products of the columns' weights with image 0's values
  CrossMerge,         // image 1's side: the two parts merged
  Assignment,         // the double softmax and the maxima (final_proj counts as a linear layer)
  PointHeads,         // between layers: the stop and pruning decisions, the compaction (their product: linear)
  kCount
};

/// Whether SUPERPOINT_RT_LIGHTGLUE_PROFILE asked for the table (read once per process).
bool profiling() noexcept;

/// Adds `ns` nanoseconds times `threads` to the stage (thread-safe).
void add_stage_time(Stage s, std::int64_t ns, int threads) noexcept;

/// Times its scope into a stage when profiling().
class StageTimer {
 public:
  explicit StageTimer(Stage s, int threads = 1) noexcept
      : stage_(s), threads_(threads), on_(profiling()), t0_(on_ ? Clock::now() : Clock::time_point{}) {}
  ~StageTimer() {
    if (on_)
      add_stage_time(stage_, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count(),
                     threads_);
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  Stage stage_;
  int threads_;
  bool on_;
  Clock::time_point t0_;
};

}  // namespace superpoint_rt::lightglue::detail
