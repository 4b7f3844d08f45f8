// AVX-512 kernel of wino_f32.hpp: the AVX2 kernel's structure (wino_f32_avx2.cpp) on 16 lanes. Per block of
// wino_f32_block_tiles tiles: the input transform (16 channels per vector), then for each of the 36 positions the
// products in register tiles of 6 tiles x 32 output channels (12 accumulators, the input broadcast, each weight panel
// reused by every group of 6 tiles of the block), then the output transform (16 output channels per vector) with the
// bias, ReLU and pooling; the reference's operations in the same order (same bits). Raw pointers and intrinsics only
// (wino_f32.hpp says why).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/onednn/wino_f32.hpp"

// GCC 12's avx512fintrin.h false positive (see post/post_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace superpoint_rt::backend::detail {

namespace {

constexpr int kOb = kWinoF32OcBlockAvx512;  // output channels per weight panel
static_assert(kOb == 32, "gemm_6x32 computes 32 output channels");

// B^T x (wino_f32_input_1d) on 16 lanes; each product by a power of two fused with its addition (exact product).
inline void input_1d(const __m512 x[6], __m512 o[6]) {
  const __m512 four = _mm512_set1_ps(4.f), two = _mm512_set1_ps(2.f);
  const __m512 x4m2 = _mm512_sub_ps(x[4], x[2]), x3m1 = _mm512_sub_ps(x[3], x[1]);
  o[0] = _mm512_fmadd_ps(_mm512_sub_ps(x[0], x[2]), four, x4m2);
  o[1] = _mm512_fnmadd_ps(_mm512_add_ps(x[1], x[2]), four, _mm512_add_ps(x[3], x[4]));
  o[2] = _mm512_fmadd_ps(_mm512_sub_ps(x[1], x[2]), four, _mm512_sub_ps(x[4], x[3]));
  o[3] = _mm512_fmadd_ps(x3m1, two, x4m2);
  o[4] = _mm512_fnmadd_ps(x3m1, two, x4m2);
  o[5] = _mm512_fmadd_ps(_mm512_sub_ps(x[1], x[3]), four, _mm512_sub_ps(x[5], x[3]));
}

// A^T m (wino_f32_output_1d) on 16 lanes, in the reference's order.
inline void output_1d(const __m512 m[6], __m512 y[4]) {
  const __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
  const __m512 c = _mm512_add_ps(m[3], m[4]), d = _mm512_sub_ps(m[3], m[4]);
  y[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
  y[1] = _mm512_fmadd_ps(d, _mm512_set1_ps(2.f), b);
  y[2] = _mm512_fmadd_ps(c, _mm512_set1_ps(4.f), a);
  y[3] = _mm512_add_ps(_mm512_fmadd_ps(d, _mm512_set1_ps(8.f), b), m[5]);
}

// V of one tile for 16 channels: rows[i] is the patch row i at column 0 of those channels (nullptr: a zero row),
// columns x0 .. x0 + 5 at `block` floats apart (outside [0, w): zeros); position p goes to v + p * vstride.
inline void input_tile(const float* const rows[6], int x0, int w, int block, float* v, long vstride) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 t[6][6];  // t[i][j]: B^T d down column j
  for (int j = 0; j < 6; ++j) {
    const int x = x0 + j;
    const bool col = x >= 0 && x < w;
    __m512 d[6];
    for (int i = 0; i < 6; ++i) d[i] = rows[i] && col ? _mm512_loadu_ps(rows[i] + static_cast<long>(x) * block) : zero;
    __m512 o[6];
    input_1d(d, o);
    for (int i = 0; i < 6; ++i) t[i][j] = o[i];
  }
  for (int i = 0; i < 6; ++i) {
    __m512 o[6];
    input_1d(t[i], o);
    for (int j = 0; j < 6; ++j) _mm512_store_ps(v + static_cast<long>(i * 6 + j) * vstride, o[j]);
  }
}

// m[t * ms + 0..31] = sum over i < k of v[t * vs + i] * u[32 i + 0..31] for the 6 tiles t, one fused multiply-add
// per term in the order of i, from +0.
inline void gemm_6x32(const float* v, long vs, const float* u, int k, float* m, long ms) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float* v3 = v + 3 * vs;
  for (int i = 0; i < k; ++i) {
    const __m512 u0 = _mm512_load_ps(u), u1 = _mm512_load_ps(u + 16);
    __m512 b = _mm512_set1_ps(v[i]);
    c00 = _mm512_fmadd_ps(b, u0, c00);
    c01 = _mm512_fmadd_ps(b, u1, c01);
    b = _mm512_set1_ps((v + vs)[i]);
    c10 = _mm512_fmadd_ps(b, u0, c10);
    c11 = _mm512_fmadd_ps(b, u1, c11);
    b = _mm512_set1_ps((v + 2 * vs)[i]);
    c20 = _mm512_fmadd_ps(b, u0, c20);
    c21 = _mm512_fmadd_ps(b, u1, c21);
    b = _mm512_set1_ps(v3[i]);
    c30 = _mm512_fmadd_ps(b, u0, c30);
    c31 = _mm512_fmadd_ps(b, u1, c31);
    b = _mm512_set1_ps((v3 + vs)[i]);
    c40 = _mm512_fmadd_ps(b, u0, c40);
    c41 = _mm512_fmadd_ps(b, u1, c41);
    b = _mm512_set1_ps((v3 + 2 * vs)[i]);
    c50 = _mm512_fmadd_ps(b, u0, c50);
    c51 = _mm512_fmadd_ps(b, u1, c51);
    u += kOb;
  }
  _mm512_store_ps(m, c00);
  _mm512_store_ps(m + 16, c01);
  _mm512_store_ps(m + ms, c10);
  _mm512_store_ps(m + ms + 16, c11);
  _mm512_store_ps(m + 2 * ms, c20);
  _mm512_store_ps(m + 2 * ms + 16, c21);
  _mm512_store_ps(m + 3 * ms, c30);
  _mm512_store_ps(m + 3 * ms + 16, c31);
  _mm512_store_ps(m + 4 * ms, c40);
  _mm512_store_ps(m + 4 * ms + 16, c41);
  _mm512_store_ps(m + 5 * ms, c50);
  _mm512_store_ps(m + 5 * ms + 16, c51);
}

}  // namespace

