// Internal: LightGlue's element-wise kernels per instruction-set level (lightglue.cpp runs the matrix products on
// oneDNN and these in between): the online-softmax update of a tile of attention logits (over its rows, and over its
// columns for the cross block's second direction), and the feed-forward block's LayerNorm + GELU.
//
// exp and erf are polynomials of our own, evaluated in one fixed sequence of float32 operations (fused multiply-adds
// where written) in every table, and sums run in 16 lanes added pairwise at the end (lane l takes the elements
// j = l mod 16), so the scalar table (the plain reference) and the AVX2 and AVX-512 tables give the same bits
// (tests/lightglue/test_lg_kernels.cpp). Their accuracy against the exact functions: exp within 2 ulps on
// [-86, 0] (below -86 it gives 0, where the exact value is under 5e-38); 1 + erf within 2e-7 (Abramowitz-Stegun
// 7.1.26), which GELU needs, not erf's relative error near 0.
//
// One table per translation unit (lg_kernels_scalar.cpp, lg_kernels_avx2.cpp, lg_kernels_avx512.cpp, the last two
// compiled with those ISA flags only: cmake/Warnings.cmake); they take raw pointers and instantiate no std::
// templates (src/post/kernels.hpp says why).
#pragma once

#include <vector>

#include "util/cpu.hpp"

namespace superpoint_rt::lightglue::detail {

struct LgKernels {
  util::Isa isa;
  /// The online-softmax step of one tile of logits: for each row r in [0, rows) of `s` (row stride lds floats,
  /// cols >= 1 values), m' = max(row_max[r], max_j s[r][j]); alpha[r] = exp(row_max[r] - m') (0 when row_max[r]
  /// was -inf); s[r][j] = exp(s[r][j] - m') in place; row_sum[r] = row_sum[r] * alpha[r] + sum_j s[r][j];
  /// row_max[r] = m'.
  void (*softmax_tile)(float* s, int rows, int cols, int lds, float* row_max, float* row_sum, float* alpha);
  /// The same step over the columns of a tile, for the cross block's second direction (cvg's
  /// softmax(sim.transpose(-2, -1)): image 1's points attend to image 0's over the rows of the one sim): for each
  /// column c in [0, cols) of `s` (rows x cols, row stride lds; left as it is), m' = max(col_max[c], max_r s[r][c]);
  /// beta[c] = exp(col_max[c] - m') (0 when col_max[c] was -inf); p[r][c] = exp(s[r][c] - m') (row stride ldp);
  /// col_sum[c] = col_sum[c] * beta[c] + (the sum of p[r][c] in row order); col_max[c] = m'.
  void (*softmax_cols)(const float* s, int rows, int cols, int lds, float* col_max, float* col_sum, float* beta,
                       float* p, int ldp);
  /// out[k] = GELU(LayerNorm(x)[k]) for one row of n values (n a multiple of 16): mean and variance over the row
  /// (biased, as torch.nn.LayerNorm), eps 1e-5, gamma `g`, beta `b`; GELU(y) = y / 2 (1 + erf(y / sqrt 2)) (torch's
  /// exact GELU). `out` may be `x`.
  void (*layernorm_gelu)(const float* x, int n, const float* g, const float* b, float* out);
  /// out[k] = exp(x[k]) for x[k] <= 0 (the domain the softmax uses), n >= 0 values.
  void (*exp_nonpositive)(const float* x, int n, float* out);
};

extern const LgKernels kScalarLgKernels;
extern const LgKernels kAvx2LgKernels;
extern const LgKernels kAvx512LgKernels;

/// The table for util::best_isa() (SUPERPOINT_RT_ISA caps it).
const LgKernels& best_lg_kernels();
/// Every table this CPU can run (after the cap), scalar first: for the tests.
std::vector<const LgKernels*> available_lg_kernels();

/// The constants of the polynomials, one definition for every table.
namespace poly {
inline constexpr float kExpMin = -86.0f;  // exp(-86) = 4.4e-38, above float's smallest normal: 2^n stays normal
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // Cephes' split of ln 2
inline constexpr float kExpC[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
inline constexpr float kErfP = 0.3275911f;  // Abramowitz-Stegun 7.1.26
inline constexpr float kErfA[5] = {0.254829592f, -0.284496736f, 1.421413741f, -1.453152027f, 1.061405429f};
inline constexpr float kSqrtHalf = 0.70710678118654752f;
inline constexpr float kLayerNormEps = 1e-5f;  // torch.nn.LayerNorm's default, which LightGlue keeps
}  // namespace poly

}  // namespace superpoint_rt::lightglue::detail
