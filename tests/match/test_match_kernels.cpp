// The matcher's kernels (src/match/): every scan table this CPU runs against the scalar reference, the oneDNN GEMM
// against the plain reference, the threaded matcher against the single-threaded reference path, on random and
// awkward shapes (1-3 points, lengths around the vector widths, ties, infinities). ctest also runs this program under
// SUPERPOINT_RT_ISA=avx2 and =scalar (with oneDNN capped likewise: ONEDNN_MAX_CPU_ISA), so that the public dispatch
// takes every path this machine has.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "match/gemm.hpp"
#include "match/kernels.hpp"
#include "match/matcher.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/match.hpp"

namespace md = superpoint_rt::matching::detail;
using superpoint_rt::DescriptorsView;
using superpoint_rt::MatchOptions;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Values k / 4 with k in [-lo, hi]: many exact ties, and every product and sum of up to 2^20 terms exact in float32.
std::vector<float> dyadic(std::size_t n, unsigned seed, int lo = 4, int hi = 4) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng)) / 4.0f;
  return v;
}

std::vector<float> gaussian(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp's pointers must not be null, even for 0 bytes (an empty vector's data() may be).
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct Scan {
  md::Top2 rows, cols;
};

Scan run_scan(const md::ScanKernels& k, const std::vector<float>& c, int m, int n, std::size_t ld, int split) {
  Scan s;
  s.rows.resize(static_cast<std::size_t>(m));
  s.cols.resize(static_cast<std::size_t>(n));
  md::reset_top2(s.cols.arrays(), static_cast<std::size_t>(n));
  // Two calls (rows [0, split) then [split, m)) continue the same column state, as successive blocks do.
  for (int r0 = 0; r0 < m;) {
    const int mm = r0 == 0 && split > 0 && split < m ? split : m - r0;
    const md::Top2Arrays out{s.rows.best.data() + r0, s.rows.second.data() + r0, s.rows.index.data() + r0};
    k.scan(c.data() + static_cast<std::size_t>(r0) * ld, ld, mm, n, r0, out, s.cols.arrays());
    r0 += mm;
  }
  return s;
}

void expect_same(const md::Top2& a, const md::Top2& b, const std::string& what) {
  EXPECT_TRUE(same_bits(a.best, b.best)) << what << " best";
  EXPECT_TRUE(same_bits(a.second, b.second)) << what << " second";
  EXPECT_EQ(a.index, b.index) << what << " index";
}

}  // namespace

TEST(MatchScan, EveryTableEqualsTheReferenceOnAwkwardShapes) {
  const int ms[] = {1, 2, 3, 4, 5, 7, 9, 16, 17, 33};
  const int ns[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100};
  const auto tables = md::available_scans();
  ASSERT_FALSE(tables.empty());
  unsigned seed = 1;
  for (int m : ms)
    for (int n : ns)
      for (int variant = 0; variant < 3; ++variant) {
        const std::size_t ld = static_cast<std::size_t>(n) + (variant == 2 ? 5 : 0);
        // variant 0: few distinct values (ties everywhere); 1: Gaussian; 2: with infinities, padded rows.
        std::vector<float> c = variant == 0 ? dyadic(m * ld, seed++, 1, 1) : gaussian(m * ld, seed++);
        if (variant == 2)
          for (std::size_t i = 0; i < c.size(); i += 7) c[i] = (i / 7) % 2 ? -kInf : kInf;
        const Scan ref = run_scan(md::kScalarScan, c, m, n, ld, m / 2);
        for (const auto* k : tables) {
          const Scan got = run_scan(*k, c, m, n, ld, m / 2);
          const std::string what = std::string(superpoint_rt::util::to_string(k->isa)) + " m=" + std::to_string(m) +
                                   " n=" + std::to_string(n) + " variant " + std::to_string(variant);
          expect_same(got.rows, ref.rows, what + " rows");
          expect_same(got.cols, ref.cols, what + " cols");
        }
      }
}

