// GPTQ's int8 weights (backend/onednn/gptq.hpp): the patch Hessian against a double-precision reference (padding,
// pooling, sampling stride, 1x1), the nearest codes, GPTQ's two defining properties (with independent inputs it IS
// nearest rounding; with correlated inputs its output error on those inputs is smaller) and its refusals.
#include "backend/onednn/gptq.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "superpoint_rt/errors.hpp"

namespace sp = superpoint_rt;
namespace d = superpoint_rt::backend::detail;

namespace {

std::vector<float> random_values(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Sum over i, j of |(W - Q / s) H (W - Q / s)^T|'s diagonal: the squared error of the layer's outputs on the
// inputs whose Hessian H is.
double output_error(const std::vector<float>& w, const d::S8Weights& q, int oc, const std::vector<double>& h) {
  const std::size_t k = w.size() / static_cast<std::size_t>(oc);
  double total = 0;
  for (int o = 0; o < oc; ++o) {
    std::vector<double> e(k);
    for (std::size_t i = 0; i < k; ++i)
      e[i] = w[o * k + i] - double(q.codes[o * k + i]) / q.scales[static_cast<std::size_t>(o)];
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) total += e[i] * h[i * k + j] * e[j];
  }
  return total;
}

}  // namespace

TEST(Gptq, PatchHessianMatchesTheReference) {
  struct Case {
    int c, h, w, kernel, stride;
    bool pool;
  };
  for (const Case& cs : {Case{3, 9, 11, 3, 1, false}, Case{3, 9, 11, 3, 4, false}, Case{2, 13, 10, 3, 2, true},
                         Case{5, 7, 7, 1, 1, false}, Case{4, 17, 6, 3, 3, true}, Case{16, 40, 44, 3, 4, false},
                         Case{16, 21, 19, 3, 2, true}, Case{8, 9, 9, 1, 1, true}}) {
    const std::size_t k = static_cast<std::size_t>(cs.c) * cs.kernel * cs.kernel;
    const auto x = random_values(static_cast<std::size_t>(cs.c) * cs.h * cs.w, 7u + cs.c, 0.f, 3.f);
    std::vector<float> hf(k * k, 0.f);
    std::vector<double> hd(k * k, 0.0);
    // Twice: the sums accumulate over calls.
    for (int rep = 0; rep < 2; ++rep) {
      d::add_patch_hessian(d::ActivationView::planar(x.data(), cs.c, cs.h, cs.w), cs.pool, cs.kernel, cs.stride, hf);
      d::add_patch_hessian_reference(x.data(), cs.c, cs.h, cs.w, cs.pool, cs.kernel, cs.stride, hd);
    }
    // The same bits from the other layouts oneDNN writes: channels-last, and blocked by channels where they split.
    std::vector<float> nhwc(x.size());
    for (int ch = 0; ch < cs.c; ++ch)
      for (int y = 0; y < cs.h; ++y)
        for (int xx = 0; xx < cs.w; ++xx)
          nhwc[(static_cast<std::size_t>(y) * cs.w + xx) * cs.c + ch] =
              x[(static_cast<std::size_t>(ch) * cs.h + y) * cs.w + xx];
    std::vector<float> hl(k * k, 0.f);
    for (int rep = 0; rep < 2; ++rep)
      d::add_patch_hessian(
          {nhwc.data(), cs.c, cs.h, cs.w, 1, 1, static_cast<std::size_t>(cs.w) * cs.c, static_cast<std::size_t>(cs.c)},
          cs.pool, cs.kernel, cs.stride, hl);
    EXPECT_EQ(hl, hf);
    for (const int block : {8, 16}) {
      if (cs.c % block != 0) continue;
      std::vector<float> blocked(x.size());
      for (int ch = 0; ch < cs.c; ++ch)
        for (int y = 0; y < cs.h; ++y)
          for (int xx = 0; xx < cs.w; ++xx)
            blocked[((static_cast<std::size_t>(ch / block) * cs.h + y) * cs.w + xx) * block + ch % block] =
                x[(static_cast<std::size_t>(ch) * cs.h + y) * cs.w + xx];
      std::vector<float> hb(k * k, 0.f);
      for (int rep = 0; rep < 2; ++rep)
        d::add_patch_hessian({blocked.data(), cs.c, cs.h, cs.w, block, static_cast<std::size_t>(cs.h) * cs.w * block,
                              static_cast<std::size_t>(cs.w) * block, static_cast<std::size_t>(block)},
                             cs.pool, cs.kernel, cs.stride, hb);
      EXPECT_EQ(hb, hf) << "block " << block;
    }
    // Non-negative inputs: every product is >= 0, so a float sum of n of them is within n * 2^-24 of the exact sum
    // (relative), whatever the order (sgemm's). The count of sampled patches bounds n.
    const int ph = cs.pool ? cs.h / 2 : cs.h, pw = cs.pool ? cs.w / 2 : cs.w;
    const double n = 2.0 * ((ph + cs.stride - 1) / cs.stride) * ((pw + cs.stride - 1) / cs.stride);
    for (std::size_t i = 0; i < k * k; ++i)
      ASSERT_NEAR(hf[i], hd[i], (n + 2) * std::ldexp(1.0, -24) * hd[i] + 1e-30)
          << "c " << cs.c << " kernel " << cs.kernel << " stride " << cs.stride << " pool " << cs.pool << " at " << i;
  }
  // The same bits at any thread count (the blocks of the sum are fixed).
  {
    const int c = 32, hh = 30, ww = 34;  // K = 288: several column blocks
    const auto x = random_values(static_cast<std::size_t>(c) * hh * ww, 9, 0.f, 1.f);
    std::vector<float> h1(288 * 288, 0.f), h2(288 * 288, 0.f);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    d::add_patch_hessian(d::ActivationView::planar(x.data(), c, hh, ww), true, 3, 1, h1);
    omp_set_num_threads(3);
    d::add_patch_hessian(d::ActivationView::planar(x.data(), c, hh, ww), true, 3, 1, h2);
    omp_set_num_threads(saved);
    EXPECT_EQ(h1, h2);
  }
  // The reference itself, by hand: one channel 2 x 2 [1 2; 3 4], kernel 3, stride 1, zero padding: the centre tap
  // (index 4) sees each value once, tap (-1, -1) (index 0) only x[0][0], from the patch at (1, 1).
  const std::vector<float> x{1, 2, 3, 4};
  std::vector<double> h(81, 0.0);
  d::add_patch_hessian_reference(x.data(), 1, 2, 2, false, 3, 1, h);
  EXPECT_EQ(h[4 * 9 + 4], 1 + 4 + 9 + 16);
  EXPECT_EQ(h[0], 1);
  EXPECT_EQ(h[4 * 9 + 0], 4 * 1);  // centre x tap (-1, -1), the patch at (1, 1): x[1][1] * x[0][0]
  // Pooling: the 2 x 2 max of a 2 x 3 plane is one value (floor), max(1, 2, 4, 5) = 5.
  const std::vector<float> y{1, 2, 3, 4, 5, 6};
  std::vector<double> hp(1, 0.0);
  d::add_patch_hessian_reference(y.data(), 1, 2, 3, true, 1, 1, hp);
  EXPECT_EQ(hp[0], 25);
}

