// Baseline x86-64 (SSE2) kernel table: the plain references where they are already the natural scalar code
// (softmax, normalisation, sampling), plus the separable NMS and the threshold scan.
#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "post/kernels.hpp"

namespace superpoint_rt::post::detail {
namespace {

struct RowOps {
  static void max_rows(float* o, const float* a, const float* b, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(o + i, _mm_max_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
    for (; i < n; ++i) o[i] = a[i] > b[i] ? a[i] : b[i];  // maxps semantics
  }
  static void mask_row(const float* s, const std::uint64_t* bits, int n, float* out) {
    for (int i = 0; i < n; ++i) out[i] = ((bits[i / 64] >> (i % 64)) & 1u) != 0 ? 0.0f : s[i];
  }
  static void max_eq_bits(const float* a, const float* b, const float* s, int n, std::uint64_t* bits) {
    for (int t = 0; t < (n + 63) / 64; ++t) {
      std::uint64_t word = 0;
      for (int i = 64 * t; i < n && i < 64 * t + 64; ++i) {
        const float q = a[i] > b[i] ? a[i] : b[i];
        word |= static_cast<std::uint64_t>(s[i] == q) << (i % 64);
      }
      bits[t] = word;
    }
  }
  static constexpr int kLanes = 1;
  static bool any_greater(const float* row, int n, float v) {
    for (int i = 0; i < n; ++i)
      if (row[i] > v) return true;
    return false;
  }
  static void gt_bits(const float* s, float t, int n, std::uint64_t* bits) {
    for (int q = 0; q < (n + 63) / 64; ++q) bits[q] = 0;
    for (int i = 0; i < n; ++i) bits[i / 64] |= static_cast<std::uint64_t>(s[i] > t) << (i % 64);
  }
  static void select_row(float* out, const float* s, const std::uint64_t* bits, int n) {
    for (int i = 0; i < n; ++i) out[i] = ((bits[i / 64] >> (i % 64)) & 1u) != 0 ? s[i] : 0.0f;
  }
  static void horizontal(const float* in, int h, int w, int r, float* out, float* strip);
};

#include "post/nms_separable.inl"

void RowOps::horizontal(const float* in, int h, int w, int r, float* out, float* strip) {
  horizontal_running_max_rows(in, 0, h, w, r, out, strip, strip + w + 2 * r);
}

void nms_scalar(const float* heat, int h, int w, int radius, float threshold, float* out, float* work) {
  simple_nms_separable(heat, h, w, radius, threshold, out, work);
}

int collect_scalar(const float* row, int x0, int x1, float threshold, int* xs) {
  int n = 0;
  for (int x = x0; x < x1; ++x)
    if (row[x] > threshold) xs[n++] = x;
  return n;
}

void normalize_scalar(float* v, int n, int dim) {
  normalize_cells_reference(v, n, dim);
}

void sample_one_scalar(const float* const corner[4], const float weight[4], int dim, float* out) {
  sample_taps_reference(corner, weight, dim, out);
}

}  // namespace

extern const Kernels kScalarKernels;
const Kernels kScalarKernels = {
    util::Isa::Scalar, scores_from_logits_reference, nms_scalar, collect_scalar, normalize_scalar, sample_one_scalar};

}  // namespace superpoint_rt::post::detail
