// Internal: the matcher's kernels per instruction-set level: the fused row + column top-2 scan of a block of
// similarities, the exact similarity (`dot`), the candidate filter of the screened matcher (`collect`) and the bfloat16
// rounding of its screen (`to_bf16`).
//
// The matcher (matcher.cpp) computes the similarity matrix in blocks of rows with a oneDNN GEMM; each block is scanned
// once, while it is in cache, for both directions of hloc's find_nn: every row's best and second-best similarity
// (complete, since a block holds whole rows) and every column's running best / second best over the rows seen so far.
//
// One table per translation unit (scan_scalar.cpp: the plain reference; scan_avx2.cpp, scan_avx512.cpp: compiled
// with those ISA flags only, cmake/Warnings.cmake). The ISA files take raw pointers and instantiate no std::
// templates (see src/post/kernels.hpp for why). Every table gives the same bits as the reference for all inputs
// without NaN (tests/match/test_match_kernels.cpp): the best value and index, ties to the lowest index, and the
// second-best value (the second of the multiset: equal to the best when the best occurs twice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/cpu.hpp"

namespace superpoint_rt::matching::detail {

/// Running top-2 of a set of similarities: `best` at `index` (the lowest index among equal bests), `second` the
/// second largest of the multiset. Empty: best = second = -inf, index = 0.
struct Top2Arrays {
  float* best;
  float* second;
  std::int32_t* index;
};

struct ScanKernels {
  util::Isa isa;
  /// Scans rows [0, m) x columns [0, n) of `c` (row stride ldc floats; m, n >= 1). Rows: rows.{best, second,
  /// index}[r] = the top-2 of row r over the n columns (column indices). Columns: cols.{...}[j] is updated with the
  /// rows in increasing r, whose index is row0 + r; a value must be strictly greater to replace the best, so an
  /// earlier row keeps a tie. NaN similarities are never taken (the result is then valid but unspecified).
  void (*scan)(const float* c, std::size_t ldc, int m, int n, std::int32_t row0, Top2Arrays rows, Top2Arrays cols);
  /// The matcher's exact similarity sum_k a[k] b[k] (dim >= 1), in one order fixed for every CPU: 64 float32 lanes,
  /// lane l takes k = l, l + 64, ... in increasing k with one fused multiply-add each (no rounding of the product),
  /// then the lanes are added pairwise (l + l+32, l + l+16, ..., 0 + 1). Four independent chains of 16 lanes keep the
  /// FMA units busy. Every table gives the same bits, so the matches and scores do not depend on the CPU, the thread
  /// count or oneDNN's GEMM kernel (matcher.hpp).
  float (*dot)(const float* a, const float* b, int dim);
  /// Writes to `out` (room for n + 16 entries) the columns j in [0, n), increasing, with
  /// row[j] >= min(row_min, max(col_second[j], col_floor[j]) - margin) (the difference rounded to float32); returns
  /// their count. NaN is never collected (and col_second, col_floor hold none).
  int (*collect)(const float* row, int n, float row_min, const float* col_second, const float* col_floor, float margin,
                 std::int32_t* out);
  /// out[k] = the bfloat16 bits of x[k] rounded to nearest, ties to even (a NaN stays a quiet NaN), and
  /// resid[k] = x[k] - that bfloat16 (exact in float32), k in [0, dim).
  void (*to_bf16)(const float* x, int dim, std::uint16_t* out, float* resid);
};

extern const ScanKernels kScalarScan;
extern const ScanKernels kAvx2Scan;
extern const ScanKernels kAvx512Scan;

/// The plain to_bf16 (the scalar table's, and the AVX2 table's too: the bfloat16 screen runs on AVX512-BF16 CPUs only).
void to_bf16_reference(const float* x, int dim, std::uint16_t* out, float* resid);

/// The table for util::best_isa() (SUPERPOINT_RT_ISA caps it).
const ScanKernels& best_scan();
/// Every table this CPU can run (after the SUPERPOINT_RT_ISA cap), scalar first; for tests and benchmarks.
std::vector<const ScanKernels*> available_scans();

/// Adds value v at index i to a running top-2 (best b1 at i1, second b2): strictly greater to replace the best (an
/// earlier index keeps a tie), b2 the second of the multiset; NaN is never taken. The rule of every table above.
inline void push_top2(float& b1, float& b2, std::int32_t& i1, float v, std::int32_t i) noexcept {
  if (v > b1) {
    b2 = b1;
    b1 = v;
    i1 = i;
  } else if (v > b2) {
    b2 = v;
  }
}

/// Fills n entries with the empty state (-inf, -inf, 0).
void reset_top2(Top2Arrays t, std::size_t n) noexcept;

/// Merges the running column state `other` (rows of another set) into `into`, columns [0, n): the larger best wins,
/// an equal best goes to the lower row index; second = the second largest of the four values. The result is that
/// of one scan over both row sets in increasing row order.
void merge_top2(Top2Arrays into, Top2Arrays other, std::size_t n) noexcept;

}  // namespace superpoint_rt::matching::detail
