// Float32 plane resizes matching OpenCV 4.6 cv::resize (INTER_AREA, INTER_LINEAR) and kornia's antialiased
// resize; see resize_float.hpp. The OpenCV functions named in comments are those of
// modules/imgproc/src/resize.cpp; every float/double expression is written in OpenCV's order and types, and the
// project builds with -ffp-contract=off, so no multiply-add is fused (OpenCV's SSE2 baseline has no FMA either).
#include "image/resize_float.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::image {
namespace {

std::string size_text(int w, int h) {
  return std::to_string(w) + "x" + std::to_string(h);
}

// Sources of any size >= 1 x 1 (a 17000 x 300 panorama is an ordinary input of hloc and LightGlue); destinations up
// to kMaxResizeFloatSide.
void check_side(const char* fn, const char* what, int w, int h, int max_side) {
  if (w < 1 || h < 1 || w > max_side || h > max_side)
    throw Error(ErrorKind::InvalidArgument, std::string(fn) + ": " + what + " size " + size_text(w, h) +
                                                " is out of range (each side must be 1.." + std::to_string(max_side) +
                                                ")");
}

void check_args(const char* fn, const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, const float* dst,
                int dst_w, int dst_h, std::ptrdiff_t dst_stride) {
  check_side(fn, "source", src_w, src_h, std::numeric_limits<int>::max());
  check_side(fn, "destination", dst_w, dst_h, kMaxResizeFloatSide);
  if (src_stride < src_w || dst_stride < dst_w)
    throw Error(ErrorKind::InvalidArgument, std::string(fn) + ": row stride " + std::to_string(src_stride) + " / " +
                                                std::to_string(dst_stride) + " is below the width " +
                                                std::to_string(src_w) + " / " + std::to_string(dst_w));
  if (src == nullptr || dst == nullptr)
    throw Error(ErrorKind::InvalidArgument, std::string(fn) + ": null plane pointer");
}

void copy_plane(const float* src, int w, int h, std::ptrdiff_t src_stride, float* dst, std::ptrdiff_t dst_stride) {
  for (int y = 0; y < h; ++y)
    std::memcpy(dst + y * dst_stride, src + y * src_stride, static_cast<std::size_t>(w) * sizeof(float));
}

template <typename T>
void grow(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

// cvFloor / cvCeil / cvRound (saturate_cast<int>(double)) for values well inside int range.
int cv_floor(double v) {
  const int i = static_cast<int>(v);
  return i - (static_cast<double>(i) > v ? 1 : 0);
}
int cv_floor(float v) {
  const int i = static_cast<int>(v);
  return i - (static_cast<float>(i) > v ? 1 : 0);
}
int cv_ceil(double v) {
  const int i = static_cast<int>(v);
  return i + (static_cast<double>(i) < v ? 1 : 0);
}
int cv_round(double v) {
  return static_cast<int>(std::lrint(v));
}

// What hal::resize decides from the sizes (cv::resize passes inv_scale = dsize / ssize in double; hal::resize
// takes scale = 1 / inv_scale, not ssize / dsize).
struct Cv2Plan {
  double inv_scale_x, inv_scale_y, scale_x, scale_y;
  int iscale_x, iscale_y;
  bool is_area_fast;
};

Cv2Plan cv2_plan(int src_w, int src_h, int dst_w, int dst_h) {
  Cv2Plan p{};
  p.inv_scale_x = static_cast<double>(dst_w) / src_w;
  p.inv_scale_y = static_cast<double>(dst_h) / src_h;
  p.scale_x = 1. / p.inv_scale_x;
  p.scale_y = 1. / p.inv_scale_y;
  p.iscale_x = cv_round(p.scale_x);
  p.iscale_y = cv_round(p.scale_y);
  p.is_area_fast = std::abs(p.scale_x - p.iscale_x) < DBL_EPSILON && std::abs(p.scale_y - p.iscale_y) < DBL_EPSILON;
  return p;
}

// resizeAreaFast_<float, float, ResizeAreaFastVec_SIMD_32f>: integer factors. When is_area_fast holds the source
// is exactly iscale x dst (a ratio src / dst that is not an integer is at least 1 / dst away from one, far more than
// DBL_EPSILON for destinations <= kMaxResizeFloatSide), so OpenCV's partial-cell border loop never runs and is not
// reproduced.
void area_fast(const float* src, std::ptrdiff_t src_stride, float* dst, int dst_w, int dst_h, std::ptrdiff_t dst_stride,
               int ix, int iy, FloatResizeScratch& s) {
  const int area = ix * iy;
  const float scale = 1.f / static_cast<float>(area);
  grow(s.area_ofs, static_cast<std::size_t>(area));
  std::ptrdiff_t* ofs = s.area_ofs.data();  // 64-bit: iy rows of a wide source pass 2^31 floats
  for (int sy = 0, k = 0; sy < iy; ++sy)
    for (int sx = 0; sx < ix; ++sx) ofs[k++] = sy * src_stride + sx;
  // ResizeAreaFastVec_SIMD_32f (2x2, one channel): 4-lane SSE2 vectors compute ((a + b) + (c + d)) * 0.25 for the
  // first multiple of 4 outputs; the scalar loop below adds the taps left to right in groups of 4
  // (CV_ENABLE_UNROLLED), a different grouping, for the rest.
  const bool simd_2x2 = ix == 2 && iy == 2;
  for (int dy = 0; dy < dst_h; ++dy) {
    float* D = dst + dy * dst_stride;
    const float* row = src + static_cast<std::ptrdiff_t>(dy) * iy * src_stride;
    int dx = 0;
    if (simd_2x2) {
      const float* S0 = row;
      const float* S1 = row + src_stride;
      for (; dx <= dst_w - 4; dx += 4)
        for (int l = 0; l < 4; ++l) {
          const int i = 2 * (dx + l);
          D[dx + l] = ((S0[i] + S0[i + 1]) + (S1[i] + S1[i + 1])) * 0.25f;
        }
    }
    for (; dx < dst_w; ++dx) {
      const float* S = row + static_cast<std::ptrdiff_t>(dx) * ix;
      float sum = 0;
      int k = 0;
      for (; k <= area - 4; k += 4) sum += S[ofs[k]] + S[ofs[k + 1]] + S[ofs[k + 2]] + S[ofs[k + 3]];
      for (; k < area; ++k) sum += S[ofs[k]];
      D[dx] = sum * scale;
    }
  }
}

// computeResizeAreaTab (cn = 1): the taps of each destination cell, in double as OpenCV, weights rounded to float.
void area_tab(int ssize, int dsize, double scale, std::vector<AreaTap>& tab) {
  tab.clear();
  for (int dx = 0; dx < dsize; ++dx) {
    const double fsx1 = dx * scale;
    const double fsx2 = fsx1 + scale;
    const double cellWidth = std::min(scale, ssize - fsx1);
    int sx1 = cv_ceil(fsx1), sx2 = cv_floor(fsx2);
    sx2 = std::min(sx2, ssize - 1);
    sx1 = std::min(sx1, sx2);
    if (sx1 - fsx1 > 1e-3) tab.push_back({sx1 - 1, dx, static_cast<float>((sx1 - fsx1) / cellWidth)});
    for (int sx = sx1; sx < sx2; ++sx) tab.push_back({sx, dx, static_cast<float>(1.0 / cellWidth)});
    if (fsx2 - sx2 > 1e-3)
      tab.push_back({sx2, dx, static_cast<float>(std::min(std::min(fsx2 - sx2, 1.), cellWidth) / cellWidth)});
  }
}

// resizeArea_<float, float> (ResizeArea_Invoker over all rows), literally: for every (source row, weight) of the
// vertical table the source row is resampled into buf by scattering the horizontal taps, then weighted into sum;
// sum is written out when the destination row changes.
void area_general_reference(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                            int dst_h, std::ptrdiff_t dst_stride, const Cv2Plan& p, FloatResizeScratch& s) {
  area_tab(src_w, dst_w, p.scale_x, s.xtab);
  area_tab(src_h, dst_h, p.scale_y, s.ytab);
  grow(s.buf, static_cast<std::size_t>(dst_w));
  grow(s.sum, static_cast<std::size_t>(dst_w));
  float* buf = s.buf.data();
  float* sum = s.sum.data();
  const AreaTap* xtab = s.xtab.data();
  const int xtab_size = static_cast<int>(s.xtab.size());
  for (int dx = 0; dx < dst_w; ++dx) sum[dx] = 0.f;
  int prev_dy = s.ytab.front().di;
  for (const AreaTap& yt : s.ytab) {
    const float beta = yt.alpha;
    const int dy = yt.di;
    const float* S = src + yt.si * src_stride;
    for (int dx = 0; dx < dst_w; ++dx) buf[dx] = 0.f;
    for (int k = 0; k < xtab_size; ++k) buf[xtab[k].di] += S[xtab[k].si] * xtab[k].alpha;
    if (dy != prev_dy) {
      std::copy(sum, sum + dst_w, dst + prev_dy * dst_stride);
      for (int dx = 0; dx < dst_w; ++dx) sum[dx] = beta * buf[dx];
      prev_dy = dy;
    } else {
      for (int dx = 0; dx < dst_w; ++dx) sum[dx] += beta * buf[dx];
    }
  }
  std::copy(sum, sum + dst_w, dst + prev_dy * dst_stride);
  (void)src_h;
}

// The same computation, faster: each destination column gathers its taps in table order into a register (the same
// additions in the same order as the scatter), a source row shared by two destination rows is resampled once, and
// the vertical loops are plain element-wise loops the compiler vectorises (no reordering: each element is still
// beta * buf or sum + beta * buf). Bit-identical to area_general_reference for finite inputs.
void area_general_fast(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                       int dst_h, std::ptrdiff_t dst_stride, const Cv2Plan& p, FloatResizeScratch& s) {
  area_tab(src_w, dst_w, p.scale_x, s.xtab);
  area_tab(src_h, dst_h, p.scale_y, s.ytab);
  const std::size_t nx = s.xtab.size();
  grow(s.buf, static_cast<std::size_t>(dst_w));
  grow(s.sum, static_cast<std::size_t>(dst_w));
  grow(s.xofs, nx + static_cast<std::size_t>(dst_w) + 1);
  grow(s.alpha, nx);
  // Structure of arrays: tap t reads source column xofs[t] with weight alpha[t]; column dx owns taps
  // tabofs[dx] .. tabofs[dx + 1] - 1 (the table is ordered by dx).
  int* tsi = s.xofs.data();
  int* tstart = tsi + nx;
  float* talpha = s.alpha.data();
  {
    int dx = 0;
    for (std::size_t t = 0; t < nx; ++t) {
      while (dx <= s.xtab[t].di) tstart[dx++] = static_cast<int>(t);
      tsi[t] = s.xtab[t].si;
      talpha[t] = s.xtab[t].alpha;
    }
    while (dx <= dst_w) tstart[dx++] = static_cast<int>(nx);
  }
  float* buf = s.buf.data();
  float* sum = s.sum.data();
  int buf_sy = -1;
  int prev_dy = s.ytab.front().di;
  bool first = true;
  for (const AreaTap& yt : s.ytab) {
    const float beta = yt.alpha;
    const int dy = yt.di;
    if (yt.si != buf_sy) {
      const float* S = src + yt.si * src_stride;
      for (int dx = 0; dx < dst_w; ++dx) {
        float acc = 0.f;
        for (int t = tstart[dx]; t < tstart[dx + 1]; ++t) acc += S[tsi[t]] * talpha[t];
        buf[dx] = acc;
      }
      buf_sy = yt.si;
    }
    if (first) {  // the reference's sum starts at 0 and its first row is added to it
      for (int dx = 0; dx < dst_w; ++dx) sum[dx] = 0.f + beta * buf[dx];
      first = false;
    } else if (dy != prev_dy) {
      std::copy(sum, sum + dst_w, dst + prev_dy * dst_stride);
      for (int dx = 0; dx < dst_w; ++dx) sum[dx] = beta * buf[dx];
      prev_dy = dy;
    } else {
      for (int dx = 0; dx < dst_w; ++dx) sum[dx] += beta * buf[dx];
    }
  }
  std::copy(sum, sum + dst_w, dst + prev_dy * dst_stride);
  (void)src_h;
}

// The linear path of hal::resize (ksize 2, float alpha/beta) with resizeGeneric_<HResizeLinear<float, float, float,
// 1, HResizeLinearVec_32f>, VResizeLinear<float, float, float, Cast<float, float>, VResizeLinearVec_32f>>.
// area_mode: INTER_AREA when an axis is enlarged (OpenCV's "area" coefficients).
void linear_generic(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w, int dst_h,
                    std::ptrdiff_t dst_stride, const Cv2Plan& p, bool area_mode, FloatResizeScratch& s) {
  grow(s.xofs, static_cast<std::size_t>(dst_w));
  grow(s.yofs, static_cast<std::size_t>(dst_h));
  grow(s.alpha, static_cast<std::size_t>(dst_w) * 2);
  grow(s.beta, static_cast<std::size_t>(dst_h) * 2);
  int* xofs = s.xofs.data();
  int* yofs = s.yofs.data();
  float* alpha = s.alpha.data();
  float* beta = s.beta.data();
  int xmax = dst_w;
  for (int dx = 0; dx < dst_w; ++dx) {
    float fx;
    int sx;
    if (!area_mode) {
      fx = static_cast<float>((dx + 0.5) * p.scale_x - 0.5);
      sx = cv_floor(fx);
      fx -= static_cast<float>(sx);
    } else {
      sx = cv_floor(dx * p.scale_x);
      fx = static_cast<float>((dx + 1) - (sx + 1) * p.inv_scale_x);
      fx = fx <= 0 ? 0.f : fx - static_cast<float>(cv_floor(fx));
    }
    if (sx < 0) fx = 0, sx = 0;  // (xmin is not used by HResizeLinear: these columns take S[0] * 1 + S[1] * 0)
    if (sx + 1 >= src_w) {
      xmax = std::min(xmax, dx);
      if (sx >= src_w - 1) fx = 0, sx = src_w - 1;
    }
    xofs[dx] = sx;
    alpha[dx * 2] = 1.f - fx;
    alpha[dx * 2 + 1] = fx;
  }
  for (int dy = 0; dy < dst_h; ++dy) {  // rows are clipped by the invoker, their weights are not
    float fy;
    int sy;
    if (!area_mode) {
      fy = static_cast<float>((dy + 0.5) * p.scale_y - 0.5);
      sy = cv_floor(fy);
      fy -= static_cast<float>(sy);
    } else {
      sy = cv_floor(dy * p.scale_y);
      fy = static_cast<float>((dy + 1) - (sy + 1) * p.inv_scale_y);
      fy = fy <= 0 ? 0.f : fy - static_cast<float>(cv_floor(fy));
    }
    yofs[dy] = sy;
    beta[dy * 2] = 1.f - fy;
    beta[dy * 2 + 1] = fy;
  }
  // Two horizontally resampled rows, cached by source row (resizeGeneric_Invoker reuses rows the same way).
  grow(s.rows, static_cast<std::size_t>(dst_w) * 2);
  float* rows[2] = {s.rows.data(), s.rows.data() + dst_w};
  int row_sy[2] = {-1, -1};
  auto hresize = [&](int sy, float* D) {
    const float* S = src + sy * src_stride;
    int dx = 0;
    for (; dx < xmax; ++dx) {
      const int sx = xofs[dx];
      D[dx] = S[sx] * alpha[dx * 2] + S[sx + 1] * alpha[dx * 2 + 1];
    }
    for (; dx < dst_w; ++dx) D[dx] = S[xofs[dx]] * 1.f;
  };
  auto row_of = [&](int sy) -> const float* {
    for (int k = 0; k < 2; ++k)
      if (row_sy[k] == sy) return rows[k];
    return nullptr;
  };
  for (int dy = 0; dy < dst_h; ++dy) {
    const int sy0 = std::clamp(yofs[dy], 0, src_h - 1);
    const int sy1 = std::clamp(yofs[dy] + 1, 0, src_h - 1);
    const float* r0 = row_of(sy0);
    const float* r1 = row_of(sy1);
    // Fill the missing rows into the slots not holding the other needed row.
    for (int need : {sy0, sy1}) {
      if (row_of(need)) continue;
      const int other = need == sy0 ? sy1 : sy0;
      const int k = row_sy[0] == other ? 1 : 0;
      hresize(need, rows[k]);
      row_sy[k] = need;
    }
    r0 = row_of(sy0);
    r1 = row_of(sy1);
    const float b0 = beta[dy * 2], b1 = beta[dy * 2 + 1];
    float* D = dst + dy * dst_stride;
    for (int x = 0; x < dst_w; ++x) D[x] = r0[x] * b0 + r1[x] * b1;
  }
}

enum class Cv2Kind { Area, AreaReference, Linear };

void cv2_resize(Cv2Kind kind, const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& s) {
  if (src_w == dst_w && src_h == dst_h) {  // cv::resize: "Source and destination are of same size. Use simple copy."
    copy_plane(src, src_w, src_h, src_stride, dst, dst_stride);
    return;
  }
  const Cv2Plan p = cv2_plan(src_w, src_h, dst_w, dst_h);
  // "in case of scale_x && scale_y is equal to 2, INTER_AREA (fast) also is equal to INTER_LINEAR"
  bool area = kind != Cv2Kind::Linear || (p.is_area_fast && p.iscale_x == 2 && p.iscale_y == 2);
  if (area && p.scale_x >= 1 && p.scale_y >= 1) {
    if (p.is_area_fast)
      area_fast(src, src_stride, dst, dst_w, dst_h, dst_stride, p.iscale_x, p.iscale_y, s);
    else if (kind == Cv2Kind::AreaReference)
      area_general_reference(src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride, p, s);
    else
      area_general_fast(src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride, p, s);
    return;
  }
  linear_generic(src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride, p, area, s);
}

// ---- kornia ----

// kornia.filters.kernels.gaussian(window_size, sigma) in float32 (sigma is a tensor of the input's dtype):
// x = arange(k) - k // 2; exp(-x^2 / (2 sigma^2)) / sum.
void gaussian_kernel(int k, double sigma_d, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(k));
  const float sigma = static_cast<float>(sigma_d);
  const float denom = 2.f * (sigma * sigma);
  float total = 0.f;
  for (int i = 0; i < k; ++i) {
    const float x = static_cast<float>(i - k / 2);
    out[static_cast<std::size_t>(i)] = std::exp(-(x * x) / denom);
    total += out[static_cast<std::size_t>(i)];
  }
  for (float& v : out) v = v / total;
}

// torch F.pad(mode="reflect") index (edge not repeated); torch needs pad < size, a 1-pixel side stays constant.
int reflect_index(int i, int n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
  }
  return i;
}