TEST(MatchScan, ReferenceKeepsTheLowestIndexAndTheSecondOfTheMultiset) {
  // Row 0: 0.5 at columns 1 and 3 -> best 0.5 at 1, second 0.5. Row 1: all -inf -> best -inf at 0.
  const std::vector<float> c{0.1f, 0.5f, 0.2f, 0.5f, -kInf, -kInf, -kInf, -kInf};
  const Scan s = run_scan(md::kScalarScan, c, 2, 4, 4, 0);
  EXPECT_EQ(s.rows.best[0], 0.5f);
  EXPECT_EQ(s.rows.second[0], 0.5f);
  EXPECT_EQ(s.rows.index[0], 1);
  EXPECT_EQ(s.rows.best[1], -kInf);
  EXPECT_EQ(s.rows.index[1], 0);
  // Column 1: 0.5 (row 0) and -inf: best at 0, second -inf.
  EXPECT_EQ(s.cols.best[1], 0.5f);
  EXPECT_EQ(s.cols.second[1], -kInf);
  EXPECT_EQ(s.cols.index[1], 0);
}

TEST(MatchScan, NanIsNeverTaken) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto* k : md::available_scans()) {
    std::vector<float> c(3 * 20, 0.25f);
    c[5] = nan;
    c[20 + 5] = 0.75f;
    const Scan s = run_scan(*k, c, 3, 20, 20, 0);
    EXPECT_EQ(s.rows.index[0], 0);
    EXPECT_EQ(s.rows.best[0], 0.25f);
    EXPECT_EQ(s.cols.best[5], 0.75f);
    EXPECT_EQ(s.cols.index[5], 1);
    EXPECT_EQ(s.cols.second[5], 0.25f);
  }
}

TEST(MatchScan, MergeEqualsOneScanWhateverTheRowSplit) {
  const int m = 37, n = 29;
  const auto c = dyadic(static_cast<std::size_t>(m) * n, 7, 1, 1);  // ties between the two row sets
  const Scan whole = run_scan(md::kScalarScan, c, m, n, n, 0);
  // Rows in blocks of 5 dealt alternately to two states (as two threads take blocks), merged in either order.
  for (int first = 0; first < 2; ++first) {
    md::Top2 st[2];
    for (auto& s : st) {
      s.resize(n);
      md::reset_top2(s.arrays(), n);
    }
    md::Top2 rows;
    rows.resize(m);
    for (int r0 = 0, blk = 0; r0 < m; r0 += 5, ++blk) {
      const int mm = std::min(5, m - r0);
      const md::Top2Arrays out{rows.best.data() + r0, rows.second.data() + r0, rows.index.data() + r0};
      md::kScalarScan.scan(c.data() + static_cast<std::size_t>(r0) * n, n, mm, n, r0, out, st[blk % 2].arrays());
    }
    md::merge_top2(st[first].arrays(), st[1 - first].arrays(), n);
    expect_same(st[first], whole.cols, "merged cols, first " + std::to_string(first));
    expect_same(rows, whole.rows, "rows");
  }
}

namespace {

// The exact similarity as kernels.hpp defines it, written out here: 64 lanes of fused multiply-adds in increasing k,
// then pairwise sums l + l+32, l + l+16, ..., 0 + 1.
float documented_dot(const float* a, const float* b, int dim) {
  float lane[64] = {};
  for (int k = 0; k < dim; ++k) lane[k % 64] = std::fma(a[k], b[k], lane[k % 64]);
  for (int w = 32; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] = lane[l] + lane[l + w];
  return lane[0];
}

}  // namespace

