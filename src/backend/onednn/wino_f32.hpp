// Our fp32 3x3 convolution (stride 1, zero padding 1) + bias + ReLU (+ the 2x2 max pooling that follows conv1b, conv2b
// and conv3b) by Winograd F(4x4,3x3), for every 3x3 layer after conv1a where it is the plan's kernel (oneDNN 2.6 has
// f32 Winograd only for avx512_core; on AVX2 its direct kernels do 9 multiply-adds per output and input channel where
// F(4x4,3x3) does 2.25).
//
// The arithmetic, per 4x4 output tile (frame rows y..y+3, columns x..x+3; y and x multiples of 4), in this order (the
// scalar reference and every vector kernel give the same bits: tests/backend/test_wino_f32.cpp):
//   d  = the 6x6 input patch from (y - 1, x - 1), zero outside the frame or the rows the caller holds;
//   V  = B^T d B (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016, F(4x4,3x3)), down each
//        column first (wino_f32_input_1d), then along each row;
//   M[p][o] = sum over input channels i = 0, 1, ... of V[p][i] * U[p][i][o], one fused multiply-add per term in
//        that order from +0 (U = G g G^T computed in double and rounded to float once, at plan time);
//   Y  = A^T M A, down each column first, then along each row (wino_output_1d);
//   out = relu(Y + bias), or with pooling relu((max of each 2x2 of Y) + bias) (a rounded sum is monotonic, so adding
//        the bias after the maximum gives the bits of pooling after it; ReLU commutes with both). relu(v) = v > 0 ? v
//        : +0 and max(a, b) = a > b ? a : b, as the vector max instructions compute them.
// Every multiplication in the transforms is by a power of two, exact in float, so a kernel may fuse it with the
// following addition (one rounding either way): the vector kernels use fused multiply-adds there, the reference
// plain expressions, with the same bits.
// Accuracy: against a float64 convolution the outputs differ by a few float32 ulps of the largest |V U| products
// (tests/backend/test_wino_f32.cpp bounds it; the network stays inside SPEC §2 on the goldens: tests/golden).
// Each output tile depends only on its input patch and the weights: any split of the tiles over threads or calls, any
// stripe of the frame, gives the same bytes.
// Internal to the oneDNN backend; the vector translation units take raw pointers only (post/kernels.hpp says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/onednn/wino_transform.hpp"

