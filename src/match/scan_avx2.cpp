// AVX2 scan (kernels.hpp): the AVX-512 kernel's scheme with 8 columns per vector and two rows per pass over the
// column state (16 registers). The last partial vector is read with maskload (masked-off lanes become -inf) and
// written with maskstore. Same bits as the scalar reference.
#include <immintrin.h>

#include <limits>

#include "match/kernels.hpp"

namespace superpoint_rt::matching::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline void reduce_row(__m256 b1, __m256 b2, __m256i i1, float* best, float* second, std::int32_t* index) {
  alignas(32) float v1[8], v2[8];
  alignas(32) std::int32_t ix[8];
  _mm256_store_ps(v1, b1);
  _mm256_store_ps(v2, b2);
  _mm256_store_si256(reinterpret_cast<__m256i*>(ix), i1);
  int w = 0;
  for (int l = 1; l < 8; ++l)
    if (v1[l] > v1[w] || (v1[l] == v1[w] && ix[l] < ix[w])) w = l;
  float s = v2[w];
  for (int l = 0; l < 8; ++l)
    if (l != w && v1[l] > s) s = v1[l];
  *best = v1[w];
  *second = s;
  *index = ix[w];
}

// Lanes [0, left) of a vector (left >= 8: all).
inline __m256i lane_mask(int left) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), iota);
}

inline __m256 load(const float* p, __m256i mask, bool full, __m256 ninf) {
  if (full) return _mm256_loadu_ps(p);
  return _mm256_blendv_ps(ninf, _mm256_maskload_ps(p, mask), _mm256_castsi256_ps(mask));
}

template <int R>
inline void scan_rows(const float* c, std::size_t ldc, int r, int n, std::int32_t row0, Top2Arrays rows,
                      Top2Arrays cols) {
  const __m256 ninf = _mm256_set1_ps(kNegInf);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 b1[R], b2[R];
  __m256i i1[R];
  const float* row[R];
  for (int q = 0; q < R; ++q) {
    b1[q] = ninf;
    b2[q] = ninf;
    i1[q] = _mm256_setzero_si256();
    row[q] = c + static_cast<std::size_t>(r + q) * ldc;
  }
  for (int j = 0; j < n; j += 8) {
    const bool full = n - j >= 8;
    const __m256i mask = lane_mask(n - j);
    const __m256i jv = _mm256_add_epi32(_mm256_set1_epi32(j), iota);
    __m256 cb1 = load(cols.best + j, mask, full, ninf);
    __m256 cb2 = load(cols.second + j, mask, full, ninf);
    __m256i ci = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cols.index + j))
                      : _mm256_maskload_epi32(cols.index + j, mask);
    for (int q = 0; q < R; ++q) {
      const __m256 s = load(row[q] + j, mask, full, ninf);
      // max(s, x) returns x when s is NaN (VMAXPS gives the second operand), so a NaN is never taken.
      const __m256 g = _mm256_cmp_ps(s, b1[q], _CMP_GT_OQ);
      b2[q] = _mm256_blendv_ps(_mm256_max_ps(s, b2[q]), b1[q], g);
      b1[q] = _mm256_blendv_ps(b1[q], s, g);
      i1[q] = _mm256_blendv_epi8(i1[q], jv, _mm256_castps_si256(g));
      const __m256 gc = _mm256_cmp_ps(s, cb1, _CMP_GT_OQ);
      cb2 = _mm256_blendv_ps(_mm256_max_ps(s, cb2), cb1, gc);
      cb1 = _mm256_blendv_ps(cb1, s, gc);
      ci = _mm256_blendv_epi8(ci, _mm256_set1_epi32(row0 + r + q), _mm256_castps_si256(gc));
    }
    if (full) {
      _mm256_storeu_ps(cols.best + j, cb1);
      _mm256_storeu_ps(cols.second + j, cb2);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(cols.index + j), ci);
    } else {
      _mm256_maskstore_ps(cols.best + j, mask, cb1);
      _mm256_maskstore_ps(cols.second + j, mask, cb2);
      _mm256_maskstore_epi32(cols.index + j, mask, ci);
    }
  }
  for (int q = 0; q < R; ++q)
    reduce_row(b1[q], b2[q], i1[q], rows.best + r + q, rows.second + r + q, rows.index + r + q);
}

void scan_avx2(const float* c, std::size_t ldc, int m, int n, std::int32_t row0, Top2Arrays rows, Top2Arrays cols) {
  int r = 0;
  for (; r + 2 <= m; r += 2) scan_rows<2>(c, ldc, r, n, row0, rows, cols);
  for (; r < m; ++r) scan_rows<1>(c, ldc, r, n, row0, rows, cols);
}

// The reference dot's 64 lanes are eight vectors: acc[q] holds lanes 8q..8q+7; the masked tail adds
// fma(0, 0, lane) = lane, as on AVX-512.
float dot_avx2(const float* a, const float* b, int dim) {
  __m256 acc[8];
  for (auto& v : acc) v = _mm256_setzero_ps();
  int k = 0;
  for (; k + 64 <= dim; k += 64)
    for (int q = 0; q < 8; ++q)
      acc[q] = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8 * q), _mm256_loadu_ps(b + k + 8 * q), acc[q]);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int q = 0; k + 8 * q < dim; ++q) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(dim - k - 8 * q), iota);
    acc[q] = _mm256_fmadd_ps(_mm256_maskload_ps(a + k + 8 * q, m), _mm256_maskload_ps(b + k + 8 * q, m), acc[q]);
  }
  // 64 -> 32 -> 16 -> 8 lanes: lane l + lane l+32, then l + l+16, then l + l+8.
  __m256 s32[4], s16[2];
  for (int q = 0; q < 4; ++q) s32[q] = _mm256_add_ps(acc[q], acc[q + 4]);
  for (int q = 0; q < 2; ++q) s16[q] = _mm256_add_ps(s32[q], s32[q + 2]);
  const __m256 s8 = _mm256_add_ps(s16[0], s16[1]);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

int collect_avx2(const float* row, int n, float row_min, const float* col_second, const float* col_floor, float margin,
                 std::int32_t* out) {
  const __m256 rmin = _mm256_set1_ps(row_min), mv = _mm256_set1_ps(margin);
  int count = 0;
  for (int j = 0; j < n; j += 8) {
    const int left = n - j;
    unsigned hit;
    if (left >= 8) {
      const __m256 col = _mm256_max_ps(_mm256_loadu_ps(col_second + j), _mm256_loadu_ps(col_floor + j));
      const __m256 t = _mm256_min_ps(_mm256_sub_ps(col, mv), rmin);
      hit = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + j), t, _CMP_GE_OQ)));
    } else {
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const __m256 col = _mm256_max_ps(_mm256_maskload_ps(col_second + j, m), _mm256_maskload_ps(col_floor + j, m));
      const __m256 t = _mm256_min_ps(_mm256_sub_ps(col, mv), rmin);
      hit = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_maskload_ps(row + j, m), t, _CMP_GE_OQ))) &
            ((1u << left) - 1u);
    }
    for (; hit; hit &= hit - 1) out[count++] = j + __builtin_ctz(hit);
  }
  return count;
}

}  // namespace

const ScanKernels kAvx2Scan{util::Isa::Avx2, scan_avx2, dot_avx2, collect_avx2, to_bf16_reference};

}  // namespace superpoint_rt::matching::detail