TEST(MatchDot, EveryTableGivesTheDocumentedBits) {
  const int dims[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 300};
  unsigned seed = 31;
  for (int dim : dims)
    for (int variant = 0; variant < 4; ++variant) {
      auto a = gaussian(static_cast<std::size_t>(dim), seed++), b = gaussian(static_cast<std::size_t>(dim), seed++);
      // 1: magnitudes spread over 2^-60..2^60 (cancellation, subnormal products); 2: signed zeros; 3: an infinity.
      for (int k = 0; k < dim; ++k) {
        if (variant == 1) a[k] = std::ldexp(a[k], (k * 37) % 121 - 60);
        if (variant == 2 && k % 3 == 0) a[k] = k % 2 ? -0.0f : 0.0f;
      }
      if (variant == 3) b[dim / 2] = kInf;
      const float want = documented_dot(a.data(), b.data(), dim);
      for (const auto* k : md::available_scans()) {
        const float got = k->dot(a.data(), b.data(), dim);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
            << superpoint_rt::util::to_string(k->isa) << " dim " << dim << " variant " << variant << ": " << got
            << " vs " << want;
      }
    }
}

TEST(MatchCollect, EveryTableEqualsTheDefinition) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  unsigned seed = 41;
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257})
    for (float row_min : {-kInf, -0.5f, 0.0f, 0.7f, kInf}) {
      auto row = gaussian(static_cast<std::size_t>(n), seed++);
      auto second = gaussian(static_cast<std::size_t>(n), seed++);
      auto floor = gaussian(static_cast<std::size_t>(n), seed++);
      row[static_cast<std::size_t>(n) / 2] = nan;
      second[0] = -kInf;
      floor[static_cast<std::size_t>(n) - 1] = -kInf;
      const float margin = 0.125f;
      std::vector<std::int32_t> want;
      for (int j = 0; j < n; ++j) {
        const auto u = static_cast<std::size_t>(j);
        const float t = std::min(std::max(second[u], floor[u]) - margin, row_min);
        if (row[static_cast<std::size_t>(j)] >= t) want.push_back(j);
      }
      for (const auto* k : md::available_scans()) {
        std::vector<std::int32_t> out(static_cast<std::size_t>(n) + 16, -7);
        const int count = k->collect(row.data(), n, row_min, second.data(), floor.data(), margin, out.data());
        out.resize(static_cast<std::size_t>(count));
        EXPECT_EQ(out, want) << superpoint_rt::util::to_string(k->isa) << " n " << n << " row_min " << row_min;
      }
    }
}

TEST(MatchBf16, EveryTableRoundsToNearestEvenAndKeepsTheResidual) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8 ties to 1 + 2^-6; just above a tie rounds
  // up; the largest float rounds to infinity; NaN stays NaN, infinities and signed zeros stay; 2^-130 is a bfloat16
  // subnormal, 2^-140 is below half the smallest (2^-133) and rounds to 0.
  std::vector<float> x{1.0f + 0x1p-8f,
                       1.0f + 3 * 0x1p-8f,
                       1.0f + 0x1p-8f + 0x1p-20f,
                       -1.0f - 0x1p-8f,
                       std::numeric_limits<float>::max(),
                       nan,
                       kInf,
                       -kInf,
                       0.0f,
                       -0.0f,
                       0x1p-130f,
                       0x1p-140f,
                       3.14159265f};
  const std::vector<float> want{1.0f,  1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -1.0f,     kInf, nan,      kInf,
                                -kInf, 0.0f,           -0.0f,          0x1p-130f, 0.0f, 3.140625f};
  const auto g = gaussian(37, 5);
  x.insert(x.end(), g.begin(), g.end());
  const int dim = static_cast<int>(x.size());
  std::vector<std::uint16_t> ref(x.size());
  std::vector<float> ref_resid(x.size());
  md::to_bf16_reference(x.data(), dim, ref.data(), ref_resid.data());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float got = std::bit_cast<float>(static_cast<std::uint32_t>(ref[i]) << 16);
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << i;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want[i])) << i << ": " << got;
    }
  }
  for (std::size_t i = want.size(); i < x.size(); ++i) {
    const float bf = std::bit_cast<float>(static_cast<std::uint32_t>(ref[i]) << 16);
    EXPECT_EQ(bf + ref_resid[i], x[i]) << i;  // the residual is exact
    EXPECT_LE(std::fabs(ref_resid[i]), std::fabs(x[i]) * 0x1p-8f) << i;
  }
  for (const auto* k : md::available_scans()) {
    std::vector<std::uint16_t> got(x.size());
    std::vector<float> resid(x.size());
    k->to_bf16(x.data(), dim, got.data(), resid.data());
    EXPECT_EQ(got, ref) << superpoint_rt::util::to_string(k->isa);
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!std::isnan(x[i]) && std::isfinite(ref_resid[i])) {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(resid[i]), std::bit_cast<std::uint32_t>(ref_resid[i]))
            << superpoint_rt::util::to_string(k->isa) << " " << i;
      }
  }
}

