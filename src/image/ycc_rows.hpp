// One RGB channel of a YCbCr JPEG computed from libjpeg-turbo's raw (downsampled) component rows, with the same
// bits as its own pipeline under Pillow's settings: fancy upsampling of the chroma (jdsample.c: h2v1, h1v2 and
// h2v2 "triangle" filters; edge samples replicated, as jdmainct.c does for the rows above the first and below the
// last) followed by ycc_rgb_convert (jdcolor.c: R = Y + round(1.402 (Cr - 128)), B = Y + round(1.772 (Cb - 128)) in
// 16-bit fixed point, clamped to 0..255). Used by decode_jpeg_resized_plane: R (or B) needs one chroma component,
// so the other one is never upsampled and no RGB row is written.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace superpoint_rt::image {

struct YccRow {
  const std::uint8_t* luma;  // `width` samples of the output row
  const std::uint8_t* near;  // chroma row nearest to it (row y / vfac)
  const std::uint8_t* far;   // vfac 2: the row above (even y) or below (odd y), edge-clamped; vfac 1: == near
  int width;                 // output samples
  int chroma_width;          // samples in a chroma row (libjpeg's downsampled_width, >= 3 when hfac == 2)
  int hfac, vfac;            // luma samples per chroma sample across / down: 1 or 2
  int odd;                   // vfac 2: y % 2 (which of the two output rows of the chroma row); else 0
  bool red;                  // Cr -> R, else Cb -> B
};

/// Plain scalar form; `scratch` holds ycc_scratch_size(r.width, r.chroma_width) values.
void ycc_channel_row_reference(const YccRow& r, std::int16_t* scratch, std::uint8_t* out);

/// Scratch values ycc_channel_row needs: the chroma column sums and one upsampled row.
inline int ycc_scratch_size(int width, int chroma_width) {
  return chroma_width + 2 + width + 1;
}

namespace detail {
/// The same loops compiled for AVX2 (ycc_rows_avx2.cpp); call only when util::cpu_features() has AVX2.
void ycc_channel_row_avx2(const YccRow& r, std::int16_t* scratch, std::uint8_t* out);
}  // namespace detail

}  // namespace superpoint_rt::image
