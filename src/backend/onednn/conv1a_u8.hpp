// conv1a of the int8 plan, quantised as it is written: the one-input-channel 3x3 convolution (stride 1, zero
// padding 1) + bias + ReLU of the full-resolution plane, written straight as the u8 channels-last (NHWC)
// activation conv1b reads. oneDNN would compute conv1a in f32 into a 4-byte-per-value activation (78 MB at
// 480x640) and then quantise it with a separate reorder; this writes the 1-byte values once (10.3 + 7.9 ms of a
// ~100 ms int8 forward at one thread, measured with ONEDNN_VERBOSE=1 build/bench/bench_forward ... --precision int8).
//
// Per output value (channel c, pixel y, x), in this order (the scalar reference and the AVX-512 and AVX2 kernels give
// the same bits; tests/backend/test_conv1a_u8.cpp):
//   acc = bias[c]; for ky in 0..2, kx in 0..2: acc = fma(weight[c][ky][kx], in(y + ky - 1, x + kx - 1), acc)
//   (in() = 0 outside the plane), v = acc > 0 ? acc : 0, q = v * scale (channel_scale[c] when set), q = q < 255 ? q :
//   255, out = round-half-even(q)  (the rounding of oneDNN's own f32 -> u8 quantisation)
// Internal to the oneDNN backend. The AVX-512 translation unit takes raw pointers only (post/kernels.hpp says why).
#pragma once

#include <cstddef>
#include <cstdint>

namespace superpoint_rt::backend::detail {

struct Conv1aU8 {
  const float* weight = nullptr;  // channels x 3 x 3 (OIHW with I = 1)
  const float* bias = nullptr;    // channels
  int channels = 0;
  float scale = 1;  // u8 per unit of activation: 255 / the calibrated maximum
  // Or, when set, one such scale per channel (channels floats): where conv1b, our Winograd kernel, folds each input
  // channel's scale into its weights (wino_u8.hpp), so that every channel spans the u8 range.
  const float* channel_scale = nullptr;
};

/// One output row (w pixels x channels bytes, NHWC) from three zero-padded input rows r0, r1, r2 (rows y - 1, y,
/// y + 1 of the plane, each w + 2 floats with a zero at both ends; all zeros for a row outside the plane).
using Conv1aU8Row = void (*)(const Conv1aU8& k, const float* r0, const float* r1, const float* r2, int w,
                             std::uint8_t* out);
void conv1a_u8_row_reference(const Conv1aU8& k, const float* r0, const float* r1, const float* r2, int w,
                             std::uint8_t* out);
/// The same with AVX-512 F+BW (channels % 16 == 0 only); call only where util::cpu_features().avx512().
void conv1a_u8_row_avx512(const Conv1aU8& k, const float* r0, const float* r1, const float* r2, int w,
                          std::uint8_t* out);
/// The same with AVX2 + FMA (channels % 8 == 0 only); call only where util::cpu_features().avx2_fma().
void conv1a_u8_row_avx2(const Conv1aU8& k, const float* r0, const float* r1, const float* r2, int w, std::uint8_t* out);

/// Floats of scratch conv1a_u8_rows needs for width w: three padded rows.
inline std::size_t conv1a_u8_scratch_floats(int w) {
  return 3 * (static_cast<std::size_t>(w) + 2);
}

/// Output rows [y0, y1) of the h x w plane `in` (row-major floats) into `out` (w x channels bytes per row, NHWC,
/// its first row holding output row `out_row0` <= y0: 0 for the whole frame, a stripe's first row otherwise), one
/// `row` call per row. Each row depends on the input only, so any split of the rows gives the same bytes.
void conv1a_u8_rows(const Conv1aU8& k, Conv1aU8Row row, const float* in, int h, int w, int y0, int y1,
                    std::uint8_t* out, int out_row0, float* scratch);

}  // namespace superpoint_rt::backend::detail
