// Post-processing kernels (src/post): every fast kernel table this CPU can run against the scalar references, the
// references against the PyTorch goldens in <shared>/golden/dense, and hand-worked HF semantics.
//
// Run under SUPERPOINT_RT_ISA=scalar, =avx2 and unset so that the public dispatch takes every path; the per-table
// tests below run each table the (capped) CPU allows, so the forced-ISA reruns leave out the costly per-table sweeps
// (Nms.FastIs*, Nms.AboveThreshold*, Nms.DenseRounds*, Nms.GoldenNmsMap*: tests/CMakeLists.txt), whose tables the
// unforced run already covers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <time.h>

#include "common/test_util.hpp"
#include "post/kernels.hpp"
#include "post/post.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/npz.hpp"

namespace post = superpoint_rt::post;
using post::Keypoint;
using post::detail::Kernels;

namespace {

// ---- helpers ------------------------------------------------------------------------------------------------------

struct Dense {
  std::string name;
  int hc = 0, wc = 0;
  std::vector<float> logits_hwc;    // hc x wc x 65
  std::vector<float> score_map;     // 8hc x 8wc
  std::vector<float> nms_map;       // 8hc x 8wc
  std::vector<float> desc_hwc;      // hc x wc x 256
  std::vector<Keypoint> keypoints;  // keypoints_net with golden scores, golden order
  std::vector<float> descriptors;   // n x 256
};

std::vector<float> chw_to_hwc(const std::vector<float>& chw, int c, int h, int w) {
  std::vector<float> out(chw.size());
  for (int k = 0; k < c; ++k)
    for (int i = 0; i < h * w; ++i)
      out[static_cast<std::size_t>(i) * c + k] = chw[static_cast<std::size_t>(k) * h * w + i];
  return out;
}

std::vector<Dense> load_dense() {
  const std::string dir = sprt_test::golden_dir() + "/dense";
  std::vector<Dense> all;
  if (!std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << "golden dense folder missing: " << dir << " (set SUPERPOINT_RT_SHARED)";
    return all;
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".npz") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto z = superpoint_rt::util::load_npz(f);
    Dense d;
    d.name = std::filesystem::path(f).filename().string();
    const auto& lg = z.at("logits");
    EXPECT_EQ(lg.shape.size(), 3u);
    EXPECT_EQ(lg.shape[0], 65);
    d.hc = static_cast<int>(lg.shape[1]);
    d.wc = static_cast<int>(lg.shape[2]);
    d.logits_hwc = chw_to_hwc(lg.as_float(), 65, d.hc, d.wc);
    d.score_map = z.at("score_map").as_float();
    d.nms_map = z.at("nms_map").as_float();
    d.desc_hwc = chw_to_hwc(z.at("descriptor_map").as_float(), 256, d.hc, d.wc);
    const auto kp = z.at("keypoints_net").as_int64();
    const auto sc = z.at("scores").as_float();
    for (std::size_t i = 0; i < sc.size(); ++i)
      d.keypoints.push_back(Keypoint{static_cast<int>(kp[2 * i]), static_cast<int>(kp[2 * i + 1]), sc[i]});
    d.descriptors = z.at("descriptors").as_float();
    EXPECT_EQ(d.score_map.size(), static_cast<std::size_t>(64) * d.hc * d.wc);
    all.push_back(std::move(d));
  }
  EXPECT_FALSE(all.empty()) << "no golden dense files in " << dir;
  return all;
}

const std::vector<Dense>& dense() {
  static const std::vector<Dense> d = load_dense();
  return d;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::size_t first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  return a.size();
}

const char* isa_name(const Kernels& k) {
  return superpoint_rt::util::to_string(k.isa);
}

// Random score map with many exact ties and zeros: values are multiples of 1/levels (levels = 0: continuous).
std::vector<float> random_map(int h, int w, int levels, double zero_fraction, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> m(static_cast<std::size_t>(h) * w);
  for (auto& v : m) {
    if (u(rng) < zero_fraction) {
      v = 0.0f;
    } else if (levels > 0) {
      v = static_cast<float>(1 + static_cast<int>(u(rng) * static_cast<float>(levels))) / static_cast<float>(levels);
    } else {
      v = u(rng);
    }
  }
  return m;
}

// One kernel table's NMS; threshold -inf is simple_nms, a finite one simple_nms_above.
std::vector<float> run_nms(const Kernels& k, const std::vector<float>& s, int h, int w, int r,
                           float threshold = -std::numeric_limits<float>::infinity()) {
  std::vector<float> out(s.size(), -1.0f);
  if (r == 0) {
    post::NmsScratch scratch;
    post::simple_nms(s.data(), h, w, 0, out.data(), scratch);
    return out;
  }
  std::vector<float> work(post::detail::nms_work_floats(h, w, r));
  k.nms(s.data(), h, w, r, threshold, out.data(), work.data());
  return out;
}

