// AVX-512 (F+BW+VL+DQ) Pillow-exact resize kernels; bit-identical to resize_plane_reference.
//
// Exactness: Pillow sums uint8 * int32 weight in int32. Splitting each weight k = hi * 2048 + lo (both < 2^15)
// lets vpmaddwd (int16 x int16, pairs summed into int32) form sum(p * hi) and sum(p * lo) exactly; the result
// (sum_hi << 11) + sum_lo equals Pillow's sum because int32 addition is exact (no partial sum leaves int32: all
// terms are >= 0 and the total is <= 255 * (2^22 + ksize) + 2^21).
#include <immintrin.h>

#include <cstring>

#include "image/resize_kernels.hpp"
#include "image/resize_simd_impl.hpp"

// GCC 12's AVX-512 intrinsics (_mm512_slli_epi32, _mm512_srai_epi32, _mm512_cvtusepi32_epi8) pass a self-initialised
// "undefined" vector (`__m512i __Y = __Y;`) as the unused merge source, which -Wmaybe-uninitialized reports at every
// inlined call site. The value is never read (the mask is all ones).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace superpoint_rt::image::detail {
namespace {

// The same as SSSE3 phaddd per 128-bit lane: (a0+a1, a2+a3, b0+b1, b2+b3).
inline __m512i hadd_lanes(__m512i a, __m512i b) {
  const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
  const __m512i even = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0x88));
  const __m512i odd = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0xDD));
  return _mm512_add_epi32(even, odd);
}

// Horizontal pass, one row, 16 outputs per step. Output o = 16g + 4 * lane + i takes its taps as 8-wide int16
// windows at row + xmin(o) + 8c; accumulator i holds outputs i, 4+i, 8+i, 12+i in its four 128-bit lanes, four
// partial sums each, and two rounds of lane-wise hadd leave output 4 * lane + i in element i of lane `lane`.
void hrow_avx512(const ResizePlan& plan, const std::int16_t* row, std::uint8_t* out, const RowPrefetch& pf) {
  const int chunks = plan.h_taps / 8;
  const __m512i bias = _mm512_set1_epi32(1 << 21);
  for (int g = 0; g < plan.h_groups; ++g) {
    pf.issue(g);
    const std::int32_t* xm = plan.h_xmin.data() + g * 16;
    const std::int16_t* khi = plan.h_hi.data() + static_cast<std::ptrdiff_t>(g) * 16 * plan.h_taps;
    const std::int16_t* klo = plan.h_lo.data() + static_cast<std::ptrdiff_t>(g) * 16 * plan.h_taps;
    __m512i acc[4];
    for (int i = 0; i < 4; ++i) {
      const std::int16_t* r0 = row + xm[i];
      const std::int16_t* r1 = row + xm[4 + i];
      const std::int16_t* r2 = row + xm[8 + i];
      const std::int16_t* r3 = row + xm[12 + i];
      __m512i ah = _mm512_setzero_si512(), al = _mm512_setzero_si512();
      for (int c = 0; c < chunks; ++c) {
        __m512i w = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + 8 * c)));
        w = _mm512_inserti32x4(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + 8 * c)), 1);
        w = _mm512_inserti32x4(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r2 + 8 * c)), 2);
        w = _mm512_inserti32x4(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r3 + 8 * c)), 3);
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(c * 4 + i) * 32;
        ah = _mm512_add_epi32(ah, _mm512_madd_epi16(w, _mm512_loadu_si512(khi + at)));
        al = _mm512_add_epi32(al, _mm512_madd_epi16(w, _mm512_loadu_si512(klo + at)));
      }
      acc[i] = _mm512_add_epi32(_mm512_slli_epi32(ah, 11), al);
    }
    __m512i r = hadd_lanes(hadd_lanes(acc[0], acc[1]), hadd_lanes(acc[2], acc[3]));
    r = _mm512_srai_epi32(_mm512_add_epi32(r, bias), 22);
    const __m128i b = _mm512_cvtusepi32_epi8(r);  // sums are >= 0: unsigned saturation == Pillow's clip8
    const int x = g * 16;
    if (x + 16 <= plan.out_w) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x), b);
    } else {
      alignas(16) std::uint8_t buf[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(buf), b);
      std::memcpy(out + x, buf, static_cast<std::size_t>(plan.out_w - x));
    }
  }
}

