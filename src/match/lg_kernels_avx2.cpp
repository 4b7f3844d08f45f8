// AVX2 LightGlue element-wise kernels (lg_kernels.hpp): the 16 lanes of a sum as two vectors of 8 (lanes 0-7 and
// 8-15), the same operations as the scalar reference.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "match/lg_kernels.hpp"

namespace superpoint_rt::lightglue::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Lanes [0, left) of 8 set (left clamped to 0..8).
inline __m256i tail(int left) {
  const int l = left < 0 ? 0 : (left > 8 ? 8 : left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 exp_np(__m256 x) {
  using namespace poly;
  const __m256 in = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_GE_OQ);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpC[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC[i]));
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(p, z, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y), e));
  y = _mm256_and_ps(y, in);
  return _mm256_blendv_ps(y, x, nan);
}

// Lanes 0-7 in lo, 8-15 in hi, added pairwise as the scalar reduce16.
inline float reduce16(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline float reduce_max(__m256 v) {
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

void softmax_tile(float* s, int rows, int cols, int lds, float* row_max, float* row_sum, float* alpha) {
  for (int r = 0; r < rows; ++r) {
    float* x = s + static_cast<std::ptrdiff_t>(r) * lds;
    __m256 mv = _mm256_set1_ps(row_max[r]);
    for (int j = 0; j < cols; j += 8) {
      const __m256i k = tail(cols - j);
      mv = _mm256_max_ps(mv, _mm256_blendv_ps(mv, _mm256_maskload_ps(x + j, k), _mm256_castsi256_ps(k)));
    }
    const float m = reduce_max(mv);
    float a = 0.0f;
    if (row_max[r] != kNegInf) a = _mm_cvtss_f32(_mm256_castps256_ps128(exp_np(_mm256_set1_ps(row_max[r] - m))));
    const __m256 mm = _mm256_set1_ps(m);
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int j = 0; j < cols; j += 16) {
      const __m256i k0 = tail(cols - j), k1 = tail(cols - j - 8);
      const __m256 e0 =
          _mm256_and_ps(exp_np(_mm256_sub_ps(_mm256_maskload_ps(x + j, k0), mm)), _mm256_castsi256_ps(k0));
      _mm256_maskstore_ps(x + j, k0, e0);
      lo = _mm256_add_ps(lo, e0);
      if (cols - j > 8) {
        const __m256 e1 =
            _mm256_and_ps(exp_np(_mm256_sub_ps(_mm256_maskload_ps(x + j + 8, k1), mm)), _mm256_castsi256_ps(k1));
        _mm256_maskstore_ps(x + j + 8, k1, e1);
        hi = _mm256_add_ps(hi, e1);
      }
    }
    row_sum[r] = std::fma(row_sum[r], a, reduce16(lo, hi));
    row_max[r] = m;
    alpha[r] = a;
  }
}

// 8 columns at a time; each lane runs the scalar reference's sequence for its column.
void softmax_cols(const float* s, int rows, int cols, int lds, float* col_max, float* col_sum, float* beta, float* p,
                  int ldp) {
  const __m256 ninf = _mm256_set1_ps(kNegInf);
  for (int c = 0; c < cols; c += 8) {
    const __m256i k = tail(cols - c);
    const __m256 km = _mm256_castsi256_ps(k);
    const __m256 m0 = _mm256_blendv_ps(ninf, _mm256_maskload_ps(col_max + c, k), km);
    __m256 mv = m0;
    for (int r = 0; r < rows; ++r) {  // v > m ? v : m, as the reference
      const __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(s + static_cast<std::ptrdiff_t>(r) * lds + c, k), km);
      mv = _mm256_max_ps(v, mv);
    }
    const __m256 was = _mm256_cmp_ps(m0, ninf, _CMP_NEQ_OQ);
    const __m256 b = _mm256_and_ps(exp_np(_mm256_sub_ps(m0, mv)), was);
    __m256 sum = _mm256_setzero_ps();
    for (int r = 0; r < rows; ++r) {
      const __m256 e = exp_np(_mm256_sub_ps(_mm256_maskload_ps(s + static_cast<std::ptrdiff_t>(r) * lds + c, k), mv));
      _mm256_maskstore_ps(p + static_cast<std::ptrdiff_t>(r) * ldp + c, k, e);
      sum = _mm256_add_ps(sum, e);
    }
    _mm256_maskstore_ps(col_sum + c, k, _mm256_fmadd_ps(_mm256_maskload_ps(col_sum + c, k), b, sum));
    _mm256_maskstore_ps(col_max + c, k, mv);
    _mm256_maskstore_ps(beta + c, k, b);
  }
}

void layernorm_gelu(const float* x, int n, const float* g, const float* b, float* out) {
  using namespace poly;
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int k = 0; k < n; k += 16) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(x + k));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(x + k + 8));
  }
  const float mean = reduce16(lo, hi) / static_cast<float>(n);
  const __m256 mv = _mm256_set1_ps(mean);
  lo = _mm256_setzero_ps();
  hi = _mm256_setzero_ps();
  for (int k = 0; k < n; k += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + k), mv), d1 = _mm256_sub_ps(_mm256_loadu_ps(x + k + 8), mv);
    lo = _mm256_fmadd_ps(d0, d0, lo);
    hi = _mm256_fmadd_ps(d1, d1, hi);
  }
  const float rstd = 1.0f / std::sqrt(reduce16(lo, hi) / static_cast<float>(n) + kLayerNormEps);
  const __m256 rs = _mm256_set1_ps(rstd), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int k = 0; k < n; k += 8) {
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + k), mv), rs), _mm256_loadu_ps(g + k));
    y = _mm256_add_ps(y, _mm256_loadu_ps(b + k));
    const __m256 u = _mm256_mul_ps(_mm256_andnot_ps(sign, y), _mm256_set1_ps(kSqrtHalf));
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(kErfP), u, one));
    __m256 q = _mm256_set1_ps(kErfA[4]);
    for (int i = 3; i >= 0; --i) q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(kErfA[i]));
    q = _mm256_mul_ps(q, t);
    const __m256 e = exp_np(_mm256_xor_ps(_mm256_mul_ps(u, u), sign));
    const __m256 erf_abs = _mm256_fnmadd_ps(q, e, one);
    const __m256 erf = _mm256_xor_ps(erf_abs, _mm256_and_ps(y, sign));
    _mm256_storeu_ps(out + k, _mm256_mul_ps(_mm256_mul_ps(half, y), _mm256_add_ps(one, erf)));
  }
}

void exp_nonpositive(const float* x, int n, float* out) {
  for (int k = 0; k < n; k += 8) {
    const __m256i m = tail(n - k);
    _mm256_maskstore_ps(out + k, m, exp_np(_mm256_maskload_ps(x + k, m)));
  }
}

}  // namespace

const LgKernels kAvx2LgKernels{util::Isa::Avx2, softmax_tile, softmax_cols, layernorm_gelu, exp_nonpositive};

}  // namespace superpoint_rt::lightglue::detail