// Strictly increasing in raster order: round 1 finds one maximum, so nearly every pixel stays a candidate and the
// NMS takes its dense rounds (a random map leaves few candidates and takes the sparse ones).
std::vector<float> ramp_map(int h, int w) {
  std::vector<float> m(static_cast<std::size_t>(h) * w);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i + 1) / static_cast<float>(m.size());
  return m;
}

// simple_nms_above's contract against the reference: the same pixels above t, with the same bits.
std::string above_mismatch(const std::vector<float>& fast, const std::vector<float>& ref, float t) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const bool a = fast[i] > t, b = ref[i] > t;
    if (a != b || (b && std::memcmp(&fast[i], &ref[i], sizeof(float)) != 0))
      return "pixel " + std::to_string(i) + ": " + std::to_string(fast[i]) + " vs reference " + std::to_string(ref[i]);
  }
  return "";
}

std::vector<float> run_nms_reference(const std::vector<float>& s, int h, int w, int r) {
  std::vector<float> out(s.size(), -1.0f);
  post::simple_nms_reference(s.data(), h, w, r, out.data());
  return out;
}

// ---- step 6: scores -----------------------------------------------------------------------------------------------

TEST(Scores, ReferenceAndFastMatchGoldenScoreMap) {
  for (const Dense& d : dense()) {
    std::vector<float> heat(d.score_map.size());
    post::scores_from_logits_reference(d.logits_hwc.data(), d.hc, d.wc, heat.data());
    std::size_t same = 0;
    for (std::size_t i = 0; i < heat.size(); ++i) same += heat[i] == d.score_map[i];
    const float err = max_abs_diff(heat, d.score_map);
    std::printf("[scores] %s reference vs golden: max abs err %.3g, %.1f%% bit-identical\n", d.name.c_str(), err,
                100.0 * static_cast<double>(same) / static_cast<double>(heat.size()));
    EXPECT_LT(err, 1e-6f) << d.name;
    for (const Kernels* k : post::detail::available_kernels()) {
      std::vector<float> fast(d.score_map.size());
      k->scores(d.logits_hwc.data(), d.hc, d.wc, fast.data());
      std::size_t fsame = 0;
      for (std::size_t i = 0; i < fast.size(); ++i) fsame += fast[i] == d.score_map[i];
      const float ferr = max_abs_diff(fast, d.score_map);
      std::printf("[scores] %s %s vs golden: max abs err %.3g, %.1f%% bit-identical\n", d.name.c_str(), isa_name(*k),
                  ferr, 100.0 * static_cast<double>(fsame) / static_cast<double>(fast.size()));
      EXPECT_LT(ferr, 1e-6f) << d.name << " " << isa_name(*k);
    }
  }
}

TEST(Scores, FastMatchesReferenceOnRandomLogits) {
  std::mt19937 rng(1234);
  struct Case {
    int hc, wc;
    float lo, hi;
  };
  const Case cases[] = {{1, 1, -3, 3}, {2, 3, -20, 20},       {7, 5, -100, 100}, {60, 80, -8, 8},
                        {3, 1, 0, 0},  {1, 4, -1e-3f, 1e-3f}, {4, 4, -200, 30}};
  for (const Case& c : cases) {
    std::uniform_real_distribution<float> u(c.lo, c.hi);
    std::vector<float> logits(static_cast<std::size_t>(c.hc) * c.wc * 65);
    for (auto& v : logits) v = u(rng);
    std::vector<float> ref(static_cast<std::size_t>(64) * c.hc * c.wc);
    post::scores_from_logits_reference(logits.data(), c.hc, c.wc, ref.data());
    for (const Kernels* k : post::detail::available_kernels()) {
      std::vector<float> fast(ref.size(), -1.0f);
      k->scores(logits.data(), c.hc, c.wc, fast.data());
      EXPECT_TRUE(same_bits(fast, ref)) << isa_name(*k) << " " << c.hc << "x" << c.wc << " [" << c.lo << "," << c.hi
                                        << "] max abs diff " << max_abs_diff(fast, ref);
    }
    std::vector<float> pub(ref.size(), -1.0f);
    post::scores_from_logits(logits.data(), c.hc, c.wc, pub.data());
    EXPECT_TRUE(same_bits(pub, ref));
    // Against a double-precision softmax (independent of the float recipe): ulp-level.
    double worst = 0;
    for (int cell = 0; cell < c.hc * c.wc; ++cell) {
      const float* x = logits.data() + static_cast<std::size_t>(cell) * 65;
      const double m = *std::max_element(x, x + 65);
      double sum = 0;
      for (int ch = 0; ch < 65; ++ch) sum += std::exp(static_cast<double>(x[ch]) - m);
      const int i = cell / c.wc, j = cell % c.wc;
      for (int ch = 0; ch < 64; ++ch) {
        const double p = std::exp(static_cast<double>(x[ch]) - m) / sum;
        const float v = ref[static_cast<std::size_t>(8 * i + ch / 8) * (8 * c.wc) + 8 * j + ch % 8];
        worst = std::max(worst, std::fabs(v - p));
      }
    }
    EXPECT_LT(worst, 2.5e-7) << c.hc << "x" << c.wc;
  }
}

