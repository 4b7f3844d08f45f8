// Post-processing: public entry points (argument checks + run-time dispatch) and the plain scalar references.
#include "post/post.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "post/kernels.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::post {

namespace detail {

std::size_t nms_work_floats(int h, int w, int radius) {
  const auto hw = static_cast<std::size_t>(h) * static_cast<std::size_t>(w);
  const auto words = static_cast<std::size_t>(h) * ((static_cast<std::size_t>(w) + 63) / 64);
  const auto r = static_cast<std::size_t>(radius);
  // Layout of nms_separable.inl: four bit maps (2 floats per uint64 word), the horizontal-pass map, 16 masked
  // rows, the vertical pass (block of 2r+1 chunk rows, prefix row, -inf row; chunks of 128 columns), the
  // horizontal strip buffers (32 * (w + 2r)) and one byte per row (h floats: ample).
  return 8 * words + hw + 16 * static_cast<std::size_t>(w) + (2 * r + 3) * 128 +
         32 * (static_cast<std::size_t>(w) + 2 * r) + static_cast<std::size_t>(h);
}

const Kernels& best_kernels() {
  static const Kernels* const k = [] {
    switch (util::best_isa()) {
      case util::Isa::Avx512: return &kAvx512Kernels;
      case util::Isa::Avx2: return &kAvx2Kernels;
      case util::Isa::Scalar: break;
    }
    return &kScalarKernels;
  }();
  return *k;
}

std::vector<const Kernels*> available_kernels() {
  std::vector<const Kernels*> v{&kScalarKernels};
  const util::Isa best = util::best_isa();
  if (best == util::Isa::Avx2 || best == util::Isa::Avx512) v.push_back(&kAvx2Kernels);
  if (best == util::Isa::Avx512) v.push_back(&kAvx512Kernels);
  return v;
}

Taps descriptor_taps(const float* desc, int hc, int wc, int dim, const Keypoint& kp) noexcept {
  // HF _sample_descriptors (scale 8), float32 step by step as PyTorch evaluates it:
  //   k = kp - scale/2 + 0.5  -> (x - 4) + 0.5 (exact);  k /= [8*wc - 4.5, 8*hc - 4.5] (IEEE divide);  g = k*2 - 1.
  const float div_x = static_cast<float>(8 * static_cast<std::int64_t>(wc)) - 4.5f;
  const float div_y = static_cast<float>(8 * static_cast<std::int64_t>(hc)) - 4.5f;
  const float kx = ((static_cast<float>(kp.x) - 4.0f) + 0.5f) / div_x;
  const float ky = ((static_cast<float>(kp.y) - 4.0f) + 0.5f) / div_y;
  const float gx = kx * 2.0f - 1.0f;
  const float gy = ky * 2.0f - 1.0f;
  // grid_sampler_unnormalize, align_corners=True. The CPU vector kernel computes (g + 1) * ((W - 1) / 2); the
  // scalar form ((g + 1) / 2) * (W - 1) rounds identically because both halvings are exact.
  const float ix = (gx + 1.0f) * (static_cast<float>(wc - 1) / 2.0f);
  const float iy = (gy + 1.0f) * (static_cast<float>(hc - 1) / 2.0f);
  const float x0 = std::floor(ix);
  const float y0 = std::floor(iy);
  // ApplyGridSample<Bilinear>: w = ix - x0, e = 1 - w, n = iy - y0, s = 1 - n; nw = s*e, ne = s*w, sw = n*e, se = n*w.
  const float we = ix - x0, e = 1.0f - we;
  const float n = iy - y0, s = 1.0f - n;
  Taps t{};
  t.weight[0] = s * e;
  t.weight[1] = s * we;
  t.weight[2] = n * e;
  t.weight[3] = n * we;
  // Zeros padding, decided per corner on the float position (no int conversion of an out-of-range value).
  const auto in_x = [wc](float x) { return x >= 0.0f && x <= static_cast<float>(wc - 1); };
  const auto in_y = [hc](float y) { return y >= 0.0f && y <= static_cast<float>(hc - 1); };
  const auto at = [&](float x, float y) -> const float* {
    if (!in_x(x) || !in_y(y)) return nullptr;
    const auto cell = static_cast<std::ptrdiff_t>(y) * wc + static_cast<std::ptrdiff_t>(x);
    return desc + cell * dim;
  };
  t.corner[0] = at(x0, y0);
  t.corner[1] = at(x0 + 1.0f, y0);
  t.corner[2] = at(x0, y0 + 1.0f);
  t.corner[3] = at(x0 + 1.0f, y0 + 1.0f);
  return t;
}

void sample_taps_reference(const float* const corner[4], const float weight[4], int dim, float* out) noexcept {
  for (int c = 0; c < dim; ++c) {
    float v[4];
    for (int q = 0; q < 4; ++q) v[q] = corner[q] != nullptr ? corner[q][c] : 0.0f;
    float acc = v[0] * weight[0];
    acc = std::fma(v[1], weight[1], acc);
    acc = std::fma(v[2], weight[2], acc);
    acc = std::fma(v[3], weight[3], acc);
    out[c] = acc;
  }
}

float exp_nonpositive_reference(float x) noexcept {
  if (x < -87.3365402f) return 0.0f;                          // below FLT_MIN: flushed (the SIMD kernels do the same)
  const float fx = std::nearbyint(x * 1.44269504088896341f);  // round half to even, as _MM_FROUND_TO_NEAREST_INT
  float r = std::fma(-fx, 0.693359375f, x);                   // Cephes' two-constant ln 2 range reduction
  r = std::fma(-fx, -2.12194440e-4f, r);
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = std::fma(y, r, 1.3981999507e-3f);
  y = std::fma(y, r, 8.3334519073e-3f);
  y = std::fma(y, r, 4.1665795894e-2f);
  y = std::fma(y, r, 1.6666665459e-1f);
  y = std::fma(y, r, 5.0000001201e-1f);
  y = std::fma(y, z, r);
  y = y + 1.0f;
  const auto bits = static_cast<std::uint32_t>(static_cast<int>(fx) + 127) << 23;  // 2^fx, fx in [-126, 0]
  return y * std::bit_cast<float>(bits);
}

float l2_sum_reference(const float* v, int dim) noexcept {
  float s[16] = {};
  for (int c = 0; c < dim; ++c) s[c % 16] += v[c] * v[c];
  for (int half = 8; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) s[l] += s[l + half];
  return s[0];
}

}  // namespace detail

