// int8 calibration's statistics (backend/onednn/calibration.hpp): the percentile against numpy.percentile's
// definition on a sorted copy (both of its paths: the heap of the top values and the partition), and the Hessian
// sampling stride.
#include "backend/onednn/calibration.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace d = superpoint_rt::backend::detail;

namespace {

// numpy.percentile(v, q), method "linear": the value at rank q / 100 * (n - 1) of the sorted values, interpolated.
float numpy_percentile(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  if (lo + 1 >= v.size()) return v[lo];
  return static_cast<float>(v[lo] + (v[lo + 1] - v[lo]) * (pos - static_cast<double>(lo)));
}

}  // namespace

TEST(Calibration, PercentileIsNumpys) {
  std::mt19937 rng(5);
  for (const std::size_t n : {1u, 2u, 3u, 64u, 65u, 1000u, 20000u, 250001u}) {
    for (const bool ties : {false, true}) {
      std::vector<float> v(n);
      // Post-ReLU-like values: many zeros, a long tail; with ties, few distinct values.
      std::exponential_distribution<float> e(0.5f);
      for (auto& x : v) {
        x = rng() % 3 == 0 ? 0.f : e(rng);
        if (ties) x = static_cast<float>(static_cast<int>(x));
      }
      for (const double q : {0.0, 50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0})
        EXPECT_EQ(d::percentile(v.data(), n, q), numpy_percentile(v, q)) << "n " << n << " q " << q << " ties " << ties;
    }
  }
  EXPECT_EQ(d::percentile(nullptr, 0, 99.99), 0.f);
}

TEST(Calibration, HessianStrideKeepsTenPatchesPerInput) {
  // 640x480 with three planes: conv1b's input (64 x 9 = 576 inputs) at 4, conv3a's (120x160, 576) at 2, conv4b's
  // (60x80, 1152) at 1.
  EXPECT_EQ(d::hessian_stride(480, 640, 3, 576), 4);
  EXPECT_EQ(d::hessian_stride(120, 160, 3, 576), 2);
  EXPECT_EQ(d::hessian_stride(60, 80, 3, 1152), 1);
  for (const int h : {7, 60, 121, 480})
    for (const int w : {9, 80, 161, 640})
      for (const int planes : {1, 3, 6})
        for (const std::size_t k : {64u, 576u, 1152u}) {
          const int s = d::hessian_stride(h, w, planes, k);
          ASSERT_TRUE(s == 1 || s == 2 || s == 4);
          const auto patches = [&](int t) {
            return static_cast<std::size_t>(planes) * static_cast<std::size_t>((h + t - 1) / t) *
                   static_cast<std::size_t>((w + t - 1) / t);
          };
          if (s > 1) {
            EXPECT_GE(patches(s), 10 * k);
          }
          if (s < 4) {
            EXPECT_LT(patches(2 * s), 10 * k);  // the next larger stride would give too few
          }
        }
}

TEST(Calibration, ChannelPercentilesArePercentileOfEachChannel) {
  // Channels-blocked (nChw16c), planar and channels-last views of one activation, at the calibration's percentiles
  // (the heap) and a low one (the copies): each channel's percentile() of its values in row-major order.
  std::mt19937 rng(7);
  std::exponential_distribution<float> e(0.5f);
  const int c = 32, h = 23, w = 41;
  std::vector<float> planar(static_cast<std::size_t>(c) * h * w);
  for (float& v : planar) v = e(rng);
  std::vector<float> blocked(planar.size()), nhwc(planar.size());
  for (int ch = 0; ch < c; ++ch)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const float v = planar[(static_cast<std::size_t>(ch) * h + y) * w + x];
        blocked[((static_cast<std::size_t>(ch / 16) * h + y) * w + x) * 16 + ch % 16] = v;
        nhwc[(static_cast<std::size_t>(y) * w + x) * c + ch] = v;
      }
  const d::ActivationView views[] = {
      d::ActivationView::planar(planar.data(), c, h, w),
      {blocked.data(), c, h, w, 16, static_cast<std::size_t>(h) * w * 16, static_cast<std::size_t>(w) * 16, 16},
      {nhwc.data(), c, h, w, 1, 1, static_cast<std::size_t>(w) * c, static_cast<std::size_t>(c)}};
  for (const double q : {100.0, 99.99, 99.5, 50.0}) {
    std::vector<float> want;
    for (int ch = 0; ch < c; ++ch) {
      const float* p = planar.data() + static_cast<std::size_t>(ch) * h * w;
      want.push_back(d::percentile(p, static_cast<std::size_t>(h) * w, q));
    }
    for (const auto& v : views) EXPECT_EQ(d::channel_percentiles(v, q), want) << "q " << q << " block " << v.block;
  }
}