TEST(MatchGemm, EqualsTheReferenceExactlyOnDyadicValuesInEveryLayout) {
  const int dims[] = {1, 3, 64, 256};
  const std::size_t sizes[][2] = {{1, 1}, {1, 5}, {3, 1}, {17, 33}, {70, 9}};
  unsigned seed = 11;
  for (int dim : dims)
    for (const auto& sz : sizes)
      for (int layout = 0; layout < 4; ++layout) {
        const std::size_t n0 = sz[0], n1 = sz[1];
        const auto a = dyadic(n0 * dim, seed++), b = dyadic(n1 * dim, seed++);
        const DescriptorsView va{a.data(), n0, dim, (layout & 1) != 0}, vb{b.data(), n1, dim, (layout & 2) != 0};
        const std::size_t row0 = n0 > 2 ? 1 : 0, m = n0 - row0, ld = n1 + 3;
        std::vector<float> got(m * ld, -1.0f), want(m * ld, -1.0f);
        md::similarity_block(va, row0, m, vb, got.data(), ld);
        md::similarity_block_reference(va, row0, m, vb, want.data(), ld);
        for (std::size_t r = 0; r < m; ++r)
          for (std::size_t j = 0; j < n1; ++j)
            ASSERT_EQ(got[r * ld + j], want[r * ld + j])
                << "dim " << dim << " n0 " << n0 << " n1 " << n1 << " layout " << layout << " at " << r << "," << j;
      }
}

namespace {

void expect_same_matches(const superpoint_rt::Matches& got, const superpoint_rt::Matches& want,
                         const std::string& what) {
  EXPECT_EQ(got.matches0, want.matches0) << what;
  EXPECT_TRUE(same_bits(got.scores0, want.scores0)) << what << " scores";
}

}  // namespace

TEST(Matcher, EqualsTheReferencePathForEveryThreadCountShapeAndConf) {
  const std::size_t sizes[] = {0, 1, 2, 3, 17, 129, 300};
  std::vector<MatchOptions> confs;
  for (const auto& c : superpoint_rt::match_confs()) confs.push_back(c.options);
  confs.push_back({0.8, 0.7, false, 0});
  confs.push_back({0.5, 0.0, false, 0});
  unsigned seed = 21;
  const int dim = 8;  // few dims, few values: many exact ties of similarity
  for (std::size_t n0 : sizes)
    for (std::size_t n1 : sizes) {
      const auto a = dyadic(n0 * dim, seed++, 2, 2), b = dyadic(n1 * dim, seed++, 2, 2);
      const DescriptorsView va{a.data(), n0, dim, false}, vb{b.data(), n1, dim, true};
      for (std::size_t ci = 0; ci < confs.size(); ++ci) {
        const auto want = md::match_reference(va, vb, confs[ci]);
        ASSERT_EQ(want.matches0.size(), n0);
        for (int threads : {1, 2, 3}) {
          MatchOptions o = confs[ci];
          o.threads = threads;
          expect_same_matches(superpoint_rt::match(va, vb, o), want,
                              "n0 " + std::to_string(n0) + " n1 " + std::to_string(n1) + " conf " + std::to_string(ci) +
                                  " threads " + std::to_string(threads));
        }
      }
    }
}

