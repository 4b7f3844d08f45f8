#include "backend/onednn/gptq.hpp"

#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::backend::detail {
namespace {

// One patch (K values, unfold order) of the h x w frame at (y, x), zero outside: the layer's input at (ch, yy, xx),
// x itself or its 2 x 2 max pooling, at data[(ch / block) * channel_block_stride + yy * row_stride + xx *
// column_stride + ch % block]. Read a channel block at a time (contiguous in the blocked and NHWC layouts) with the
// index arithmetic hoisted: the calibration gathers hundreds of millions of values (add_patch_hessian_reference is
// the plain version the tests compare with).
void patch(const ActivationView& v, bool pool, int h, int w, int kernel, int y, int x, float* out) {
  const int r = kernel / 2, kk = kernel * kernel, blocks = v.channels / v.block;
  for (int ky = 0; ky < kernel; ++ky) {
    const int yy = y + ky - r;
    for (int kx = 0; kx < kernel; ++kx) {
      const int xx = x + kx - r;
      float* o = out + ky * kernel + kx;  // channel ch at o[ch * kk]
      if (yy < 0 || yy >= h || xx < 0 || xx >= w) {
        for (int ch = 0; ch < v.channels; ++ch) o[static_cast<std::size_t>(ch) * kk] = 0.f;
        continue;
      }
      const std::size_t sy = static_cast<std::size_t>(pool ? 2 * yy : yy) * v.row_stride;
      const std::size_t sx = static_cast<std::size_t>(pool ? 2 * xx : xx) * v.column_stride;
      for (int cb = 0; cb < blocks; ++cb) {
        const float* p = v.data + static_cast<std::size_t>(cb) * v.channel_block_stride + sy + sx;
        float* ob = o + static_cast<std::size_t>(cb) * v.block * kk;
        if (!pool) {
          for (int c = 0; c < v.block; ++c) ob[static_cast<std::size_t>(c) * kk] = p[c];
        } else {
          const float *p01 = p + v.column_stride, *p10 = p + v.row_stride, *p11 = p10 + v.column_stride;
          for (int c = 0; c < v.block; ++c)
            ob[static_cast<std::size_t>(c) * kk] = std::max(std::max(p[c], p01[c]), std::max(p10[c], p11[c]));
        }
      }
    }
  }
}

void check_sizes(int c, int h, int w, int block, int kernel, int stride, std::size_t hessian_size, const char* what) {
  const std::size_t k = static_cast<std::size_t>(c) * kernel * kernel;
  if (c <= 0 || h <= 0 || w <= 0 || block <= 0 || c % block != 0 || kernel <= 0 || stride <= 0 || hessian_size != k * k)
    throw Error(ErrorKind::InvalidArgument,
                std::string(what) + ": a " + std::to_string(c) + " x " + std::to_string(h) + " x " + std::to_string(w) +
                    " input (block " + std::to_string(block) + "), kernel " + std::to_string(kernel) + ", stride " +
                    std::to_string(stride) + " does not fit a Hessian of " + std::to_string(hessian_size) + " values");
}

}  // namespace

void add_patch_hessian(const ActivationView& x, bool pool, int kernel, int stride, std::vector<float>& hessian) {
  check_sizes(x.channels, x.height, x.width, x.block, kernel, stride, hessian.size(), "add_patch_hessian");
  const int h = pool ? x.height / 2 : x.height, w = pool ? x.width / 2 : x.width;
  const int k = x.channels * kernel * kernel;
  // Patches in chunks of rows of A (n x K); H += A^T A. Only the upper triangle is summed, in fixed blocks of
  // columns, each by oneDNN's sgemm on one thread: a block's bits depend on nothing but the ISA, whichever thread
  // runs it, so the threads (the caller's OpenMP count) change the speed only. The lower triangle is then the
  // upper's mirror.
  constexpr int kChunk = 512, kBlock = 64;
  std::vector<float> a(static_cast<std::size_t>(kChunk) * k);
  const int blocks = (k + kBlock - 1) / kBlock;
  const int cols = (w + stride - 1) / stride;
  const int patches = ((h + stride - 1) / stride) * cols;
  for (int p0 = 0; p0 < patches; p0 += kChunk) {
    const int n = std::min(kChunk, patches - p0);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; ++i)
      patch(x, pool, h, w, kernel, (p0 + i) / cols * stride, (p0 + i) % cols * stride,
            a.data() + static_cast<std::size_t>(i) * k);
    dnnl_status_t failed = dnnl_success;
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = blocks - 1; b >= 0; --b) {  // the largest blocks first
      const int j0 = b * kBlock, j1 = std::min(k, j0 + kBlock);
      const dnnl_status_t st =
          dnnl_sgemm('T', 'N', j1, j1 - j0, n, 1.f, a.data(), k, a.data() + j0, k, 1.f, hessian.data() + j0, k);
      if (st != dnnl_success) {
#pragma omp critical(sprt_gptq_status)
        failed = st;
      }
    }
    if (failed != dnnl_success)
      throw Error(ErrorKind::Internal, "oneDNN sgemm failed (status " + std::to_string(failed) + ")");
  }
  // The mirror in 32 x 32 tiles: row by row it read a column of H, one cache line per value.
  constexpr int kTile = 32;
  for (int i0 = 0; i0 < k; i0 += kTile)
    for (int j0 = 0; j0 <= i0; j0 += kTile)
      for (int i = i0; i < std::min(k, i0 + kTile); ++i)
        for (int j = j0; j < std::min(i, j0 + kTile); ++j)
          hessian[static_cast<std::size_t>(i) * k + j] = hessian[static_cast<std::size_t>(j) * k + i];
}