namespace superpoint_rt::backend::detail {

/// An f32 activation as the kernels address it: element (channel c, row y, column x) at
/// data[(c / block) * block_stride + y * row_stride + x * block + c % block]. oneDNN's nChw8c / nChw16c (block 8 / 16,
/// block_stride = rows x width x block) and nhwc (block = channels) are all of this form. `block` is a multiple of 8
/// (of 16 for the AVX-512 kernel).
struct F32Act {
  float* data = nullptr;
  int block = 0;
  std::size_t block_stride = 0, row_stride = 0;
  float* at(int c, int y, int x) const {
    return data + static_cast<std::size_t>(c / block) * block_stride + static_cast<std::size_t>(y) * row_stride +
           static_cast<std::size_t>(x) * static_cast<std::size_t>(block) + static_cast<std::size_t>(c % block);
  }
};

/// What the kernels read (raw pointers only).
struct WinoF32View {
  int in_channels = 0, out_channels = 0;
  int oc_block = 0;             // output channels per packed weight panel (the kernel's register tile)
  const float* u = nullptr;     // [36 positions][out / oc_block][in][oc_block], 64-byte aligned
  const float* bias = nullptr;  // [out]
};

/// 64-byte aligned floats (the packed weights), owned.
struct AlignedFloats {
  struct Free {
    void operator()(float* q) const noexcept;
  };
  std::unique_ptr<float[], Free> p;
  std::size_t size = 0;
  explicit AlignedFloats(std::size_t n = 0);
  float* data() const { return p.get(); }
};

/// A 3x3 convolution prepared for the kernels (weights transformed and packed once), owning its arrays.
struct WinoF32 {
  int in_channels = 0, out_channels = 0, oc_block = 0;
  AlignedFloats u;
  std::vector<float> bias;
  WinoF32View view() const { return {in_channels, out_channels, oc_block, u.data(), bias.data()}; }
  std::size_t bytes() const { return u.size * sizeof(float) + bias.size() * sizeof(float); }
};

/// From f32 OIHW 3x3 weights and bias, packed in panels of `oc_block` output channels (wino_f32_oc_block of the kernel
/// that will run it; out_channels a multiple of it; in_channels a multiple of 8).
WinoF32 wino_f32_prepare(const float* weight, const float* bias, int in_channels, int out_channels, int oc_block);

/// Where a call reads and writes. `in` holds `in_rows` rows of the frame, its row 0 being frame row `in_row0`; the
/// frame rows outside [in_row0, in_row0 + in_rows) and the columns outside [0, w) read as zero (the caller zeroes
/// its rows outside the frame). The call computes convolution rows [y0, y1) (y0 a multiple of 4) of w columns and
/// writes, with `pool`, pool rows [y0 / 2, y1 / 2) (y1 even), w / 2 columns, to `out` whose row 0 is pool row y0 / 2;
/// without, convolution rows [y0, y1) to `out` whose row 0 is row y0.
struct WinoF32Rows {
  F32Act in;
  int in_row0 = 0, in_rows = 0, w = 0, y0 = 0, y1 = 0;
  F32Act out;
  bool pool = false;
  /// The 4x4 tiles to compute, numbered row-major from (y0, 0) (ceil((y1 - y0) / 4) rows of ceil(w / 4)):
  /// [first_tile, first_tile + tiles); tiles = -1: all. Threads split a call this way.
  int first_tile = 0, tiles = -1;
};

/// `scratch`: wino_f32_scratch_bytes(in, out) bytes, any alignment; one call at a time per scratch.
using WinoF32Kernel = void (*)(const WinoF32View& k, const WinoF32Rows& r, void* scratch);
void wino_f32_rows_reference(const WinoF32View& k, const WinoF32Rows& r, void* scratch);
/// AVX2 + FMA; call only where util::cpu_features().avx2_fma(). Weights packed with oc_block 16.
void wino_f32_rows_avx2(const WinoF32View& k, const WinoF32Rows& r, void* scratch);
/// AVX-512 F; call only where util::cpu_features().avx512(). Weights packed with oc_block 32.
void wino_f32_rows_avx512(const WinoF32View& k, const WinoF32Rows& r, void* scratch);

/// The panel width each kernel's weights are packed in (the reference reads any).
constexpr int kWinoF32OcBlockAvx2 = 16;
constexpr int kWinoF32OcBlockAvx512 = 32;

/// Tiles the vector kernels transform, multiply and transform back together (a multiple of 6, their register tile):
/// each block re-reads the transformed weights, so wider layers take more tiles (wino_f32.cpp has the measurements).
int wino_f32_block_tiles(int in_channels, int out_channels);
/// Bytes of scratch any kernel needs per call.
std::size_t wino_f32_scratch_bytes(int in_channels, int out_channels);

/// The call's tile range (first_tile / tiles resolved) and the tiles per tile row.
struct WinoF32Tiles {
  int first = 0, last = 0, across = 0;
};
WinoF32Tiles wino_f32_tiles(const WinoF32Rows& r);

/// The 1-D input transform B^T x of F(4x4,3x3) in the order every kernel uses (products by 4 and 2 are exact):
///   o0 = 4 (x0 - x2) + (x4 - x2);  o1 = (x3 + x4) - 4 (x1 + x2);  o2 = (x4 - x3) + 4 (x1 - x2);
///   o3 = (x4 - x2) + 2 (x3 - x1);  o4 = (x4 - x2) - 2 (x3 - x1);  o5 = 4 (x1 - x3) + (x5 - x3).
template <class T>
inline void wino_f32_input_1d(const T x[6], T o[6]) {
  const T x4m2 = x[4] - x[2], x3m1 = x[3] - x[1];
  o[0] = (x[0] - x[2]) * T(4) + x4m2;
  o[1] = (x[3] + x[4]) - (x[1] + x[2]) * T(4);
  o[2] = (x[4] - x[3]) + (x[1] - x[2]) * T(4);
  o[3] = x4m2 + x3m1 * T(2);
  o[4] = x4m2 - x3m1 * T(2);
  o[5] = (x[1] - x[3]) * T(4) + (x[5] - x[3]);
}

}  // namespace superpoint_rt::backend::detail