// Vertical pass, one output row, 64 columns per step. Rows are taken two at a time: byte-interleaving row a and
// row b and widening gives (a_x, b_x) int16 pairs for vpmaddwd with the packed weight pair. All unpack / pack
// steps work per 128-bit lane, so the column order they scramble is restored by packs + packus at the end.
void vrow_avx512(const ResizePlan& plan, const std::uint8_t* tmp, std::ptrdiff_t ts, int base, int yy,
                 std::uint8_t* out) {
  const int ymin = plan.vert.bounds[2 * yy] - plan.ybox_first - base;  // tmp row 0 is intermediate row base
  const int n = plan.vert.bounds[2 * yy + 1];
  const int pairs = (n + 1) / 2;
  const std::int32_t* khi = plan.v_hi.data() + static_cast<std::ptrdiff_t>(yy) * plan.v_pairs;
  const std::int32_t* klo = plan.v_lo.data() + static_cast<std::ptrdiff_t>(yy) * plan.v_pairs;
  const __m512i bias = _mm512_set1_epi32(1 << 21);
  const __m512i zero = _mm512_setzero_si512();
  for (int x = 0; x < plan.out_w; x += 64) {
    __m512i ah[4] = {zero, zero, zero, zero}, al[4] = {zero, zero, zero, zero};
    for (int p = 0; p < pairs; ++p) {
      const std::uint8_t* ra = tmp + static_cast<std::ptrdiff_t>(ymin + 2 * p) * ts + x;
      const std::uint8_t* rb = 2 * p + 1 < n ? ra + ts : ra;  // odd count: the partner weight is 0
      const __m512i va = _mm512_loadu_si512(ra);
      const __m512i vb = _mm512_loadu_si512(rb);
      const __m512i lo = _mm512_unpacklo_epi8(va, vb);
      const __m512i hi = _mm512_unpackhi_epi8(va, vb);
      const __m512i w[4] = {_mm512_unpacklo_epi8(lo, zero), _mm512_unpackhi_epi8(lo, zero),
                            _mm512_unpacklo_epi8(hi, zero), _mm512_unpackhi_epi8(hi, zero)};
      const __m512i ch = _mm512_set1_epi32(khi[p]);
      const __m512i cl = _mm512_set1_epi32(klo[p]);
      for (int j = 0; j < 4; ++j) {
        ah[j] = _mm512_add_epi32(ah[j], _mm512_madd_epi16(w[j], ch));
        al[j] = _mm512_add_epi32(al[j], _mm512_madd_epi16(w[j], cl));
      }
    }
    __m512i r[4];
    for (int j = 0; j < 4; ++j) {
      r[j] = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(ah[j], 11), al[j]), bias);
      r[j] = _mm512_srai_epi32(r[j], 22);
    }
    const __m512i b = _mm512_packus_epi16(_mm512_packs_epi32(r[0], r[1]), _mm512_packs_epi32(r[2], r[3]));
    if (x + 64 <= plan.out_w) {
      _mm512_storeu_si512(out + x, b);
    } else {
      const __mmask64 m = (~0ULL) >> (64 - (plan.out_w - x));
      _mm512_mask_storeu_epi8(out + x, m, b);
    }
  }
}

}  // namespace

void resize_plane_avx512(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                         std::uint8_t* dst, ResizeScratch& scratch) {
  (void)run_resize(plan, StridedRows{src, row_stride}, pixel_step, dst, scratch, hrow_avx512, vrow_avx512);
}

bool resize_plane_rows_avx512(const ResizePlan& plan, ResizeRowFn fn, void* ctx, int pixel_step, std::uint8_t* dst,
                              ResizeScratch& scratch) {
  return run_resize(plan, CallbackRows{fn, ctx}, pixel_step, dst, scratch, hrow_avx512, vrow_avx512);
}

}  // namespace superpoint_rt::image::detail

#pragma GCC diagnostic pop
