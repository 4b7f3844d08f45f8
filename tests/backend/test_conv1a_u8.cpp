// The int8 plan's conv1a kernel (src/backend/onednn/conv1a_u8.hpp): the AVX-512 and AVX2 kernels give the scalar
// reference's bytes on random and awkward shapes (each where the CPU, after the SUPERPOINT_RT_ISA cap, has it), the
// reference is the documented arithmetic (checked in double precision), and any split of the rows gives the same
// output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <utility>
#include <vector>

#include "backend/onednn/conv1a_u8.hpp"
#include "common/test_util.hpp"
#include "util/cpu.hpp"

namespace d = superpoint_rt::backend::detail;

namespace {

struct Case {
  int h, w, channels;
  unsigned seed;
};

struct Layer {
  std::vector<float> weight, bias;
  d::Conv1aU8 k;
};

Layer random_layer(int channels, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 0.4f);
  Layer l;
  for (int i = 0; i < channels * 9; ++i) l.weight.push_back(n(rng));
  for (int i = 0; i < channels; ++i) l.bias.push_back(n(rng) * 0.1f);
  l.k = {l.weight.data(), l.bias.data(), channels, scale};
  return l;
}

std::vector<std::uint8_t> run(const Layer& l, d::Conv1aU8Row row, const std::vector<float>& in, int h, int w,
                              const std::vector<int>& cuts) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(h) * w * l.k.channels, 0xAB);
  std::vector<float> scratch(d::conv1a_u8_scratch_floats(w));
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
    d::conv1a_u8_rows(l.k, row, in.data(), h, w, cuts[i], cuts[i + 1], out.data(), 0, scratch.data());
  return out;
}

const std::vector<Case> kCases = {{1, 1, 16, 1},  {1, 17, 16, 2},  {3, 5, 32, 3},   {7, 33, 64, 4}, {2, 2, 48, 5},
                                  {16, 1, 64, 6}, {31, 29, 64, 7}, {60, 80, 64, 8}, {5, 7, 3, 9},   {96, 640, 64, 10},
                                  {4, 9, 8, 11},  {9, 3, 24, 12},  {2, 641, 40, 13}};

// The fast kernels this CPU runs and the channel multiple each needs.
std::vector<std::pair<d::Conv1aU8Row, int>> fast_kernels() {
  std::vector<std::pair<d::Conv1aU8Row, int>> k;
  if (superpoint_rt::util::cpu_features().avx512()) k.emplace_back(d::conv1a_u8_row_avx512, 16);
  if (superpoint_rt::util::cpu_features().avx2_fma()) k.emplace_back(d::conv1a_u8_row_avx2, 8);
  return k;
}

TEST(Conv1aU8, ReferenceIsTheDocumentedArithmetic) {
  for (const auto& c : kCases) {
    if (c.h * c.w > 10000) continue;  // the double-precision check is slow; the big frame is covered below
    const auto in = sprt_test::random_plane(c.h, c.w, c.seed);
    const Layer l = random_layer(c.channels, c.seed, 40.f);
    const auto out = run(l, d::conv1a_u8_row_reference, in, c.h, c.w, {0, c.h});
    int saturated = 0, zero = 0;
    for (int y = 0; y < c.h; ++y)
      for (int x = 0; x < c.w; ++x)
        for (int ch = 0; ch < c.channels; ++ch) {
          double acc = l.bias[static_cast<std::size_t>(ch)];
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int sy = y + ky - 1, sx = x + kx - 1;
              if (sy < 0 || sy >= c.h || sx < 0 || sx >= c.w) continue;
              acc += static_cast<double>(l.weight[static_cast<std::size_t>(ch * 9 + ky * 3 + kx)]) *
                     in[static_cast<std::size_t>(sy) * c.w + sx];
            }
          const double want = std::min(255.0, std::max(0.0, acc) * 40.0);
          const int got = out[(static_cast<std::size_t>(y) * c.w + x) * c.channels + ch];
          ASSERT_LE(std::fabs(got - want), 0.5 + 1e-3) << c.h << "x" << c.w << " y" << y << " x" << x << " c" << ch;
          saturated += got == 255;
          zero += got == 0;
        }
    // The random layers exercise both clamps and the values between them.
    const int total = c.h * c.w * c.channels;
    EXPECT_LT(saturated + zero, total) << c.h << "x" << c.w;
  }
}

