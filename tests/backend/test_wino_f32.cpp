// Our fp32 Winograd F(4x4,3x3) kernel (src/backend/onednn/wino_f32.hpp): the scalar reference is the convolution +
// bias + ReLU (+ 2x2 max pooling) it stands for, to a few float32 ulps of the products' magnitude (checked against
// double precision); every vector kernel this CPU has (after the SUPERPOINT_RT_ISA cap) gives the reference's bits on
// random and awkward shapes, in every activation layout, for any split of the tiles (threads) and in stripes of the
// frame (the buffers a plan's lanes hold).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "backend/onednn/wino_f32.hpp"
#include "util/cpu.hpp"

namespace d = superpoint_rt::backend::detail;

namespace {

struct Layer {
  int ic, oc;
  std::vector<float> weight, bias;
};

Layer random_layer(int ic, int oc, unsigned seed) {
  std::mt19937 rng(seed);
  // SuperPoint's 3x3 weights have a spread of about 0.02-0.06.
  std::normal_distribution<float> n(0.f, 0.05f);
  Layer l{ic, oc, {}, {}};
  for (int i = 0; i < oc * ic * 9; ++i) l.weight.push_back(n(rng));
  for (int i = 0; i < oc; ++i) l.bias.push_back(n(rng));
  return l;
}

// An activation of c channels, h x w, in a layout of `block` channels per piece (block == c: channels-last), with
// `pad` unused floats after each row and each piece (so that strides are not the dense ones).
struct Act {
  int c = 0, h = 0, w = 0, block = 0, pad = 0;
  std::vector<float> data;
  Act(int c_, int h_, int w_, int block_, int pad_ = 0)
      : c(c_), h(h_), w(w_), block(block_), pad(pad_), data(static_cast<std::size_t>(c_ / block_) * piece(), -7.f) {}
  std::size_t row() const { return static_cast<std::size_t>(w) * block + static_cast<std::size_t>(pad); }
  std::size_t piece() const { return row() * static_cast<std::size_t>(h) + static_cast<std::size_t>(pad); }
  d::F32Act view() { return {data.data(), block, piece(), row()}; }
  float& at(int ch, int y, int x) { return *view().at(ch, y, x); }
};

// ReLU's zeros among positive values, as a layer's input has them; `nasty` adds -0 and magnitudes far apart.
Act random_act(int c, int h, int w, int block, unsigned seed, bool nasty = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(0.f, 4.f);
  std::uniform_int_distribution<int> on(0, 99);
  Act a(c, h, w, block, 3);
  for (int ch = 0; ch < c; ++ch)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        float val = on(rng) < 60 ? v(rng) : 0.f;
        if (nasty) {
          const int k = on(rng);
          if (k < 10) val = -0.f;
          if (k >= 95) val *= 1000.f;
          if (k >= 90 && k < 95) val *= 1e-3f;
        }
        a.at(ch, y, x) = val;
      }
  return a;
}

// conv + bias + ReLU (+ pool) in double, and for each output the sum of |products| (the scale of its rounding).
struct Exact {
  std::vector<double> value, scale;  // [oc][oh][ow]
};
Exact exact(const Layer& l, Act& in, bool pool) {
  const int h = in.h, w = in.w;
  std::vector<double> conv(static_cast<std::size_t>(l.oc) * h * w), mag(conv.size());
  for (int o = 0; o < l.oc; ++o)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        double acc = l.bias[static_cast<std::size_t>(o)], m = std::fabs(acc);
        for (int i = 0; i < l.ic; ++i)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int sy = y + ky - 1, sx = x + kx - 1;
              if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
              const double p =
                  static_cast<double>(l.weight[((static_cast<std::size_t>(o) * l.ic + i) * 3 + ky) * 3 + kx]) *
                  in.at(i, sy, sx);
              acc += p;
              m += std::fabs(p);
            }
        const std::size_t at = (static_cast<std::size_t>(o) * h + y) * w + x;
        conv[at] = std::max(acc, 0.0);
        mag[at] = m;
      }
  if (!pool) return {conv, mag};
  const int ph = h / 2, pw = w / 2;
  Exact e{std::vector<double>(static_cast<std::size_t>(l.oc) * ph * pw),
          std::vector<double>(static_cast<std::size_t>(l.oc) * ph * pw)};
  for (int o = 0; o < l.oc; ++o)
    for (int y = 0; y < ph; ++y)
      for (int x = 0; x < pw; ++x) {
        double v = 0, m = 0;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            const std::size_t at = (static_cast<std::size_t>(o) * h + 2 * y + a) * w + 2 * x + b;
            v = std::max(v, conv[at]);
            m = std::max(m, mag[at]);
          }
        e.value[(static_cast<std::size_t>(o) * ph + y) * pw + x] = v;
        e.scale[(static_cast<std::size_t>(o) * ph + y) * pw + x] = m;
      }
  return e;
}

struct Kernel {
  std::string name;
  d::WinoF32Kernel fn;
  int oc_block;
};

