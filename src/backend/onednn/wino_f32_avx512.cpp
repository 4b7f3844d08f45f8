// AVX-512 kernel of wino_f32.hpp: wino_f32_body.hpp on 16 lanes (register tiles of 6 tiles x 32 output channels).
// Raw pointers and intrinsics only (wino_f32.hpp says why).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/onednn/wino_f32.hpp"

// GCC 12's avx512fintrin.h false positive (see post/post_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace superpoint_rt::backend::detail {

namespace {

struct Vec {
  using T = __m512;
  static constexpr int kLanes = 16;
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T bcast(const float* p) { return _mm512_set1_ps(*p); }
  static T load(const float* p) { return _mm512_load_ps(p); }
  static T loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T x) { _mm512_store_ps(p, x); }
  static void storeu(float* p, T x) { _mm512_storeu_ps(p, x); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }  // a > b ? a : b
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b, one rounding
};

#include "backend/onednn/wino_f32_body.hpp"  // NOLINT(build/include): the body, inside this anonymous namespace

static_assert(WinoF32Body<Vec>::kOb == kWinoF32OcBlockAvx512, "the panels the weights are packed in");

}  // namespace

void wino_f32_rows_avx512(const WinoF32View& k, const WinoF32Rows& r, void* scratch) {
  WinoF32Body<Vec>::run(k, r, scratch);
}

}  // namespace superpoint_rt::backend::detail