namespace {

using detail::best_kernels;

[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorKind::InvalidArgument, msg);
}

void check_size(const char* fn, const char* what, std::int64_t v) {
  if (v < 0) bad(std::string(fn) + ": " + what + " = " + std::to_string(v) + " must be >= 0");
}

void check_nms(int h, int w, int radius) {
  check_size("simple_nms", "height", h);
  check_size("simple_nms", "width", w);
  if (radius < 0) bad("simple_nms: nms_radius = " + std::to_string(radius) + " must be >= 0");
}

// Strictly better in the output order: higher score, then lower raster index (y, then x).
bool better(const Keypoint& a, const Keypoint& b) noexcept {
  if (a.score != b.score) return a.score > b.score;
  if (a.y != b.y) return a.y < b.y;
  return a.x < b.x;
}

// The max_keypoints best (all for -1) in the output order. The k best in linear time, then only those are sorted.
// `better` is a strict total order (positions are unique and NaN never passes the threshold), so the result does
// not depend on the algorithm.
void best_first(std::vector<Keypoint>& kps, int max_keypoints) {
  if (max_keypoints >= 0 && static_cast<std::size_t>(max_keypoints) < kps.size()) {
    std::nth_element(kps.begin(), kps.begin() + max_keypoints, kps.end(), better);
    kps.resize(static_cast<std::size_t>(max_keypoints));
  }
  std::sort(kps.begin(), kps.end(), better);
}

// Rows [y0, y1) and columns [x0, x1) that survive border removal (HF: b <= y < H - b, b <= x < W - b).
struct Region {
  int x0, x1, y0, y1;
};
Region inside_border(int h, int w, int border) {
  const auto clampi = [](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    return static_cast<int>(std::clamp(v, lo, hi));
  };
  return {clampi(border, 0, w), clampi(static_cast<std::int64_t>(w) - border, 0, w), clampi(border, 0, h),
          clampi(static_cast<std::int64_t>(h) - border, 0, h)};
}

}  // namespace

// ---- Step 6: scores ---------------------------------------------------------------------------------------------

void scores_from_logits(const float* logits, int hc, int wc, float* heat) {
  check_size("scores_from_logits", "hc", hc);
  check_size("scores_from_logits", "wc", wc);
  if (hc == 0 || wc == 0) return;
  best_kernels().scores(logits, hc, wc, heat);
}

