// Baseline x86-64 (SSE2) kernel table: the plain references where they are already the natural scalar code
// (softmax, normalisation, sampling), plus the separable NMS and the threshold scan.
#include <xmmintrin.h>

#include <cstddef>
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
  static void eq_mask(float* m, const float* s, const float* q, std::ptrdiff_t n) {
    for (std::ptrdiff_t i = 0; i < n; ++i) m[i] = s[i] == q[i] ? 1.0f : 0.0f;
  }
  static void suppress(float* ss, const float* d, const float* s, std::ptrdiff_t n) {
    for (std::ptrdiff_t i = 0; i < n; ++i) ss[i] = d[i] > 0.0f ? 0.0f : s[i];
  }
  static void update(float* m, const float* ss, const float* q, const float* d, std::ptrdiff_t n) {
    for (std::ptrdiff_t i = 0; i < n; ++i) m[i] = (m[i] != 0.0f || (ss[i] == q[i] && !(d[i] > 0.0f))) ? 1.0f : 0.0f;
  }
  static void select(float* out, const float* m, const float* s, std::ptrdiff_t n) {
    for (std::ptrdiff_t i = 0; i < n; ++i) out[i] = m[i] != 0.0f ? s[i] : 0.0f;
  }
  static void horizontal(const float* in, int h, int w, int r, float* out, float* strip);
};

#include "post/nms_separable.inl"

void RowOps::horizontal(const float* in, int h, int w, int r, float* out, float* strip) {
  horizontal_running_max_rows(in, 0, h, w, r, out, strip, strip + w + 2 * r);
}

void nms_scalar(const float* heat, int h, int w, int radius, float* out, float* work) {
  simple_nms_separable(heat, h, w, radius, out, work);
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