void add_patch_hessian_reference(const float* x, int c, int h, int w, bool pool, int kernel, int stride,
                                 std::vector<double>& hessian) {
  check_sizes(c, h, w, 1, kernel, stride, hessian.size(), "add_patch_hessian_reference");
  // Pool first into a plain frame (the fast path pools as it reads).
  std::vector<float> pooled;
  if (pool) {
    pooled.resize(static_cast<std::size_t>(c) * (h / 2) * (w / 2));
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h / 2; ++y)
        for (int xx = 0; xx < w / 2; ++xx) {
          const float* r = x + (static_cast<std::size_t>(ch) * h + 2 * y) * w + 2 * xx;
          pooled[(static_cast<std::size_t>(ch) * (h / 2) + y) * (w / 2) + xx] =
              std::max(std::max(r[0], r[1]), std::max(r[w], r[w + 1]));
        }
    x = pooled.data();
    h /= 2;
    w /= 2;
  }
  const int k = c * kernel * kernel, r = kernel / 2;
  std::vector<double> col(static_cast<std::size_t>(k));
  for (int y = 0; y < h; y += stride)
    for (int xx = 0; xx < w; xx += stride) {
      std::size_t i = 0;
      for (int ch = 0; ch < c; ++ch)
        for (int ky = 0; ky < kernel; ++ky)
          for (int kx = 0; kx < kernel; ++kx) {
            const int yy = y + ky - r, xk = xx + kx - r;
            col[i++] =
                yy >= 0 && yy < h && xk >= 0 && xk < w ? x[(static_cast<std::size_t>(ch) * h + yy) * w + xk] : 0.0;
          }
      for (int a = 0; a < k; ++a)
        for (int b = 0; b < k; ++b) hessian[static_cast<std::size_t>(a) * k + b] += col[a] * col[b];
    }
}

S8Weights s8_nearest(const std::vector<float>& w, int out_channels) {
  if (out_channels <= 0 || w.empty() || w.size() % static_cast<std::size_t>(out_channels) != 0)
    throw Error(ErrorKind::InvalidArgument, "s8 weights: " + std::to_string(w.size()) + " values do not split into " +
                                                std::to_string(out_channels) + " output channels");
  const std::size_t k = w.size() / static_cast<std::size_t>(out_channels);
  S8Weights q;
  q.codes.resize(w.size());
  for (int o = 0; o < out_channels; ++o) {
    const float* row = w.data() + static_cast<std::size_t>(o) * k;
    float m = 0;
    for (std::size_t i = 0; i < k; ++i) m = std::max(m, std::fabs(row[i]));
    const float s = m > 0 ? 127.f / m : 1.f;  // the scale the backend has always used
    q.scales.push_back(s);
    for (std::size_t i = 0; i < k; ++i)
      q.codes[static_cast<std::size_t>(o) * k + i] =
          static_cast<signed char>(std::clamp(std::nearbyint(row[i] * s), -127.f, 127.f));
  }
  return q;
}