namespace {

// Unit descriptors rounded to float16, as hloc's files hold them, with near-duplicates so that rows have close
// seconds: the case the screen's bound exists for.
std::vector<float> unit_half(std::size_t n, int dim, unsigned seed) {
  auto v = md::random_unit_descriptors(n, dim, seed);
  const auto d = static_cast<std::size_t>(dim);
  for (std::size_t i = 1; i < n; i += 3)
    for (std::size_t k = 0; k < d; ++k) v[i * d + k] = v[(i - 1) * d + k] + (k % 5 == 0 ? 0x1p-11f : 0.0f);
  return v;
}

}  // namespace

TEST(Matcher, EveryScreenGivesTheReferenceBitsOnRealValuedData) {
  struct Case {
    std::size_t n0, n1;
    int dim;
    bool unit;
  };
  // The last case has more rows than one block, so that blocks are dealt to threads.
  const Case cases[] = {
      {1, 1, 3, false},    {1, 9, 256, true},     {9, 1, 256, true},     {2, 2, 1, false},
      {40, 70, 64, false}, {300, 257, 256, true}, {257, 300, 17, false}, {md::block_rows(500) * 2 + 3, 500, 32, true}};
  unsigned seed = 51;
  for (const auto& c : cases) {
    const auto a = c.unit ? unit_half(c.n0, c.dim, seed++) : gaussian(c.n0 * c.dim, seed++);
    const auto b = c.unit ? unit_half(c.n1, c.dim, seed++) : gaussian(c.n1 * c.dim, seed++);
    for (int layout = 0; layout < 4; ++layout) {
      const DescriptorsView va{a.data(), c.n0, c.dim, (layout & 1) != 0}, vb{b.data(), c.n1, c.dim, (layout & 2) != 0};
      const MatchOptions o{0.9, 0.0, true, 0};
      const auto want = md::match_reference(va, vb, o);
      for (const auto screen : {md::Screen::Fp32, md::Screen::Bf16, md::Screen::Exact})
        for (int threads : {1, 2, 3}) {
          md::Matcher m(threads);
          md::Top2 rows, cols;
          m.top2(va, vb, rows, cols, md::best_scan(), screen);
          const std::string what = std::string(md::to_string(screen)) + " n0 " + std::to_string(c.n0) + " n1 " +
                                   std::to_string(c.n1) + " dim " + std::to_string(c.dim) + " layout " +
                                   std::to_string(layout) + " threads " + std::to_string(threads);
          EXPECT_FALSE(m.last_stats().fell_back) << what;
          if (screen != md::Screen::Exact && c.n0 * c.n1 >= 10000) {
            EXPECT_LT(m.last_stats().exact, c.n0 * c.n1 / 4) << what << ": the screen let too much through";
          }
          expect_same_matches(md::decide(rows, cols, o, c.n0 > 1 && c.n1 > 1), want, what);
        }
    }
  }
}

TEST(Matcher, FallsBackToExactOnMassiveTiesAndOnNan) {
  // Every similarity equal: every entry is a candidate, far over the cap.
  const std::size_t n = 1500;
  const int dim = 4;
  std::vector<float> same(n * dim, 0.5f);
  const DescriptorsView v{same.data(), n, dim, false};
  md::Matcher m(2);
  md::Top2 rows, cols;
  m.top2(v, v, rows, cols, md::best_scan(), md::Screen::Fp32);
  EXPECT_TRUE(m.last_stats().fell_back);
  EXPECT_EQ(m.last_stats().screen, md::Screen::Exact);
  const MatchOptions o;
  expect_same_matches(md::decide(rows, cols, o, true), md::match_reference(v, v, o), "ties");
  EXPECT_EQ(rows.index[7], 0);  // ties go to the lowest index
  EXPECT_EQ(cols.index[7], 0);
  // A NaN descriptor: no finite bound.
  auto a = gaussian(50 * 8, 3);
  a[17] = std::numeric_limits<float>::quiet_NaN();
  const auto b = gaussian(60 * 8, 4);
  const DescriptorsView va{a.data(), 50, 8, false}, vb{b.data(), 60, 8, false};
  m.top2(va, vb, rows, cols, md::best_scan(), md::Screen::Bf16);
  EXPECT_TRUE(m.last_stats().fell_back);
  expect_same_matches(md::decide(rows, cols, o, true), md::match_reference(va, vb, o), "nan");
}

