// AVX-512 scan (kernels.hpp): 16 columns per vector, four rows per pass over the column state, so that the running
// column top-2 is loaded and stored once per four rows. Each row keeps a per-lane top-2 (lane l sees the columns
// j = l mod 16 in increasing order, strict >), reduced at the end of the row: the largest lane best, ties to the
// lowest column index, and the second of the multiset. Same bits as the scalar reference.
// GCC 12's avx512fintrin.h builds _mm512_undefined_* as `__m512 __Y = __Y;`, which -Wmaybe-uninitialized flags
// inside _mm512_max_ps (as in src/post/post_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

}  // namespace

const ScanKernels kAvx512Scan{util::Isa::Avx512, scan_avx512};

}  // namespace superpoint_rt::matching::detail
