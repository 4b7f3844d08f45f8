// oneDNN backend: fidelity against the PyTorch goldens (golden/dense), a plain scalar reference network on small
// awkward frames, determinism (repeated runs, threads 1 vs 2), run(false) semantics, and the algorithm rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/onednn/onednn_backend.hpp"
#include "common/test_util.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/npz.hpp"

namespace sp = superpoint_rt;
namespace be = superpoint_rt::backend;

namespace {

// SPEC §2 "Fidelity": the bounds every CPU must meet against the PyTorch goldens.
constexpr double kSpecScoreTol = 1e-5;
constexpr double kSpecDescTol = 1e-4;

const sp::model::Weights& real_weights() {
  static const sp::model::Weights w = sp::model::load_weights_dir(sprt_test::weights_dir());
  return w;
}

// ---- plain scalar reference of the network (double accumulation), channels-first -----------------------------

using Planes = std::vector<double>;  // C x H x W

Planes ref_conv(const Planes& x, int c_in, int h, int w, const sp::model::Conv& cv, bool relu) {
  const int k = cv.kernel, pad = k / 2, c_out = cv.out_channels;
  Planes y(static_cast<std::size_t>(c_out) * h * w);
  for (int o = 0; o < c_out; ++o) {
    for (int i = 0; i < h; ++i) {
      for (int j = 0; j < w; ++j) {
        double acc = cv.bias[static_cast<std::size_t>(o)];
        for (int c = 0; c < c_in; ++c) {
          for (int u = 0; u < k; ++u) {
            const int ii = i + u - pad;
            if (ii < 0 || ii >= h) continue;
            for (int v = 0; v < k; ++v) {
              const int jj = j + v - pad;
              if (jj < 0 || jj >= w) continue;
              acc += static_cast<double>(cv.weight[((static_cast<std::size_t>(o) * c_in + c) * k + u) * k + v]) *
                     x[(static_cast<std::size_t>(c) * h + ii) * w + jj];
            }
          }
        }
        y[(static_cast<std::size_t>(o) * h + i) * w + j] = relu ? std::max(acc, 0.0) : acc;
      }
    }
  }
  return y;
}

Planes ref_pool(const Planes& x, int c, int h, int w) {
  const int h2 = h / 2, w2 = w / 2;  // MaxPool2d(2, 2) floors
  Planes y(static_cast<std::size_t>(c) * h2 * w2);
  for (int k = 0; k < c; ++k)
    for (int i = 0; i < h2; ++i)
      for (int j = 0; j < w2; ++j) {
        auto at = [&](int a, int b) { return x[(static_cast<std::size_t>(k) * h + a) * w + b]; };
        y[(static_cast<std::size_t>(k) * h2 + i) * w2 + j] = std::max(
            std::max(at(2 * i, 2 * j), at(2 * i, 2 * j + 1)), std::max(at(2 * i + 1, 2 * j), at(2 * i + 1, 2 * j + 1)));
      }
  return y;
}

struct RefOut {
  Planes logits, desc;  // C x Hc x Wc
};

RefOut ref_network(const sp::model::Weights& wt, const std::vector<float>& plane, int h, int w) {
  Planes x(plane.begin(), plane.end());
  int c = 1;
  for (int i = 0; i < 8; ++i) {
    const auto& cv = wt.encoder[static_cast<std::size_t>(i)];
    x = ref_conv(x, c, h, w, cv, true);
    c = cv.out_channels;
    if (i == 1 || i == 3 || i == 5) {
      x = ref_pool(x, c, h, w);
      h /= 2;
      w /= 2;
    }
  }
  RefOut r;
  r.logits = ref_conv(ref_conv(x, c, h, w, wt.score_a, true), wt.score_a.out_channels, h, w, wt.score_b, false);
  r.desc =
      ref_conv(ref_conv(x, c, h, w, wt.descriptor_a, true), wt.descriptor_a.out_channels, h, w, wt.descriptor_b, false);
  return r;
}

// ---- golden helpers ----------------------------------------------------------------------------------------------

struct GoldenErrors {
  double logits = 0, score = 0, desc = 0;
};

GoldenErrors compare_golden(be::Executor& ex, const std::string& name) {
  const auto z = sp::util::load_npz(sprt_test::golden_dir() + "/dense/" + name + ".npz");
  const auto pv = z.at("pixel_values").as_float();
  const auto gl = z.at("logits").as_float();          // 65 x 60 x 80
  const auto gs = z.at("score_map").as_float();       // 480 x 640
  const auto gd = z.at("descriptor_map").as_float();  // 256 x 60 x 80, L2-normalised
  EXPECT_EQ(pv.size(), 480u * 640u);
  ex.run(pv.data(), true);
  const int hc = 60, wc = 80;
  GoldenErrors e;
  for (int i = 0; i < hc; ++i) {
    for (int j = 0; j < wc; ++j) {
      const float* lg = ex.logits() + (static_cast<std::size_t>(i) * wc + j) * 65;
      // Plain scalar softmax over the 65 channels (double), then drop the dustbin and depth-to-space.
      double mx = lg[0];
      for (int k = 1; k < 65; ++k) mx = std::max(mx, static_cast<double>(lg[k]));
      double sum = 0;
      for (int k = 0; k < 65; ++k) sum += std::exp(lg[k] - mx);
      for (int k = 0; k < 65; ++k) {
        e.logits = std::max(
            e.logits, std::fabs(static_cast<double>(lg[k]) - gl[(static_cast<std::size_t>(k) * hc + i) * wc + j]));
        if (k < 64) {
          const double p = std::exp(lg[k] - mx) / sum;
          const int y = 8 * i + k / 8, x = 8 * j + k % 8;
          e.score = std::max(e.score, std::fabs(p - gs[static_cast<std::size_t>(y) * 640 + x]));
        }
      }
      const float* d = ex.descriptors() + (static_cast<std::size_t>(i) * wc + j) * 256;
      double n2 = 0;
      for (int k = 0; k < 256; ++k) n2 += static_cast<double>(d[k]) * d[k];
      const double n = std::max(std::sqrt(n2), 1e-12);
      for (int k = 0; k < 256; ++k) {
        e.desc = std::max(e.desc, std::fabs(d[k] / n - gd[(static_cast<std::size_t>(k) * hc + i) * wc + j]));
      }
    }
  }
  return e;
}

std::vector<float> copy_out(const float* p, std::size_t n) {
  return std::vector<float>(p, p + n);
}

}  // namespace