// Issue 32: a Matcher with a deadline (the HTTP server's --timeout-s) reads the clock between blocks of rows and
// before its exact fallback, and gives up with DeadlinePassed once it has passed; without one, or before it, it
// matches as ever.
TEST(Matcher, GivesUpAtItsDeadline) {
  using Clock = std::chrono::steady_clock;
  const auto a = gaussian(700 * 64, 5), b = gaussian(600 * 64, 6);
  const DescriptorsView va{a.data(), 700, 64, false}, vb{b.data(), 600, 64, false};
  const MatchOptions o;
  md::Matcher m(1);
  m.set_deadline(Clock::now() - std::chrono::seconds(1));
  EXPECT_THROW(m.match(va, vb, o), md::DeadlinePassed);
  m.set_deadline(Clock::now() + std::chrono::hours(1));
  expect_same_matches(m.match(va, vb, o), md::match_reference(va, vb, o), "deadline ahead");
  m.set_deadline(std::nullopt);
  expect_same_matches(m.match(va, vb, o), md::match_reference(va, vb, o), "no deadline");
  // Massive ties in 4096 x 4096 x 64: the screen gives up and the exact pass (1.1e9 multiply-adds, seconds on one
  // thread with the scalar kernels) is where the deadline meets it, a block (256 rows) or two later.
  const std::size_t n = 4096;
  const int dim = 64;
  std::vector<float> same(n * dim, 1.0f / 16);
  const DescriptorsView v{same.data(), n, dim, false};
  const auto t0 = Clock::now();
  m.set_deadline(t0 + std::chrono::milliseconds(100));
  EXPECT_THROW(m.match(v, v, o), md::DeadlinePassed);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
}

