// Pillow-exact BILINEAR resize: coefficients, plan, scalar reference and run-time dispatch.
//
// The arithmetic follows Pillow 9.4 src/libImaging/Resample.c (precompute_coeffs, normalize_coeffs_8bpc,
// ImagingResampleHorizontal_8bpc, ImagingResampleVertical_8bpc, ImagingResampleInner); docs/ALGORITHM.md §1.
#include "image/resize.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "image/resize_kernels.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow PRECISION_BITS

// Pillow bilinear_filter: the triangle, support 1.0.
inline double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

// Pillow clip8 (a lookup table over ss >> 22 for -640..639; equal to this clamp for every reachable value).
inline std::uint8_t clip8(int ss) {
  const int v = ss >> kPrecisionBits;  // arithmetic shift, as C on every compiler we support
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

void check_size(int v, const char* what) {
  if (v < 1) {
    throw Error(ErrorKind::InvalidArgument, std::string("resize: ") + what + " must be >= 1, got " + std::to_string(v));
  }
}

// Pillow precompute_coeffs' scale, filterscale and ksize (as double: it may exceed int for absurd sizes).
struct AxisScale {
  double scale, filterscale, support, ksize;
};
AxisScale axis_scale(int in_size, int out_size) {
  // Pillow passes the box edges as float: (float)in_size rounds above 2^24, exactly as Pillow does.
  const float in0 = 0.0f;
  const float in1 = static_cast<float>(in_size);
  AxisScale a{};
  a.scale = static_cast<double>(in1 - in0) / out_size;
  a.filterscale = a.scale < 1.0 ? 1.0 : a.scale;
  a.support = 1.0 * a.filterscale;  // BILINEAR support 1.0, widened when downscaling (antialias)
  a.ksize = std::ceil(a.support) * 2 + 1;
  return a;
}

}  // namespace

std::ptrdiff_t resize_tmp_stride(const ResizePlan& plan) noexcept {
  return (static_cast<std::ptrdiff_t>(plan.out_w) + 63) / 64 * 64;
}

namespace {
// resize_window_rows from the sizes: rows = the ybox rows (at most in_h), ksize = vertical taps per output.
double window_rows(double rows, double ksize, double stride) {
  if (rows * stride <= static_cast<double>(kResizeWindowBytes)) return rows;
  return std::min(rows, 2 * ksize + 2);  // more than one output row's taps: see the window in resize_simd_impl.hpp
}
}  // namespace

int resize_window_rows(const ResizePlan& plan) noexcept {
  const int rows = plan.ybox_last - plan.ybox_first;
  return static_cast<int>(window_rows(rows, plan.vert.ksize, static_cast<double>(resize_tmp_stride(plan))));
}

std::size_t resize_plan_bytes(int in_w, int in_h, int out_w, int out_h) {
  // In double: the point is to refuse sizes whose tables would not fit, before computing them in integers.
  const double ts = std::ceil(out_w / 64.0) * 64;
  const AxisScale v = axis_scale(in_h, out_h);
  const double vk = v.ksize;
  double bytes = 8.0 * out_h + 4.0 * out_h * vk;  // vert.bounds, vert.k
  if (out_h != in_h) {
    bytes += 8.0 * out_h * std::ceil(vk / 2);                               // v_hi, v_lo
    bytes += window_rows(std::min<double>(in_h, vk * out_h), vk, ts) * ts;  // scratch.tmp
  }
  if (out_w != in_w) {
    const AxisScale h = axis_scale(in_w, out_w);
    const double taps = std::ceil(h.ksize / 8) * 8, slots = std::ceil(out_w / 16.0) * 16;
    bytes += 8.0 * out_w + 4.0 * out_w * h.ksize;       // horiz.bounds, horiz.k
    bytes += 4.0 * slots + 2.0 * 2.0 * slots * taps;    // h_xmin, h_hi, h_lo
    bytes += 2.0 * (static_cast<double>(in_w) + taps);  // scratch.row16
  }
  constexpr double kMax = static_cast<double>(std::numeric_limits<std::size_t>::max() / 2);
  return static_cast<std::size_t>(std::min(bytes, kMax));
}