// torch upsample_bilinear2d (align_corners=False, no scale factor) source index and weights of one axis, as torch
// >= 2.0 computes them, in float (opmath of float): scale = in / out, real = max(scale * (d + 0.5) - 0.5, 0),
// i0 = floor, i1 = i0 + (i0 < in - 1), l1 = real - i0, l0 = 1 - l1; an axis of equal size is copied
// (compute_source_index_and_lambda). Torch 1.13 (Debian 12) takes real in double instead: its l1 differs by up to
// half a float ulp of real (3e-5 near 1000; measured), a difference between the two torch versions themselves.
void torch_linear_axis(int in, int out, int* i0, int* i1, float* l0, float* l1) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int d = 0; d < out; ++d) {
    if (in == out) {
      i0[d] = i1[d] = d;
      l0[d] = 1.f;
      l1[d] = 0.f;
      continue;
    }
    float real = scale * (static_cast<float>(d) + 0.5f) - 0.5f;
    if (real < 0.f) real = 0.f;
    const int i = std::min(static_cast<int>(real), in - 1);
    i0[d] = i;
    i1[d] = i + (i < in - 1 ? 1 : 0);
    l1[d] = std::min(std::max(real - static_cast<float>(i), 0.f), 1.f);
    l0[d] = 1.f - l1[d];
  }
}

}  // namespace

