// The int8 plan's conv1b + pool1 kernel (src/backend/onednn/wino_u8.hpp): the reference is the convolution + bias +
// ReLU + 2x2 max pooling + u8 quantisation it stands for, to the accuracy of its 11-13-bit transformed weights
// (checked against double precision, worst-case inputs included); each vector kernel (AVX-512 VNNI, AVX-VNNI, AVX2)
// gives the reference's bytes on random and awkward shapes where this CPU (after the SUPERPOINT_RT_ISA cap) has it;
// stripes of the frame (the buffers a plan's lanes hold) give the whole frame's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "backend/onednn/wino_u8.hpp"
#include "util/cpu.hpp"

namespace d = superpoint_rt::backend::detail;

namespace {

struct Layer {
  int ic, oc;
  std::vector<float> weight, bias;
  std::vector<float> in_scale, out_scale;  // one value (every channel) or one per channel
  double in(int i) const { return in_scale.size() == 1 ? in_scale[0] : in_scale[static_cast<std::size_t>(i)]; }
  double out(int o) const { return out_scale.size() == 1 ? out_scale[0] : out_scale[static_cast<std::size_t>(o)]; }
  d::WinoU8 k;
};

// per_channel: a scale per input and output channel (between 0.5x and 2x the common one), as a plan folds them.
Layer random_layer(int ic, int oc, unsigned seed, bool per_channel = false) {
  std::mt19937 rng(seed);
  // conv1b's weights have a spread of about 0.05 (the SuperPoint checkpoint); the scales are of the calibrated plan's
  // order (u8 per unit of activation).
  std::normal_distribution<float> n(0.f, 0.06f);
  Layer l{ic, oc, {}, {}, {40.f}, {12.f}, {}};
  if (per_channel) {
    std::uniform_real_distribution<float> f(0.5f, 2.f);
    l.in_scale.clear();
    l.out_scale.clear();
    for (int i = 0; i < ic; ++i) l.in_scale.push_back(40.f * f(rng));
    for (int o = 0; o < oc; ++o) l.out_scale.push_back(12.f * f(rng));
  }
  for (int i = 0; i < oc * ic * 9; ++i) l.weight.push_back(n(rng));
  for (int i = 0; i < oc; ++i) l.bias.push_back(n(rng) * 2.f);
  l.k = d::wino_u8_prepare(l.weight.data(), l.bias.data(), ic, oc, l.in_scale, l.out_scale);
  return l;
}

std::vector<std::uint8_t> random_input(int h, int w, int ic, unsigned seed, int density_percent = 60) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(0, 255), on(0, 99);
  std::vector<std::uint8_t> in(static_cast<std::size_t>(h) * w * ic);
  for (auto& x : in) x = on(rng) < density_percent ? static_cast<std::uint8_t>(v(rng)) : 0;  // ReLU's zeros
  return in;
}

// The whole frame: conv rows [0, 2 * (h / 2)), pool rows [0, h / 2).
// Unpooled (pool == false): conv rows [0, h), in three runs of tiles (as the plan's threads split them).
std::vector<std::uint8_t> run_frame(const Layer& l, d::WinoU8Kernel kern, const std::vector<std::uint8_t>& in, int h,
                                    int w, bool pool = true) {
  std::vector<unsigned char> scratch(d::wino_u8_scratch_bytes(l.ic, l.oc) + 3);
  if (!pool) {
    std::vector<std::uint8_t> out(static_cast<std::size_t>(h) * w * l.oc, 0xAB);
    const int tiles = (h + 3) / 4 * ((w + 3) / 4), a = tiles / 3, b = tiles * 5 / 7;
    kern(l.k.view(), {in.data(), 0, h, w, 0, h, out.data(), false, 0, a}, scratch.data() + 3);
    kern(l.k.view(), {in.data(), 0, h, w, 0, h, out.data(), false, a, b - a}, scratch.data() + 3);
    kern(l.k.view(), {in.data(), 0, h, w, 0, h, out.data(), false, b, -1}, scratch.data() + 3);
    return out;
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(h / 2) * (w / 2) * l.oc, 0xAB);
  kern(l.k.view(), {in.data(), 0, h, w, 0, h / 2 * 2, out.data()}, scratch.data() + 3);  // misaligned on purpose
  return out;
}