TEST(OneDnnBackend, DescribesEveryLayer) {
  auto b = be::create_backend("cpu", real_weights(), {1, "fp32"});
  EXPECT_EQ(b->name(), "onednn");
  EXPECT_EQ(b->device(), "cpu");
  EXPECT_EQ(b->precision(), "fp32");
  EXPECT_EQ(b->threads(), 1);
  auto ex = b->plan({480, 640});
  const std::string d = ex->plan_description();
  std::cout << "plan: " << d << "\n";
  for (const char* l : {"conv1a:", "conv1b:", "conv2a:", "conv2b:", "conv3a:", "conv3b:", "conv4a:", "conv4b:",
                        "score_a:", "score_b:", "descriptor_a:", "descriptor_b:", "pool1:", "pool3:"}) {
    EXPECT_NE(d.find(l), std::string::npos) << l << " missing from " << d;
  }
  EXPECT_EQ(d.find("ref:"), std::string::npos) << "a reference (slow) oneDNN kernel was picked: " << d;
}

TEST(OneDnnBackend, RejectsBadOptions) {
  EXPECT_THROW(be::create_backend("tpu", real_weights(), {}), sp::Error);
  try {
    be::create_backend("cpu", real_weights(), {1, "int3"});
    FAIL() << "no throw";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("int3"), std::string::npos);
  }
  auto b = be::create_backend("cpu", real_weights(), {1, "fp32"});
  EXPECT_THROW(b->plan({4, 640}), sp::Error);
}

// The whole network against a plain double-precision scalar reference on small frames, including sizes that are
// not multiples of 8 (pools floor, Hc = H / 8).
TEST(OneDnnBackend, MatchesScalarReferenceOnSmallFrames) {
  const auto& wt = real_weights();
  for (auto [h, w] : {std::pair{24, 32}, std::pair{45, 37}, std::pair{8, 8}}) {
    auto b = be::create_backend("cpu", wt, {1, "fp32"});
    auto ex = b->plan({h, w});
    const auto plane = sprt_test::random_plane(h, w, static_cast<unsigned>(h * 1000 + w));
    ex->run(plane.data(), true);
    const auto ref = ref_network(wt, plane, h, w);
    const int hc = h / 8, wc = w / 8;
    double el = 0, ed = 0, scale_l = 0, scale_d = 0;
    for (int i = 0; i < hc; ++i) {
      for (int j = 0; j < wc; ++j) {
        const std::size_t cell = static_cast<std::size_t>(i) * wc + j;
        for (int k = 0; k < 65; ++k) {
          const double r = ref.logits[(static_cast<std::size_t>(k) * hc + i) * wc + j];
          el = std::max(el, std::fabs(static_cast<double>(ex->logits()[cell * 65 + k]) - r));
          scale_l = std::max(scale_l, std::fabs(r));
        }
        for (int k = 0; k < 256; ++k) {
          const double r = ref.desc[(static_cast<std::size_t>(k) * hc + i) * wc + j];
          ed = std::max(ed, std::fabs(static_cast<double>(ex->descriptors()[cell * 256 + k]) - r));
          scale_d = std::max(scale_d, std::fabs(r));
        }
      }
    }
    std::cout << h << "x" << w << ": max |logit err| " << el << " (max |logit| " << scale_l << "), max |desc err| "
              << ed << " (max |desc| " << scale_d << ")\n";
    EXPECT_GT(scale_l, 0.1);  // the comparison is not vacuous
    EXPECT_LT(el, 2e-4 * std::max(1.0, scale_l)) << h << "x" << w;
    EXPECT_LT(ed, 2e-4 * std::max(1.0, scale_d)) << h << "x" << w;
  }
}