AxisCoeffs make_axis_coeffs(int in_size, int out_size) {
  check_size(in_size, "input size");
  check_size(out_size, "output size");
  const AxisScale a = axis_scale(in_size, out_size);
  const float in0 = 0.0f;
  const double scale = a.scale, filterscale = a.filterscale, support = a.support, ksize_d = a.ksize;
  // Pillow: "if (outSize > INT_MAX / (ksize * sizeof(double))) return MemoryError".
  if (ksize_d > static_cast<double>(INT_MAX) ||
      static_cast<double>(out_size) > static_cast<double>(INT_MAX) / (ksize_d * sizeof(double))) {
    throw Error(ErrorKind::TooLarge, "resize: " + std::to_string(in_size) + " -> " + std::to_string(out_size) +
                                         " needs a coefficient table over INT_MAX bytes (Pillow's limit)");
  }
  AxisCoeffs c;
  c.in_size = in_size;
  c.out_size = out_size;
  c.ksize = static_cast<int>(ksize_d);
  c.bounds.assign(static_cast<std::size_t>(out_size) * 2, 0);
  c.k.assign(static_cast<std::size_t>(out_size) * c.ksize, 0);
  std::vector<double> kd(static_cast<std::size_t>(c.ksize));
  const double inv = 1.0 / filterscale;  // Pillow 9.4 computes ss = 1.0 / filterscale per output: same value
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    double ww = 0.0;
    int xmin = static_cast<int>(center - support + 0.5);  // (int) truncates toward zero, as Pillow
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    for (int x = 0; x < xmax; ++x) {
      const double w = bilinear_filter((x + xmin - center + 0.5) * inv);
      kd[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) kd[x] /= ww;
    }
    c.bounds[2 * xx] = xmin;
    c.bounds[2 * xx + 1] = xmax;
    // normalize_coeffs_8bpc; entries past xmax stay 0 (Pillow zeroes them before normalising).
    std::int32_t* kk = c.k.data() + static_cast<std::size_t>(xx) * c.ksize;
    for (int x = 0; x < xmax; ++x) {
      const double v = kd[x];
      kk[x] = v < 0 ? static_cast<std::int32_t>(-0.5 + v * (1 << kPrecisionBits))
                    : static_cast<std::int32_t>(0.5 + v * (1 << kPrecisionBits));
    }
  }
  return c;
}

ResizePlan::ResizePlan(int in_w_, int in_h_, int out_w_, int out_h_)
    : in_w(in_w_), in_h(in_h_), out_w(out_w_), out_h(out_h_) {
  check_size(in_w, "input width");
  check_size(in_h, "input height");
  check_size(out_w, "output width");
  check_size(out_h, "output height");
  bytes = resize_plan_bytes(in_w, in_h, out_w, out_h);
  if (bytes > kMaxResizePlanBytes) {
    throw Error(ErrorKind::TooLarge, "resize: " + std::to_string(in_w) + "x" + std::to_string(in_h) + " -> " +
                                         std::to_string(out_w) + "x" + std::to_string(out_h) + " needs " +
                                         std::to_string(bytes) + " bytes of coefficient tables and scratch, over the " +
                                         "limit of " + std::to_string(kMaxResizePlanBytes) +
                                         " (kMaxResizePlanBytes): the aspect ratio is too extreme");
  }
  need_h = out_w != in_w;
  need_v = out_h != in_h;
  vert = make_axis_coeffs(in_h, out_h);  // Pillow computes the vertical coefficients first (and always)
  ybox_first = vert.bounds[0];
  ybox_last = vert.bounds[2 * (out_h - 1)] + vert.bounds[2 * (out_h - 1) + 1];
  if (need_h) horiz = make_axis_coeffs(in_w, out_w);

  // SIMD tables (see the header). Weights split into two int16 halves: hi = k >> 11 <= 2048, lo = k & 2047.
  if (need_h) {
    int max_count = 1;
    for (int o = 0; o < out_w; ++o) max_count = std::max(max_count, horiz.bounds[2 * o + 1]);
    h_taps = (max_count + 7) / 8 * 8;
    h_groups = (out_w + 15) / 16;
    const int chunks = h_taps / 8;
    h_xmin.assign(static_cast<std::size_t>(h_groups) * 16, 0);
    h_hi.assign(static_cast<std::size_t>(h_groups) * 16 * h_taps, 0);
    h_lo.assign(h_hi.size(), 0);
    for (int o = 0; o < out_w; ++o) {
      const int g = o / 16, j = o % 16, lane = j / 4, i = j % 4;
      h_xmin[o] = horiz.bounds[2 * o];
      for (int t = 0; t < horiz.bounds[2 * o + 1]; ++t) {
        const std::int32_t k = horiz.k[static_cast<std::size_t>(o) * horiz.ksize + t];
        const int c = t / 8;
        const std::size_t at = ((((static_cast<std::size_t>(g) * chunks + c) * 4 + i) * 4 + lane) * 8) + t % 8;
        h_hi[at] = static_cast<std::int16_t>(k >> 11);
        h_lo[at] = static_cast<std::int16_t>(k & 2047);
      }
    }
  }
  if (need_v) {
    v_pairs = (vert.ksize + 1) / 2;
    v_hi.assign(static_cast<std::size_t>(out_h) * v_pairs, 0);
    v_lo.assign(v_hi.size(), 0);
    for (int o = 0; o < out_h; ++o) {
      const int n = vert.bounds[2 * o + 1];
      const std::int32_t* k = vert.k.data() + static_cast<std::size_t>(o) * vert.ksize;
      for (int p = 0; 2 * p < n; ++p) {
        const std::int32_t a = k[2 * p];
        const std::int32_t b = 2 * p + 1 < n ? k[2 * p + 1] : 0;
        const std::size_t at = static_cast<std::size_t>(o) * v_pairs + p;
        v_hi[at] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a >> 11) |
                                             (static_cast<std::uint32_t>(b >> 11) << 16));
        v_lo[at] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a & 2047) |
                                             (static_cast<std::uint32_t>(b & 2047) << 16));
      }
    }
  }
}