TEST(Conv1aU8, FastKernelsMatchTheReferenceAndRowSplitsDoNotMatter) {
  const auto kernels = fast_kernels();
  std::cout << kernels.size() << " fast kernel(s) on this CPU\n";
  for (const auto& c : kCases) {
    const auto in = sprt_test::random_plane(c.h, c.w, c.seed + 100);
    for (const float scale : {1.f, 40.f, 300.f}) {
      const Layer l = random_layer(c.channels, c.seed, scale);
      const auto ref = run(l, d::conv1a_u8_row_reference, in, c.h, c.w, {0, c.h});
      // Rows in uneven bands (as threads split them) give the same bytes.
      EXPECT_EQ(run(l, d::conv1a_u8_row_reference, in, c.h, c.w, {0, c.h / 3, c.h / 2, c.h}), ref);
      for (const auto& [row, multiple] : kernels) {
        if (c.channels % multiple != 0) continue;  // the kernel's precondition (the plan checks it too)
        EXPECT_EQ(run(l, row, in, c.h, c.w, {0, c.h}), ref)
            << c.h << "x" << c.w << "x" << c.channels << " scale " << scale << " multiple " << multiple;
        EXPECT_EQ(run(l, row, in, c.h, c.w, {0, 1, c.h / 2, c.h}), ref);
      }
    }
  }
}

TEST(Conv1aU8, PerChannelScalesMatchTheReferenceAndTheOneScaleKernel) {
  // channel_scale[c] = s gives the bytes of the one-scale kernel at scale s, channel by channel, on every kernel.
  const auto kernels = fast_kernels();
  const int h = 9, w = 37, channels = 64;
  const auto in = sprt_test::random_plane(h, w, 31);
  std::vector<float> scales(channels);
  for (int c = 0; c < channels; ++c) scales[static_cast<std::size_t>(c)] = 5.f + 7.5f * static_cast<float>(c % 13);
  Layer l = random_layer(channels, 17, 1.f);
  l.k.channel_scale = scales.data();
  const auto ref = run(l, d::conv1a_u8_row_reference, in, h, w, {0, h});
  for (const float s : {5.f, 50.f, 95.f}) {
    Layer one = random_layer(channels, 17, s);
    const auto want = run(one, d::conv1a_u8_row_reference, in, h, w, {0, h});
    for (int c = 0; c < channels; ++c) {
      if (scales[static_cast<std::size_t>(c)] != s) continue;
      for (int i = 0; i < h * w; ++i)
        ASSERT_EQ(ref[static_cast<std::size_t>(i) * channels + c], want[static_cast<std::size_t>(i) * channels + c])
            << "channel " << c << " pixel " << i;
    }
  }
  for (const auto& [row, multiple] : kernels) EXPECT_EQ(run(l, row, in, h, w, {0, 2, h}), ref);
}

TEST(Conv1aU8, RoundsHalfToEven) {
  // One pixel, one tap: acc = bias + w * v with exactly representable halves.
  std::vector<float> weight(16 * 9, 0.f), bias(16, 0.f);
  const float halves[16] = {0.5f,   1.5f,   2.5f, 3.5f, 254.5f, 253.5f, 0.25f, 0.75f,
                            100.5f, 101.5f, 7.5f, 8.5f, 255.5f, 300.f,  -1.f,  0.f};
  for (int c = 0; c < 16; ++c) bias[static_cast<std::size_t>(c)] = halves[c];
  const d::Conv1aU8 k{weight.data(), bias.data(), 16, 1.f};
  const std::vector<float> in(1, 0.f);
  std::vector<float> scratch(d::conv1a_u8_scratch_floats(1));
  const std::uint8_t want[16] = {0, 2, 2, 4, 254, 254, 0, 1, 100, 102, 8, 8, 255, 255, 0, 0};
  std::vector<d::Conv1aU8Row> rows{d::conv1a_u8_row_reference};
  for (const auto& [row, multiple] : fast_kernels()) rows.push_back(row);
  for (const auto row : rows) {
    std::vector<std::uint8_t> out(16);
    d::conv1a_u8_rows(k, row, in.data(), 1, 1, 0, 1, out.data(), 0, scratch.data());
    for (int c = 0; c < 16; ++c) EXPECT_EQ(out[static_cast<std::size_t>(c)], want[c]) << "bias " << halves[c];
  }
}

}  // namespace
