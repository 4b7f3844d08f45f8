// Internal: the matcher behind superpoint_rt::match() and the file pipeline (run.cpp).
//
// Exact by screening. hloc's decisions need, for every row and every column of the similarity matrix a . b^T, the best
// and second-best similarity and the best's index. The matrix is computed fast but approximately (the screen: oneDNN's
// GEMM in float32, or in bfloat16 on CPUs with AVX512-BF16, which is twice as fast), with a proven bound E on its
// error against the exact similarity (ScanKernels::dot, one summation order on every CPU). An entry can be among a
// row's top 2 only if its screened value is >= the row's screened second best - 2E (and likewise for columns), so only
// those few candidates are computed exactly, and the top-2 sets are those of the exact matrix: the matches and scores
// are the same bits on every CPU, at every thread count, whichever screen ran (match_reference computes every entry
// with `dot`). Where the bound is not finite (NaN or huge descriptors) or the candidates are too many (massive ties),
// the matcher computes every entry exactly instead.
//
// The matrix is never held whole: rows are taken in blocks (about kBlockBytes of similarities), each block is one GEMM
// followed at once, while it is in cache, by the fused top-2 scan (kernels.hpp) and the candidate pass. Blocks are
// handed to the OpenMP threads dynamically; each thread keeps its own running column top-2, merged at the end (ties to
// the lower row, so the result does not depend on the thread count or on which thread took which block).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "match/kernels.hpp"
#include "superpoint_rt/errors.hpp"
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

/// How the matcher computes the similarity matrix before its exact pass (see the file comment).
enum class Screen {
  Auto,   ///< Bf16 where util::cpu_features() has AVX512-BF16 (after the SUPERPOINT_RT_ISA cap), else Fp32
  Fp32,   ///< oneDNN's float32 GEMM
  Bf16,   ///< oneDNN's bfloat16 matmul, float32 accumulation (slow without AVX512-BF16; Fp32 where oneDNN has none)
  Exact,  ///< no screen: every entry with ScanKernels::dot (the fallback; also for tests)
};
const char* to_string(Screen s) noexcept;
/// The screen Auto stands for on this CPU, or the one SUPERPOINT_RT_MATCH_SCREEN names (fp32, bf16, exact).
Screen auto_screen();

/// What the last Matcher::top2 did, for tests and benchmarks.
struct ScreenStats {
  Screen screen = Screen::Auto;  ///< the one that gave the result (Exact after a fallback, Fp32 for an unrunnable Bf16)
  bool fell_back = false;        ///< the screen was given up (bound not finite, or too many candidates)
  double bound = 0;              ///< E, the screen's error bound on one similarity
  std::size_t exact = 0;         ///< similarities computed exactly
};

/// Thrown by a Matcher whose deadline passed before it finished (Matcher::set_deadline): an Error of kind Overloaded,
/// told apart by its type (the HTTP server answers it with 504).
class DeadlinePassed : public Error {
 public:
  explicit DeadlinePassed(const std::string& message) : Error(ErrorKind::Overloaded, message) {}
};

/// hloc's NearestNeighbor with reusable work space. Not thread-safe: one Matcher per thread. With `threads` > 1 each
/// call's OpenMP regions open on the process's compute thread (util/compute_thread.hpp): calls of several Matchers,
/// and the engines' forwards, take turns there.
class Matcher {
 public:
  /// threads: OpenMP threads per call; 0 = all cores.
  explicit Matcher(int threads = 0);
  /// Row and column top-2 of the exact a . b^T (a.n, b.n >= 1, equal dims) with the kernels `k`.
  void top2(const DescriptorsView& a, const DescriptorsView& b, Top2& rows, Top2& cols,
            const ScanKernels& k = best_scan(), Screen screen = Screen::Auto);
  const ScreenStats& last_stats() const { return stats_; }
  /// hloc's NearestNeighbor._forward (validated views and options).
  Matches match(const DescriptorsView& a, const DescriptorsView& b, const MatchOptions& options);
  int threads() const { return threads_; }
  /// From now on, calls give up when `deadline` has passed: the clock is read between blocks of rows (about
  /// kBlockBytes of similarities each) and before the exact fallback, and the call throws DeadlinePassed. None: no
  /// deadline (the default).
  void set_deadline(std::optional<std::chrono::steady_clock::time_point> deadline) { deadline_ = deadline; }
  /// An upper bound of the bytes one call on n0 x n1 descriptors of `dim` values holds at once with `threads`
  /// threads: its blocks, top-2 arrays, bfloat16 copies and candidate lists (the screen's cap on them, grown by
  /// doubling, plus one block's worth before the cap is seen) and the Matches it returns. For a caller's memory
  /// budget (the HTTP server's /v1/match).
  static std::size_t memory_bound(std::size_t n0, std::size_t n1, int dim, int threads);

 private:
  // A screened entry kept for the columns' exact pass: row i, column j, screened and (once computed) exact similarity.
  struct Candidate {
    std::int32_t i, j;
    float screened, exact;
    bool computed;
  };
  struct Workspace {
    AlignedFloats c;
    Top2 cols;                             // the running column top-2 of the screened values of this thread's blocks
    std::vector<Candidate> kept;           // column candidates of this thread's blocks
    std::vector<std::int32_t> hits;        // one row's collected columns
    std::vector<float> resid;              // one row's bfloat16 residual
    Top2 floor_rows;                       // the floor rows' top-2 over this thread's share of the columns (unused)
    double norm2[2] = {}, resid2[2] = {};  // this thread's largest squared norms of a and b rows
  };
  // One screened (or exact) pass; false when the screen had to be given up.
  bool run(const ScanKernels& k, Screen screen, std::size_t dim, Top2& rows, Top2& cols);

  int threads_;
  std::vector<Workspace> work_;
  Top2 rows_, cols_;
  Top2 floor_;  // the columns' screened top-2 over the first kFloorRows rows
  ScreenStats stats_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  bool past_deadline() const { return deadline_ && std::chrono::steady_clock::now() >= *deadline_; }
  // The current pair: point-major float32 rows (copies only for dim-major views) and their bfloat16 roundings.
  std::vector<float> copy_[2];
  const float* rows_of_[2] = {};
  std::size_t n_[2] = {};
  std::vector<std::uint16_t> bf16_[2];
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