void scores_from_logits_reference(const float* logits, int hc, int wc, float* heat) {
  const std::ptrdiff_t w = static_cast<std::ptrdiff_t>(wc) * 8;
  for (int i = 0; i < hc; ++i) {
    for (int j = 0; j < wc; ++j) {
      const float* x = logits + (static_cast<std::ptrdiff_t>(i) * wc + j) * 65;
      // PyTorch _vec_softmax: max, exp(x - max) summed in channel order, then a division by the sum (the golden
      // score maps match a division far better than a multiply by 1/sum).
      float m = x[0];
      for (int c = 1; c < 65; ++c) m = x[c] > m ? x[c] : m;
      float e[65];
      float sum = 0.0f;
      for (int c = 0; c < 65; ++c) {
        e[c] = detail::exp_nonpositive_reference(x[c] - m);
        sum += e[c];
      }
      // Channel 64 (dustbin) is dropped; channel 8r+s goes to heat[8i+r][8j+s].
      for (int r = 0; r < 8; ++r)
        for (int s = 0; s < 8; ++s) heat[(8 * static_cast<std::ptrdiff_t>(i) + r) * w + 8 * j + s] = e[8 * r + s] / sum;
    }
  }
}

// ---- Step 7: NMS ------------------------------------------------------------------------------------------------

void simple_nms(const float* heat, int h, int w, int radius, float* out, NmsScratch& scratch) {
  simple_nms_above(heat, h, w, radius, -std::numeric_limits<float>::infinity(), out, scratch);
}

void simple_nms_above(const float* heat, int h, int w, int radius, float threshold, float* out, NmsScratch& scratch) {
  check_nms(h, w, radius);
  // Below 0 (or NaN) the shortcut's guarantee (pixels outside A come out <= threshold) could fail: full map.
  if (!(threshold >= 0.0f)) threshold = -std::numeric_limits<float>::infinity();
  if (h == 0 || w == 0) return;
  // A window wider than the map sees the whole map: larger radii give the same result and would only waste work.
  const int r = std::min(radius, std::max(h, w));
  if (r == 0) {
    // max_pool with a 1x1 window is the identity: every cell is its own maximum and survives.
    if (out != heat) std::memmove(out, heat, static_cast<std::size_t>(h) * static_cast<std::size_t>(w) * sizeof(float));
    return;
  }
  scratch.work.resize(detail::nms_work_floats(h, w, r));
  best_kernels().nms(heat, h, w, r, threshold, out, scratch.work.data());
}

void simple_nms_reference(const float* heat, int h, int w, int radius, float* out) {
  check_nms(h, w, radius);
  if (h == 0 || w == 0) return;
  const std::size_t hw = static_cast<std::size_t>(h) * static_cast<std::size_t>(w);
  // max_pool2d(kernel 2r+1, stride 1, padding r): PyTorch's CPU kernel starts from -inf and takes
  // `val > maxval || isnan(val)` over the window; padded cells never win.
  const auto max_pool = [&](const std::vector<float>& in, std::vector<float>& po) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        float m = -std::numeric_limits<float>::infinity();
        for (int yy = std::max(0, y - radius); yy <= std::min(h - 1, y + radius); ++yy)
          for (int xx = std::max(0, x - radius); xx <= std::min(w - 1, x + radius); ++xx) {
            const float v = in[static_cast<std::size_t>(yy) * w + xx];
            if (v > m || std::isnan(v)) m = v;
          }
        po[static_cast<std::size_t>(y) * w + x] = m;
      }
    }
  };
  const std::vector<float> scores(heat, heat + hw);
  std::vector<float> pooled(hw), supp_scores(hw), maskf(hw);
  std::vector<std::uint8_t> max_mask(hw), supp_mask(hw);
  max_pool(scores, pooled);
  for (std::size_t i = 0; i < hw; ++i) max_mask[i] = scores[i] == pooled[i];
  for (int iter = 0; iter < 2; ++iter) {
    for (std::size_t i = 0; i < hw; ++i) maskf[i] = max_mask[i] ? 1.0f : 0.0f;
    max_pool(maskf, pooled);
    for (std::size_t i = 0; i < hw; ++i) supp_mask[i] = pooled[i] > 0.0f;
    for (std::size_t i = 0; i < hw; ++i) supp_scores[i] = supp_mask[i] ? 0.0f : scores[i];
    max_pool(supp_scores, pooled);
    for (std::size_t i = 0; i < hw; ++i) max_mask[i] = max_mask[i] || (supp_scores[i] == pooled[i] && !supp_mask[i]);
  }
  for (std::size_t i = 0; i < hw; ++i) out[i] = max_mask[i] ? scores[i] : 0.0f;
}