TEST(Gptq, RefusesSizesThatDoNotFit) {
  const std::vector<float> x(3 * 4 * 4, 1.f);
  const auto v = d::ActivationView::planar(x.data(), 3, 4, 4);
  std::vector<float> h(26 * 26);
  EXPECT_THROW(d::add_patch_hessian(v, false, 3, 1, h), sp::Error);
  std::vector<float> ok(27 * 27);
  EXPECT_THROW(d::add_patch_hessian(v, false, 3, 0, ok), sp::Error);
  auto odd = v;
  odd.block = 2;  // 3 channels do not split into blocks of 2
  EXPECT_THROW(d::add_patch_hessian(odd, false, 3, 1, ok), sp::Error);
  EXPECT_THROW(d::s8_nearest(std::vector<float>(10), 3), sp::Error);
  EXPECT_THROW(d::s8_gptq(std::vector<float>(12), 3, std::vector<float>(9)), sp::Error);
  try {
    d::s8_gptq(std::vector<float>(12, 1.f), 3, std::vector<float>(16, NAN));
    ADD_FAILURE() << "a NaN Hessian was accepted";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::Internal);
  }
}

TEST(Gptq, NearestCodesAndScales) {
  // Scale 127 / max|w[o]|; ties to even; an all-zero channel has scale 1 and codes 0.
  const std::vector<float> w{1.f, -0.5f, 0.25f, 2.f, 0.f, 0.f, 0.f, 0.f, -4.f, 0.5f, 0.f, 1.f};
  const d::S8Weights q = d::s8_nearest(w, 3);
  ASSERT_EQ(q.scales.size(), 3u);
  EXPECT_FLOAT_EQ(q.scales[0], 127.f / 2.f);
  EXPECT_EQ(q.scales[1], 1.f);
  EXPECT_FLOAT_EQ(q.scales[2], 127.f / 4.f);
  // 63.5 (a tie) -> 64, -31.75 -> -32, 15.875 -> 16; 15.875 -> 16, 31.75 -> 32.
  const std::vector<int> want{64, -32, 16, 127, 0, 0, 0, 0, -127, 16, 0, 32};
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(q.codes[i], want[i]) << i;
}

