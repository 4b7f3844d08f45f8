// The 256-bit kernels of wino_u8.hpp (AVX2 and AVX-VNNI), written once: included by wino_u8_avx2.cpp and
// wino_u8_avxvnni.cpp only, INSIDE an anonymous namespace, after each defines `struct Dot` with
//   static void sums(const char* v, long vs, const char* w, long ws, long pairs, std::int32_t acc[96])
// the register tile's loop (vpmaddwd + vpaddd, or vpdpwssd): for the 6 tiles t (their V at v + t * vs bytes, an int16
// channel pair per int32) and 16 output channels (their weights of channel pair i at w + i * ws bytes: 16 x 2 int16),
// acc[(2 t + j) * 8 + l] = the int32 sum over the pairs of the pair products for output channel 8 j + l. Written in
// assembly: GCC 12 keeps 12 accumulators in memory (a store and a reload per multiply-add, as for the AVX-512 kernel).
// Nothing here may be included elsewhere (post/kernels.hpp says why).
//
// The AVX-512 VNNI kernel's structure (wino_u8_avx512vnni.cpp) on 256-bit registers: kWinoTiles tiles at a time are
// transformed (16 channels of int16 per register), multiplied position by position in register tiles of 6 tiles x 16
// output channels (12 int32 accumulators, the input channel pair of a tile broadcast), and transformed back 8 output
// channels per register. The int32 sums are exact (wino_u8_limit), so any order of summation gives the reference's
// bits; the float steps are the reference's operations in its order.

static_assert(kWinoTiles == 6, "the register tile names six tiles");

// B^T x (wino_input_1d) on 16 int16 lanes; exact (|values| <= 20400).
inline void input_1d(const __m256i x[6], __m256i o[6]) {
  const __m256i x1p2 = _mm256_add_epi16(x[1], x[2]), x1m2 = _mm256_sub_epi16(x[1], x[2]);
  const __m256i x3p4 = _mm256_add_epi16(x[3], x[4]), x4m3 = _mm256_sub_epi16(x[4], x[3]);
  const __m256i x4m2 = _mm256_sub_epi16(x[4], x[2]), x3m1 = _mm256_sub_epi16(x[3], x[1]);
  o[0] = _mm256_add_epi16(_mm256_slli_epi16(_mm256_sub_epi16(x[0], x[2]), 2), x4m2);  // 4x0 - 5x2 + x4
  o[1] = _mm256_sub_epi16(x3p4, _mm256_slli_epi16(x1p2, 2));                          // -4x1 - 4x2 + x3 + x4
  o[2] = _mm256_add_epi16(x4m3, _mm256_slli_epi16(x1m2, 2));                          // 4x1 - 4x2 - x3 + x4
  o[3] = _mm256_add_epi16(_mm256_slli_epi16(x3m1, 1), x4m2);                          // -2x1 - x2 + 2x3 + x4
  o[4] = _mm256_sub_epi16(x4m2, _mm256_slli_epi16(x3m1, 1));                          // 2x1 - x2 - 2x3 + x4
  o[5] = _mm256_add_epi16(_mm256_slli_epi16(_mm256_sub_epi16(x[1], x[3]), 2),         // 4x1 - 5x3 + x5
                          _mm256_sub_epi16(x[5], x[3]));
}

// A^T m (wino_output_1d) on 8 float lanes, in the reference's order.
inline void output_1d(const __m256 m[6], __m256 y[4]) {
  const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
  const __m256 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
  y[1] = _mm256_add_ps(b, _mm256_mul_ps(d, _mm256_set1_ps(2.f)));
  y[2] = _mm256_add_ps(a, _mm256_mul_ps(c, _mm256_set1_ps(4.f)));
  y[3] = _mm256_add_ps(_mm256_add_ps(b, _mm256_mul_ps(d, _mm256_set1_ps(8.f))), m[5]);
}

// V of one tile (input columns x0 .. x0 + 5) into v (position p at v + p * kWinoTiles * ic).
inline void input_tile(const std::uint8_t* const rows[6], int x0, int w, int ic, std::int16_t* v) {
  const bool inside = x0 >= 0 && x0 + 6 <= w;
  for (int c0 = 0; c0 < ic; c0 += 16) {
    __m256i t[6][6];  // t[i][j]: B^T d down column j
    for (int j = 0; j < 6; ++j) {
      const int x = x0 + j;
      const bool col = inside || (x >= 0 && x < w);
      __m256i d[6];
      for (int i = 0; i < 6; ++i)
        d[i] = rows[i] && col ? _mm256_cvtepu8_epi16(_mm_loadu_si128(
                                    reinterpret_cast<const __m128i*>(rows[i] + static_cast<long>(x) * ic + c0)))
                              : _mm256_setzero_si256();
      __m256i o[6];
      input_1d(d, o);
      for (int i = 0; i < 6; ++i) t[i][j] = o[i];
    }
    for (int i = 0; i < 6; ++i) {
      __m256i o[6];
      input_1d(t[i], o);
      for (int j = 0; j < 6; ++j)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + static_cast<long>(i * 6 + j) * kWinoTiles * ic + c0), o[j]);
    }
  }
}

