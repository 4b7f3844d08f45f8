// AVX2 Pillow-exact resize kernels; bit-identical to resize_plane_reference. The same scheme as resize_avx512.cpp
// (see there for why splitting the 22-bit weights into two int16 halves keeps Pillow's int32 sums exact) at half
// the width: 8 outputs per horizontal step, 32 columns per vertical step.
#include <immintrin.h>

#include <cstring>

#include "image/resize_kernels.hpp"
#include "image/resize_simd_impl.hpp"

namespace superpoint_rt::image::detail {
namespace {

// Horizontal pass, one row. The plan's tables are laid out for 16 outputs in 4 lanes (resize.hpp); half h of a
// group uses lanes 2h and 2h+1, i.e. outputs 8h + i and 8h + 4 + i in accumulator i. Two rounds of vphaddd leave
// outputs 8h + 0..3 in the low lane and 8h + 4..7 in the high lane.
void hrow_avx2(const ResizePlan& plan, const std::int16_t* row, std::uint8_t* out, const RowPrefetch& pf) {
  const int chunks = plan.h_taps / 8;
  const __m256i bias = _mm256_set1_epi32(1 << 21);
  for (int g = 0; g < plan.h_groups; ++g) {
    pf.issue(g);
    const std::int32_t* xm = plan.h_xmin.data() + g * 16;
    const std::int16_t* khi = plan.h_hi.data() + static_cast<std::ptrdiff_t>(g) * 16 * plan.h_taps;
    const std::int16_t* klo = plan.h_lo.data() + static_cast<std::ptrdiff_t>(g) * 16 * plan.h_taps;
    __m128i half_bytes[2];
    for (int h = 0; h < 2; ++h) {
      __m256i acc[4];
      for (int i = 0; i < 4; ++i) {
        const std::int16_t* r0 = row + xm[8 * h + i];
        const std::int16_t* r1 = row + xm[8 * h + 4 + i];
        __m256i ah = _mm256_setzero_si256(), al = _mm256_setzero_si256();
        for (int c = 0; c < chunks; ++c) {
          __m256i w = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + 8 * c)));
          w = _mm256_inserti128_si256(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + 8 * c)), 1);
          const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(c * 4 + i) * 32 + 16 * h;
          ah = _mm256_add_epi32(ah,
                                _mm256_madd_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(khi + at))));
          al = _mm256_add_epi32(al,
                                _mm256_madd_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(klo + at))));
        }
        acc[i] = _mm256_add_epi32(_mm256_slli_epi32(ah, 11), al);
      }
      __m256i r = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
      r = _mm256_srai_epi32(_mm256_add_epi32(r, bias), 22);
      const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
      half_bytes[h] = _mm_packus_epi16(w16, w16);  // sums are >= 0: unsigned saturation == Pillow's clip8
    }
    const __m128i b = _mm_unpacklo_epi64(half_bytes[0], half_bytes[1]);
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

// Vertical pass, one output row, 32 columns per step (see vrow_avx512 for the pairing of rows).
void vrow_avx2(const ResizePlan& plan, const std::uint8_t* tmp, std::ptrdiff_t ts, int base, int yy,
               std::uint8_t* out) {
  const int ymin = plan.vert.bounds[2 * yy] - plan.ybox_first - base;  // tmp row 0 is intermediate row base
  const int n = plan.vert.bounds[2 * yy + 1];
  const int pairs = (n + 1) / 2;
  const std::int32_t* khi = plan.v_hi.data() + static_cast<std::ptrdiff_t>(yy) * plan.v_pairs;
  const std::int32_t* klo = plan.v_lo.data() + static_cast<std::ptrdiff_t>(yy) * plan.v_pairs;
  const __m256i bias = _mm256_set1_epi32(1 << 21);
  const __m256i zero = _mm256_setzero_si256();
  for (int x = 0; x < plan.out_w; x += 32) {
    __m256i ah[4] = {zero, zero, zero, zero}, al[4] = {zero, zero, zero, zero};
    for (int p = 0; p < pairs; ++p) {
      const std::uint8_t* ra = tmp + static_cast<std::ptrdiff_t>(ymin + 2 * p) * ts + x;
      const std::uint8_t* rb = 2 * p + 1 < n ? ra + ts : ra;  // odd count: the partner weight is 0
      const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra));
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb));
      const __m256i lo = _mm256_unpacklo_epi8(va, vb);
      const __m256i hi = _mm256_unpackhi_epi8(va, vb);
      const __m256i w[4] = {_mm256_unpacklo_epi8(lo, zero), _mm256_unpackhi_epi8(lo, zero),
                            _mm256_unpacklo_epi8(hi, zero), _mm256_unpackhi_epi8(hi, zero)};
      const __m256i ch = _mm256_set1_epi32(khi[p]);
      const __m256i cl = _mm256_set1_epi32(klo[p]);
      for (int j = 0; j < 4; ++j) {
        ah[j] = _mm256_add_epi32(ah[j], _mm256_madd_epi16(w[j], ch));
        al[j] = _mm256_add_epi32(al[j], _mm256_madd_epi16(w[j], cl));
      }
    }
    __m256i r[4];
    for (int j = 0; j < 4; ++j) {
      r[j] = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(ah[j], 11), al[j]), bias);
      r[j] = _mm256_srai_epi32(r[j], 22);
    }
    const __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    if (x + 32 <= plan.out_w) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), b);
    } else {
      alignas(32) std::uint8_t buf[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(buf), b);
      std::memcpy(out + x, buf, static_cast<std::size_t>(plan.out_w - x));
    }
  }
}

}  // namespace

void resize_plane_avx2(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                       std::uint8_t* dst, ResizeScratch& scratch) {
  (void)run_resize(plan, StridedRows{src, row_stride}, pixel_step, dst, scratch, hrow_avx2, vrow_avx2);
}

bool resize_plane_rows_avx2(const ResizePlan& plan, ResizeRowFn fn, void* ctx, int pixel_step, std::uint8_t* dst,
                            ResizeScratch& scratch) {
  return run_resize(plan, CallbackRows{fn, ctx}, pixel_step, dst, scratch, hrow_avx2, vrow_avx2);
}

}  // namespace superpoint_rt::image::detail
