// LightGlue's element-wise kernels (src/match/lg_kernels.hpp): every table this CPU runs gives the scalar reference's
// bits on random and awkward shapes (the tails of 8 and 16 lanes), and the reference is accurate against double
// precision exp and erf; the online softmax over tiles equals the softmax of the whole row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "match/lg_kernels.hpp"

namespace lg = superpoint_rt::lightglue::detail;

namespace {

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST(LgKernels, ExpEqualsTheReferenceAndIsAccurate) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-100.0f, 0.0f);
  for (const lg::LgKernels* k : lg::available_lg_kernels()) {
    for (int n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 1000}) {
      std::vector<float> x(static_cast<std::size_t>(n)), a(x.size()), b(x.size());
      for (auto& v : x) v = u(rng);
      if (n > 3) x[0] = 0.0f, x[1] = -86.0f, x[2] = -std::numeric_limits<float>::infinity();
      lg::kScalarLgKernels.exp_nonpositive(x.data(), n, a.data());
      k->exp_nonpositive(x.data(), n, b.data());
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(same_bits(a[static_cast<std::size_t>(i)], b[static_cast<std::size_t>(i)]))
            << superpoint_rt::util::to_string(k->isa) << " n=" << n << " x=" << x[static_cast<std::size_t>(i)];
        const double exact = std::exp(static_cast<double>(x[static_cast<std::size_t>(i)]));
        if (x[static_cast<std::size_t>(i)] >= lg::poly::kExpMin)
          EXPECT_LE(std::fabs(a[static_cast<std::size_t>(i)] - exact), 2.5 * exact * 0x1p-23)
              << x[static_cast<std::size_t>(i)];
        else
          EXPECT_EQ(a[static_cast<std::size_t>(i)], 0.0f);
      }
    }
  }
}

TEST(LgKernels, SoftmaxTilesEqualTheReferenceAndTheWholeRow) {
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0.0f, 4.0f);
  for (const lg::LgKernels* k : lg::available_lg_kernels()) {
    for (int cols : {1, 5, 8, 13, 16, 31, 64, 100}) {
      const int rows = 3, tiles = 3, lds = 3 * 128 + 5;
      std::vector<float> s(static_cast<std::size_t>(rows * lds));
      for (auto& v : s) v = g(rng);
      std::vector<float> s_ref = s;
      std::vector<float> m(rows, -INFINITY), l(rows, 0), al(rows), m_ref = m, l_ref = l, al_ref = al;
      for (int t = 0; t < tiles; ++t) {
        k->softmax_tile(s.data() + t * cols, rows, cols, lds, m.data(), l.data(), al.data());
        lg::kScalarLgKernels.softmax_tile(s_ref.data() + t * cols, rows, cols, lds, m_ref.data(), l_ref.data(),
                                          al_ref.data());
        for (int r = 0; r < rows; ++r) {
          ASSERT_TRUE(same_bits(m[r], m_ref[r]) && same_bits(l[r], l_ref[r]) && same_bits(al[r], al_ref[r]))
              << superpoint_rt::util::to_string(k->isa) << " cols=" << cols;
          for (int j = 0; j < cols; ++j)
            ASSERT_TRUE(same_bits(s[static_cast<std::size_t>(r * lds + t * cols + j)],
                                  s_ref[static_cast<std::size_t>(r * lds + t * cols + j)]));
        }
      }
    }
  }
  // Online over 4 tiles == the whole row's max and sum of exp, within float rounding.
  std::vector<float> x(64);
  for (auto& v : x) v = g(rng);
  std::vector<float> y = x;
  float m = -INFINITY, l = 0, a = 0;
  for (int t = 0; t < 4; ++t) lg::kScalarLgKernels.softmax_tile(y.data() + 16 * t, 1, 16, 64, &m, &l, &a);
  double mx = -INFINITY, sum = 0;
  for (float v : x) mx = std::max<double>(mx, v);
  for (float v : x) sum += std::exp(v - mx);
  EXPECT_EQ(m, static_cast<float>(mx));
  EXPECT_NEAR(l, sum, 1e-5 * sum);
}