TEST(Scores, ExpPolynomialIsWithinTwoUlpOfExp) {
  // The softmax exp (a model of PyTorch's Sleef expf) against the double-precision exp over its whole range.
  double worst_ulp = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -87.3f * static_cast<float>(i) / 2000000.0f;
    const double want = std::exp(static_cast<double>(x));
    const float got = post::detail::exp_nonpositive_reference(x);
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst_ulp = std::max(worst_ulp, std::fabs(got - want) / ulp);
  }
  std::printf("[scores] exp polynomial: worst error %.3f ulp on [-87.3, 0]\n", worst_ulp);
  EXPECT_LT(worst_ulp, 2.0);
  EXPECT_EQ(post::detail::exp_nonpositive_reference(0.0f), 1.0f);
  EXPECT_EQ(post::detail::exp_nonpositive_reference(-90.0f), 0.0f);
  EXPECT_EQ(post::detail::exp_nonpositive_reference(-std::numeric_limits<float>::infinity()), 0.0f);
}

TEST(Scores, DepthToSpaceLayoutAndUniformLogits) {
  // One dominant channel per cell: its probability lands at heat[8i + c/8][8j + c%8]; the dustbin (c = 64)
  // leaves the whole cell near zero. Equal logits give 1/65 everywhere.
  const int hc = 3, wc = 4;
  std::vector<float> logits(static_cast<std::size_t>(hc) * wc * 65, 0.0f);
  std::vector<int> hot(hc * wc);
  for (int cell = 0; cell < hc * wc; ++cell) {
    hot[cell] = (cell * 29 + 5) % 65;
    if (cell == 7) hot[cell] = 64;
    logits[static_cast<std::size_t>(cell) * 65 + hot[cell]] = 40.0f;
  }
  for (const Kernels* k : post::detail::available_kernels()) {
    std::vector<float> heat(static_cast<std::size_t>(64) * hc * wc, -1.0f);
    k->scores(logits.data(), hc, wc, heat.data());
    for (int i = 0; i < hc; ++i)
      for (int j = 0; j < wc; ++j)
        for (int c = 0; c < 64; ++c) {
          const float v = heat[static_cast<std::size_t>(8 * i + c / 8) * (8 * wc) + 8 * j + c % 8];
          if (c == hot[i * wc + j]) {
            EXPECT_NEAR(v, 1.0f, 1e-12f) << isa_name(*k) << " cell " << i << "," << j;
          } else {
            EXPECT_LT(v, 1e-15f) << isa_name(*k) << " cell " << i << "," << j << " c " << c;
          }
        }
    std::vector<float> flat(logits.size(), 0.25f);
    k->scores(flat.data(), hc, wc, heat.data());
    for (float v : heat) EXPECT_NEAR(v, 1.0f / 65.0f, 1e-8f) << isa_name(*k);
  }
}

// ---- step 7: NMS --------------------------------------------------------------------------------------------------