// In stripes [y0, y1) (boundaries multiples of 4), each from a buffer of its rows y0 - 1 .. y1 (zeros outside the
// frame), as the plan's lanes run them.
std::vector<std::uint8_t> run_stripes(const Layer& l, d::WinoU8Kernel kern, const std::vector<std::uint8_t>& in, int h,
                                      int w, int rows) {
  const std::size_t row_bytes = static_cast<std::size_t>(w) * l.ic;
  const std::size_t out_row = static_cast<std::size_t>(w / 2) * l.oc;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(h / 2) * out_row, 0xAB);
  std::vector<unsigned char> scratch(d::wino_u8_scratch_bytes(l.ic, l.oc));
  const int end = h / 2 * 2;
  for (int y0 = 0; y0 < end; y0 += rows) {
    const int y1 = std::min(end, y0 + rows);
    std::vector<std::uint8_t> buf(static_cast<std::size_t>(y1 - y0 + 2) * row_bytes, 0);
    for (int y = y0 - 1; y <= y1; ++y)
      if (y >= 0 && y < h)
        std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(y * row_bytes), row_bytes,
                    buf.begin() + static_cast<std::ptrdiff_t>((y - y0 + 1) * row_bytes));
    kern(l.k.view(),
         {buf.data(), y0 - 1, y1 - y0 + 2, w, y0, y1, out.data() + static_cast<std::size_t>(y0 / 2) * out_row},
         scratch.data());
  }
  return out;
}

// conv + bias + ReLU + pool + quantisation in double: the value the u8 output rounds.
std::vector<double> exact(const Layer& l, const std::vector<std::uint8_t>& in, int h, int w,
                          const std::vector<float>* weight = nullptr, bool pool = true) {
  const std::vector<float>& wt = weight ? *weight : l.weight;
  std::vector<double> conv(static_cast<std::size_t>(h) * w * l.oc);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int o = 0; o < l.oc; ++o) {
        double acc = l.bias[static_cast<std::size_t>(o)];
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int sy = y + ky - 1, sx = x + kx - 1;
            if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
            const std::uint8_t* px = &in[(static_cast<std::size_t>(sy) * w + sx) * l.ic];
            for (int i = 0; i < l.ic; ++i)
              acc += wt[((static_cast<std::size_t>(o) * l.ic + i) * 3 + ky) * 3 + kx] * (px[i] / l.in(i));
          }
        conv[(static_cast<std::size_t>(y) * w + x) * l.oc + o] = acc;
      }
  if (!pool) {
    for (std::size_t i = 0; i < conv.size(); ++i)
      conv[i] = std::clamp(conv[i] * l.out(static_cast<int>(i % static_cast<std::size_t>(l.oc))), 0.0, 255.0);
    return conv;
  }
  std::vector<double> out(static_cast<std::size_t>(h / 2) * (w / 2) * l.oc);
  for (int y = 0; y < h / 2; ++y)
    for (int x = 0; x < w / 2; ++x)
      for (int o = 0; o < l.oc; ++o) {
        double m = -1e300;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b)
            m = std::max(m, conv[((static_cast<std::size_t>(2 * y + a)) * w + 2 * x + b) * l.oc + o]);
        out[(static_cast<std::size_t>(y) * (w / 2) + x) * l.oc + o] = std::clamp(m * l.out(o), 0.0, 255.0);
      }
  return out;
}

struct Case {
  int h, w, ic, oc;
  unsigned seed;
};
const std::vector<Case> kCases = {{2, 2, 64, 64, 1},    {4, 4, 32, 64, 2},    {6, 10, 64, 64, 3},  {9, 7, 64, 64, 4},
                                  {16, 26, 64, 128, 5}, {13, 37, 32, 64, 6},  {20, 3, 64, 64, 7},  {3, 1, 64, 64, 8},
                                  {8, 48, 96, 64, 9},   {30, 50, 64, 64, 10}, {2, 130, 64, 64, 11}};

// A vector kernel and the channel multiples it takes (the kernel table checks them too).
struct FastKernel {
  d::WinoU8Kernel fn;
  const char* name;
  int ic_multiple, oc_multiple;
  bool takes(int ic, int oc) const { return ic % ic_multiple == 0 && oc % oc_multiple == 0; }
};

// Every vector kernel this CPU runs after the SUPERPOINT_RT_ISA cap (avx2 keeps AVX-VNNI, avx2-novnni drops it).
std::vector<FastKernel> fast_kernels() {
  const auto& f = superpoint_rt::util::cpu_features();
  std::vector<FastKernel> k;
  if (f.avx512() && f.avx512_vnni) k.push_back({d::wino_u8_rows_avx512vnni, "avx512_vnni", 32, 64});
  if (f.avx2_fma() && f.avx_vnni) k.push_back({d::wino_u8_rows_avxvnni, "avx_vnni", 16, 16});
  if (f.avx2_fma()) k.push_back({d::wino_u8_rows_avx2, "avx2", 16, 16});
  return k;
}