// m[p][t][o0 .. o0 + 15] = float(sum_i V[p][t][i] U[p][i][o]) * scale[p][o] for the 6 tiles (Dot::sums: the int32
// sums, acc[(2 t + j) * 8 + l] for output channel o0 + 8 j + l).
inline void multiply(const WinoU8View& k, int p, int o0, const std::int16_t* v, float* m) {
  const int ic = k.in_channels, oc = k.out_channels;
  const auto* v0 = reinterpret_cast<const char*>(v + static_cast<long>(p) * kWinoTiles * ic);
  const std::int16_t* w = k.u + (static_cast<long>(p) * (ic / 2) * oc + o0) * 2;
  alignas(32) std::int32_t acc[12 * 8];
  Dot::sums(v0, static_cast<long>(ic) * 2, reinterpret_cast<const char*>(w), static_cast<long>(oc) * 4, ic / 2, acc);
  const float* sp = k.scale + static_cast<long>(p) * oc + o0;
  const __m256 s0 = _mm256_loadu_ps(sp), s1 = _mm256_loadu_ps(sp + 8);
  float* mp = m + static_cast<long>(p) * kWinoTiles * oc + o0;
  for (int t = 0; t < kWinoTiles; ++t) {
    const __m256i a0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + 16 * t));
    const __m256i a1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + 16 * t + 8));
    _mm256_storeu_ps(mp + static_cast<long>(t) * oc, _mm256_mul_ps(_mm256_cvtepi32_ps(a0), s0));
    _mm256_storeu_ps(mp + static_cast<long>(t) * oc + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(a1), s1));
  }
}

// 8 values in [0, 255] (already rounded to integers) to bytes at `out`.
inline void store_u8x8(std::uint8_t* out, __m256i q) {
  const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(w16, w16));
}

void rows_256(const WinoU8View& k, const WinoU8Rows& r, void* scratch) {
  const int ic = k.in_channels, oc = k.out_channels;
  const long row_bytes = static_cast<long>(r.w) * ic;
  const int pw = r.w / 2;
  auto* v = reinterpret_cast<std::int16_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) & ~std::uintptr_t{63});
  float* m = reinterpret_cast<float*>(v + 36L * kWinoTiles * ic);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.f);
  // The call's tiles in one row-major sequence, taken kWinoTiles at a time across tile rows.
  const WinoTiles range = wino_tiles(r);
  const std::uint8_t* const none[6] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  for (int g = range.first; g < range.last; g += kWinoTiles) {
    const int nt = range.last - g < kWinoTiles ? range.last - g : kWinoTiles;
    int tys[kWinoTiles], txs[kWinoTiles];
    for (int t = 0; t < kWinoTiles; ++t) {
      if (t >= nt) {  // past the last tile: zeros (results not written)
        input_tile(none, 0, r.w, ic, v + t * ic);
        continue;
      }
      tys[t] = r.y0 + 4 * ((g + t) / range.across);
      txs[t] = 4 * ((g + t) % range.across);
      const std::uint8_t* rows[6];
      for (int i = 0; i < 6; ++i) {
        const int row = tys[t] - 1 + i - r.in_row0;
        rows[i] = row >= 0 && row < r.in_rows ? r.in + row * row_bytes : nullptr;
      }
      input_tile(rows, txs[t] - 1, r.w, ic, v + t * ic);
    }
    for (int p = 0; p < 36; ++p)
      for (int o0 = 0; o0 < oc; o0 += 16) multiply(k, p, o0, v, m);
    for (int t = 0; t < nt; ++t) {
      const int ty = tys[t], tx = txs[t];
      for (int o0 = 0; o0 < oc; o0 += 8) {
        __m256 cols[4][6];
        for (int j = 0; j < 6; ++j) {
          __m256 col[6];
          for (int i = 0; i < 6; ++i)
            col[i] = _mm256_loadu_ps(m + (static_cast<long>(i * 6 + j) * kWinoTiles + t) * oc + o0);
          __m256 y[4];
          output_1d(col, y);
          for (int i = 0; i < 4; ++i) cols[i][j] = y[i];
        }
        __m256 y[4][4];
        for (int i = 0; i < 4; ++i) output_1d(cols[i], y[i]);
        const __m256 bias = _mm256_loadu_ps(k.bias + o0);
        if (!r.pool) {
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
              if (ty + a >= r.y1 || tx + b >= r.w) continue;
              const __m256 q = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(y[a][b], bias), zero), top);
              store_u8x8(r.out + ((static_cast<long>(ty - r.y0 + a)) * r.w + tx + b) * oc + o0,
                         _mm256_cvtps_epi32(q));  // the default rounding: to nearest, half to even
            }
          continue;
        }
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            const int py = (ty - r.y0) / 2 + a, px = tx / 2 + b;
            if (ty + 2 * a >= r.y1 || px >= pw) continue;
            const __m256 mx = _mm256_max_ps(_mm256_max_ps(y[2 * a][2 * b], y[2 * a][2 * b + 1]),
                                            _mm256_max_ps(y[2 * a + 1][2 * b], y[2 * a + 1][2 * b + 1]));
            const __m256 q = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(mx, bias), zero), top);
            store_u8x8(r.out + (static_cast<long>(py) * pw + px) * oc + o0, _mm256_cvtps_epi32(q));
          }
      }
    }
  }
}
