// int8 weights by GPTQ instead of rounding each weight to its nearest s8 code.
//
// Rounding every weight of a layer to the nearest code (per output channel, scale 127 / max|w[o]|) makes each
// rounding error independent, and they add up in the layer's outputs. GPTQ (Frantar, Ashkboos, Hoefler, Alistarh,
// "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained Transformers", arXiv 2210.17323,
// Algorithm 1; written here from the paper, without its lazy batching) rounds the weights of an output channel one
// input column at a time and moves each rounding error onto the columns not yet rounded, through the inverse of the
// layer's input Hessian H = X X^T (X: the layer's input patches over the calibration planes), so that the error of
// the layer's OUTPUT on those inputs is what gets minimised. Same codes, same scales, same kernels: it costs nothing
// per forward, only at load (calibration).
//
// Measured in the float simulation (bench/quant_sim.py wq=gptq-order, 12 photos, synthetic calibration at the
// 99.99th percentile): top-500 keypoint F1 against fp32 0.9731 / 0.9620 (mean / worst) for the all-int8 plan against
// 0.9601 / 0.9500 with nearest rounding, about what keeping conv1b and conv2a in f32 gives (0.9757 / 0.9622).
//
// Both are deterministic: the same inputs give the same bits whatever the thread count (GPTQ is sequential; the
// Hessian's sums are fixed blocks of oneDNN's single-thread sgemm, spread over the caller's OpenMP threads).
// Internal to the oneDNN backend.
#pragma once

#include <cstddef>
#include <vector>

namespace superpoint_rt::backend::detail {

/// A layer output as oneDNN holds it: value (channel ch, row y, column x) at
/// data[(ch / block) * channel_block_stride + y * row_stride + x * column_stride + ch % block]
/// (planar NCHW: block 1, strides h * w, w, 1; nChw16c: block 16, strides h * w * 16, w * 16, 16; NHWC: block 1,
/// strides 1, w * c, c).
struct ActivationView {
  const float* data = nullptr;
  int channels = 0, height = 0, width = 0;
  int block = 1;
  std::size_t channel_block_stride = 0, row_stride = 0, column_stride = 0;
  static ActivationView planar(const float* data, int c, int h, int w) {
    return {data, c, h, w, 1, static_cast<std::size_t>(h) * w, static_cast<std::size_t>(w), 1};
  }
};

/// Adds to `hessian` (K x K row-major floats, K = channels * kernel * kernel in PyTorch's unfold order: channel, then
/// kernel row, then kernel column) col col^T for the layer's input patch col at every `stride`-th row and column
/// (from 0) of its frame, zero outside the frame (the convolution's padding kernel / 2). The layer's input is `x`,
/// or with `pool` the 2 x 2 / stride 2 max pooling of `x` (the frame floor(h / 2) x floor(w / 2), as PyTorch's
/// MaxPool2d), read in place. Throws InvalidArgument on a size that does not fit `hessian`.
void add_patch_hessian(const ActivationView& x, bool pool, int kernel, int stride, std::vector<float>& hessian);

/// The same sums in double with plain loops, from a planar (c x h x w) input: the reference of the tests.
void add_patch_hessian_reference(const float* x, int c, int h, int w, bool pool, int kernel, int stride,
                                 std::vector<double>& hessian);

struct S8Weights {
  std::vector<signed char> codes;  // out_channels x K, in [-127, 127]
  std::vector<float> scales;       // per output channel: 127 / max|w[o]| (1 for an all-zero channel); w ~ code / scale
};

/// Nearest rounding (ties to even) at the per-output-channel scales: what the int8 plan computed before GPTQ.
S8Weights s8_nearest(const std::vector<float>& w, int out_channels);

/// GPTQ with the scales of s8_nearest. `w`: out_channels x K (OIHW flattened); `hessian`: K x K as
/// add_patch_hessian accumulates it. The columns are rounded in decreasing order of H's diagonal ("act order");
/// H gets `damp` times the mean of its diagonal added to the diagonal (GPTQ's dampening), a column no calibration
/// input reaches (zero diagonal) is rounded as 0. Throws InvalidArgument on mismatched sizes and Internal when H is
/// not positive definite after the dampening (non-finite inputs).
S8Weights s8_gptq(const std::vector<float>& w, int out_channels, const std::vector<float>& hessian, double damp = 0.01);

}  // namespace superpoint_rt::backend::detail