TEST(Nms, HandWorkedHfSemantics) {
  // Worked by hand from HF simple_nms with r = 1 (3x3 window):
  //  - 0.9 > 0.8 > 0.7: only 0.9 is a max at first; 0.8 is suppressed (next to 0.9), after which 0.7 is the max of
  //    its unsuppressed window and re-emerges in round 1;
  //  - the tied plateau 0.5, 0.5 keeps both;
  //  - zeros stay zero.
  const int h = 2, w = 7;
  const std::vector<float> s = {0.9f, 0.8f, 0.7f, 0.0f, 0.0f, 0.5f, 0.5f,  //
                                0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> expect = {0.9f, 0.0f, 0.7f, 0.0f, 0.0f, 0.5f, 0.5f,  //
                                     0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(run_nms_reference(s, h, w, 1), expect);
  for (const Kernels* k : post::detail::available_kernels()) EXPECT_EQ(run_nms(*k, s, h, w, 1), expect) << isa_name(*k);
  // r = 0: the identity.
  EXPECT_EQ(run_nms_reference(s, h, w, 0), s);
  // r = 3 (7x7 window): 0.5 at column 5 sees 0.7 (column 2) and is not a max; 0.5 at column 6 only sees columns
  // 3..6 and is. Round 1 suppresses everything within 3 columns of 0.9 and of column 6, i.e. every cell.
  const std::vector<float> expect3 = {0.9f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f,  //
                                      0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(run_nms_reference(s, h, w, 3), expect3);
  for (const Kernels* k : post::detail::available_kernels())
    EXPECT_EQ(run_nms(*k, s, h, w, 3), expect3) << isa_name(*k);
}

TEST(Nms, FastIsBitIdenticalToReferenceForEveryRadius) {
  std::mt19937 rng(42);
  struct Size {
    int h, w;
  };
  const Size sizes[] = {{1, 1}, {1, 37}, {29, 1}, {8, 8}, {5, 3}, {13, 29}, {40, 56}, {24, 80}};
  const int levels[] = {2, 6, 0};
  for (const Size& sz : sizes) {
    for (int lv : levels) {
      const auto s = random_map(sz.h, sz.w, lv, 0.4, rng);
      for (int r = 0; r <= 32; ++r) {
        const auto ref = run_nms_reference(s, sz.h, sz.w, r);
        for (const Kernels* k : post::detail::available_kernels()) {
          const auto fast = run_nms(*k, s, sz.h, sz.w, r);
          ASSERT_TRUE(same_bits(fast, ref)) << isa_name(*k) << " " << sz.h << "x" << sz.w << " levels " << lv << " r "
                                            << r << " first difference at " << first_bit_difference(fast, ref);
        }
      }
    }
  }
}

TEST(Nms, FastIsBitIdenticalToReferenceAt480x640) {
  std::mt19937 rng(7);
  const int h = 480, w = 640;
  const auto s = random_map(h, w, 16, 0.3, rng);
  for (int r : {0, 1, 4, 9}) {
    const auto ref = run_nms_reference(s, h, w, r);
    for (const Kernels* k : post::detail::available_kernels()) {
      const auto fast = run_nms(*k, s, h, w, r);
      EXPECT_TRUE(same_bits(fast, ref)) << isa_name(*k) << " r " << r << " first difference at "
                                        << first_bit_difference(fast, ref);
    }
  }
}

TEST(Nms, DenseRoundsOnRampsAreBitIdentical) {
  for (const auto& [h, w] : {std::pair{1, 50}, {7, 9}, {24, 80}, {60, 33}}) {
    const auto s = ramp_map(h, w);
    for (int r : {1, 2, 5, 17, 32}) {
      const auto ref = run_nms_reference(s, h, w, r);
      for (const Kernels* k : post::detail::available_kernels()) {
        const auto fast = run_nms(*k, s, h, w, r);
        EXPECT_TRUE(same_bits(fast, ref)) << isa_name(*k) << " ramp " << h << "x" << w << " r " << r
                                          << " first difference at " << first_bit_difference(fast, ref);
        EXPECT_EQ(above_mismatch(run_nms(*k, s, h, w, r, 0.5f), ref, 0.5f), "")
            << isa_name(*k) << " ramp " << h << "x" << w << " r " << r;
      }
    }
  }
}

TEST(Nms, AboveThresholdKeepsTheSamePixelsAboveIt) {
  std::mt19937 rng(11);
  struct Size {
    int h, w;
  };
  const Size sizes[] = {{1, 37}, {29, 1}, {13, 29}, {40, 56}, {24, 80}};
  // Thresholds on the levels themselves (ties with the threshold), between them, 0 and 1.
  const float thresholds[] = {0.0f, 0.25f, 0.3f, 0.5f, 0.9f, 1.0f};
  for (const Size& sz : sizes) {
    for (int lv : {2, 4, 0}) {
      const auto s = random_map(sz.h, sz.w, lv, 0.4, rng);
      for (int r = 1; r <= 32; r += 3) {
        const auto ref = run_nms_reference(s, sz.h, sz.w, r);
        for (const Kernels* k : post::detail::available_kernels())
          for (float t : thresholds)
            ASSERT_EQ(above_mismatch(run_nms(*k, s, sz.h, sz.w, r, t), ref, t), "")
                << isa_name(*k) << " " << sz.h << "x" << sz.w << " levels " << lv << " r " << r << " t " << t;
      }
    }
  }
}

// The public entry points (the table util::best_isa() picks; the ctests isa_<isa>_post run this under each cap) on
// a random map of awkward width (no multiple of 16) and, for the thresholded one, in place and with the fall-back to
// the full map for a negative threshold. (The per-table sweeps above already run every table the capped CPU allows,
// so the reruns leave them out: tests/CMakeLists.txt. The map is small: under ASan the reference NMS of 480 x 640 at
// radius 9 took 12 s.)
TEST(Nms, PublicEntryPointsEqualTheReference) {
  std::mt19937 rng(7);
  const int h = 100, w = 139;
  const auto s = random_map(h, w, 16, 0.3, rng);
  post::NmsScratch scratch;
  for (int r : {0, 1, 4, 9}) {
    const auto ref = run_nms_reference(s, h, w, r);
    std::vector<float> pub(s.size());
    post::simple_nms(s.data(), h, w, r, pub.data(), scratch);
    EXPECT_TRUE(same_bits(pub, ref)) << "public simple_nms r " << r;
    if (r != 4) continue;
    auto inplace = s;
    post::simple_nms_above(inplace.data(), h, w, r, 0.25f, inplace.data(), scratch);
    EXPECT_EQ(above_mismatch(inplace, ref, 0.25f), "");
    std::vector<float> full(s.size());
    post::simple_nms_above(s.data(), h, w, r, -0.5f, full.data(), scratch);
    EXPECT_TRUE(same_bits(full, ref));
  }
}

TEST(Nms, AboveThresholdOnGoldenScoreMaps) {
  for (const Dense& d : dense()) {
    const int h = 8 * d.hc, w = 8 * d.wc;
    for (int r : {1, 4}) {
      const auto ref = run_nms_reference(d.score_map, h, w, r);
      for (const Kernels* k : post::detail::available_kernels())
        for (float t : {0.0f, 0.005f, 0.015f})
          EXPECT_EQ(above_mismatch(run_nms(*k, d.score_map, h, w, r, t), ref, t), "")
              << d.name << " " << isa_name(*k) << " r " << r << " t " << t;
    }
  }
}

bool same_keypoints(const std::vector<Keypoint>& a, const std::vector<Keypoint>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].x != b[i].x || a[i].y != b[i].y || std::memcmp(&a[i].score, &b[i].score, sizeof(float)) != 0) return false;
  return true;
}

// Steps 7-10 fused (the engine's call) against the literal references of simple_nms and select_keypoints.
TEST(NmsSelect, FusedEqualsNmsMapThenSelect) {
  std::mt19937 rng(17);
  post::NmsScratch scratch;
  std::vector<Keypoint> got, want;
  const std::pair<int, int> sizes[] = {{1, 37}, {29, 1}, {13, 29}, {40, 70}, {24, 130}};
  for (const auto& [h, w] : sizes) {
    for (int lv : {3, 0}) {
      const auto s = random_map(h, w, lv, 0.4, rng);
      for (int r : {0, 1, 2, 4, 9, 32}) {
        const auto nms = run_nms_reference(s, h, w, r);
        for (float t : {0.0f, 1.0f / 3.0f, 0.5f, -1.0f})
          for (int border : {0, 4, 1000})
            for (int k : {-1, 0, 3, 50}) {
              post::select_keypoints_reference(nms.data(), h, w, t, border, k, want);
              post::nms_select_keypoints(s.data(), h, w, r, t, border, k, got, scratch);
              ASSERT_TRUE(same_keypoints(got, want))
                  << h << "x" << w << " levels " << lv << " r " << r << " t " << t << " border " << border << " k " << k
                  << ": " << got.size() << " vs " << want.size() << " keypoints";
            }
      }
    }
  }
  for (const Dense& d : dense()) {
    const int h = 8 * d.hc, w = 8 * d.wc;
    const auto nms = run_nms_reference(d.score_map, h, w, 4);
    post::select_keypoints_reference(nms.data(), h, w, 0.005f, 4, 1024, want);
    post::nms_select_keypoints(d.score_map.data(), h, w, 4, 0.005f, 4, 1024, got, scratch);
    EXPECT_TRUE(same_keypoints(got, want)) << d.name;
    EXPECT_EQ(want.size(), d.keypoints.size()) << d.name;
  }
}

TEST(Nms, GoldenNmsMapFromGoldenScoreMap) {
  for (const Dense& d : dense()) {
    const int h = 8 * d.hc, w = 8 * d.wc;
    const auto ref = run_nms_reference(d.score_map, h, w, 4);
    EXPECT_TRUE(same_bits(ref, d.nms_map))
        << d.name << " reference, first difference at " << first_bit_difference(ref, d.nms_map);
    for (const Kernels* k : post::detail::available_kernels()) {
      const auto fast = run_nms(*k, d.score_map, h, w, 4);
      EXPECT_TRUE(same_bits(fast, d.nms_map))
          << d.name << " " << isa_name(*k) << ", first difference at " << first_bit_difference(fast, d.nms_map);
    }
  }
}

TEST(Nms, InPlaceRadiusLargerThanMapAndBadRadius) {
  std::mt19937 rng(3);
  const auto s = random_map(6, 9, 4, 0.2, rng);
  const auto ref = run_nms_reference(s, 6, 9, 2);
  post::NmsScratch scratch;
  auto inplace = s;
  post::simple_nms(inplace.data(), 6, 9, 2, inplace.data(), scratch);
  EXPECT_TRUE(same_bits(inplace, ref));
  // A radius far beyond the map equals the whole-map window.
  std::vector<float> big(s.size());
  post::simple_nms(s.data(), 6, 9, 1000, big.data(), scratch);
  EXPECT_TRUE(same_bits(big, run_nms_reference(s, 6, 9, 9)));
  std::vector<float> out(s.size());
  try {
    post::simple_nms(s.data(), 6, 9, -1, out.data(), scratch);
    ADD_FAILURE() << "no error for radius -1";
  } catch (const superpoint_rt::Error& e) {
    EXPECT_EQ(e.kind(), superpoint_rt::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("nms_radius"), std::string::npos) << e.what();
  }
  EXPECT_THROW(post::simple_nms_reference(s.data(), 6, 9, -1, out.data()), superpoint_rt::Error);
}

// ---- steps 8-10: selection ----------------------------------------------------------------------------------------

bool same_keypoints(const std::vector<Keypoint>& a, const std::vector<Keypoint>& b, std::string* why) {
  if (a.size() != b.size()) {
    *why = "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].x != b[i].x || a[i].y != b[i].y || std::memcmp(&a[i].score, &b[i].score, sizeof(float)) != 0) {
      *why = "index " + std::to_string(i) + ": (" + std::to_string(a[i].x) + "," + std::to_string(a[i].y) + "," +
             std::to_string(a[i].score) + ") vs (" + std::to_string(b[i].x) + "," + std::to_string(b[i].y) + "," +
             std::to_string(b[i].score) + ")";
      return false;
    }
  return true;
}

TEST(Select, HandWorkedOrderBorderAndTopK) {
  // 6 x 7 map, border 1: row 0, row 5, column 0 and column 6 are dropped.
  const int h = 6, w = 7;
  std::vector<float> m(h * w, 0.0f);
  const auto set = [&](int x, int y, float v) { m[y * w + x] = v; };
  set(0, 2, 0.9f);  // border column
  set(3, 0, 0.9f);  // border row
  set(6, 3, 0.9f);  // border column (x >= w - 1)
  set(2, 1, 0.5f);
  set(5, 4, 0.7f);
  set(1, 3, 0.5f);   // tie with (2,1): raster order puts y = 1 first
  set(4, 3, 0.5f);   // tie, same row as (1,3): x order
  set(3, 2, 0.01f);  // equal to the threshold: strict '>' drops it
  set(4, 2, 0.02f);
  std::vector<Keypoint> out;
  post::select_keypoints(m.data(), h, w, 0.01f, 1, -1, out);
  const std::vector<Keypoint> all = {{5, 4, 0.7f}, {2, 1, 0.5f}, {1, 3, 0.5f}, {4, 3, 0.5f}, {4, 2, 0.02f}};
  std::string why;
  EXPECT_TRUE(same_keypoints(out, all, &why)) << why;
  post::select_keypoints(m.data(), h, w, 0.01f, 1, 3, out);
  EXPECT_TRUE(same_keypoints(out, std::vector<Keypoint>(all.begin(), all.begin() + 3), &why)) << why;
  post::select_keypoints(m.data(), h, w, 0.01f, 1, 0, out);
  EXPECT_TRUE(out.empty());
  post::select_keypoints(m.data(), h, w, 0.01f, 4, -1, out);  // 4 <= x < 3: nothing
  EXPECT_TRUE(out.empty());
  try {
    post::select_keypoints(m.data(), h, w, 0.01f, 1, -2, out);
    ADD_FAILURE() << "no error for max_keypoints -2";
  } catch (const superpoint_rt::Error& e) {
    EXPECT_EQ(e.kind(), superpoint_rt::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("max_keypoints"), std::string::npos) << e.what();
  }
}

TEST(Select, FastMatchesReferenceWithTies) {
  std::mt19937 rng(99);
  struct Size {
    int h, w;
  };
  const Size sizes[] = {{1, 1}, {1, 50}, {50, 1}, {8, 8}, {17, 33}, {120, 160}};
  for (const Size& sz : sizes) {
    for (int lv : {3, 50, 0}) {
      const auto m = random_map(sz.h, sz.w, lv, 0.5, rng);
      for (float thr : {0.0f, 0.34f, -1.0f, 2.0f}) {
        for (int border : {0, 1, 4, 30}) {
          std::vector<Keypoint> ref;
          post::select_keypoints_reference(m.data(), sz.h, sz.w, thr, border, -1, ref);
          const int n = static_cast<int>(ref.size());
          for (int k : {-1, 0, 1, 7, n / 2, n - 1, n, n + 5}) {
            if (k < -1) continue;
            std::vector<Keypoint> a, b;
            post::select_keypoints_reference(m.data(), sz.h, sz.w, thr, border, k, a);
            post::select_keypoints(m.data(), sz.h, sz.w, thr, border, k, b);
            std::string why;
            ASSERT_TRUE(same_keypoints(b, a, &why)) << sz.h << "x" << sz.w << " lv " << lv << " thr " << thr
                                                    << " border " << border << " k " << k << ": " << why;
          }
        }
      }
    }
  }
}

TEST(Select, CollectKernelsAgree) {
  std::mt19937 rng(5);
  auto row = random_map(1, 3000, 7, 0.5, rng);
  row[17] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int> expect;
  for (int x0 : {0, 3, 16}) {
    for (int x1 : {0, 5, 16, 17, 31, 1024, 2999, 3000}) {
      if (x1 < x0) continue;
      expect.clear();
      for (int x = x0; x < x1; ++x)
        if (row[x] > 0.4f) expect.push_back(x);
      for (const Kernels* k : post::detail::available_kernels()) {
        std::vector<int> xs(3000, -1);
        const int n = k->collect(row.data(), x0, x1, 0.4f, xs.data());
        xs.resize(static_cast<std::size_t>(n));
        EXPECT_EQ(xs, expect) << isa_name(*k) << " [" << x0 << "," << x1 << ")";
      }
    }
  }
}

TEST(Select, GoldenKeypointsFromGoldenNmsMap) {
  for (const Dense& d : dense()) {
    const int h = 8 * d.hc, w = 8 * d.wc;
    std::vector<Keypoint> fast, ref;
    post::select_keypoints(d.nms_map.data(), h, w, 0.005f, 4, 1024, fast);
    post::select_keypoints_reference(d.nms_map.data(), h, w, 0.005f, 4, 1024, ref);
    std::string why;
    EXPECT_TRUE(same_keypoints(fast, d.keypoints, &why)) << d.name << " fast: " << why;
    EXPECT_TRUE(same_keypoints(ref, d.keypoints, &why)) << d.name << " reference: " << why;
    std::printf("[select] %s: %zu keypoints, identical to golden order\n", d.name.c_str(), fast.size());
  }
}

// ---- step 11: descriptors -----------------------------------------------------------------------------------------

TEST(Descriptors, NormalizeKernelsAreBitIdenticalToReference) {
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int dim : {1, 7, 16, 17, 33, 64, 256, 300}) {
    const int n = 9;
    std::vector<float> v(static_cast<std::size_t>(n) * dim);
    for (auto& x : v) x = g(rng);
    for (int c = 0; c < dim; ++c) {
      v[static_cast<std::size_t>(1) * dim + c] = 0.0f;    // zero vector stays zero
      v[static_cast<std::size_t>(2) * dim + c] = 1e-30f;  // norm < 1e-12: divided by 1e-12
    }
    auto ref = v;
    post::normalize_cells_reference(ref.data(), n, dim);
    for (int k = 0; k < n; ++k) {
      if (k == 1 || k == 2) continue;
      double s = 0;
      for (int c = 0; c < dim; ++c)
        s += static_cast<double>(ref[static_cast<std::size_t>(k) * dim + c]) *
             ref[static_cast<std::size_t>(k) * dim + c];
      EXPECT_NEAR(s, 1.0, 1e-6) << "dim " << dim;
    }
    for (int c = 0; c < dim; ++c) {
      EXPECT_EQ(ref[static_cast<std::size_t>(dim) + c], 0.0f);
      EXPECT_EQ(ref[static_cast<std::size_t>(2) * dim + c], 1e-30f / 1e-12f);
    }
    for (const Kernels* k : post::detail::available_kernels()) {
      auto fast = v;
      k->normalize(fast.data(), n, dim);
      EXPECT_TRUE(same_bits(fast, ref)) << isa_name(*k) << " dim " << dim;
    }
    auto pub = v;
    post::normalize_cells(pub.data(), n, dim);
    EXPECT_TRUE(same_bits(pub, ref)) << "dim " << dim;
  }
}

