// int8 calibration's statistics: the percentile of a layer's activations that sets its u8 scale, and how densely
// a layer's input is sampled for its GPTQ Hessian (gptq.hpp). Internal to the oneDNN backend.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/onednn/gptq.hpp"

namespace superpoint_rt::backend::detail {

/// numpy.percentile(v[0..n), q) (linear interpolation between the closest ranks); q = 100 is the maximum, n = 0
/// gives 0. Calibrating int8 at the 99.99th percentile instead of the maximum lets the few largest activations
/// saturate and gives every other value finer steps: keypoint F1 against fp32 0.956 / 0.915 against 0.948 / 0.872
/// in the float simulation (bench/quant_sim.py, docs/BENCHMARKS.md), confirmed on the real plan (bench/quality.py).
float percentile(const float* v, std::size_t n, double q);

/// percentile(channel, q) of every channel of `v` (height x width values each), in one pass over the activation in
/// its memory order (the calibration's high percentiles: a min-heap of the largest values per channel), the same
/// values as percentile() of each channel's values in row-major order.
std::vector<float> channel_percentiles(const ActivationView& v, double q);

/// The sampling stride of a layer's GPTQ Hessian: every s-th row and column of its h x w input frame, s the largest
/// of 4, 2 that still gives at least 10 K patches over `planes` calibration planes (K = inputs per output), else 1.
/// A Hessian of fewer patches than K is singular, and GPTQ then pushes the rounding errors into the input
/// directions the calibration never showed, which real images do (all-int8 descriptor cosine mean 0.980 with every
/// layer at s = 4, where nearest rounding gives 0.99). At 640x480: conv1b, conv2a, conv2b 4, conv3a, conv3b 2, the
/// rest 1 (bench/quant_sim.py hessian_stride, the same rule).
int hessian_stride(int h, int w, int planes, std::size_t k);

}  // namespace superpoint_rt::backend::detail
