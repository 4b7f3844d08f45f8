// The int8 plan's 3x3 layers after conv1a (AVX-512 VNNI, AVX-VNNI or AVX2): a 3x3 convolution (stride 1, zero padding
// 1) + bias + ReLU (+ the 2x2 max pooling that follows conv1b, conv2b and conv3b) of a u8 channels-last (NHWC)
// activation, by Winograd F(4x4,3x3) in 16-bit integers, written straight as the next layer's u8 NHWC input.
//
// Why: oneDNN's int8 direct kernels do 9 multiplies per output and input channel at 4 per 32-bit lane (vpdpbusd);
// F(4x4,3x3) does 36 per 16 outputs (2.25 each) at 2 per lane (vpdpwssd), half the instructions. oneDNN's own int8
// Winograd (F(2x2,3x3)) squeezes the transformed input back into 8 bits and lost 4.5 points of homography accuracy
// (docs/BENCHMARKS.md); here every transform is exact in integers and the weights keep 10 to 13 bits in the
// transformed domain, finer than the 8 bits of the direct kernel. And the u8 scales may differ per channel, in and
// out, at no cost: an input channel's is folded into its weights, an output channel's into the dequantisation.
//
// The arithmetic, per 4x4 output tile (frame rows y..y+3, columns x..x+3; y and x multiples of 4), in this order (the
// scalar reference and the AVX-512 VNNI, AVX-VNNI and AVX2 kernels give the same bits, the int32 sums being exact;
// tests/backend/test_wino_u8.cpp; unpooled: q is
// round-half-even(min(max(Y + bias * out_scale, 0), 255)) per value):
//   d  = the 6x6 u8 input patch from (y - 1, x - 1), zero outside the frame or the rows the caller holds;
//   V  = B^T d B in int16 (exact: |V| <= 20400; B^T of Lavin & Gray, "Fast Algorithms for Convolutional Neural
//        Networks", 2016, F(4x4,3x3)), rows first;
//   M[p][o] = sum over input channels i of V[p][i] * U[p][i][o] in int32 (exact: |U| <= limit(p), which keeps the
//        sum of 64 channels inside int32), U = round(G g G^T * s[p][o]) per tile position p and output channel o;
//   m  = float(M) * (out_scale[o] / s[p][o])  (the dequantisation, with the output's u8 scale folded in; the input's
//        per-channel scales are in U: U = round(G (g / in_scale[i]) G^T * s[p][o]));
//   Y  = A^T m A in float (down each column of the 6x6 first, then along each row; wino_output_1d);
//   q  = round-half-even(min(max((max of each 2x2 of Y) + bias * out_scale, 0), 255))  (adding the bias after the
//        maximum gives the same bits: a rounded sum is monotonic; ReLU and pooling commute with the monotonic
//        rounding; the rounding of oneDNN's own f32 -> u8 quantisation).
// Internal to the oneDNN backend; the AVX-512 translation unit takes raw pointers only (post/kernels.hpp says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/onednn/wino_transform.hpp"

