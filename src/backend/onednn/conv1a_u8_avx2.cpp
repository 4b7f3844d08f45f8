// AVX2 kernel of conv1a_u8.hpp: 8 channels per vector, the nine weights of an 8-channel block held in registers
// while the row is swept; the reference's operations in the same order (same bits). For AVX2-only CPUs, where the
// int8 plan's conv1b reads the u8 channels-last activation with oneDNN's AVX2 u8s8 kernels. Raw pointers only.
#include <immintrin.h>

#include "backend/onednn/conv1a_u8.hpp"

namespace superpoint_rt::backend::detail {

void conv1a_u8_row_avx2(const Conv1aU8& k, const float* r0, const float* r1, const float* r2, int w,
                        std::uint8_t* out) {
  const auto ch = static_cast<std::size_t>(k.channels);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.f);
  // Weight vectors gather tap t of 8 channels: the OIHW weights are channel-major (stride 9).
  const __m256i idx = _mm256_set_epi32(63, 54, 45, 36, 27, 18, 9, 0);
  for (std::size_t c0 = 0; c0 < ch; c0 += 8) {
    __m256 wt[9];
    for (int t = 0; t < 9; ++t) wt[t] = _mm256_i32gather_ps(k.weight + c0 * 9 + static_cast<std::size_t>(t), idx, 4);
    const __m256 bias = _mm256_loadu_ps(k.bias + c0);
    const __m256 scale = k.channel_scale ? _mm256_loadu_ps(k.channel_scale + c0) : _mm256_set1_ps(k.scale);
    std::uint8_t* o = out + c0;
    for (int x = 0; x < w; ++x) {
      __m256 acc = bias;
      acc = _mm256_fmadd_ps(wt[0], _mm256_set1_ps(r0[x]), acc);
      acc = _mm256_fmadd_ps(wt[1], _mm256_set1_ps(r0[x + 1]), acc);
      acc = _mm256_fmadd_ps(wt[2], _mm256_set1_ps(r0[x + 2]), acc);
      acc = _mm256_fmadd_ps(wt[3], _mm256_set1_ps(r1[x]), acc);
      acc = _mm256_fmadd_ps(wt[4], _mm256_set1_ps(r1[x + 1]), acc);
      acc = _mm256_fmadd_ps(wt[5], _mm256_set1_ps(r1[x + 2]), acc);
      acc = _mm256_fmadd_ps(wt[6], _mm256_set1_ps(r2[x]), acc);
      acc = _mm256_fmadd_ps(wt[7], _mm256_set1_ps(r2[x + 1]), acc);
      acc = _mm256_fmadd_ps(wt[8], _mm256_set1_ps(r2[x + 2]), acc);
      // max(acc, 0) is 0 unless acc > 0 and min(q, 255) is 255 unless q < 255: the reference's selects (the second
      // operand is returned for NaN, as the reference's comparisons do).
      __m256 q = _mm256_mul_ps(_mm256_max_ps(acc, zero), scale);
      q = _mm256_min_ps(q, top);
      // cvtps rounds with MXCSR's mode, round-to-nearest-even unless a caller changed it (the reference's
      // nearbyint uses the same mode); the values are in [0, 255], so both packs are exact.
      const __m256i qi = _mm256_cvtps_epi32(q);
      const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(o + static_cast<std::size_t>(x) * ch), _mm_packus_epi16(w16, w16));
    }
  }
}

}  // namespace superpoint_rt::backend::detail