S8Weights s8_gptq(const std::vector<float>& w, int out_channels, const std::vector<float>& hessian, double damp) {
  S8Weights q = s8_nearest(w, out_channels);  // the scales (and the sizes checked)
  const std::size_t kk = w.size() / static_cast<std::size_t>(out_channels);
  const int k = static_cast<int>(kk);
  if (hessian.size() != kk * kk)
    throw Error(ErrorKind::InvalidArgument, "GPTQ: a Hessian of " + std::to_string(hessian.size()) +
                                                " values for weights of " + std::to_string(kk) + " columns");
  auto at = [k](std::vector<double>& m, int i, int j) -> double& {
    return m[static_cast<std::size_t>(i) * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)];
  };
  std::vector<double> hd(hessian.begin(), hessian.end());
  std::vector<char> dead(kk, 0);
  double mean = 0;
  for (int i = 0; i < k; ++i) {
    if (at(hd, i, i) == 0) {
      dead[static_cast<std::size_t>(i)] = 1;
      at(hd, i, i) = 1;
    }
    mean += at(hd, i, i);
  }
  mean /= k;
  for (int i = 0; i < k; ++i) at(hd, i, i) += damp * mean;
  // Act order: the columns with the largest inputs first (GPTQ's --act-order); ties by index.
  std::vector<int> perm(kk);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return at(hd, a, a) > at(hd, b, b); });
  // U = the upper Cholesky factor of P^T H^-1 P (GPTQ's Hinv), without forming H^-1: with R = reverse(P^T H P)
  // (rows and columns reversed) = M M^T (lower Cholesky), U = reverse(M^-1).
  std::vector<double> m(kk * kk, 0.0);
  for (int i = 0; i < k; ++i)
    for (int j = 0; j <= i; ++j)
      at(m, i, j) = at(hd, perm[static_cast<std::size_t>(k - 1 - i)], perm[static_cast<std::size_t>(k - 1 - j)]);
  for (int i = 0; i < k; ++i) {  // Cholesky-Banachiewicz, in place in the lower triangle
    for (int j = 0; j <= i; ++j) {
      double s[4] = {0, 0, 0, 0};
      int t = 0;
      for (; t + 4 <= j; t += 4)
        for (int u = 0; u < 4; ++u) s[u] += at(m, i, t + u) * at(m, j, t + u);
      for (; t < j; ++t) s[0] += at(m, i, t) * at(m, j, t);
      const double v = at(m, i, j) - ((s[0] + s[1]) + (s[2] + s[3]));
      if (i == j) {
        if (!(v > 0) || !std::isfinite(v))
          throw Error(ErrorKind::Internal,
                      "GPTQ: the dampened Hessian is not positive definite (column " + std::to_string(i) + ")");
        at(m, i, i) = std::sqrt(v);
      } else {
        at(m, i, j) = v / at(m, j, j);
      }
    }
  }
  // X = M^-1 (lower), row by row: X[i] = (e_i - sum_{t < i} M[i][t] X[t]) / M[i][i].
  std::vector<double> x(kk * kk, 0.0);
  for (int i = 0; i < k; ++i) {
    double* xi = &at(x, i, 0);
    for (int t = 0; t < i; ++t) {
      const double mit = at(m, i, t);
      const double* xt = &at(x, t, 0);
      for (int j = 0; j <= t; ++j) xi[j] -= mit * xt[j];
    }
    xi[i] += 1;
    const double inv = 1 / at(m, i, i);
    for (int j = 0; j <= i; ++j) xi[j] *= inv;
  }
  std::vector<double> u(kk * kk, 0.0);  // U[i][j] = X[K-1-i][K-1-j], j >= i
  for (int i = 0; i < k; ++i)
    for (int j = i; j < k; ++j) at(u, i, j) = at(x, k - 1 - i, k - 1 - j);
  // Round column by column in the permuted order, each error spread over the later columns of its row.
  std::vector<double> row(kk);
  for (int o = 0; o < out_channels; ++o) {
    const std::size_t base = static_cast<std::size_t>(o) * kk;
    for (int i = 0; i < k; ++i) {
      const int src = perm[static_cast<std::size_t>(i)];
      row[static_cast<std::size_t>(i)] =
          dead[static_cast<std::size_t>(src)] ? 0.0 : w[base + static_cast<std::size_t>(src)];
    }
    const double s = q.scales[static_cast<std::size_t>(o)];
    for (int i = 0; i < k; ++i) {
      const double code = std::clamp(std::nearbyint(row[static_cast<std::size_t>(i)] * s), -127.0, 127.0);
      q.codes[base + static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])] = static_cast<signed char>(code);
      const double err = (row[static_cast<std::size_t>(i)] - code / s) / at(u, i, i);
      const double* ui = &at(u, i, 0);
      for (int j = i + 1; j < k; ++j) row[static_cast<std::size_t>(j)] -= err * ui[j];
    }
  }
  return q;
}

}  // namespace superpoint_rt::backend::detail