// The reference and every vector kernel this CPU runs (after the SUPERPOINT_RT_ISA cap).
std::vector<Kernel> fast_kernels() {
  const auto& f = superpoint_rt::util::cpu_features();
  std::vector<Kernel> k;
  if (f.avx2_fma()) k.push_back({"avx2", d::wino_f32_rows_avx2, d::kWinoF32OcBlockAvx2});
  if (f.avx512()) k.push_back({"avx512", d::wino_f32_rows_avx512, d::kWinoF32OcBlockAvx512});
  return k;
}

// The whole activation in `splits` calls over consecutive tile ranges (as a plan's threads share a layer).
Act run_frame(const Layer& l, const d::WinoF32& k, d::WinoF32Kernel fn, Act& in, bool pool, int out_block,
              int splits = 1) {
  const int h = in.h, w = in.w;
  Act out(l.oc, pool ? h / 2 : h, pool ? w / 2 : w, out_block, 5);
  std::vector<unsigned char> scratch(d::wino_f32_scratch_bytes(l.ic, l.oc) + 3);
  const int y1 = pool ? h / 2 * 2 : h;
  const int tiles = (y1 + 3) / 4 * ((w + 3) / 4);
  for (int s = 0; s < splits; ++s) {
    const int first = tiles * s / splits, last = tiles * (s + 1) / splits;
    d::WinoF32Rows r;
    r.in = in.view();
    r.in_row0 = 0;
    r.in_rows = h;
    r.w = w;
    r.y0 = 0;
    r.y1 = y1;
    r.out = out.view();
    r.pool = pool;
    r.first_tile = first;
    r.tiles = s + 1 == splits ? -1 : last - first;
    fn(k.view(), r, scratch.data() + 3);  // misaligned on purpose
  }
  return out;
}

// In stripes [y0, y1) (boundaries multiples of 4), each from a buffer of its rows y0 - 1 .. y1 (zeros outside the
// frame), as the plan's lanes run conv1b.
Act run_stripes(const Layer& l, const d::WinoF32& k, d::WinoF32Kernel fn, Act& in, int rows) {
  const int h = in.h, w = in.w, end = h / 2 * 2;
  Act out(l.oc, h / 2, w / 2, in.block, 0);
  std::vector<unsigned char> scratch(d::wino_f32_scratch_bytes(l.ic, l.oc));
  for (int y0 = 0; y0 < end; y0 += rows) {
    const int y1 = std::min(end, y0 + rows);
    Act buf(l.ic, y1 - y0 + 2, w, in.block, 1);
    for (int y = y0 - 1; y <= y1; ++y)
      for (int c = 0; c < l.ic; ++c)
        for (int x = 0; x < w; ++x) buf.at(c, y - y0 + 1, x) = y >= 0 && y < h ? in.at(c, y, x) : 0.f;
    d::F32Act o = out.view();
    o.data += static_cast<std::size_t>(y0 / 2) * o.row_stride;
    d::WinoF32Rows r;
    r.in = buf.view();
    r.in_row0 = y0 - 1;
    r.in_rows = y1 - y0 + 2;
    r.w = w;
    r.y0 = y0;
    r.y1 = y1;
    r.out = o;
    r.pool = true;
    fn(k.view(), r, scratch.data());
    (void)l;
  }
  return out;
}

bool same_values(Act& a, Act& b) {
  for (int c = 0; c < a.c; ++c)
    for (int y = 0; y < a.h; ++y)
      for (int x = 0; x < a.w; ++x)
        if (std::memcmp(&a.at(c, y, x), &b.at(c, y, x), sizeof(float)) != 0) {
          ADD_FAILURE() << "first difference at channel " << c << " row " << y << " column " << x << ": "
                        << a.at(c, y, x) << " vs " << b.at(c, y, x);
          return false;
        }
  return true;
}

struct Case {
  int h, w, ic, oc;
  unsigned seed;
};
// Odd and tiny frames, widths that leave partial tiles and partial groups of 6 tiles, 64 and 128 channels.
const std::vector<Case> kCases = {
    {2, 2, 64, 64, 1},    {4, 4, 8, 32, 2},       {6, 10, 64, 64, 3},  {9, 7, 64, 64, 4},    {16, 26, 64, 128, 5},
    {13, 37, 32, 64, 6},  {20, 3, 64, 64, 7},     {3, 1, 64, 64, 8},   {8, 48, 128, 128, 9}, {30, 50, 64, 64, 10},
    {2, 130, 64, 64, 11}, {11, 21, 128, 256, 12}, {29, 45, 16, 32, 13}};

}  // namespace