// The column step (the cross block's second direction): every table gives the reference's bits on awkward column
// counts over several row blocks, leaves the tile as it was, and over the blocks equals the softmax of whole columns.
TEST(LgKernels, SoftmaxColumnsEqualTheReferenceAndTheWholeColumn) {
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.0f, 4.0f);
  for (const lg::LgKernels* k : lg::available_lg_kernels()) {
    for (int cols : {1, 5, 8, 13, 16, 17, 31, 64, 100}) {
      const int rows = 7, blocks = 3, lds = cols + 3, ldp = cols + 5;
      std::vector<float> s(static_cast<std::size_t>(blocks * rows * lds));
      for (auto& v : s) v = g(rng);
      const std::vector<float> s_in = s;
      std::vector<float> m(static_cast<std::size_t>(cols), -INFINITY), l(m.size(), 0), be(m.size()),
          m_ref = m, l_ref = l, be_ref = be;
      std::vector<float> p(static_cast<std::size_t>(rows * ldp)), p_ref = p;
      for (int b = 0; b < blocks; ++b) {
        const float* t = s.data() + static_cast<std::size_t>(b * rows * lds);
        k->softmax_cols(t, rows, cols, lds, m.data(), l.data(), be.data(), p.data(), ldp);
        lg::kScalarLgKernels.softmax_cols(t, rows, cols, lds, m_ref.data(), l_ref.data(), be_ref.data(), p_ref.data(),
                                          ldp);
        for (int c = 0; c < cols; ++c) {
          const auto cu = static_cast<std::size_t>(c);
          ASSERT_TRUE(same_bits(m[cu], m_ref[cu]) && same_bits(l[cu], l_ref[cu]) && same_bits(be[cu], be_ref[cu]))
              << superpoint_rt::util::to_string(k->isa) << " cols=" << cols << " block " << b << " column " << c;
          if (b == 0) {
            EXPECT_EQ(be[cu], 0.0f);  // no earlier block: nothing to rescale
          }
          for (int r = 0; r < rows; ++r)
            ASSERT_TRUE(
                same_bits(p[static_cast<std::size_t>(r * ldp + c)], p_ref[static_cast<std::size_t>(r * ldp + c)]))
                << superpoint_rt::util::to_string(k->isa) << " cols=" << cols << " row " << r << " column " << c;
        }
      }
      EXPECT_EQ(s, s_in);
      for (int c = 0; c < cols; ++c) {  // over the blocks: the whole column's max and sum of exp
        double mx = -INFINITY, sum = 0;
        for (int r = 0; r < blocks * rows; ++r) mx = std::max<double>(mx, s_in[static_cast<std::size_t>(r * lds + c)]);
        for (int r = 0; r < blocks * rows; ++r) sum += std::exp(s_in[static_cast<std::size_t>(r * lds + c)] - mx);
        EXPECT_EQ(m[static_cast<std::size_t>(c)], static_cast<float>(mx));
        EXPECT_NEAR(l[static_cast<std::size_t>(c)], sum, 1e-5 * sum);
      }
    }
  }
}

TEST(LgKernels, LayerNormGeluEqualsTheReferenceAndTorchsDefinition) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.5f);
  for (const lg::LgKernels* k : lg::available_lg_kernels()) {
    for (int n : {16, 32, 512}) {
      std::vector<float> x(static_cast<std::size_t>(n)), gam(x.size()), bet(x.size()), a(x.size()), b(x.size());
      for (auto& v : x) v = 3.0f * g(rng) + 1.0f;
      for (auto& v : gam) v = 1.0f + 0.3f * g(rng);
      for (auto& v : bet) v = 0.5f * g(rng);
      lg::kScalarLgKernels.layernorm_gelu(x.data(), n, gam.data(), bet.data(), a.data());
      k->layernorm_gelu(x.data(), n, gam.data(), bet.data(), b.data());
      double mean = 0, var = 0;
      for (float v : x) mean += v;
      mean /= n;
      for (float v : x) var += (v - mean) * (v - mean);
      var /= n;
      for (int i = 0; i < n; ++i) {
        const auto u = static_cast<std::size_t>(i);
        ASSERT_TRUE(same_bits(a[u], b[u])) << superpoint_rt::util::to_string(k->isa) << " n=" << n << " i=" << i;
        const double y = (x[u] - mean) / std::sqrt(var + 1e-5) * gam[u] + bet[u];
        const double gelu = 0.5 * y * (1.0 + std::erf(y / std::sqrt(2.0)));
        EXPECT_NEAR(a[u], gelu, 2e-6 * (1.0 + std::fabs(y))) << "y=" << y;
      }
    }
  }
}
