// Internal: the matcher behind superpoint_rt::match() and the file pipeline (run.cpp).
//
// The similarity matrix is never held whole: rows are taken in blocks (about kBlockBytes of similarities), each block
// is one oneDNN GEMM followed at once by the fused top-2 scan (kernels.hpp) while it is in cache. Blocks are handed
// to the OpenMP threads dynamically; each thread keeps its own running column top-2, and the threads' column states
// are merged at the end (ties to the lower row, so the result does not depend on the thread count or on which thread
// took which block). hloc's decisions (ratio, distance, mutual check) then need only the two top-2 sets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "match/kernels.hpp"
#include "superpoint_rt/match.hpp"

namespace superpoint_rt::matching::detail {

/// Best and second-best similarity (and the best's index) of every row, or of every column.
struct Top2 {
  std::vector<float> best, second;
  std::vector<std::int32_t> index;
  void resize(std::size_t n);
  Top2Arrays arrays() { return {best.data(), second.data(), index.data()}; }
};

/// A float buffer aligned to 64 bytes that only grows.
class AlignedFloats {
 public:
  float* reserve(std::size_t n);

 private:
  struct Free {
    void operator()(float* p) const noexcept;
  };
  std::unique_ptr<float[], Free> p_;
  std::size_t n_ = 0;
};

/// Bytes of similarities per block of rows (the GEMM output that the scan reads while it is in cache).
inline constexpr std::size_t kBlockBytes = std::size_t{4} << 20;

/// The rows of one block for n1 columns: a multiple of 4 (the AVX-512 scan's row group), at least 16.
std::size_t block_rows(std::size_t n1) noexcept;

/// hloc's NearestNeighbor with reusable work space. Not thread-safe: one Matcher per thread (each call uses its own
/// OpenMP team of `threads`).
class Matcher {
 public:
  /// threads: OpenMP threads per call; 0 = all cores.
  explicit Matcher(int threads = 0);
  /// Row and column top-2 of a . b^T (a.n, b.n >= 1, equal dims) with `scan`.
  void top2(const DescriptorsView& a, const DescriptorsView& b, Top2& rows, Top2& cols,
            const ScanKernels& scan = best_scan());
  /// hloc's NearestNeighbor._forward (validated views and options).
  Matches match(const DescriptorsView& a, const DescriptorsView& b, const MatchOptions& options);
  int threads() const { return threads_; }

 private:
  struct Workspace {
    AlignedFloats c;
    Top2 cols;
  };
  int threads_;
  std::vector<Workspace> work_;
  Top2 rows_, cols_;
};

/// hloc's find_nn on a top-2 set followed (with mutual) by mutual_check, in float32 as torch evaluates it:
/// d = 2 * (1 - sim); ratio: d1 <= float(ratio^2) * d2; distance: d1 <= float(distance^2); score (sim + 1) / 2.
/// `use_ratio` is false when either side has one descriptor (hloc turns the test off there).
Matches decide(const Top2& rows, const Top2& cols, const MatchOptions& options, bool use_ratio);

/// The whole matcher on the plain references (similarity_block_reference, the scalar scan, one thread).
Matches match_reference(const DescriptorsView& a, const DescriptorsView& b, const MatchOptions& options);

/// Throws Error(InvalidArgument) for views the matcher cannot take (a null pointer with n > 0, dim < 1 or over
/// kMaxDescriptorDim, different dims, more than INT32_MAX points).
void check_views(const DescriptorsView& a, const DescriptorsView& b);

}  // namespace superpoint_rt::matching::detail