// ---- Steps 8-10: threshold, border, top-k ----------------------------------------------------------------------

void select_keypoints(const float* nms, int h, int w, float threshold, int border, int max_keypoints,
                      std::vector<Keypoint>& out) {
  check_size("select_keypoints", "height", h);
  check_size("select_keypoints", "width", w);
  if (max_keypoints < -1)
    bad("select_keypoints: max_keypoints = " + std::to_string(max_keypoints) + " must be -1 (all) or >= 0");
  out.clear();
  const Region reg = inside_border(h, w, border);
  const auto collect = best_kernels().collect;
  constexpr int kChunk = 1024;
  int xs[kChunk];
  for (int y = reg.y0; y < reg.y1; ++y) {
    const float* row = nms + static_cast<std::ptrdiff_t>(y) * w;
    for (int xa = reg.x0; xa < reg.x1; xa += kChunk) {
      const int n = collect(row, xa, std::min(reg.x1, xa + kChunk), threshold, xs);
      for (int i = 0; i < n; ++i) out.push_back(Keypoint{xs[i], y, row[xs[i]]});
    }
  }
  best_first(out, max_keypoints);
}

void nms_select_keypoints(const float* heat, int h, int w, int radius, float threshold, int border, int max_keypoints,
                          std::vector<Keypoint>& out, NmsScratch& scratch) {
  check_nms(h, w, radius);
  if (max_keypoints < -1)
    bad("select_keypoints: max_keypoints = " + std::to_string(max_keypoints) + " must be -1 (all) or >= 0");
  const int r = std::min(radius, std::max(h, w));
  if (h == 0 || w == 0 || r == 0 || !(threshold >= 0.0f)) {  // no NMS work, or the full map is needed
    scratch.map.resize(static_cast<std::size_t>(h) * static_cast<std::size_t>(w));
    simple_nms(heat, h, w, radius, scratch.map.data(), scratch);
    select_keypoints(scratch.map.data(), h, w, threshold, border, max_keypoints, out);
    return;
  }
  scratch.work.resize(detail::nms_work_floats(h, w, r));
  best_kernels().nms(heat, h, w, r, threshold, nullptr, scratch.work.data());
  const std::size_t nw = (static_cast<std::size_t>(w) + 63) / 64;
  const auto* m = reinterpret_cast<const std::uint64_t*>(scratch.work.data());
  const std::uint64_t* a = m + 3 * static_cast<std::size_t>(h) * nw;
  // simple_nms_above's map is m ? S : 0 and select takes S > threshold, i.e. the bits of m & a, in raster order.
  out.clear();
  const Region reg = inside_border(h, w, border);
  for (int y = reg.y0; y < reg.y1; ++y) {
    const std::size_t row = static_cast<std::size_t>(y) * nw;
    for (std::size_t t = static_cast<std::size_t>(reg.x0) / 64; t * 64 < static_cast<std::size_t>(reg.x1); ++t) {
      std::uint64_t bits = m[row + t] & a[row + t];
      while (bits != 0) {
        const int x = static_cast<int>(64 * t) + std::countr_zero(bits);
        bits &= bits - 1;
        if (x >= reg.x0 && x < reg.x1) out.push_back(Keypoint{x, y, heat[static_cast<std::ptrdiff_t>(y) * w + x]});
      }
    }
  }
  best_first(out, max_keypoints);
}

void select_keypoints_reference(const float* nms, int h, int w, float threshold, int border, int max_keypoints,
                                std::vector<Keypoint>& out) {
  check_size("select_keypoints", "height", h);
  check_size("select_keypoints", "width", w);
  if (max_keypoints < -1)
    bad("select_keypoints: max_keypoints = " + std::to_string(max_keypoints) + " must be -1 (all) or >= 0");
  out.clear();
  // HF: nonzero(S > threshold) in raster order, then the border mask, then the order (a stable sort by
  // descending score keeps raster order among equal scores), then the first k.
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const float v = nms[static_cast<std::ptrdiff_t>(y) * w + x];
      if (!(v > threshold)) continue;
      const std::int64_t b = border;
      if (y >= b && y < h - b && x >= b && x < w - b) out.push_back(Keypoint{x, y, v});
    }
  std::stable_sort(out.begin(), out.end(), [](const Keypoint& a, const Keypoint& b) { return a.score > b.score; });
  if (max_keypoints >= 0 && static_cast<std::size_t>(max_keypoints) < out.size())
    out.resize(static_cast<std::size_t>(max_keypoints));
}