namespace superpoint_rt::backend::detail {

/// What the kernels read (raw pointers only: see the note above).
struct WinoU8View {
  int in_channels = 0, out_channels = 0;
  const std::int16_t* u = nullptr;  // [36 positions][in / 2][out][2]: channel pairs, as vpdpwssd multiplies them
  const float* scale = nullptr;     // [36][out]: out_scale[o] / s[p][o]
  const float* bias = nullptr;      // [out]: bias * out_scale[o]
};

/// A 3x3 convolution prepared for the kernels, owning its arrays. in_channels % 32 == 0 and out_channels % 64 == 0
/// for the AVX-512 kernel; the reference takes any even in_channels.
struct WinoU8 {
  int in_channels = 0, out_channels = 0;
  std::vector<std::int16_t> u;
  std::vector<float> scale, bias;
  WinoU8View view() const { return {in_channels, out_channels, u.data(), scale.data(), bias.data()}; }
};

/// From f32 OIHW 3x3 weights and bias: u8 input value of channel i = activation * in_scale[i], u8 output of channel
/// o = activation * out_scale[o]; a vector of one value applies to every channel. A per-channel input scale is folded
/// into that channel's weights before they are rounded (exact in the sum: w * a = (w / s) * (a * s)).
WinoU8 wino_u8_prepare(const float* weight, const float* bias, int in_channels, int out_channels,
                       const std::vector<float>& in_scale, const std::vector<float>& out_scale);

/// The largest |U| at tile position p (0..35) for `in_channels` channels: the int32 sum cannot overflow.
int wino_u8_limit(int p, int in_channels);

/// Where a call reads and writes. The input holds `in_rows` rows of w pixels x in_channels bytes, its row 0 being
/// frame row `in_row0`; the frame rows outside [in_row0, in_row0 + in_rows) and the columns outside [0, w) read as
/// zero (the caller zeroes its rows outside the frame). The call computes convolution rows [y0, y1) (y0 a multiple of
/// 4, y1 even) and writes pool rows [y0 / 2, y1 / 2), w / 2 pixels each, to `out` (whose first row is pool row
/// y0 / 2; rows of (w / 2) x out_channels bytes).
/// With pool == false the call writes convolution rows [y0, y1) (y1 any) unpooled instead, w pixels each, the bias
/// added to each value (rows of w x out_channels bytes, the first being row y0).
struct WinoU8Rows {
  const std::uint8_t* in = nullptr;
  int in_row0 = 0, in_rows = 0, w = 0, y0 = 0, y1 = 0;
  std::uint8_t* out = nullptr;
  bool pool = true;
  /// The 4x4 tiles to compute, numbered row-major from (y0, 0) (ceil((y1 - y0) / 4) rows of ceil(w / 4)):
  /// [first_tile, first_tile + tiles); tiles = -1: all. Threads split a call this way: every tile reads the input
  /// only and writes its own outputs, so any split gives the same bytes.
  int first_tile = 0, tiles = -1;
};

/// A call's tile range (WinoU8Rows::first_tile / tiles resolved) and the tiles per tile row.
struct WinoTiles {
  int first = 0, last = 0, across = 0;
};
/// Defined out of line in the baseline translation unit: the AVX-512 one must not emit a copy the linker could pick.
WinoTiles wino_tiles(const WinoU8Rows& r);

/// `scratch`: wino_u8_scratch_bytes bytes, any alignment; one call at a time per scratch.
using WinoU8Kernel = void (*)(const WinoU8View& k, const WinoU8Rows& r, void* scratch);
void wino_u8_rows_reference(const WinoU8View& k, const WinoU8Rows& r, void* scratch);
/// The same with AVX-512 F+BW+VNNI; call only where util::cpu_features().avx512() and avx512_vnni. in_channels % 32,
/// out_channels % 64.
void wino_u8_rows_avx512vnni(const WinoU8View& k, const WinoU8Rows& r, void* scratch);
/// The same with AVX2 (vpmaddwd + vpaddd); call only where util::cpu_features().avx2_fma(). in_channels % 16,
/// out_channels % 16.
void wino_u8_rows_avx2(const WinoU8View& k, const WinoU8Rows& r, void* scratch);
/// The same with AVX-VNNI (vpdpwssd on 256-bit registers); call only where util::cpu_features().avx_vnni.
/// in_channels % 16, out_channels % 16.
void wino_u8_rows_avxvnni(const WinoU8View& k, const WinoU8Rows& r, void* scratch);

/// Bytes of scratch either kernel needs per call.
std::size_t wino_u8_scratch_bytes(int in_channels, int out_channels);
/// Tiles the AVX-512 kernel transforms and multiplies together.
constexpr int kWinoTiles = 6;

/// The 1-D input transform B^T x of F(4x4,3x3) (integers: exact in any order).
template <class T>
inline void wino_input_1d(const T x[6], T o[6]) {
  o[0] = T(4 * x[0] - 5 * x[2] + x[4]);
  o[1] = T(-4 * x[1] - 4 * x[2] + x[3] + x[4]);
  o[2] = T(4 * x[1] - 4 * x[2] - x[3] + x[4]);
  o[3] = T(-2 * x[1] - x[2] + 2 * x[3] + x[4]);
  o[4] = T(2 * x[1] - x[2] - 2 * x[3] + x[4]);
  o[5] = T(4 * x[1] - 5 * x[3] + x[5]);
}

}  // namespace superpoint_rt::backend::detail