TEST(Matcher, HlocSemantics) {
  // Unit vectors in 2-D: a0 = (1, 0), a1 = (0, 1); b0 = (1, 0), b1 = (0.6, 0.8), b2 = (0, 1).
  const std::vector<float> a{1, 0, 0, 1}, b{1, 0, 0.6f, 0.8f, 0, 1};
  const DescriptorsView va{a.data(), 2, 2, false}, vb{b.data(), 3, 2, false};
  auto m = superpoint_rt::match(va, vb, {});
  EXPECT_EQ(m.matches0, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(m.scores0, (std::vector<float>{1.0f, 1.0f}));  // (sim + 1) / 2
  EXPECT_EQ(m.count(), 2u);
  // Ratio 0.8: a1's best (b2, d = 0) passes; a0's best is b0 (d = 0): passes too.
  m = superpoint_rt::match(va, vb, {0.8, 0.0, true, 0});
  EXPECT_EQ(m.matches0, (std::vector<std::int32_t>{0, 2}));
  // Distance 0.1 with a1 moved off: a = (1, 0), (0.8, 0.6): a1's best is b1 (sim 0.96, d^2 = 0.08 <= 0.01? no).
  const std::vector<float> a2{1, 0, 0.8f, 0.6f};
  const DescriptorsView va2{a2.data(), 2, 2, false};
  m = superpoint_rt::match(va2, vb, {0.0, 0.1, false, 0});
  EXPECT_EQ(m.matches0[0], 0);
  EXPECT_EQ(m.matches0[1], -1);
  EXPECT_EQ(m.scores0[1], 0.0f);
  // The mutual check leaves the score: without a threshold, a1' = (0.8, 0.6) -> b1 (sim 0.96), and b1's best is...
  // a1' too (0.96 > 0.6): mutual. Put a third vector closer to b1 so that a1' loses the check.
  const std::vector<float> a3{1, 0, 0.8f, 0.6f, 0.6f, 0.8f};
  const DescriptorsView va3{a3.data(), 3, 2, false};
  m = superpoint_rt::match(va3, vb, {});
  EXPECT_EQ(m.matches0[1], -1);                          // b1's nearest is a3[2]
  EXPECT_FLOAT_EQ(m.scores0[1], (0.96f + 1.0f) / 2.0f);  // hloc keeps the score
  EXPECT_EQ(m.matches0[2], 1);
  // One descriptor on a side: the ratio test is off (hloc), so a ratio that rejects everything still matches.
  const DescriptorsView one{b.data() + 2, 1, 2, false};
  m = superpoint_rt::match(va3, one, {0.01, 0.0, false, 0});
  EXPECT_EQ(m.matches0, (std::vector<std::int32_t>{0, 0, 0}));
  // No descriptors: n0 entries of -1 and 0.
  const DescriptorsView none{nullptr, 0, 2, false};
  m = superpoint_rt::match(va3, none, {});
  EXPECT_EQ(m.matches0, (std::vector<std::int32_t>{-1, -1, -1}));
  EXPECT_EQ(m.scores0, (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(superpoint_rt::match(none, va3, {}).matches0.empty());
}

TEST(Matcher, RefusesBadInputsByName) {
  const std::vector<float> a{1, 0};
  const DescriptorsView va{a.data(), 1, 2, false}, vb{a.data(), 2, 1, false};
  auto msg = [&](auto&& f) {
    try {
      f();
    } catch (const superpoint_rt::Error& e) {
      EXPECT_EQ(e.kind(), superpoint_rt::ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([&] { superpoint_rt::match(va, vb); }).find("different dims"), std::string::npos);
  EXPECT_NE(msg([&] {
              superpoint_rt::match(va, DescriptorsView{nullptr, 3, 2, false});
            }).find("no data"),
            std::string::npos);
  EXPECT_NE(msg([&] { superpoint_rt::match(va, va, {std::nan(""), 0, true, 0}); }).find("ratio"), std::string::npos);
  EXPECT_NE(msg([&] { superpoint_rt::match(va, va, {0, 2.5, true, 0}); }).find("distance: 2.5"), std::string::npos);
  superpoint_rt::Features f;  // no descriptors
  EXPECT_NE(msg([&] { superpoint_rt::match(f, f); }).find("no descriptors"), std::string::npos);
}

TEST(MatchParams, ConfsOverridesAndTextForms) {
  superpoint_rt::MatchParams p;
  auto o = superpoint_rt::resolve(p);
  EXPECT_EQ(o.ratio_threshold, 0.0);
  EXPECT_TRUE(o.mutual_check);
  p.conf = "NN-ratio";
  EXPECT_EQ(superpoint_rt::resolve(p).ratio_threshold, 0.8);
  superpoint_rt::set_match_param_text(p, "ratio", "0.9");
  superpoint_rt::set_match_param_text(p, "mutual", "false");
  o = superpoint_rt::resolve(p);
  EXPECT_EQ(o.ratio_threshold, 0.9);
  EXPECT_FALSE(o.mutual_check);
  superpoint_rt::set_match_param_text(p, "conf", "NN-superpoint");
  EXPECT_EQ(superpoint_rt::resolve(p).distance_threshold, 0.7);
  for (const char* bad : {"0x1p-3", " 0.5", "+0.5", "nan", "1.5", "-0.1", ""})
    EXPECT_THROW(superpoint_rt::set_match_param_text(p, "ratio", bad), superpoint_rt::Error) << bad;
  EXPECT_THROW(superpoint_rt::set_match_param_text(p, "conf", "superglue"), superpoint_rt::Error);
  EXPECT_THROW(superpoint_rt::set_match_param_text(p, "mutual", "maybe"), superpoint_rt::Error);
  EXPECT_THROW(superpoint_rt::set_match_param_text(p, "epsilon", "1"), superpoint_rt::Error);
  EXPECT_THROW(superpoint_rt::set_match_param(p, "ratio", superpoint_rt::ParamValue{true}), superpoint_rt::Error);
}