TEST(Descriptors, GoldenDescriptorsFromGoldenDenseMap) {
  for (const Dense& d : dense()) {
    const int n = static_cast<int>(d.keypoints.size());
    std::vector<float> fast(static_cast<std::size_t>(n) * 256), ref(fast.size());
    post::sample_descriptors(d.desc_hwc.data(), d.hc, d.wc, 256, d.keypoints.data(), n, fast.data());
    post::sample_descriptors_reference(d.desc_hwc.data(), d.hc, d.wc, 256, d.keypoints.data(), n, ref.data());
    EXPECT_TRUE(same_bits(fast, ref)) << d.name;
    std::size_t same = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) same += ref[i] == d.descriptors[i];
    const float err = max_abs_diff(ref, d.descriptors);
    std::printf("[descriptors] %s: %d keypoints, max abs err %.3g, %.2f%% bit-identical\n", d.name.c_str(), n, err,
                100.0 * static_cast<double>(same) / static_cast<double>(ref.size()));
    EXPECT_LT(err, 1e-6f) << d.name;
  }
}

// Double-precision bilinear sampling from the real-number formula (independent of the float32 recipe).
std::vector<double> sample_double(const std::vector<float>& desc, int hc, int wc, int dim, const Keypoint& kp) {
  const double ix = (kp.x - 3.5) * (wc - 1) / (8.0 * wc - 4.5);
  const double iy = (kp.y - 3.5) * (hc - 1) / (8.0 * hc - 4.5);
  const double x0 = std::floor(ix), y0 = std::floor(iy);
  std::vector<double> out(static_cast<std::size_t>(dim), 0.0);
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const double x = x0 + dx, y = y0 + dy;
      if (x < 0 || x > wc - 1 || y < 0 || y > hc - 1) continue;
      const double wgt = (dx ? ix - x0 : 1 - (ix - x0)) * (dy ? iy - y0 : 1 - (iy - y0));
      const float* v = desc.data() + (static_cast<std::size_t>(y) * wc + static_cast<std::size_t>(x)) * dim;
      for (int c = 0; c < dim; ++c) out[c] += wgt * v[c];
    }
  double s = 0;
  for (double v : out) s += v * v;
  const double nrm = std::max(std::sqrt(s), 1e-12);
  for (double& v : out) v /= nrm;
  return out;
}