void resize_plane_reference(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                            std::uint8_t* dst, ResizeScratch& scratch) {
  const std::ptrdiff_t step = pixel_step;
  if (!plan.need_h && !plan.need_v) {  // Image.resize returns self.copy() at the same size
    for (int y = 0; y < plan.in_h; ++y) {
      const std::uint8_t* s = src + y * row_stride;
      for (int x = 0; x < plan.in_w; ++x) dst[static_cast<std::ptrdiff_t>(y) * plan.out_w + x] = s[x * step];
    }
    return;
  }
  // The horizontal pass's input: the source plane (interleaved).
  const std::uint8_t* in = src;
  std::ptrdiff_t in_stride = row_stride, in_step = step;
  int row_offset = 0;  // vertical bounds are shifted by -ybox_first when the horizontal pass ran (Pillow)
  if (plan.need_h) {
    const int rows = plan.need_v ? plan.ybox_last - plan.ybox_first : plan.out_h;
    const int first = plan.need_v ? plan.ybox_first : 0;
    std::uint8_t* out = dst;
    if (plan.need_v) {
      scratch.tmp.resize(static_cast<std::size_t>(rows) * plan.out_w);
      out = scratch.tmp.data();
    }
    const AxisCoeffs& h = plan.horiz;
    for (int yy = 0; yy < rows; ++yy) {
      const std::uint8_t* s = src + (yy + first) * row_stride;
      for (int xx = 0; xx < plan.out_w; ++xx) {
        const int xmin = h.bounds[2 * xx], xmax = h.bounds[2 * xx + 1];
        const std::int32_t* k = h.k.data() + static_cast<std::size_t>(xx) * h.ksize;
        int ss0 = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < xmax; ++x) ss0 += static_cast<int>(s[(x + xmin) * step]) * k[x];
        out[static_cast<std::ptrdiff_t>(yy) * plan.out_w + xx] = clip8(ss0);
      }
    }
    if (!plan.need_v) return;
    in = scratch.tmp.data();
    in_stride = plan.out_w;
    in_step = 1;
    row_offset = plan.ybox_first;
  }
  const AxisCoeffs& v = plan.vert;
  for (int yy = 0; yy < plan.out_h; ++yy) {
    const std::int32_t* k = v.k.data() + static_cast<std::size_t>(yy) * v.ksize;
    const int ymin = v.bounds[2 * yy] - row_offset, ymax = v.bounds[2 * yy + 1];
    for (int xx = 0; xx < plan.out_w; ++xx) {
      int ss0 = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < ymax; ++y) ss0 += static_cast<int>(in[(y + ymin) * in_stride + xx * in_step]) * k[y];
      dst[static_cast<std::ptrdiff_t>(yy) * plan.out_w + xx] = clip8(ss0);
    }
  }
}