void cv2_resize_area(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                     int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& scratch) {
  check_args("cv2_resize_area", src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride);
  cv2_resize(Cv2Kind::Area, src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride, scratch);
}

void cv2_resize_area_reference(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                               int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& scratch) {
  check_args("cv2_resize_area_reference", src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride);
  cv2_resize(Cv2Kind::AreaReference, src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride, scratch);
}

void cv2_resize_linear(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                       int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& scratch) {
  check_args("cv2_resize_linear", src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride);
  cv2_resize(Cv2Kind::Linear, src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride, scratch);
}

void kornia_resize_antialias(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                             int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& s) {
  check_args("kornia_resize_antialias", src, src_w, src_h, src_stride, dst, dst_w, dst_h, dst_stride);
  if (src_w == dst_w && src_h == dst_h) {  // kornia: `if size == input_size: return input`
    copy_plane(src, src_w, src_h, src_stride, dst, dst_stride);
    return;
  }
  const double fy = static_cast<double>(src_h) / dst_h, fx = static_cast<double>(src_w) / dst_w;
  const bool antialias = std::max(fy, fx) > 1;  // blur only when shrinking (either axis)
  int kx = 1, ky = 1;
  if (antialias) {
    const double sigma_y = std::max((fy - 1.0) / 2.0, 0.001), sigma_x = std::max((fx - 1.0) / 2.0, 0.001);
    ky = static_cast<int>(std::max(2.0 * 2 * sigma_y, 3.0));
    kx = static_cast<int>(std::max(2.0 * 2 * sigma_x, 3.0));
    if (ky % 2 == 0) ++ky;
    if (kx % 2 == 0) ++kx;
    gaussian_kernel(kx, sigma_x, s.kernel_x);
    gaussian_kernel(ky, sigma_y, s.kernel_y);
  }
  // Interpolation tables (xofs / yofs hold i0 then i1; alpha / beta hold l0 then l1).
  grow(s.xofs, static_cast<std::size_t>(dst_w) * 2);
  grow(s.yofs, static_cast<std::size_t>(dst_h) * 2);
  grow(s.alpha, static_cast<std::size_t>(dst_w) * 2);
  grow(s.beta, static_cast<std::size_t>(dst_h) * 2);
  int* x0 = s.xofs.data();
  int* x1 = x0 + dst_w;
  int* y0 = s.yofs.data();
  int* y1 = y0 + dst_h;
  float* wx0 = s.alpha.data();
  float* wx1 = wx0 + dst_w;
  float* wy0 = s.beta.data();
  float* wy1 = wy0 + dst_h;
  torch_linear_axis(src_w, dst_w, x0, x1, wx0, wx1);
  torch_linear_axis(src_h, dst_h, y0, y1, wy0, wy1);

  // Source rows after the blur, produced on demand in increasing order and only at the columns the interpolation
  // reads (x0 / x1; each element is still the same sequential sum of taps, so the values are those of the full
  // blur): the horizontal pass (reflect padding, taps accumulated left to right) of every row the vertical taps
  // reach sits in a ring of ky rows keyed by row index, then the vertical pass (taps top to bottom).
  const int rx = kx / 2, ry = ky / 2;
  int nc = src_w;  // columns kept: all without blur (rows are read from src directly)
  const float* kxp = s.kernel_x.data();
  const float* kyp = s.kernel_y.data();
  float* ring = nullptr;
  float* vrow = nullptr;
  int* ring_tag = nullptr;
  const int* tap_col = nullptr;  // tap_col[t * nc + j]: the source column of tap t for kept column j
  if (antialias) {
    // Kept columns: the sorted distinct x0 / x1; x0 / x1 become indices into them.
    grow(s.ofs, static_cast<std::size_t>(dst_w) * 2 * static_cast<std::size_t>(kx + 1));
    int* cols = s.ofs.data();
    std::copy(x0, x0 + 2 * dst_w, cols);  // x1 follows x0 in the same buffer
    std::sort(cols, cols + 2 * dst_w);
    nc = static_cast<int>(std::unique(cols, cols + 2 * dst_w) - cols);
    for (int i = 0; i < 2 * dst_w; ++i) x0[i] = static_cast<int>(std::lower_bound(cols, cols + nc, x0[i]) - cols);
    int* taps = cols + nc;
    for (int t = 0; t < kx; ++t)
      for (int j = 0; j < nc; ++j) taps[t * nc + j] = reflect_index(cols[j] - rx + t, src_w);
    tap_col = taps;
    const std::size_t NC = static_cast<std::size_t>(nc);
    grow(s.plane, NC * static_cast<std::size_t>(ky) + NC);
    ring = s.plane.data();
    vrow = ring + NC * static_cast<std::size_t>(ky);
    grow(s.tabofs, static_cast<std::size_t>(ky));
    ring_tag = s.tabofs.data();
    for (int k = 0; k < ky; ++k) ring_tag[k] = -1;
  }
  auto hblur_row = [&](int y) -> const float* {
    float* out = ring + static_cast<std::size_t>(nc) * static_cast<std::size_t>(y % ky);
    if (ring_tag[y % ky] == y) return out;
    const float* S = src + y * src_stride;
    for (int j = 0; j < nc; ++j) out[j] = S[tap_col[j]] * kxp[0];
    for (int t = 1; t < kx; ++t)
      for (int j = 0; j < nc; ++j) out[j] += S[tap_col[t * nc + j]] * kxp[t];
    ring_tag[y % ky] = y;
    return out;
  };
  auto blurred_row = [&](int y) -> const float* {
    if (!antialias) return src + y * src_stride;
    const float* r = hblur_row(reflect_index(y - ry, src_h));
    for (int j = 0; j < nc; ++j) vrow[j] = r[j] * kyp[0];
    for (int t = 1; t < ky; ++t) {
      r = hblur_row(reflect_index(y - ry + t, src_h));
      for (int j = 0; j < nc; ++j) vrow[j] += r[j] * kyp[t];
    }
    return vrow;
  };

  // Each needed blurred row is interpolated horizontally once (two cached rows, keyed by source row); the output
  // is wy0 * (wx0 * a + wx1 * b) + wy1 * (wx0 * c + wx1 * d), torch's order.
  grow(s.rows, static_cast<std::size_t>(dst_w) * 2);
  float* hrows[2] = {s.rows.data(), s.rows.data() + dst_w};
  int hrow_y[2] = {-1, -1};
  auto hrow_of = [&](int y) -> const float* {
    for (int k = 0; k < 2; ++k)
      if (hrow_y[k] == y) return hrows[k];
    return nullptr;
  };
  for (int dy = 0; dy < dst_h; ++dy) {
    for (int need : {y0[dy], y1[dy]}) {
      if (hrow_of(need)) continue;
      const int other = need == y0[dy] ? y1[dy] : y0[dy];
      const int k = hrow_y[0] == other ? 1 : 0;
      const float* r = blurred_row(need);
      for (int dx = 0; dx < dst_w; ++dx) hrows[k][dx] = r[x0[dx]] * wx0[dx] + r[x1[dx]] * wx1[dx];
      hrow_y[k] = need;
    }
    const float* a = hrow_of(y0[dy]);
    const float* b = hrow_of(y1[dy]);
    float* D = dst + dy * dst_stride;
    for (int dx = 0; dx < dst_w; ++dx) D[dx] = a[dx] * wy0[dy] + b[dx] * wy1[dy];
  }
}