// The weights as the direct int8 kernel would take them: per output channel, the nearest of 255 codes (of the weights
// with the input channels' scales folded in, where they differ, as the Winograd kernel's are).
std::vector<float> s8_weights(const Layer& l) {
  std::vector<float> q(l.weight.size());
  const std::size_t per = static_cast<std::size_t>(l.ic) * 9;
  auto folded = [&](std::size_t o, std::size_t i) {
    return l.weight[o * per + i] / static_cast<float>(l.in(static_cast<int>(i / 9)));
  };
  for (std::size_t o = 0; o < static_cast<std::size_t>(l.oc); ++o) {
    float top = 0;
    for (std::size_t i = 0; i < per; ++i) top = std::max(top, std::fabs(folded(o, i)));
    const float s = top > 0 ? 127.f / top : 1.f;
    for (std::size_t i = 0; i < per; ++i)
      q[o * per + i] = std::nearbyint(folded(o, i) * s) / s * static_cast<float>(l.in(static_cast<int>(i / 9)));
  }
  return q;
}

TEST(WinoU8, ReferenceIsTheConvolutionMoreCloselyThanS8Weights) {
  for (const auto& c : kCases) {
    if (c.h * c.w * c.oc > 200000) continue;                            // the double-precision check is slow
    const Layer l = random_layer(c.ic, c.oc, c.seed, c.seed % 3 == 0);  // every third case with per-channel scales
    const auto in = random_input(c.h, c.w, c.ic, c.seed + 50);
    const bool pool = c.seed % 2 == 1;  // every other case unpooled (conv2a)
    const auto got = run_frame(l, d::wino_u8_rows_reference, in, c.h, c.w, pool);
    const auto want = exact(l, in, c.h, c.w, nullptr, pool);
    const auto s8w = s8_weights(l);
    const auto s8 = exact(l, in, c.h, c.w, &s8w, pool);
    // The error of the u8 output against the exact value, beside that of the direct kernel's s8 weights (rounded to
    // u8 the same way): the transformed 11-13-bit weights must be closer on average.
    double sq = 0, sq_s8 = 0, worst = 0;
    int between = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double e = got[i] - want[i], e8 = std::nearbyint(s8[i]) - want[i];
      sq += e * e;
      sq_s8 += e8 * e8;
      // In codes of the common output scale (a channel's own scale is up to 2x it).
      worst = std::max(worst, std::fabs(e) * 12.0 / l.out(static_cast<int>(i % static_cast<std::size_t>(c.oc))));
      between += want[i] > 0.5 && want[i] < 254.5;
    }
    const double n = static_cast<double>(want.size());
    std::cout << c.h << "x" << c.w << "x" << c.ic << "->" << c.oc << ": rms " << std::sqrt(sq / n) << " (s8 "
              << std::sqrt(sq_s8 / n) << "), worst " << worst << "\n";
    EXPECT_LE(sq, sq_s8) << c.h << "x" << c.w << "x" << c.ic << "->" << c.oc;
    EXPECT_LE(worst, 3.0);
    if (!want.empty()) {
      EXPECT_GT(between, 0) << "the case exercises values between the clamps";
    }
  }
}