TEST(WinoF32, ReferenceIsTheConvolution) {
  double worst = 0;
  for (const Case& c : kCases) {
    const Layer l = random_layer(c.ic, c.oc, c.seed);
    for (bool pool : {true, false}) {
      if (pool && (c.h < 2 || c.w < 2)) continue;
      Act in = random_act(c.ic, c.h, c.w, 8, c.seed + 100);
      const d::WinoF32 k = d::wino_f32_prepare(l.weight.data(), l.bias.data(), c.ic, c.oc, 16);
      Act out = run_frame(l, k, d::wino_f32_rows_reference, in, pool, 8);
      const Exact e = exact(l, in, pool);
      std::size_t i = 0;
      for (int o = 0; o < out.c; ++o)
        for (int y = 0; y < out.h; ++y)
          for (int x = 0; x < out.w; ++x, ++i) {
            const double diff = std::fabs(out.at(o, y, x) - e.value[i]);
            // F(4x4,3x3)'s transforms multiply each product's rounding by at most a few tens (the entries of A and B
            // reach 8 and 5; G's 1/24): a few float32 ulps of the sum of |products|. Measured up to ~1e-6 of it.
            ASSERT_LE(diff, 2e-5 * e.scale[i] + 1e-30)
                << c.h << "x" << c.w << " " << c.ic << "->" << c.oc << " pool " << pool << " at " << o << "," << y
                << "," << x << ": " << out.at(o, y, x) << " vs " << e.value[i];
            if (e.scale[i] > 0) worst = std::max(worst, diff / e.scale[i]);
          }
    }
  }
  std::cout << "worst |error| / sum |products|: " << worst << "\n";
  EXPECT_GT(worst, 0);  // float32 rounding shows: the comparison is not vacuous
}

TEST(WinoF32, FastKernelsMatchTheReferenceInEveryLayoutAndSplit) {
  const auto kernels = fast_kernels();
  if (kernels.empty()) std::cout << "no vector kernel on this CPU (after SUPERPOINT_RT_ISA): reference only\n";
  for (const Kernel& kern : kernels) {
    for (const Case& c : kCases) {
      if (c.oc % kern.oc_block != 0) continue;
      const Layer l = random_layer(c.ic, c.oc, c.seed);
      const d::WinoF32 kr = d::wino_f32_prepare(l.weight.data(), l.bias.data(), c.ic, c.oc, kern.oc_block);
      for (bool pool : {true, false}) {
        if (pool && (c.h < 2 || c.w < 2)) continue;
        for (int block : {16, 8, c.ic}) {
          if (c.ic % block != 0 || (kern.name == "avx512" && block % 16 != 0) || block > c.ic) continue;
          Act in = random_act(c.ic, c.h, c.w, block, c.seed + 7, true);
          const int out_block = block == c.ic ? c.oc : std::min(block, c.oc);
          Act ref = run_frame(l, kr, d::wino_f32_rows_reference, in, pool, out_block);
          for (int splits : {1, 2, 3}) {
            Act got = run_frame(l, kr, kern.fn, in, pool, out_block, splits);
            EXPECT_TRUE(same_values(ref, got)) << kern.name << " " << c.h << "x" << c.w << " " << c.ic << "->" << c.oc
                                               << " pool " << pool << " block " << block << " splits " << splits;
          }
        }
      }
    }
  }
}

TEST(WinoF32, StripesGiveTheFramesBytes) {
  std::vector<Kernel> kernels = fast_kernels();
  kernels.push_back({"reference", d::wino_f32_rows_reference, 16});
  for (const Kernel& kern : kernels) {
    const Layer l = random_layer(64, 64, 21);
    const d::WinoF32 k = d::wino_f32_prepare(l.weight.data(), l.bias.data(), 64, 64, kern.oc_block);
    for (const auto& [h, w] : {std::pair{37, 45}, std::pair{64, 30}, std::pair{18, 9}}) {
      const int block = kern.name == "avx512" ? 16 : 8;
      Act in = random_act(64, h, w, block, 5);
      Act whole = run_frame(l, k, kern.fn, in, true, block);
      for (int rows : {4, 8, 12, 16}) {
        Act striped = run_stripes(l, k, kern.fn, in, rows);
        EXPECT_TRUE(same_values(whole, striped)) << kern.name << " " << h << "x" << w << " stripes of " << rows;
      }
    }
  }
}

TEST(WinoF32, ReluGivesPositiveZeroAndPoolingTakesTheLarger) {
  // All-zero weights: every output is relu(bias) (pooled or not): -0 and negative biases give +0.
  for (const Kernel& kern : [] {
         auto k = fast_kernels();
         k.push_back({"reference", d::wino_f32_rows_reference, 16});
         return k;
       }()) {
    Layer l{16, 32, std::vector<float>(16 * 32 * 9, 0.f), {}};
    for (int o = 0; o < 32; ++o)
      l.bias.push_back(o % 3 == 0 ? -0.f : o % 3 == 1 ? -1.5f : 0.25f * static_cast<float>(o));
    const d::WinoF32 k = d::wino_f32_prepare(l.weight.data(), l.bias.data(), 16, 32, kern.oc_block);
    Act in = random_act(16, 6, 6, 16, 3);
    for (bool pool : {true, false}) {
      Act out = run_frame(l, k, kern.fn, in, pool, 16);
      for (int o = 0; o < 32; ++o)
        for (int y = 0; y < out.h; ++y)
          for (int x = 0; x < out.w; ++x) {
            const float v = out.at(o, y, x), want = o % 3 == 2 ? 0.25f * static_cast<float>(o) : 0.f;
            EXPECT_EQ(std::memcmp(&v, &want, sizeof v), 0) << kern.name << " channel " << o << ": " << v;
          }
    }
  }
}
