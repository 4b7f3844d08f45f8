// AVX-512 scan (kernels.hpp): 16 columns per vector, four rows per pass over the column state, so that the running
// column top-2 is loaded and stored once per four rows. Each row keeps a per-lane top-2 (lane l sees the columns
// j = l mod 16 in increasing order, strict >), reduced at the end of the row: the largest lane best, ties to the
// lowest column index, and the second of the multiset. Same bits as the scalar reference.
// GCC 12's avx512fintrin.h builds _mm512_undefined_* as `__m512 __Y = __Y;`, which -Wmaybe-uninitialized flags
// inside _mm512_max_ps, and -Wuninitialized inside _mm512_extractf32x8_ps (as in src/post/post_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <limits>

#include "match/kernels.hpp"

namespace superpoint_rt::matching::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The row's top-2 from its 16 lanes.
inline void reduce_row(__m512 b1, __m512 b2, __m512i i1, float* best, float* second, std::int32_t* index) {
  alignas(64) float v1[16], v2[16];
  alignas(64) std::int32_t ix[16];
  _mm512_store_ps(v1, b1);
  _mm512_store_ps(v2, b2);
  _mm512_store_si512(ix, i1);
  int w = 0;
  for (int l = 1; l < 16; ++l)
    if (v1[l] > v1[w] || (v1[l] == v1[w] && ix[l] < ix[w])) w = l;
  float s = v2[w];
  for (int l = 0; l < 16; ++l)
    if (l != w && v1[l] > s) s = v1[l];
  *best = v1[w];
  *second = s;
  *index = ix[w];
}

template <int R>
inline void scan_rows(const float* c, std::size_t ldc, int r, int n, std::int32_t row0, Top2Arrays rows,
                      Top2Arrays cols) {
  const __m512 ninf = _mm512_set1_ps(kNegInf);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 b1[R], b2[R];
  __m512i i1[R], rid[R];
  const float* row[R];
  for (int q = 0; q < R; ++q) {
    b1[q] = ninf;
    b2[q] = ninf;
    i1[q] = _mm512_setzero_si512();
    rid[q] = _mm512_set1_epi32(row0 + r + q);
    row[q] = c + static_cast<std::size_t>(r + q) * ldc;
  }
  for (int j = 0; j < n; j += 16) {
    const int left = n - j;
    const __mmask16 k = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    const __m512i jv = _mm512_add_epi32(_mm512_set1_epi32(j), iota);
    __m512 cb1 = _mm512_mask_loadu_ps(ninf, k, cols.best + j);
    __m512 cb2 = _mm512_mask_loadu_ps(ninf, k, cols.second + j);
    __m512i ci = _mm512_maskz_loadu_epi32(k, cols.index + j);
    for (int q = 0; q < R; ++q) {
      const __m512 s = _mm512_mask_loadu_ps(ninf, k, row[q] + j);
      // max(s, x) returns x when s is NaN (VMAXPS gives the second operand), so a NaN is never taken.
      const __mmask16 g = _mm512_cmp_ps_mask(s, b1[q], _CMP_GT_OQ);
      b2[q] = _mm512_mask_blend_ps(g, _mm512_max_ps(s, b2[q]), b1[q]);
      b1[q] = _mm512_mask_blend_ps(g, b1[q], s);
      i1[q] = _mm512_mask_blend_epi32(g, i1[q], jv);
      const __mmask16 gc = _mm512_cmp_ps_mask(s, cb1, _CMP_GT_OQ);
      cb2 = _mm512_mask_blend_ps(gc, _mm512_max_ps(s, cb2), cb1);
      cb1 = _mm512_mask_blend_ps(gc, cb1, s);
      ci = _mm512_mask_blend_epi32(gc, ci, rid[q]);
    }
    _mm512_mask_storeu_ps(cols.best + j, k, cb1);
    _mm512_mask_storeu_ps(cols.second + j, k, cb2);
    _mm512_mask_storeu_epi32(cols.index + j, k, ci);
  }
  for (int q = 0; q < R; ++q)
    reduce_row(b1[q], b2[q], i1[q], rows.best + r + q, rows.second + r + q, rows.index + r + q);
}

void scan_avx512(const float* c, std::size_t ldc, int m, int n, std::int32_t row0, Top2Arrays rows, Top2Arrays cols) {
  int r = 0;
  for (; r + 4 <= m; r += 4) scan_rows<4>(c, ldc, r, n, row0, rows, cols);
  for (; r < m; ++r) scan_rows<1>(c, ldc, r, n, row0, rows, cols);
}

// The reference dot's 64 lanes are four vectors: acc[q] holds lanes 16q..16q+15. The masked tail adds
// fma(0, 0, lane) = lane (a lane that starts at +0 is never -0, so adding +0 changes no bit).
float dot_avx512(const float* a, const float* b, int dim) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int k = 0;
  for (; k + 64 <= dim; k += 64)
    for (int q = 0; q < 4; ++q)
      acc[q] = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16 * q), _mm512_loadu_ps(b + k + 16 * q), acc[q]);
  for (int q = 0; k + 16 * q < dim; ++q) {
    const int left = dim - k - 16 * q;
    const auto m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    acc[q] =
        _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k + 16 * q), _mm512_maskz_loadu_ps(m, b + k + 16 * q), acc[q]);
  }
  const __m512 s16 = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(s16), _mm512_extractf32x8_ps(s16, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// Candidates are rare (a few per row): test 16 columns at a time and compress only where one passes. The compress
// goes to a register and is stored whole (`out` has 16 entries of slack): VPCOMPRESSD to memory is slow on AMD.
int collect_avx512(const float* row, int n, float row_min, const float* col_second, const float* col_floor,
                   float margin, std::int32_t* out) {
  const __m512 rmin = _mm512_set1_ps(row_min), mv = _mm512_set1_ps(margin);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int count = 0;
  for (int j = 0; j < n; j += 16) {
    const int left = n - j;
    const __mmask16 k = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    const __m512 col = _mm512_max_ps(_mm512_maskz_loadu_ps(k, col_second + j), _mm512_maskz_loadu_ps(k, col_floor + j));
    const __m512 t = _mm512_min_ps(_mm512_sub_ps(col, mv), rmin);
    const __mmask16 hit = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, row + j), t, _CMP_GE_OQ);
    if (hit) {
      const __m512i idx = _mm512_maskz_compress_epi32(hit, _mm512_add_epi32(_mm512_set1_epi32(j), iota));
      _mm512_storeu_si512(out + count, idx);
      count += __builtin_popcount(hit);
    }
  }
  return count;
}

void to_bf16_avx512(const float* x, int dim, std::uint16_t* out, float* resid) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
  const __m512i half = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x00400000);
  for (int k = 0; k < dim; k += 16) {
    const int left = dim - k;
    const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    const __m512i u = _mm512_castps_si512(v);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, half), _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i r = _mm512_mask_mov_epi32(rounded, nan, _mm512_srli_epi32(_mm512_or_si512(u, quiet), 16));
    _mm256_mask_storeu_epi16(out + k, m, _mm512_cvtepi32_epi16(r));
    _mm512_mask_storeu_ps(resid + k, m, _mm512_sub_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(r, 16))));
  }
}

}  // namespace

const ScanKernels kAvx512Scan{util::Isa::Avx512, scan_avx512, dot_avx512, collect_avx512, to_bf16_avx512};

}  // namespace superpoint_rt::matching::detail