TEST(WinoU8, WorstCaseInputsStayExact) {
  // Every input 255 or 0 in a pattern that drives each transformed value to its bound (|V| up to 20400), with every
  // weight at its extreme: the int32 sums are at their largest and must not wrap.
  Layer l{64, 64, std::vector<float>(64 * 64 * 9), std::vector<float>(64, 0.f), {1.f}, {0.005f}, {}};
  for (std::size_t i = 0; i < l.weight.size(); ++i) l.weight[i] = (i * 7919 % 5 < 2) ? -0.25f : 0.25f;
  l.k = d::wino_u8_prepare(l.weight.data(), l.bias.data(), 64, 64, l.in_scale, l.out_scale);
  for (int p = 0; p < 36; ++p) {
    int top = 0;
    for (std::size_t i = 0; i < 32; ++i)
      for (std::size_t o = 0; o < 64; ++o)
        for (std::size_t h = 0; h < 2; ++h)
          top = std::max(top,
                         std::abs(static_cast<int>(l.k.u[((static_cast<std::size_t>(p) * 32 + i) * 64 + o) * 2 + h])));
    EXPECT_LE(top, d::wino_u8_limit(p, 64));
    EXPECT_GE(top, d::wino_u8_limit(p, 64) - 1) << "the largest weight maps to the limit";
  }
  const int h = 12, w = 12;
  for (unsigned pattern = 0; pattern < 4; ++pattern) {
    std::vector<std::uint8_t> in(static_cast<std::size_t>(h) * w * 64);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int i = 0; i < 64; ++i) {
          const bool on = pattern == 0   ? true
                          : pattern == 1 ? (x + y) % 2 == 0
                          : pattern == 2 ? (x % 4 == 1) != (y % 3 == 0)
                                         : (i % 2 == 0);
          in[(static_cast<std::size_t>(y) * w + x) * 64 + i] = on ? 255 : 0;
        }
    const auto want = exact(l, in, h, w);
    std::vector<d::WinoU8Kernel> kernels{d::wino_u8_rows_reference};
    for (const auto& k : fast_kernels())
      if (k.takes(64, 64)) kernels.push_back(k.fn);
    for (const auto k : kernels) {
      const auto got = run_frame(l, k, in, h, w);
      for (std::size_t i = 0; i < want.size(); ++i)
        ASSERT_LE(std::fabs(got[i] - want[i]), 1.0) << "pattern " << pattern << " at " << i;
    }
  }
}

TEST(WinoU8, FastKernelsMatchTheReferenceAndStripesDoNotMatter) {
  const auto kernels = fast_kernels();
  std::cout << kernels.size() << " fast kernel(s) on this CPU:";
  for (const auto& k : kernels) std::cout << " " << k.name;
  std::cout << "\n";
  for (const auto& c : kCases) {
    const Layer l = random_layer(c.ic, c.oc, c.seed, c.seed % 3 == 0);
    const auto in = random_input(c.h, c.w, c.ic, c.seed + 70, 80);
    const auto ref = run_frame(l, d::wino_u8_rows_reference, in, c.h, c.w);
    EXPECT_EQ(run_stripes(l, d::wino_u8_rows_reference, in, c.h, c.w, 4), ref) << c.h << "x" << c.w;
    for (const auto& k : kernels) {
      if (!k.takes(c.ic, c.oc)) continue;  // the kernel's precondition (the plan checks it too)
      EXPECT_EQ(run_frame(l, k.fn, in, c.h, c.w), ref)
          << k.name << " " << c.h << "x" << c.w << "x" << c.ic << "->" << c.oc;
      EXPECT_EQ(run_stripes(l, k.fn, in, c.h, c.w, 8), ref) << k.name << " " << c.h << "x" << c.w;
      EXPECT_EQ(run_frame(l, k.fn, in, c.h, c.w, false), run_frame(l, d::wino_u8_rows_reference, in, c.h, c.w, false))
          << k.name << " unpooled " << c.h << "x" << c.w;
    }
  }
  // A frame of the stripes' real size.
  const Layer l = random_layer(64, 64, 99);
  const auto in = random_input(64, 640, 64, 98);
  const auto ref = run_stripes(l, d::wino_u8_rows_reference, in, 64, 640, 60);
  for (const auto& k : kernels) EXPECT_EQ(run_stripes(l, k.fn, in, 64, 640, 60), ref) << k.name;
}

TEST(WinoU8, RoundsHalfToEvenAfterTheBias) {
  // All weights zero: the output is round(clamp(bias * out_scale)), with exactly representable halves.
  const float halves[8] = {0.5f, 1.5f, 2.5f, 254.5f, 253.5f, 300.f, -1.f, 100.5f};
  Layer l{64, 64, std::vector<float>(64 * 64 * 9, 0.f), std::vector<float>(64), {1.f}, {1.f}, {}};
  for (int o = 0; o < 64; ++o) l.bias[static_cast<std::size_t>(o)] = halves[o % 8];
  l.k = d::wino_u8_prepare(l.weight.data(), l.bias.data(), 64, 64, {1.f}, {1.f});
  const std::uint8_t want[8] = {0, 2, 2, 254, 254, 255, 0, 100};
  const std::vector<std::uint8_t> in(4 * 4 * 64, 200);
  std::vector<d::WinoU8Kernel> kernels{d::wino_u8_rows_reference};
  for (const auto& k : fast_kernels()) kernels.push_back(k.fn);
  for (const auto k : kernels) {
    const auto out = run_frame(l, k, in, 4, 4);
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], want[i % 64 % 8]) << i;
  }
}

}  // namespace