TEST(Descriptors, KernelsMatchReferenceAndRealFormula) {
  std::mt19937 rng(21);
  std::normal_distribution<float> g(0.0f, 1.0f);
  struct Case {
    int hc, wc, dim;
  };
  const Case cases[] = {{60, 80, 256}, {3, 5, 7}, {1, 1, 16}, {2, 9, 33}, {5, 2, 1}};
  for (const Case& c : cases) {
    std::vector<float> desc(static_cast<std::size_t>(c.hc) * c.wc * c.dim);
    for (auto& v : desc) v = g(rng);
    std::vector<Keypoint> kps;
    std::uniform_int_distribution<int> ux(0, 8 * c.wc - 1), uy(0, 8 * c.hc - 1);
    for (int i = 0; i < 200; ++i) kps.push_back(Keypoint{ux(rng), uy(rng), 0.5f});
    // Corners of the frame: x = 0..3 sample left of cell 0 (zeros padding on one side).
    for (int x : {0, 3, 4, 8 * c.wc - 1})
      for (int y : {0, 3, 4, 8 * c.hc - 1}) kps.push_back(Keypoint{x, y, 0.5f});
    const int n = static_cast<int>(kps.size());
    std::vector<float> ref(static_cast<std::size_t>(n) * c.dim);
    post::sample_descriptors_reference(desc.data(), c.hc, c.wc, c.dim, kps.data(), n, ref.data());
    for (int i = 0; i < n; ++i) {
      const auto dd = sample_double(desc, c.hc, c.wc, c.dim, kps[i]);
      for (int ch = 0; ch < c.dim; ++ch)
        ASSERT_NEAR(ref[static_cast<std::size_t>(i) * c.dim + ch], dd[ch], 2e-6)
            << c.hc << "x" << c.wc << "x" << c.dim << " kp (" << kps[i].x << "," << kps[i].y << ") ch " << ch;
    }
    for (const Kernels* k : post::detail::available_kernels()) {
      std::vector<float> fast(ref.size(), -1.0f);
      for (int i = 0; i < n; ++i) {
        const auto t = post::detail::descriptor_taps(desc.data(), c.hc, c.wc, c.dim, kps[i]);
        k->sample_one(t.corner, t.weight, c.dim, fast.data() + static_cast<std::size_t>(i) * c.dim);
      }
      k->normalize(fast.data(), n, c.dim);
      EXPECT_TRUE(same_bits(fast, ref)) << isa_name(*k) << " " << c.hc << "x" << c.wc << "x" << c.dim;
    }
    std::vector<float> pub(ref.size(), -1.0f);
    post::sample_descriptors(desc.data(), c.hc, c.wc, c.dim, kps.data(), n, pub.data());
    EXPECT_TRUE(same_bits(pub, ref));
  }
}

TEST(Post, KernelNameMatchesDispatch) {
  const std::string name = post::post_kernel_name();
  EXPECT_EQ(name, superpoint_rt::util::to_string(superpoint_rt::util::best_isa()));
  std::printf("[post] kernels: %s\n", name.c_str());
}

}  // namespace
