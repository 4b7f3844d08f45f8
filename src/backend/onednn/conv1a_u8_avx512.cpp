// AVX-512 kernel of conv1a_u8.hpp: 16 channels per vector, the nine weights of a 16-channel block held in
// registers while the row is swept; the reference's operations in the same order (same bits). Raw pointers only.
#include <immintrin.h>

#include "backend/onednn/conv1a_u8.hpp"

// GCC 12's avx512fintrin.h false positive (see post/post_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace superpoint_rt::backend::detail {

void conv1a_u8_row_avx512(const Conv1aU8& k, const float* r0, const float* r1, const float* r2, int w,
                          std::uint8_t* out) {
  const auto ch = static_cast<std::size_t>(k.channels);
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.f);
  // Weight vectors gather tap t of 16 channels: the OIHW weights are channel-major (stride 9).
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(9));
  for (std::size_t c0 = 0; c0 < ch; c0 += 16) {
    __m512 wt[9];
    for (int t = 0; t < 9; ++t) wt[t] = _mm512_i32gather_ps(idx, k.weight + c0 * 9 + static_cast<std::size_t>(t), 4);
    const __m512 bias = _mm512_loadu_ps(k.bias + c0);
    const __m512 scale = k.channel_scale ? _mm512_loadu_ps(k.channel_scale + c0) : _mm512_set1_ps(k.scale);
    std::uint8_t* o = out + c0;
    for (int x = 0; x < w; ++x) {
      __m512 acc = bias;
      acc = _mm512_fmadd_ps(wt[0], _mm512_set1_ps(r0[x]), acc);
      acc = _mm512_fmadd_ps(wt[1], _mm512_set1_ps(r0[x + 1]), acc);
      acc = _mm512_fmadd_ps(wt[2], _mm512_set1_ps(r0[x + 2]), acc);
      acc = _mm512_fmadd_ps(wt[3], _mm512_set1_ps(r1[x]), acc);
      acc = _mm512_fmadd_ps(wt[4], _mm512_set1_ps(r1[x + 1]), acc);
      acc = _mm512_fmadd_ps(wt[5], _mm512_set1_ps(r1[x + 2]), acc);
      acc = _mm512_fmadd_ps(wt[6], _mm512_set1_ps(r2[x]), acc);
      acc = _mm512_fmadd_ps(wt[7], _mm512_set1_ps(r2[x + 1]), acc);
      acc = _mm512_fmadd_ps(wt[8], _mm512_set1_ps(r2[x + 2]), acc);
      // max(acc, 0) is 0 unless acc > 0 and min(q, 255) is 255 unless q < 255: the reference's selects.
      __m512 q = _mm512_mul_ps(_mm512_max_ps(acc, zero), scale);
      q = _mm512_min_ps(q, top);
      const __m512i qi = _mm512_cvt_roundps_epi32(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + static_cast<std::size_t>(x) * ch), _mm512_cvtusepi32_epi8(qi));
    }
  }
}

}  // namespace superpoint_rt::backend::detail
