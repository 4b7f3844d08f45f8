// Internal: the pass structure shared by resize_avx2.cpp and resize_avx512.cpp (include it from those files only).
//
// Everything here has internal linkage (anonymous namespace) on purpose: each ISA file compiles its own copy with
// its own target flags, so the linker can never pick the AVX-512 build of a helper for the AVX2 path.
//
// Pass structure (Pillow ImagingResampleInner, docs/ALGORITHM.md §1.2):
//   identity size          -> copy the plane;
//   width changes          -> for each input row ybox_first..ybox_last-1: de-interleave the channel into an int16
//                             row (zero padded by h_taps), then HRow computes the out_w outputs of that row (into
//                             the uint8 intermediate, or into dst when the height does not change);
//   only height changes    -> the needed input rows are de-interleaved into the uint8 intermediate;
//   height changes         -> VRow computes each output row from the intermediate rows, as soon as they exist.
// The intermediate's row stride is out_w rounded up to 64 so the vertical kernel may load whole vectors.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "image/resize.hpp"

namespace superpoint_rt::image {
namespace {

/// 16 consecutive samples of one channel as 16 int16 (AVX2 code; compiled with each file's flags).
/// Reads bytes [0, 15 * step + 1 + slack) of p, see kReadBytes.
template <int Step>
inline __m256i load16_channel(const std::uint8_t* p) {
  if constexpr (Step == 1) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (Step == 2) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_and_si256(v, _mm256_set1_epi16(0x00FF));
  } else if constexpr (Step == 3) {
    // Channel bytes sit at 0, 3, ..., 45: six in the first 16 bytes, five in each of the next two.
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
    const __m128i ma = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i mb = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i mc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i v =
        _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ma), _mm_shuffle_epi8(b, mb)), _mm_shuffle_epi8(c, mc));
    return _mm256_cvtepu8_epi16(v);
  } else {
    static_assert(Step == 4);
    const __m256i mask = _mm256_set1_epi32(0xFF);
    const __m256i lo = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), mask);
    const __m256i hi = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)), mask);
    // packus is per 128-bit lane: words come out as samples 0-3, 8-11, 4-7, 12-15.
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
  }
}

/// Bytes load16_channel<Step> reads.
constexpr std::ptrdiff_t kReadBytes[5] = {0, 16, 32, 48, 64};

template <int Step, class T>
inline void deinterleave_fixed(const std::uint8_t* s, int n, T* out) {
  // Vector groups only while every byte they read is a byte of this row's samples (the last sample of the last row
  // may be the last byte of the caller's buffer, e.g. the B channel of a packed RGB image).
  const std::ptrdiff_t last = static_cast<std::ptrdiff_t>(n - 1) * Step + 1;
  int x = 0;
  for (; static_cast<std::ptrdiff_t>(x) * Step + kReadBytes[Step] <= last; x += 16) {
    const __m256i v = load16_channel<Step>(s + static_cast<std::ptrdiff_t>(x) * Step);
    if constexpr (std::is_same_v<T, std::int16_t>) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), v);
    } else {
      const __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x), b);
    }
  }
  for (; x < n; ++x) out[x] = static_cast<T>(s[static_cast<std::ptrdiff_t>(x) * Step]);
}

/// out[x] = s[x * step] for x < n (T = int16 for the horizontal pass, uint8 for copies).
template <class T>
inline void deinterleave(const std::uint8_t* s, int step, int n, T* out) {
  switch (step) {
    case 1: deinterleave_fixed<1>(s, n, out); return;
    case 2: deinterleave_fixed<2>(s, n, out); return;
    case 3: deinterleave_fixed<3>(s, n, out); return;
    case 4: deinterleave_fixed<4>(s, n, out); return;
    default: break;
  }
  for (int x = 0; x < n; ++x) out[x] = static_cast<T>(s[static_cast<std::ptrdiff_t>(x) * step]);
}

/// Spreads software prefetches of the next source row over the horizontal kernel's output groups. WHY: while the
/// kernel computes, the row being read is idle, the hardware prefetchers stall at every 4 KiB page and a 12 MP RGB
/// row (12 KiB) then arrives at memory latency; prefetching it during the previous row's arithmetic about halved
/// the 4032x3024 -> 640x480 time on our test machine. (Prefetches never fault, so the last row needs no care, but
/// next is null there anyway.)
struct RowPrefetch {
  const std::uint8_t* next = nullptr;  // the next source row's first sample, or null
  int per_group = 0;                   // cache lines to prefetch per output group
  int lines = 0;                       // cache lines in the row
  void issue(int group) const {
    if (!next) return;
    const int end = std::min(lines, (group + 1) * per_group);
    for (int l = group * per_group; l < end; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(next + static_cast<std::ptrdiff_t>(l) * 64), _MM_HINT_T0);
    }
  }
};

/// Input rows of a plane held in memory: row y starts at src + y * row_stride.
struct StridedRows {
  const std::uint8_t* src;
  std::ptrdiff_t row_stride;
  const std::uint8_t* row(int y) const { return src + y * row_stride; }
  /// The row after y, for RowPrefetch (null: nothing to prefetch).
  const std::uint8_t* prefetch_after(int y) const { return src + (y + 1) * row_stride; }
};