TEST(OneDnnBackend, GoldenFidelity) {
  auto b = be::create_backend("cpu", real_weights(), {0, "fp32"});
  auto ex = b->plan({480, 640});
  for (const char* name : {"berlin01_1600x900.jpg", "icl_250.png"}) {
    const auto e = compare_golden(*ex, name);
    std::cout << name << ": max |logit err| " << e.logits << "  max |score err| " << e.score
              << "  max |descriptor err| " << e.desc << "\n";
    // SPEC §2 "Fidelity": scores within 1e-5 absolute, descriptors within 1e-4 per component, whatever the CPU.
    // The margin under these bounds depends on the kernels oneDNN picks (Winograd on AVX-512: 1.74e-6 on one Zen 4,
    // 2.21e-6 / 2.29e-6 on a Zen 5; AVX2 / SSE4.1 direct: 4.8e-6), so no tighter bound fitted to one CPU's rounding
    // is asserted here. ctest runs this test again with the narrower ISAs forced (tests/CMakeLists.txt).
    EXPECT_LT(e.score, kSpecScoreTol) << name;
    EXPECT_LT(e.desc, kSpecDescTol) << name;
    EXPECT_LT(e.logits, 1e-3) << name;
  }
}

TEST(OneDnnBackend, RepeatedRunsAreBitIdentical) {
  auto b = be::create_backend("cpu", real_weights(), {0, "fp32"});
  auto ex = b->plan({480, 640});
  const auto plane = sprt_test::random_plane(480, 640, 7);
  ex->run(plane.data(), true);
  const auto l0 = copy_out(ex->logits(), 60 * 80 * 65), d0 = copy_out(ex->descriptors(), 60 * 80 * 256);
  for (int r = 0; r < 3; ++r) {
    ex->run(plane.data(), r % 2 == 0);
    EXPECT_EQ(0, std::memcmp(l0.data(), ex->logits(), l0.size() * sizeof(float))) << "run " << r;
  }
  ex->run(plane.data(), true);
  EXPECT_EQ(0, std::memcmp(d0.data(), ex->descriptors(), d0.size() * sizeof(float)));
  // A second plan (as a second process would build) gives the same bits.
  auto ex2 = b->plan({480, 640});
  ex2->run(plane.data(), true);
  EXPECT_EQ(0, std::memcmp(l0.data(), ex2->logits(), l0.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(d0.data(), ex2->descriptors(), d0.size() * sizeof(float)));
}

TEST(OneDnnBackend, ThreadCountsGiveBitIdenticalOutputs) {
  // 640x480, and two frames where oneDNN 2.6's own Winograd choice changes with the thread count on AVX-512 (AMD
  // Zen 4: F(4x4, 3x3) for conv1b at 1-2 threads, F(2x2, 3x3) from 3 at 104x152 and from 4 at 1024x18), so that the
  // plan's rule (the kernel of one thread at every thread count) is what keeps the bits.
  for (const auto& [h, w] : {std::pair{480, 640}, std::pair{152, 104}, std::pair{18, 1024}}) {
    const auto plane = sprt_test::random_plane(h, w, 11);
    const std::size_t cells = static_cast<std::size_t>(h / 8) * (w / 8);
    std::vector<float> l0, d0;
    for (int t : {1, 2, 3, 4, 5}) {
      auto b = be::create_backend("cpu", real_weights(), {t, "fp32"});
      auto ex = b->plan({h, w});
      ex->run(plane.data(), true);
      if (t == 1) {
        l0 = copy_out(ex->logits(), cells * 65);
        d0 = copy_out(ex->descriptors(), cells * 256);
        continue;
      }
      EXPECT_EQ(0, std::memcmp(l0.data(), ex->logits(), l0.size() * sizeof(float)))
          << w << "x" << h << ", " << t << " threads: " << ex->plan_description();
      EXPECT_EQ(0, std::memcmp(d0.data(), ex->descriptors(), d0.size() * sizeof(float)))
          << w << "x" << h << ", " << t << " threads";
    }
  }
}

TEST(OneDnnBackend, RunWithoutDescriptorsSkipsTheDescriptorHead) {
  auto b = be::create_backend("cpu", real_weights(), {1, "fp32"});
  auto ex = b->plan({480, 640});
  auto p1 = sprt_test::random_plane(480, 640, 1), p2 = sprt_test::random_plane(480, 640, 2);
  ex->run(p1.data(), true);
  const auto d1 = copy_out(ex->descriptors(), 60 * 80 * 256);
  const auto l1 = copy_out(ex->logits(), 60 * 80 * 65);
  ex->run(p2.data(), false);
  // Logits follow the new input, descriptors are untouched (no descriptor work was done).
  EXPECT_NE(0, std::memcmp(l1.data(), ex->logits(), l1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(d1.data(), ex->descriptors(), d1.size() * sizeof(float)));
  // run(false) logits equal run(true) logits for the same input.
  const auto l2 = copy_out(ex->logits(), l1.size());
  ex->run(p2.data(), true);
  EXPECT_EQ(0, std::memcmp(l2.data(), ex->logits(), l2.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(d1.data(), ex->descriptors(), d1.size() * sizeof(float)));
}
