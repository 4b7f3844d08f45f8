// AVX2 build (SSE4.1 / SSSE3 instructions on 128-bit registers, enabled by the _avx2 flags) of the PNG Sub, Average
// and Paeth filters for 3- and 4-byte pixels (png_fast.hpp). These filters chain each pixel to its left neighbour, so
// the work is one pixel per step: its 3 or 4 bytes in the lanes of one register, as libpng's own SSE2 filters do.
// Same results as png_unfilter_row_reference (tests/image/test_png_fast.cpp compares them on random rows).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "image/png_fast.hpp"

namespace superpoint_rt::image::detail {
namespace {

// 4 bytes from p (for 3-byte pixels one byte past the pixel, which the contract allows to be read).
inline __m128i load_px(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return _mm_cvtsi32_si128(static_cast<int>(v));
}

// Exactly BPP bytes: a 4-byte store of a 3-byte pixel would overwrite the next row's filter byte at a row's end.
template <int BPP>
inline void store_px(std::uint8_t* p, __m128i v) {
  const std::uint32_t x = static_cast<std::uint32_t>(_mm_cvtsi128_si32(v));
  std::memcpy(p, &x, BPP);
}

template <int BPP>
void sub(const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
  __m128i a = _mm_setzero_si128();
  for (std::size_t i = 0; i < n; i += BPP) {
    a = _mm_add_epi8(load_px(in + i), a);
    store_px<BPP>(out + i, a);
  }
}

template <int BPP>
void avg(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t n) {
  const __m128i one = _mm_set1_epi8(1);
  __m128i a = _mm_setzero_si128();
  for (std::size_t i = 0; i < n; i += BPP) {
    const __m128i b = load_px(prior + i);
    // floor((a + b) / 2): pavgb rounds up, so take back the carry of odd sums.
    const __m128i mean = _mm_sub_epi8(_mm_avg_epu8(a, b), _mm_and_si128(_mm_xor_si128(a, b), one));
    a = _mm_add_epi8(load_px(in + i), mean);
    store_px<BPP>(out + i, a);
  }
}

template <int BPP>
void paeth(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t n) {
  const __m128i zero = _mm_setzero_si128();
  __m128i a = zero, c = zero;  // left and upper-left, 16-bit lanes
  for (std::size_t i = 0; i < n; i += BPP) {
    const __m128i b = _mm_unpacklo_epi8(load_px(prior + i), zero);
    const __m128i x = load_px(in + i);
    // p = a + b - c: |p - a| = |b - c|, |p - b| = |a - c|, |p - c| = |(b - c) + (a - c)|.
    const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
    const __m128i pa = _mm_abs_epi16(bc), pb = _mm_abs_epi16(ac), pc = _mm_abs_epi16(_mm_add_epi16(bc, ac));
    const __m128i m = _mm_min_epi16(_mm_min_epi16(pa, pb), pc);
    // The spec's order of preference on ties: a, then b, then c.
    __m128i pred = _mm_blendv_epi8(c, b, _mm_cmpeq_epi16(pb, m));
    pred = _mm_blendv_epi8(pred, a, _mm_cmpeq_epi16(pa, m));
    const __m128i r = _mm_add_epi8(x, _mm_packus_epi16(pred, pred));
    store_px<BPP>(out + i, r);
    a = _mm_unpacklo_epi8(r, zero);
    c = b;
  }
}

// Two consecutive Paeth rows at once, row 1 one pixel behind row 0: row 1's pixel s - 1 needs row 0's pixels s - 1
// and s - 2 (above and upper-left), which the previous steps produced. Lanes 0-3 hold row 0's pixel s, lanes 4-7
// row 1's pixel s - 1, so each step of the dependency chain (left neighbour -> prediction -> output) yields two
// pixels. All arithmetic on 16-bit lanes; row 1's "above" comes from the register, not from memory.
template <int BPP>
void paeth_pair(const std::uint8_t* prior, std::uint8_t* r0, std::uint8_t* r1, std::size_t n) {
  const __m128i zero = _mm_setzero_si128(), low = _mm_set1_epi16(0xFF);
  const std::size_t px = n / BPP;
  __m128i a = zero, c = zero, r = zero;
  const auto step = [&](__m128i b_lo, __m128i x_lo, __m128i x_hi) {
    // b: above (row 0: prior; row 1: row 0's previous output, lanes 0-3 of r), x: the filtered bytes.
    const __m128i b = _mm_unpacklo_epi64(b_lo, r);
    const __m128i x = _mm_unpacklo_epi64(x_lo, x_hi);
    const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
    const __m128i pa = _mm_abs_epi16(bc), pb = _mm_abs_epi16(ac), pc = _mm_abs_epi16(_mm_add_epi16(bc, ac));
    const __m128i m = _mm_min_epi16(_mm_min_epi16(pa, pb), pc);
    __m128i pred = _mm_blendv_epi8(c, b, _mm_cmpeq_epi16(pb, m));
    pred = _mm_blendv_epi8(pred, a, _mm_cmpeq_epi16(pa, m));
    r = _mm_and_si128(_mm_add_epi16(x, pred), low);
    a = r;
    c = b;
    return _mm_packus_epi16(r, r);  // bytes 0-3: row 0's pixel, 4-7: row 1's
  };
  const auto wide = [&](const std::uint8_t* p) { return _mm_unpacklo_epi8(load_px(p), zero); };
  // Step 0: row 0's first pixel; row 1's half runs on zeros and leaves its left / upper-left at 0, as the spec's
  // first pixel needs.
  store_px<BPP>(r0, step(wide(prior), wide(r0), zero));
  for (std::size_t s = 1; s < px; ++s) {
    const std::size_t i = s * BPP;
    const __m128i x_hi = wide(r1 + i - BPP);  // loaded before row 1's store below (in place)
    const __m128i out = step(wide(prior + i), wide(r0 + i), x_hi);
    store_px<BPP>(r0 + i, out);
    store_px<BPP>(r1 + i - BPP, _mm_srli_si128(out, 4));
  }
  // Step px: row 1's last pixel (row 0's half is past its end and not stored).
  store_px<BPP>(r1 + n - BPP, _mm_srli_si128(step(zero, zero, wide(r1 + n - BPP)), 4));
}

template <int BPP>
void run(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t n) {
  switch (filter) {
    case 1: sub<BPP>(in, out, n); break;
    case 3: avg<BPP>(in, prior, out, n); break;
    case 4: paeth<BPP>(in, prior, out, n); break;
    default: break;
  }
}

}  // namespace

void png_unfilter_row_avx2(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out,
                           std::size_t n, int bpp) noexcept {
  if (bpp == 3)
    run<3>(filter, in, prior, out, n);
  else
    run<4>(filter, in, prior, out, n);
}

void png_unpaeth_two_rows_avx2(const std::uint8_t* prior, std::uint8_t* row0, std::uint8_t* row1, std::size_t n,
                               int bpp) noexcept {
  if (bpp == 3)
    paeth_pair<3>(prior, row0, row1, n);
  else
    paeth_pair<4>(prior, row0, row1, n);
}

}  // namespace superpoint_rt::image::detail
