// 8x8 AVX float transpose (unpack / shuffle / permute2f128) out[t * ldo + s] = in[s * ldi + t], s, t < 8.
// Include inside an anonymous namespace of an AVX2 or AVX-512 translation unit (internal linkage per ISA level).

inline __attribute__((always_inline)) void transpose8x8_avx(const float* in, std::ptrdiff_t ldi, float* out,
                                                            std::ptrdiff_t ldo) {
  const __m256 r0 = _mm256_loadu_ps(in + 0 * ldi), r1 = _mm256_loadu_ps(in + 1 * ldi);
  const __m256 r2 = _mm256_loadu_ps(in + 2 * ldi), r3 = _mm256_loadu_ps(in + 3 * ldi);
  const __m256 r4 = _mm256_loadu_ps(in + 4 * ldi), r5 = _mm256_loadu_ps(in + 5 * ldi);
  const __m256 r6 = _mm256_loadu_ps(in + 6 * ldi), r7 = _mm256_loadu_ps(in + 7 * ldi);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(out + 0 * ldo, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + 1 * ldo, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * ldo, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * ldo, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * ldo, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * ldo, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * ldo, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * ldo, _mm256_permute2f128_ps(u3, u7, 0x31));
}
