// normalize_sampled_cells (the engine normalises only the cells the descriptor sampler reads) against
// normalize_cells of every cell: the sampled descriptors are bit-identical, every cell a keypoint touches is
// normalised exactly as normalize_cells does it, and the others are left alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "post/post.hpp"
#include "superpoint_rt/errors.hpp"

namespace post = superpoint_rt::post;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST(NormalizeSampledCells, SameDescriptorsAsNormalisingEveryCell) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Case {
    int hc, wc, dim, n;
  };
  for (const Case& c : {Case{60, 80, 256, 1024}, Case{60, 80, 256, 3}, Case{60, 80, 256, 0}, Case{1, 1, 5, 4},
                        Case{7, 3, 33, 50}, Case{2, 9, 16, 200}}) {
    std::vector<float> dense(static_cast<std::size_t>(c.hc) * c.wc * c.dim);
    for (auto& v : dense) v = nd(rng);
    if (dense.size() > 2u * c.dim) std::fill(dense.begin() + c.dim, dense.begin() + 2 * c.dim, 0.0f);  // a zero cell
    std::vector<post::Keypoint> kps;
    std::uniform_int_distribution<int> xs(0, 8 * c.wc - 1), ys(0, 8 * c.hc - 1);
    for (int i = 0; i < c.n; ++i) {
      post::Keypoint k;
      switch (i % 7) {  // corners and edges of the frame, where the zero padding drops taps
        case 0: k.x = 0, k.y = 0; break;
        case 1: k.x = 8 * c.wc - 1, k.y = 8 * c.hc - 1; break;
        case 2: k.x = xs(rng), k.y = 8 * c.hc - 1; break;
        default: k.x = xs(rng), k.y = ys(rng); break;
      }
      k.score = 0.5f;
      kps.push_back(k);
    }
    std::vector<float> all = dense, some = dense;
    post::normalize_cells(all.data(), c.hc * c.wc, c.dim);
    std::vector<std::uint8_t> mark;
    post::normalize_sampled_cells(some.data(), c.hc, c.wc, c.dim, kps.data(), c.n, mark);
    std::vector<float> want(static_cast<std::size_t>(c.n) * c.dim), got(want.size());
    post::sample_descriptors(all.data(), c.hc, c.wc, c.dim, kps.data(), c.n, want.data());
    post::sample_descriptors(some.data(), c.hc, c.wc, c.dim, kps.data(), c.n, got.data());
    EXPECT_TRUE(same_bits(want, got)) << c.hc << "x" << c.wc << "x" << c.dim << " n=" << c.n;
    // Cell by cell: normalised bits, or untouched.
    int normalised = 0;
    for (int cell = 0; cell < c.hc * c.wc; ++cell) {
      const std::size_t at = static_cast<std::size_t>(cell) * c.dim;
      const bool as_all = std::memcmp(some.data() + at, all.data() + at, c.dim * sizeof(float)) == 0;
      const bool as_before = std::memcmp(some.data() + at, dense.data() + at, c.dim * sizeof(float)) == 0;
      EXPECT_TRUE(as_all || as_before) << "cell " << cell;
      normalised += as_all && !as_before;
    }
    if (c.n == 0) {
      EXPECT_EQ(normalised, 0);
    } else if (c.n >= 3) {
      EXPECT_GT(normalised, 0);
    }
  }
}

TEST(NormalizeSampledCells, BadSizesAreErrors) {
  std::vector<float> d(16);
  std::vector<std::uint8_t> mark;
  post::Keypoint k;
  EXPECT_THROW(post::normalize_sampled_cells(d.data(), -1, 2, 4, &k, 1, mark), superpoint_rt::Error);
  EXPECT_THROW(post::normalize_sampled_cells(d.data(), 2, 2, 4, &k, -1, mark), superpoint_rt::Error);
}