/// Input rows pulled from a callback (resize_plane_rows: the fused JPEG decode + resize). The rows are produced on
/// demand into a small buffer that is hot in cache, so there is nothing to prefetch.
struct CallbackRows {
  ResizeRowFn fn;
  void* ctx;
  const std::uint8_t* row(int y) const { return fn(ctx, y); }
  const std::uint8_t* prefetch_after(int) const { return nullptr; }
};

/// HRow(plan, const int16_t* row, uint8_t* out, const RowPrefetch& pf): the out_w outputs of one row; row holds in_w
/// samples followed by at least h_taps zeros; it calls pf.issue(g) once per output group g. VRow(plan, const uint8_t*
/// tmp, ptrdiff_t tmp_stride, int base, int yy, uint8_t* out): output row yy from the intermediate (tmp row 0 is
/// intermediate row `base`, counted from ybox_first; out_w rounded up to 64 readable per row). Rows(src).row(y) gives
/// input row y; rows are requested once each, in increasing y, and a null row aborts the resize: run_resize then
/// returns false (dst incomplete).
///
/// The intermediate is a window of resize_window_rows(plan) rows, not all ybox rows: output rows are computed as
/// soon as their input rows exist and their first input row never decreases, so when the window is full the rows
/// still needed (fewer than vert.ksize) move to its front. Memory is then O(vert.ksize * out_w) instead of
/// O(in_h * out_w) (a 1 x 1,000,000 image would need 640 MB); below kResizeWindowBytes nothing ever moves.
template <class Rows, class HRow, class VRow>
bool run_resize(const ResizePlan& plan, const Rows& src, int pixel_step, std::uint8_t* dst, ResizeScratch& scratch,
                HRow hrow, VRow vrow) {
  if (!plan.need_h && !plan.need_v) {  // Image.resize returns self.copy() at the same size
    for (int y = 0; y < plan.in_h; ++y) {
      const std::uint8_t* s = src.row(y);
      if (!s) return false;
      deinterleave(s, pixel_step, plan.in_w, dst + static_cast<std::ptrdiff_t>(y) * plan.out_w);
    }
    return true;
  }
  const std::ptrdiff_t ts = resize_tmp_stride(plan);
  const int first = plan.ybox_first;
  const int rows = plan.ybox_last - plan.ybox_first;  // == in_h when the height does not change
  const int window = plan.need_v ? resize_window_rows(plan) : 0;
  if (plan.need_v) scratch.tmp.resize(static_cast<std::size_t>(window) * static_cast<std::size_t>(ts));
  // Output row yy can be computed as soon as the intermediate holds its last input row; running the vertical pass
  // interleaved with the horizontal one keeps the rows it reads in cache (the result is the same: each output row
  // depends only on its own input rows). Pillow's first and last input rows are non-decreasing in yy.
  int next_out = 0;
  int base = 0;  // intermediate row held in tmp row 0
  std::uint8_t* tmp = scratch.tmp.data();
  auto vertical_upto = [&](int ready_rows) {
    if (!plan.need_v) return;
    while (next_out < plan.out_h &&
           plan.vert.bounds[2 * next_out] - first + plan.vert.bounds[2 * next_out + 1] <= ready_rows) {
      vrow(plan, static_cast<const std::uint8_t*>(tmp), ts, base, next_out,
           dst + static_cast<std::ptrdiff_t>(next_out) * plan.out_w);
      ++next_out;
    }
  };
  // Where intermediate row r goes: moves the rows still needed to the front of a full window first.
  auto slot = [&](int r) -> std::uint8_t* {
    if (r - base >= window) {
      const int keep = next_out < plan.out_h ? std::min(plan.vert.bounds[2 * next_out] - first, r) : r;
      std::memmove(tmp, tmp + static_cast<std::ptrdiff_t>(keep - base) * ts,
                   static_cast<std::size_t>(r - keep) * static_cast<std::size_t>(ts));
      base = keep;
    }
    return tmp + static_cast<std::ptrdiff_t>(r - base) * ts;
  };
  if (plan.need_h) {
    scratch.row16.resize(static_cast<std::size_t>(plan.in_w) + static_cast<std::size_t>(plan.h_taps));
    std::int16_t* row16 = scratch.row16.data();
    std::memset(row16 + plan.in_w, 0, sizeof(std::int16_t) * static_cast<std::size_t>(plan.h_taps));

    const std::ptrdiff_t row_bytes = static_cast<std::ptrdiff_t>(plan.in_w - 1) * pixel_step + 1;
    RowPrefetch pf;
    pf.lines = static_cast<int>((row_bytes + 63) / 64);
    pf.per_group = (pf.lines + plan.h_groups - 1) / plan.h_groups;
    for (int r = 0; r < rows; ++r) {
      const std::uint8_t* s = src.row(r + first);
      if (!s) return false;
      deinterleave(s, pixel_step, plan.in_w, row16);
      pf.next = r + 1 < rows ? src.prefetch_after(r + first) : nullptr;
      hrow(plan, static_cast<const std::int16_t*>(row16), plan.need_v ? slot(r) : dst + r * plan.out_w, pf);
      vertical_upto(r + 1);
    }
  } else {
    for (int r = 0; r < rows; ++r) {
      const std::uint8_t* s = src.row(r + first);
      if (!s) return false;
      deinterleave(s, pixel_step, plan.in_w, slot(r));
      vertical_upto(r + 1);
    }
  }
  vertical_upto(rows);  // every row is ready here (the window needs monotonic bounds; Pillow's are)
  return true;
}

}  // namespace
}  // namespace superpoint_rt::image