std::pair<int, int> kornia_long_side_size(int w, int h, int side) {
  check_side("kornia_long_side_size", "image", w, h, std::numeric_limits<int>::max());
  if (side < 1 || side > kMaxResizeFloatSide)
    throw Error(ErrorKind::InvalidArgument, "kornia_long_side_size: side " + std::to_string(side) +
                                                " is out of range (1.." + std::to_string(kMaxResizeFloatSide) + ")");
  // _side_to_image_size(side, aspect_ratio = w / h, "long"): (side ^ (aspect < 1)) picks which side is `side`.
  const double aspect = static_cast<double>(w) / h;
  return aspect < 1.0 ? std::pair<int, int>{static_cast<int>(side * aspect), side}
                      : std::pair<int, int>{side, static_cast<int>(side / aspect)};
}

std::pair<int, int> hloc_resize_size(int w, int h, int resize_max) {
  check_side("hloc_resize_size", "image", w, h, std::numeric_limits<int>::max());
  if (resize_max < 1 || resize_max > kMaxResizeFloatSide)
    throw Error(ErrorKind::InvalidArgument, "hloc_resize_size: resize_max " + std::to_string(resize_max) +
                                                " is out of range (1.." + std::to_string(kMaxResizeFloatSide) + ")");
  const double scale = static_cast<double>(resize_max) / std::max(w, h);
  // Python's round(): to nearest, ties to even (the default floating-point rounding mode).
  return {static_cast<int>(std::nearbyint(w * scale)), static_cast<int>(std::nearbyint(h * scale))};
}

}  // namespace superpoint_rt::image
