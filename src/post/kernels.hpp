// Internal: the per-instruction-set kernels behind post.hpp, and the scalar helpers they share.
//
// Each table is implemented in its own translation unit: post_fast.cpp (baseline x86-64, SSE2), post_avx2.cpp and
// post_avx512.cpp (compiled with those ISA flags only, cmake/Warnings.cmake). The ISA files take and return raw
// pointers only and instantiate no std:: templates: an inline/template function emitted by an AVX-512 file could
// otherwise be merged by the linker with the baseline copy and run on a CPU without AVX-512. Buffers are
// therefore sized by the baseline caller (post.cpp).
//
// All tables produce the same bits as the references (tests check this), `scores` included: every level uses the
// same exp polynomial (exp_nonpositive_reference) and the same summation order.
#pragma once

#include <cstddef>
#include <vector>

#include "post/post.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::post::detail {

/// Floats of work space the separable NMS needs for an h x w map at radius r (r >= 1).
std::size_t nms_work_floats(int h, int w, int radius);

struct Kernels {
  util::Isa isa;
  /// scores_from_logits (hc, wc >= 1).
  void (*scores)(const float* logits, int hc, int wc, float* heat);
  /// simple_nms for radius >= 1 (threshold -inf), or simple_nms_above(threshold); `work` holds
  /// nms_work_floats(h, w, radius) floats. With out == nullptr no map is written; `work` then begins with the
  /// final max-mask bits (h rows of (w + 63) / 64 uint64 words), followed by two more such maps and the
  /// above-threshold bits (the fourth map).
  void (*nms)(const float* heat, int h, int w, int radius, float threshold, float* out, float* work);
  /// Writes the x in [x0, x1) with row[x] > threshold, ascending, to xs; returns their count (<= x1 - x0).
  int (*collect)(const float* row, int x0, int x1, float threshold, int* xs);
  /// F.normalize of n vectors of `dim` floats in place, sum of squares in the canonical order (l2_sum_reference).
  void (*normalize)(float* v, int n, int dim);
  /// One bilinear grid_sample tap set over `dim` channels: out = ((v0*w0 fma v1*w1) fma v2*w2) fma v3*w3;
  /// a null corner reads zeros (padding_mode="zeros"). No normalisation.
  void (*sample_one)(const float* const corner[4], const float weight[4], int dim, float* out);
};

// Constant-initialised tables, one per translation unit (post_scalar.cpp, post_avx2.cpp, post_avx512.cpp). Use
// the AVX ones only where util::cpu_features() allows them (available_kernels() checks).
extern const Kernels kScalarKernels;
extern const Kernels kAvx2Kernels;
extern const Kernels kAvx512Kernels;

/// The table for util::best_isa() (SUPERPOINT_RT_ISA caps it).
const Kernels& best_kernels();
/// Every table this CPU can run (after the SUPERPOINT_RT_ISA cap), scalar first; for tests and benchmarks.
std::vector<const Kernels*> available_kernels();

/// Bilinear taps of one keypoint for HF _sample_descriptors (docs/ALGORITHM.md §3.7, §4). Corner order nw, ne,
/// sw, se; a corner outside the hc x wc map has a null pointer (zeros padding).
struct Taps {
  const float* corner[4];
  float weight[4];
};
Taps descriptor_taps(const float* desc, int hc, int wc, int dim, const Keypoint& kp) noexcept;

/// expf for x <= 0 as every softmax kernel computes it: Cephes' range reduction (fma) and degree-6 polynomial,
/// ~1 ulp from the correctly rounded value, and 0 below -87.3365 (where expf is denormal, < 1.2e-38). It is a
/// closer model of PyTorch's Sleef expf than glibc's expf: the golden score maps match ~99% of bits instead of ~90%.
float exp_nonpositive_reference(float x) noexcept;

/// The reference channel loop of one tap set (Kernels::sample_one): acc = v_nw * w_nw, then std::fma with ne, sw,
/// se in that order (docs/ALGORITHM.md §4).
void sample_taps_reference(const float* const corner[4], const float weight[4], int dim, float* out) noexcept;

/// The canonical order of the sum of squares used by every normalize kernel, so that all ISA levels give the
/// same bits: 16 partial sums, channel c going to partial c % 16 in increasing c (plain multiply, then add), then
/// the pairwise tree s[i] += s[i + 8], s[i] += s[i + 4], s[i] += s[i + 2], s[0] + s[1]. (PyTorch's own order is
/// unspecified; this is the natural AVX-512 order.)
float l2_sum_reference(const float* v, int dim) noexcept;

}  // namespace superpoint_rt::post::detail
