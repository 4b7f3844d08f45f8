// AVX-512 VNNI kernel of wino_u8.hpp: kWinoTiles tiles at a time are transformed (32 channels of int16 per vector),
// multiplied position by position with vpdpwssd (kWinoTiles x 64 output channels of int32 in 24 registers, the input
// channel pairs broadcast), and transformed back 16 output channels per vector; the reference's operations in the
// same order (same bits). Raw pointers and intrinsics only (wino_u8.hpp says why).
#include <immintrin.h>

#include "backend/onednn/wino_u8.hpp"

// GCC 12's avx512fintrin.h false positive (see post/post_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace superpoint_rt::backend::detail {

namespace {

constexpr int kT = kWinoTiles;

// B^T x (wino_input_1d) on 32 int16 lanes; exact (|values| <= 20400).
inline void input_1d(const __m512i x[6], __m512i o[6]) {
  const __m512i x1p2 = _mm512_add_epi16(x[1], x[2]), x1m2 = _mm512_sub_epi16(x[1], x[2]);
  const __m512i x3p4 = _mm512_add_epi16(x[3], x[4]), x4m3 = _mm512_sub_epi16(x[4], x[3]);
  const __m512i x4m2 = _mm512_sub_epi16(x[4], x[2]), x3m1 = _mm512_sub_epi16(x[3], x[1]);
  o[0] = _mm512_add_epi16(_mm512_slli_epi16(_mm512_sub_epi16(x[0], x[2]), 2), x4m2);  // 4x0 - 5x2 + x4
  o[1] = _mm512_sub_epi16(x3p4, _mm512_slli_epi16(x1p2, 2));                          // -4x1 - 4x2 + x3 + x4
  o[2] = _mm512_add_epi16(x4m3, _mm512_slli_epi16(x1m2, 2));                          // 4x1 - 4x2 - x3 + x4
  o[3] = _mm512_add_epi16(_mm512_slli_epi16(x3m1, 1), x4m2);                          // -2x1 - x2 + 2x3 + x4
  o[4] = _mm512_sub_epi16(x4m2, _mm512_slli_epi16(x3m1, 1));                          // 2x1 - x2 - 2x3 + x4
  o[5] = _mm512_add_epi16(_mm512_slli_epi16(_mm512_sub_epi16(x[1], x[3]), 2),         // 4x1 - 5x3 + x5
                          _mm512_sub_epi16(x[5], x[3]));
}

// A^T m (wino_output_1d) on 16 float lanes, in the reference's order.
inline void output_1d(const __m512 m[6], __m512 y[4]) {
  const __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
  const __m512 c = _mm512_add_ps(m[3], m[4]), d = _mm512_sub_ps(m[3], m[4]);
  y[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
  y[1] = _mm512_add_ps(b, _mm512_mul_ps(d, _mm512_set1_ps(2.f)));
  y[2] = _mm512_add_ps(a, _mm512_mul_ps(c, _mm512_set1_ps(4.f)));
  y[3] = _mm512_add_ps(_mm512_add_ps(b, _mm512_mul_ps(d, _mm512_set1_ps(8.f))), m[5]);
}

// V of one tile (input columns x0 .. x0 + 5) into v (position p at v + p * kT * ic).
inline void input_tile(const std::uint8_t* const rows[6], int x0, int w, int ic, std::int16_t* v) {
  const bool inside = x0 >= 0 && x0 + 6 <= w;
  for (int c0 = 0; c0 < ic; c0 += 32) {
    __m512i t[6][6];  // t[i][j]: B^T d down column j
    for (int j = 0; j < 6; ++j) {
      const int x = x0 + j;
      const bool col = inside || (x >= 0 && x < w);
      __m512i d[6];
      for (int i = 0; i < 6; ++i)
        d[i] = rows[i] && col ? _mm512_cvtepu8_epi16(_mm256_loadu_si256(
                                    reinterpret_cast<const __m256i*>(rows[i] + static_cast<long>(x) * ic + c0)))
                              : _mm512_setzero_si512();
      __m512i o[6];
      input_1d(d, o);
      for (int i = 0; i < 6; ++i) t[i][j] = o[i];
    }
    for (int i = 0; i < 6; ++i) {
      __m512i o[6];
      input_1d(t[i], o);
      for (int j = 0; j < 6; ++j) _mm512_storeu_si512(v + static_cast<long>(i * 6 + j) * kT * ic + c0, o[j]);
    }
  }
}

// m[p][t][o0 .. o0 + 63] = float(sum_i V[p][t][i] U[p][i][o]) * scale[p][o] for the kT tiles. The loop is written
// in assembly: GCC 12 does not keep 24 vpdpwssd accumulators in registers (it stores and reloads each one per
// multiply-add, measured 3x slower); here zmm0-23 hold them, zmm24-27 the weights of one input channel pair for 64
// output channels, zmm28 the broadcast pair of one tile.
static_assert(kT == 6, "multiply() names six tiles");

inline void multiply(const WinoU8View& k, int p, int o0, const std::int16_t* v, float* m) {
  const int ic = k.in_channels, oc = k.out_channels;
  long pairs = ic / 2;
  const char* v0 = reinterpret_cast<const char*>(v + static_cast<long>(p) * kT * ic);
  const long vs = static_cast<long>(ic) * 2;  // bytes from one tile's V to the next
  const char* v3 = v0 + 3 * vs;
  const char* w = reinterpret_cast<const char*>(k.u + (static_cast<long>(p) * (ic / 2) * oc + o0) * 2);
  const long ws = static_cast<long>(oc) * 4;  // bytes from one channel pair's weights to the next
  alignas(64) std::int32_t acc[24 * 16];
  asm volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpxord %%zmm1, %%zmm1, %%zmm1\n\t"
      "vpxord %%zmm2, %%zmm2, %%zmm2\n\t"
      "vpxord %%zmm3, %%zmm3, %%zmm3\n\t"
      "vpxord %%zmm4, %%zmm4, %%zmm4\n\t"
      "vpxord %%zmm5, %%zmm5, %%zmm5\n\t"
      "vpxord %%zmm6, %%zmm6, %%zmm6\n\t"
      "vpxord %%zmm7, %%zmm7, %%zmm7\n\t"
      "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"
      "vpxord %%zmm9, %%zmm9, %%zmm9\n\t"
      "vpxord %%zmm10, %%zmm10, %%zmm10\n\t"
      "vpxord %%zmm11, %%zmm11, %%zmm11\n\t"
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\t"
      "vpxord %%zmm13, %%zmm13, %%zmm13\n\t"
      "vpxord %%zmm14, %%zmm14, %%zmm14\n\t"
      "vpxord %%zmm15, %%zmm15, %%zmm15\n\t"
      "vpxord %%zmm16, %%zmm16, %%zmm16\n\t"
      "vpxord %%zmm17, %%zmm17, %%zmm17\n\t"
      "vpxord %%zmm18, %%zmm18, %%zmm18\n\t"
      "vpxord %%zmm19, %%zmm19, %%zmm19\n\t"
      "vpxord %%zmm20, %%zmm20, %%zmm20\n\t"
      "vpxord %%zmm21, %%zmm21, %%zmm21\n\t"
      "vpxord %%zmm22, %%zmm22, %%zmm22\n\t"
      "vpxord %%zmm23, %%zmm23, %%zmm23\n\t"
      "1:\n\t"
      "vmovdqu64 (%[w]), %%zmm24\n\t"
      "vmovdqu64 64(%[w]), %%zmm25\n\t"
      "vmovdqu64 128(%[w]), %%zmm26\n\t"
      "vmovdqu64 192(%[w]), %%zmm27\n\t"
      "vpbroadcastd (%[v0]), %%zmm28\n\t"
      "vpdpwssd %%zmm24, %%zmm28, %%zmm0\n\t"
      "vpdpwssd %%zmm25, %%zmm28, %%zmm1\n\t"
      "vpdpwssd %%zmm26, %%zmm28, %%zmm2\n\t"
      "vpdpwssd %%zmm27, %%zmm28, %%zmm3\n\t"
      "vpbroadcastd (%[v0],%[vs],1), %%zmm28\n\t"
      "vpdpwssd %%zmm24, %%zmm28, %%zmm4\n\t"
      "vpdpwssd %%zmm25, %%zmm28, %%zmm5\n\t"
      "vpdpwssd %%zmm26, %%zmm28, %%zmm6\n\t"
      "vpdpwssd %%zmm27, %%zmm28, %%zmm7\n\t"
      "vpbroadcastd (%[v0],%[vs],2), %%zmm28\n\t"
      "vpdpwssd %%zmm24, %%zmm28, %%zmm8\n\t"
      "vpdpwssd %%zmm25, %%zmm28, %%zmm9\n\t"
      "vpdpwssd %%zmm26, %%zmm28, %%zmm10\n\t"
      "vpdpwssd %%zmm27, %%zmm28, %%zmm11\n\t"
      "vpbroadcastd (%[v3]), %%zmm28\n\t"
      "vpdpwssd %%zmm24, %%zmm28, %%zmm12\n\t"
      "vpdpwssd %%zmm25, %%zmm28, %%zmm13\n\t"
      "vpdpwssd %%zmm26, %%zmm28, %%zmm14\n\t"
      "vpdpwssd %%zmm27, %%zmm28, %%zmm15\n\t"
      "vpbroadcastd (%[v3],%[vs],1), %%zmm28\n\t"
      "vpdpwssd %%zmm24, %%zmm28, %%zmm16\n\t"
      "vpdpwssd %%zmm25, %%zmm28, %%zmm17\n\t"
      "vpdpwssd %%zmm26, %%zmm28, %%zmm18\n\t"
      "vpdpwssd %%zmm27, %%zmm28, %%zmm19\n\t"
      "vpbroadcastd (%[v3],%[vs],2), %%zmm28\n\t"
      "vpdpwssd %%zmm24, %%zmm28, %%zmm20\n\t"
      "vpdpwssd %%zmm25, %%zmm28, %%zmm21\n\t"
      "vpdpwssd %%zmm26, %%zmm28, %%zmm22\n\t"
      "vpdpwssd %%zmm27, %%zmm28, %%zmm23\n\t"
      "add $4, %[v0]\n\t"
      "add $4, %[v3]\n\t"
      "add %[ws], %[w]\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "vmovdqu32 %%zmm0, 0(%[acc])\n\t"
      "vmovdqu32 %%zmm1, 64(%[acc])\n\t"
      "vmovdqu32 %%zmm2, 128(%[acc])\n\t"
      "vmovdqu32 %%zmm3, 192(%[acc])\n\t"
      "vmovdqu32 %%zmm4, 256(%[acc])\n\t"
      "vmovdqu32 %%zmm5, 320(%[acc])\n\t"
      "vmovdqu32 %%zmm6, 384(%[acc])\n\t"
      "vmovdqu32 %%zmm7, 448(%[acc])\n\t"
      "vmovdqu32 %%zmm8, 512(%[acc])\n\t"
      "vmovdqu32 %%zmm9, 576(%[acc])\n\t"
      "vmovdqu32 %%zmm10, 640(%[acc])\n\t"
      "vmovdqu32 %%zmm11, 704(%[acc])\n\t"
      "vmovdqu32 %%zmm12, 768(%[acc])\n\t"
      "vmovdqu32 %%zmm13, 832(%[acc])\n\t"
      "vmovdqu32 %%zmm14, 896(%[acc])\n\t"
      "vmovdqu32 %%zmm15, 960(%[acc])\n\t"
      "vmovdqu32 %%zmm16, 1024(%[acc])\n\t"
      "vmovdqu32 %%zmm17, 1088(%[acc])\n\t"
      "vmovdqu32 %%zmm18, 1152(%[acc])\n\t"
      "vmovdqu32 %%zmm19, 1216(%[acc])\n\t"
      "vmovdqu32 %%zmm20, 1280(%[acc])\n\t"
      "vmovdqu32 %%zmm21, 1344(%[acc])\n\t"
      "vmovdqu32 %%zmm22, 1408(%[acc])\n\t"
      "vmovdqu32 %%zmm23, 1472(%[acc])\n\t"
      : [v0] "+r"(v0), [v3] "+r"(v3), [w] "+r"(w), [n] "+r"(pairs)
      : [vs] "r"(vs), [ws] "r"(ws), [acc] "r"(acc)
      : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
        "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28");
  const float* sp = k.scale + static_cast<long>(p) * oc + o0;
  for (int t = 0; t < kT; ++t)
    for (int j = 0; j < 4; ++j)
      _mm512_storeu_ps(
          m + (static_cast<long>(p) * kT + t) * oc + o0 + 16 * j,
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(acc + (4 * t + j) * 16)), _mm512_loadu_ps(sp + 16 * j)));
}

}  // namespace