namespace {

using KernelFn = void (*)(const ResizePlan&, const std::uint8_t*, std::ptrdiff_t, int, std::uint8_t*, ResizeScratch&);

using RowsFn = bool (*)(const ResizePlan&, ResizeRowFn, void*, int, std::uint8_t*, ResizeScratch&);

struct Kernel {
  KernelFn fn;
  const char* name;
  RowsFn rows = nullptr;  // null for the scalar reference (it needs the whole plane)
};

Kernel pick_kernel() {
  switch (util::best_isa()) {
    case util::Isa::Avx512: return {detail::resize_plane_avx512, "avx512", detail::resize_plane_rows_avx512};
    case util::Isa::Avx2: return {detail::resize_plane_avx2, "avx2", detail::resize_plane_rows_avx2};
    case util::Isa::Scalar: break;
  }
  return {resize_plane_reference, "scalar"};
}

const Kernel& kernel() {
  static const Kernel k = pick_kernel();
  return k;
}

}  // namespace

void resize_plane(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                  std::uint8_t* dst, ResizeScratch& scratch) {
  kernel().fn(plan, src, row_stride, pixel_step, dst, scratch);
}

bool resize_plane_rows(const ResizePlan& plan, ResizeRowFn fn, void* ctx, int pixel_step, std::uint8_t* dst,
                       ResizeScratch& scratch) {
  const RowsFn rows = kernel().rows;
  if (!rows) throw Error(ErrorKind::InvalidArgument, "resize_plane_rows needs an AVX2 or AVX-512 resize kernel");
  return rows(plan, fn, ctx, pixel_step, dst, scratch);
}

ResizePlan slice_resize_plan(const ResizePlan& plan, int out_first, int out_last) {
  if (!plan.need_v || out_first < 0 || out_first >= out_last || out_last > plan.out_h)
    throw Error(ErrorKind::InvalidArgument, "slice_resize_plan: rows " + std::to_string(out_first) + ".." +
                                                std::to_string(out_last) + " of a plan of " +
                                                std::to_string(plan.out_h) + " rows" +
                                                (plan.need_v ? "" : " without a vertical pass"));
  ResizePlan s;
  s.in_w = plan.in_w;
  s.in_h = plan.in_h;
  s.out_w = plan.out_w;
  s.out_h = out_last - out_first;
  s.need_h = plan.need_h;
  s.need_v = true;  // even when the slice happens to have as many rows as the input: its rows are not the input's
  s.horiz = plan.horiz;
  s.h_taps = plan.h_taps;
  s.h_groups = plan.h_groups;
  s.h_xmin = plan.h_xmin;
  s.h_hi = plan.h_hi;
  s.h_lo = plan.h_lo;
  const auto rows = [&](const auto& v, std::size_t per_row) {
    using V = std::remove_cvref_t<decltype(v)>;
    return V(v.begin() + static_cast<std::ptrdiff_t>(per_row * out_first),
             v.begin() + static_cast<std::ptrdiff_t>(per_row * out_last));
  };
  s.vert.in_size = plan.vert.in_size;
  s.vert.out_size = s.out_h;
  s.vert.ksize = plan.vert.ksize;
  s.vert.bounds = rows(plan.vert.bounds, 2);
  s.vert.k = rows(plan.vert.k, static_cast<std::size_t>(plan.vert.ksize));
  s.v_pairs = plan.v_pairs;
  s.v_hi = rows(plan.v_hi, static_cast<std::size_t>(plan.v_pairs));
  s.v_lo = rows(plan.v_lo, static_cast<std::size_t>(plan.v_pairs));
  s.ybox_first = s.vert.bounds[0];
  s.ybox_last = s.vert.bounds[2 * (s.out_h - 1)] + s.vert.bounds[2 * (s.out_h - 1) + 1];
  s.bytes = plan.bytes;
  return s;
}

bool resize_rows_available() noexcept {
  return kernel().rows != nullptr;
}

const char* resize_kernel_name() noexcept {
  return kernel().name;
}

}  // namespace superpoint_rt::image