void wino_f32_rows_avx512(const WinoF32View& k, const WinoF32Rows& r, void* scratch) {
  const int ic = k.in_channels, oc = k.out_channels;
  const int nb = wino_f32_block_tiles(ic, oc);
  auto* v = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) & ~std::uintptr_t{63});
  float* m = v + 36L * nb * ic;  // v: [36][nb][ic]; m: [nb][36][oc]
  const long vstride = static_cast<long>(nb) * ic, mstride = 36L * oc;
  const WinoF32Tiles range = wino_f32_tiles(r);
  const int ib = r.in.block, ob = r.out.block;
  const long in_bs = static_cast<long>(r.in.block_stride), in_rs = static_cast<long>(r.in.row_stride);
  const long out_bs = static_cast<long>(r.out.block_stride), out_rs = static_cast<long>(r.out.row_stride);
  const __m512 zero = _mm512_setzero_ps();
  const int pw = r.w / 2;
  for (int b0 = range.first; b0 < range.last; b0 += nb) {
    const int nt = range.last - b0 < nb ? range.last - b0 : nb;
    const int groups = (nt + 5) / 6;
    for (int t = 0; t < nt; ++t) {
      const int id = b0 + t, ty = r.y0 + 4 * (id / range.across), tx = 4 * (id % range.across);
      for (int c0 = 0; c0 < ic; c0 += 16) {
        const float* rows[6];
        for (int i = 0; i < 6; ++i) {
          const int row = ty - 1 + i - r.in_row0;
          rows[i] = row >= 0 && row < r.in_rows ? r.in.data + (c0 / ib) * in_bs + row * in_rs + c0 % ib : nullptr;
        }
        input_tile(rows, tx - 1, r.w, ib, v + static_cast<long>(t) * ic + c0, vstride);
      }
    }
    // The last group's tiles past the block's end: zeros (their products are not read).
    for (int t = nt; t < groups * 6; ++t)
      for (int p = 0; p < 36; ++p) std::memset(v + p * vstride + static_cast<long>(t) * ic, 0, sizeof(float) * ic);
    for (int p = 0; p < 36; ++p)
      for (int o0 = 0; o0 < oc; o0 += kOb) {
        const float* u = k.u + (static_cast<long>(p) * (oc / kOb) + o0 / kOb) * ic * kOb;
        for (int g = 0; g < groups; ++g)
          gemm_6x32(v + p * vstride + 6L * g * ic, ic, u, ic, m + 6L * g * mstride + static_cast<long>(p) * oc + o0,
                    mstride);
      }
    for (int t = 0; t < nt; ++t) {
      const int id = b0 + t, ty = r.y0 + 4 * (id / range.across), tx = 4 * (id % range.across);
      const float* mt = m + t * mstride;
      for (int o0 = 0; o0 < oc; o0 += 16) {
        __m512 cols[4][6];
        for (int j = 0; j < 6; ++j) {
          __m512 col[6];
          for (int i = 0; i < 6; ++i) col[i] = _mm512_load_ps(mt + static_cast<long>(i * 6 + j) * oc + o0);
          __m512 y[4];
          output_1d(col, y);
          for (int i = 0; i < 4; ++i) cols[i][j] = y[i];
        }
        __m512 y[4][4];
        for (int i = 0; i < 4; ++i) output_1d(cols[i], y[i]);
        const __m512 bias = _mm512_loadu_ps(k.bias + o0);
        float* out = r.out.data + (o0 / ob) * out_bs + o0 % ob;
        if (!r.pool) {
          for (int a = 0; a < 4; ++a) {
            if (ty + a >= r.y1) break;
            for (int c = 0; c < 4; ++c) {
              if (tx + c >= r.w) break;
              _mm512_storeu_ps(out + (ty - r.y0 + a) * out_rs + static_cast<long>(tx + c) * ob,
                               _mm512_max_ps(_mm512_add_ps(y[a][c], bias), zero));
            }
          }
          continue;
        }
        for (int a = 0; a < 2; ++a) {
          if (ty + 2 * a >= r.y1) break;
          for (int c = 0; c < 2; ++c) {
            const int py = (ty - r.y0) / 2 + a, px = tx / 2 + c;
            if (px >= pw) break;
            const __m512 top = _mm512_max_ps(_mm512_max_ps(y[2 * a][2 * c], y[2 * a][2 * c + 1]),
                                             _mm512_max_ps(y[2 * a + 1][2 * c], y[2 * a + 1][2 * c + 1]));
            _mm512_storeu_ps(out + py * out_rs + static_cast<long>(px) * ob,
                             _mm512_max_ps(_mm512_add_ps(top, bias), zero));
          }
        }
      }
    }
  }
}

}  // namespace superpoint_rt::backend::detail