// ---- Step 11: descriptors --------------------------------------------------------------------------------------

void normalize_cells(float* desc, int cells, int dim) {
  check_size("normalize_cells", "cells", cells);
  check_size("normalize_cells", "dim", dim);
  if (cells == 0 || dim == 0) return;
  best_kernels().normalize(desc, cells, dim);
}

void normalize_cells_reference(float* desc, int cells, int dim) {
  for (int k = 0; k < cells; ++k) {
    float* v = desc + static_cast<std::ptrdiff_t>(k) * dim;
    // F.normalize(p=2): v / clamp_min(||v||_2, 1e-12), a true division per element.
    const float norm = std::max(std::sqrt(detail::l2_sum_reference(v, dim)), 1e-12f);
    for (int c = 0; c < dim; ++c) v[c] = v[c] / norm;
  }
}

void normalize_sampled_cells(float* desc, int hc, int wc, int dim, const Keypoint* kps, int n,
                             std::vector<std::uint8_t>& mark) {
  check_size("normalize_sampled_cells", "hc", hc);
  check_size("normalize_sampled_cells", "wc", wc);
  check_size("normalize_sampled_cells", "dim", dim);
  check_size("normalize_sampled_cells", "keypoint count", n);
  if (n == 0 || dim == 0) return;
  const std::size_t cells = static_cast<std::size_t>(hc) * static_cast<std::size_t>(wc);
  const detail::Kernels& k = best_kernels();
  // With 4 taps per keypoint, 4 * n >= cells usually touches nearly every cell: marking would cost more than it saves
  // (bench_host: 6349 keypoints, 0.85 ms against 0.73 ms for all 4800 cells; 1024 keypoints, 0.61 ms).
  if (4 * static_cast<std::size_t>(n) >= cells) {
    k.normalize(desc, static_cast<int>(cells), dim);
    return;
  }
  mark.assign(cells, 0);
  for (int i = 0; i < n; ++i) {
    const detail::Taps t = detail::descriptor_taps(desc, hc, wc, dim, kps[i]);
    for (const float* c : t.corner)
      if (c != nullptr) mark[static_cast<std::size_t>((c - desc) / dim)] = 1;
  }
  // Each cell is normalised on its own (every kernel handles cells independently), so runs of marked cells go to
  // the kernel as one call and the bits are those of normalize_cells.
  std::size_t c = 0;
  while (c < cells) {
    if (!mark[c]) {
      ++c;
      continue;
    }
    std::size_t end = c + 1;
    while (end < cells && mark[end]) ++end;
    k.normalize(desc + static_cast<std::ptrdiff_t>(c) * dim, static_cast<int>(end - c), dim);
    c = end;
  }
}

void sample_descriptors(const float* desc, int hc, int wc, int dim, const Keypoint* kps, int n, float* out) {
  check_size("sample_descriptors", "hc", hc);
  check_size("sample_descriptors", "wc", wc);
  check_size("sample_descriptors", "dim", dim);
  check_size("sample_descriptors", "keypoint count", n);
  if (n == 0 || dim == 0) return;
  const detail::Kernels& k = best_kernels();
  for (int i = 0; i < n; ++i) {
    const detail::Taps t = detail::descriptor_taps(desc, hc, wc, dim, kps[i]);
    k.sample_one(t.corner, t.weight, dim, out + static_cast<std::ptrdiff_t>(i) * dim);
  }
  k.normalize(out, n, dim);
}

void sample_descriptors_reference(const float* desc, int hc, int wc, int dim, const Keypoint* kps, int n, float* out) {
  check_size("sample_descriptors", "hc", hc);
  check_size("sample_descriptors", "wc", wc);
  check_size("sample_descriptors", "dim", dim);
  check_size("sample_descriptors", "keypoint count", n);
  for (int i = 0; i < n; ++i) {
    const detail::Taps t = detail::descriptor_taps(desc, hc, wc, dim, kps[i]);
    detail::sample_taps_reference(t.corner, t.weight, dim, out + static_cast<std::ptrdiff_t>(i) * dim);
  }
  normalize_cells_reference(out, n, dim);
}

const char* post_kernel_name() noexcept {
  return util::to_string(best_kernels().isa);
}

}  // namespace superpoint_rt::post