TEST(Gptq, WithIndependentInputsItIsNearestRounding) {
  // A diagonal Hessian (uncorrelated inputs) leaves nothing to compensate: GPTQ's codes are the nearest ones.
  const int oc = 8, k = 27;
  const auto w = random_values(static_cast<std::size_t>(oc) * k, 3, -1.f, 1.f);
  std::vector<float> h(static_cast<std::size_t>(k) * k, 0.f);
  for (int i = 0; i < k; ++i) h[static_cast<std::size_t>(i) * k + i] = 1.f + static_cast<float>(i % 5);
  const d::S8Weights g = d::s8_gptq(w, oc, h), n = d::s8_nearest(w, oc);
  EXPECT_EQ(g.codes, n.codes);
  EXPECT_EQ(g.scales, n.scales);
}

TEST(Gptq, WithCorrelatedInputsItHasTheSmallerOutputError) {
  // Inputs that share a common component (like neighbouring pixels of a feature map): GPTQ's codes give a smaller
  // output error on them than nearest rounding, with the same scales and codes in [-127, 127]; a column no input
  // reaches gets the code 0.
  const int oc = 16, c = 4, kernel = 3, hh = 24, ww = 24;
  const int k = c * kernel * kernel;
  std::vector<float> x(static_cast<std::size_t>(c) * hh * ww);
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.f, 1.f);
  for (int y = 0; y < hh; ++y)
    for (int xx = 0; xx < ww; ++xx) {
      const float common = 2.f + g(rng);
      for (int ch = 0; ch < c; ++ch)
        x[(static_cast<std::size_t>(ch) * hh + y) * ww + xx] = std::max(0.f, common + 0.3f * g(rng));
    }
  for (int y = 0; y < hh; ++y)
    for (int xx = 0; xx < ww; ++xx) x[(static_cast<std::size_t>(3) * hh + y) * ww + xx] = 0.f;  // a dead channel
  std::vector<float> h(static_cast<std::size_t>(k) * k, 0.f);
  std::vector<double> hd(static_cast<std::size_t>(k) * k, 0.0);
  d::add_patch_hessian(d::ActivationView::planar(x.data(), c, hh, ww), false, kernel, 1, h);
  d::add_patch_hessian_reference(x.data(), c, hh, ww, false, kernel, 1, hd);
  const auto w = random_values(static_cast<std::size_t>(oc) * k, 5, -0.2f, 0.2f);
  const d::S8Weights q = d::s8_gptq(w, oc, h), n = d::s8_nearest(w, oc);
  EXPECT_EQ(q.scales, n.scales);
  for (int o = 0; o < oc; ++o)
    for (int i = 0; i < k; ++i) {
      const int code = q.codes[static_cast<std::size_t>(o) * k + i];
      EXPECT_LE(std::abs(code), 127);
      if (i >= 3 * kernel * kernel) {
        EXPECT_EQ(code, 0) << "dead input column " << i;
      }
    }
  // The dead channel's weights contribute nothing to the outputs: compare the errors without them.
  const double eg = output_error(w, q, oc, hd), en = output_error(w, n, oc, hd);
  EXPECT_LT(eg, 0.5 * en) << "GPTQ " << eg << " nearest " << en;
}