void wino_u8_rows_avx512vnni(const WinoU8View& k, const WinoU8Rows& r, void* scratch) {
  const int ic = k.in_channels, oc = k.out_channels;
  const long row_bytes = static_cast<long>(r.w) * ic;
  const int pw = r.w / 2;
  auto* v = reinterpret_cast<std::int16_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) & ~std::uintptr_t{63});
  float* m = reinterpret_cast<float*>(v + 36L * kT * ic);
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.f);
  // The call's tiles in one row-major sequence, taken kT at a time across tile rows (no partial group per row).
  const WinoTiles range = wino_tiles(r);
  const std::uint8_t* const none[6] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  for (int g = range.first; g < range.last; g += kT) {
    const int nt = range.last - g < kT ? range.last - g : kT;
    int tys[kT], txs[kT];
    for (int t = 0; t < kT; ++t) {
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
      for (int o0 = 0; o0 < oc; o0 += 64) multiply(k, p, o0, v, m);
    for (int t = 0; t < nt; ++t) {
      const int ty = tys[t], tx = txs[t];
      for (int o0 = 0; o0 < oc; o0 += 16) {
        __m512 cols[4][6];
        for (int j = 0; j < 6; ++j) {
          __m512 col[6];
          for (int i = 0; i < 6; ++i) col[i] = _mm512_loadu_ps(m + (static_cast<long>(i * 6 + j) * kT + t) * oc + o0);
          __m512 y[4];
          output_1d(col, y);
          for (int i = 0; i < 4; ++i) cols[i][j] = y[i];
        }
        __m512 y[4][4];
        for (int i = 0; i < 4; ++i) output_1d(cols[i], y[i]);
        const __m512 bias = _mm512_loadu_ps(k.bias + o0);
        if (!r.pool) {
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
              if (ty + a >= r.y1 || tx + b >= r.w) continue;
              __m512 q = _mm512_max_ps(_mm512_add_ps(y[a][b], bias), zero);
              q = _mm512_min_ps(q, top);
              const __m512i qi = _mm512_cvt_roundps_epi32(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
              _mm_storeu_si128(
                  reinterpret_cast<__m128i*>(r.out + ((static_cast<long>(ty - r.y0 + a)) * r.w + tx + b) * oc + o0),
                  _mm512_cvtusepi32_epi8(qi));
            }
          continue;
        }
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            const int py = (ty - r.y0) / 2 + a, px = tx / 2 + b;
            if (ty + 2 * a >= r.y1 || px >= pw) continue;
            const __m512 mx = _mm512_max_ps(_mm512_max_ps(y[2 * a][2 * b], y[2 * a][2 * b + 1]),
                                            _mm512_max_ps(y[2 * a + 1][2 * b], y[2 * a + 1][2 * b + 1]));
            __m512 q = _mm512_max_ps(_mm512_add_ps(mx, bias), zero);
            q = _mm512_min_ps(q, top);
            const __m512i qi = _mm512_cvt_roundps_epi32(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(r.out + (static_cast<long>(py) * pw + px) * oc + o0),
                             _mm512_cvtusepi32_epi8(qi));
          }
      }
    }
  }
}

}  // namespace superpoint_rt::backend::detail
