// AVX-512 LightGlue element-wise kernels (lg_kernels.hpp): 16 lanes, the same operations as the scalar reference.
// GCC 12's avx512fintrin.h builds _mm512_undefined_* as `__m512 __Y = __Y;` (see src/match/scan_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "match/lg_kernels.hpp"

namespace superpoint_rt::lightglue::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline __mmask16 tail(int left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

inline __m512 exp_np(__m512 x) {
  using namespace poly;
  const __mmask16 in = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMin), _CMP_GE_OQ);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpC[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC[i]));
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_fmadd_ps(p, z, r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
  y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(y), e));
  y = _mm512_maskz_mov_ps(in, y);
  return _mm512_mask_mov_ps(y, nan, x);
}

// The 16 lanes added pairwise (l + l+8, l + l+4, l + l+2, l + l+1), as the scalar reduce16.
inline float reduce16(__m512 v) {
  __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

void softmax_tile(float* s, int rows, int cols, int lds, float* row_max, float* row_sum, float* alpha) {
  for (int r = 0; r < rows; ++r) {
    float* x = s + static_cast<std::ptrdiff_t>(r) * lds;
    __m512 mv = _mm512_set1_ps(row_max[r]);
    for (int j = 0; j < cols; j += 16) mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(mv, tail(cols - j), x + j));
    const float m = _mm512_reduce_max_ps(mv);
    float a = 0.0f;
    if (row_max[r] != kNegInf) {
      const __m512 d = _mm512_set1_ps(row_max[r] - m);
      a = _mm_cvtss_f32(_mm512_castps512_ps128(exp_np(d)));
    }
    const __m512 mm = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < cols; j += 16) {
      const __mmask16 k = tail(cols - j);
      const __m512 e = exp_np(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mm));
      _mm512_mask_storeu_ps(x + j, k, e);
      acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(k, e));
    }
    row_sum[r] = std::fma(row_sum[r], a, reduce16(acc));
    row_max[r] = m;
    alpha[r] = a;
  }
}

// 16 columns at a time; each lane runs the scalar reference's sequence for its column.
void softmax_cols(const float* s, int rows, int cols, int lds, float* col_max, float* col_sum, float* beta, float* p,
                  int ldp) {
  const __m512 ninf = _mm512_set1_ps(kNegInf);
  for (int c = 0; c < cols; c += 16) {
    const __mmask16 k = tail(cols - c);
    const __m512 m0 = _mm512_mask_loadu_ps(ninf, k, col_max + c);
    __m512 mv = m0;
    for (int r = 0; r < rows; ++r)  // v > m ? v : m, as the reference
      mv = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, s + static_cast<std::ptrdiff_t>(r) * lds + c), mv);
    const __mmask16 was = _mm512_cmp_ps_mask(m0, ninf, _CMP_NEQ_OQ);
    const __m512 b = _mm512_maskz_mov_ps(was, exp_np(_mm512_sub_ps(m0, mv)));
    __m512 sum = _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
      const __m512 e =
          exp_np(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + static_cast<std::ptrdiff_t>(r) * lds + c), mv));
      _mm512_mask_storeu_ps(p + static_cast<std::ptrdiff_t>(r) * ldp + c, k, e);
      sum = _mm512_add_ps(sum, e);
    }
    _mm512_mask_storeu_ps(col_sum + c, k, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, col_sum + c), b, sum));
    _mm512_mask_storeu_ps(col_max + c, k, mv);
    _mm512_mask_storeu_ps(beta + c, k, b);
  }
}

void layernorm_gelu(const float* x, int n, const float* g, const float* b, float* out) {
  using namespace poly;
  __m512 acc = _mm512_setzero_ps();
  for (int k = 0; k < n; k += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + k));
  const float mean = reduce16(acc) / static_cast<float>(n);
  const __m512 mv = _mm512_set1_ps(mean);
  __m512 va = _mm512_setzero_ps();
  for (int k = 0; k < n; k += 16) {
    const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + k), mv);
    va = _mm512_fmadd_ps(d, d, va);
  }
  const float rstd = 1.0f / std::sqrt(reduce16(va) / static_cast<float>(n) + kLayerNormEps);
  const __m512 rs = _mm512_set1_ps(rstd), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int k = 0; k < n; k += 16) {
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + k), mv), rs), _mm512_loadu_ps(g + k));
    y = _mm512_add_ps(y, _mm512_loadu_ps(b + k));
    const __m512 u = _mm512_mul_ps(_mm512_andnot_ps(sign, y), _mm512_set1_ps(kSqrtHalf));
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(kErfP), u, one));
    __m512 q = _mm512_set1_ps(kErfA[4]);
    for (int i = 3; i >= 0; --i) q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(kErfA[i]));
    q = _mm512_mul_ps(q, t);
    const __m512 e = exp_np(_mm512_xor_ps(_mm512_mul_ps(u, u), sign));
    const __m512 erf_abs = _mm512_fnmadd_ps(q, e, one);
    const __m512 erf = _mm512_xor_ps(erf_abs, _mm512_and_ps(y, sign));
    _mm512_storeu_ps(out + k, _mm512_mul_ps(_mm512_mul_ps(half, y), _mm512_add_ps(one, erf)));
  }
}

void exp_nonpositive(const float* x, int n, float* out) {
  for (int k = 0; k < n; k += 16) {
    const __mmask16 m = tail(n - k);
    _mm512_mask_storeu_ps(out + k, m, exp_np(_mm512_maskz_loadu_ps(m, x + k)));
  }
}

}  // namespace

const LgKernels kAvx512LgKernels{util::Isa::Avx512, softmax_tile, softmax_cols, layernorm_gelu, exp_nonpositive};

}  // namespace superpoint_rt::lightglue::detail
