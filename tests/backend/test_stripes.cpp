// The network's memory (issue 19 §1): the shared workspace and the plan's block layout (backend/workspace.hpp), and
// the full-resolution block in stripes (backend/onednn/stripes.hpp), which must give the same bits as the unstriped
// network on every path: fp32 (this CPU's kernels: Winograd on AVX-512, F(4x4,3x3) or F(2x2,3x3)), AVX2 and SSE4.1
// JIT kernels (ctest runs these tests again under SUPERPOINT_RT_ISA=avx2 and =scalar: isa_*_backend), the bf16 and
// int8 plans (their mixed per-layer plans, and int8 with an integer conv1b: conv1a_u8's AVX-512 or AVX2 kernel), on
// awkward frames (odd sides, not multiples of 8, tall, wide, a stripe of one row pair) and at several thread counts
// (lanes).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/onednn/stripes.hpp"
#include "backend/workspace.hpp"
#include "common/test_util.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace sp = superpoint_rt;
namespace be = superpoint_rt::backend;

namespace {

const sp::model::Weights& real_weights() {
  static const sp::model::Weights w = sp::model::load_weights_dir(sprt_test::weights_dir());
  return w;
}

struct Out {
  std::vector<float> logits, desc;
  std::string plan;
  std::size_t workspace = 0;
};

Out run_plan(be::Backend& b, const std::vector<float>& plane, int h, int w, int stripe_rows) {
  auto ex = b.plan({h, w, stripe_rows});
  ex->run(plane.data(), true);
  const std::size_t cells = static_cast<std::size_t>(h / 8) * (w / 8);
  return {std::vector<float>(ex->logits(), ex->logits() + cells * 65),
          std::vector<float>(ex->descriptors(), ex->descriptors() + cells * 256), ex->plan_description(),
          ex->workspace_bytes()};
}

// Striped plans (each `rows`, and the rule) against the unstriped plan of the same backend, bit for bit; every
// striped plan must really be striped.
void expect_stripes_identical(be::Backend& b, int h, int w, const std::vector<int>& rows_list) {
  const auto plane = sprt_test::random_plane(h, w, static_cast<unsigned>(h * 7919 + w));
  const Out ref = run_plan(b, plane, h, w, 0);
  EXPECT_EQ(ref.plan.find("block1:stripes"), std::string::npos) << ref.plan;
  std::cout << w << "x" << h << " " << b.precision() << " " << b.threads() << " threads: " << ref.plan << "\n";
  for (const int rows : rows_list) {
    const Out s = run_plan(b, plane, h, w, rows);
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + " stripe_rows " + std::to_string(rows) + " (" +
                 b.precision() + ", " + std::to_string(b.threads()) + " threads): " + s.plan);
    EXPECT_NE(s.plan.find("block1:stripes"), std::string::npos);
    EXPECT_EQ(0, std::memcmp(ref.logits.data(), s.logits.data(), ref.logits.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(ref.desc.data(), s.desc.data(), ref.desc.size() * sizeof(float)));
  }
}

// Frames: awkward sides (odd, not multiples of 8, a last stripe of one row pair), tall, wide, and the default frame
// with several stripe heights. Narrow stripes whose one-thread Winograd kernel would be F(2x2,3x3) under an
// F(4x4,3x3) layer (97x123 at 8-16 rows on AMD Zen 4) take stripe_conv1b's extra row. The rule (-1) only on frames
// where stripes pay: on a small frame it may keep the block unstriped (its lanes' Winograd scratch would cost more).
void expect_all_frames(be::Backend& b) {
  expect_stripes_identical(b, 480, 640, {-1, 16});
  expect_stripes_identical(b, 97, 123, {8, 12, 16});
  expect_stripes_identical(b, 45, 37, {8, 20});
  expect_stripes_identical(b, 26, 41, {16});   // two stripes: 16 rows and 10
  expect_stripes_identical(b, 642, 96, {-1});  // a remainder of a row pair joins the last stripe
  expect_stripes_identical(b, 300, 40, {24, -1});
  expect_stripes_identical(b, 40, 300, {12});
}

// Sets an environment variable for its scope (the backend reads SUPERPOINT_RT_LAYER_PRECISION when it is made).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

std::unique_ptr<be::Backend> backend_of(const std::string& precision, int threads) {
  return be::create_backend("cpu", real_weights(), {threads, precision});
}

}  // namespace

TEST(StripeGeometry, StripesCoverTheRowsInAlignedSteps) {
  for (const int h : {16, 17, 64, 97, 480}) {
    for (const int rows : {4, 8, 12, 64}) {
      const auto st = be::onednn::stripes_of(h, rows);
      ASSERT_FALSE(st.empty());
      EXPECT_EQ(st.front().y0, 0);
      EXPECT_EQ(st.back().y1, h);
      for (std::size_t i = 0; i < st.size(); ++i) {
        EXPECT_EQ(st[i].y0 % be::onednn::kStripeAlign, 0);
        EXPECT_GT(st[i].y1, st[i].y0);
        if (i + 1 < st.size()) {
          EXPECT_EQ(st[i].y1, st[i + 1].y0);
          EXPECT_EQ(st[i].y1 - st[i].y0, rows);
        } else if (st.size() > 1) {  // the last: half a stripe to one and a half
          EXPECT_GE(2 * (st[i].y1 - st[i].y0), rows);
          EXPECT_LT(2 * (st[i].y1 - st[i].y0), 3 * rows);
        }
      }
    }
  }
  // Shared by lanes: a multiple of the lanes, aligned, covering, each at least half the rows asked, the heights within
  // one alignment step of each other (the last one may also hold the rows below the last aligned row).
  for (const int h : {16, 64, 97, 480, 482, 1200})
    for (const int rows : {8, 24, 32, 64})
      for (const int lanes : {2, 3, 4}) {
        const auto st = be::onednn::stripes_of(h, rows, lanes);
        const auto plain = be::onednn::stripes_of(h, rows);
        ASSERT_FALSE(st.empty());
        EXPECT_EQ(st.front().y0, 0);
        EXPECT_EQ(st.back().y1, h);
        if (st.size() == plain.size() && plain.size() % lanes != 0) {
          // kept as they were: too short to share
          for (std::size_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i].y1, plain[i].y1);
          continue;
        }
        if (plain.size() > 1) {
          EXPECT_EQ(st.size() % lanes, 0u) << h << " " << rows << " " << lanes;
        }
        int lo = h, hi = 0;
        for (std::size_t i = 0; i < st.size(); ++i) {
          EXPECT_EQ(st[i].y0 % be::onednn::kStripeAlign, 0);
          if (i + 1 < st.size()) {
            EXPECT_EQ(st[i].y1, st[i + 1].y0);
          }
          const int r = st[i].y1 - st[i].y0 - (i + 1 == st.size() ? h % be::onednn::kStripeAlign : 0);
          lo = std::min(lo, r);
          hi = std::max(hi, r);
          if (st.size() > 1) {
            EXPECT_GE(2 * r, rows);
          }
        }
        EXPECT_LE(hi - lo, be::onednn::kStripeAlign) << h << " " << rows << " " << lanes;
      }
  const auto two = be::onednn::stripes_of(480, 32, 2);
  EXPECT_EQ(two.size(), 16u);  // 8 x 32 + 8 x 28, not 15 x 32
  EXPECT_EQ(two[7].y1 - two[7].y0, 32);
  EXPECT_EQ(two[8].y1 - two[8].y0, 28);
  EXPECT_EQ(be::onednn::stripes_of(480, 64, 2).size(), 8u);  // 8 x 60, not 7 x 64 + 32
  EXPECT_EQ(be::onednn::stripes_of(480, 64, 2)[7].y0, 420);
  EXPECT_EQ(be::onednn::stripes_of(10, 64).size(), 1u);
  EXPECT_EQ(be::onednn::stripes_of(642, 64).size(), 10u);  // 10 x 64 + 2: the row pair joins the last stripe
  EXPECT_EQ(be::onednn::stripes_of(642, 64).back().y0, 576);
}

TEST(MemoryPlan, BlocksLiveAtTheSameStepNeverOverlap) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    be::MemoryPlan plan;
    struct B {
      int id, first, last;
      std::size_t bytes;
    };
    std::vector<B> blocks;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % 30), last = first + static_cast<int>(rng() % 8);
      const std::size_t bytes = 1 + rng() % 100000;
      const int id = plan.add(bytes);
      plan.use(id, first);
      plan.use(id, last);
      blocks.push_back({id, first, last, bytes});
    }
    const int unused = plan.add(12345);  // never used: takes no room
    const std::size_t total = plan.place(64);
    EXPECT_GE(total, plan.peak_live_bytes());
    std::size_t sum = 0;
    for (const B& b : blocks) sum += b.bytes;
    EXPECT_LE(total, sum + 64 * blocks.size());
    for (const B& a : blocks) {
      EXPECT_EQ(plan.offset(a.id) % 64, 0u);
      EXPECT_LE(plan.offset(a.id) + a.bytes, total);
      for (const B& b : blocks) {
        if (a.id >= b.id || a.last < b.first || b.last < a.first) continue;
        const bool apart =
            plan.offset(a.id) + a.bytes <= plan.offset(b.id) || plan.offset(b.id) + b.bytes <= plan.offset(a.id);
        EXPECT_TRUE(apart) << "blocks " << a.id << " and " << b.id << " share bytes while both live";
      }
    }
    (void)unused;
  }
}

TEST(Workspace, GrowsForARunAndShrinksToThePlansThatRemain) {
  be::Workspace ws;
  EXPECT_EQ(ws.mapped_bytes(), 0u);
  ws.add_user(10 << 20);
  ws.add_user(3 << 20);
  {
    const auto lease = ws.acquire(3 << 20);
    ASSERT_NE(lease.data(), nullptr);
    std::memset(lease.data(), 1, 3 << 20);
  }
  EXPECT_GE(ws.mapped_bytes(), std::size_t{3} << 20);
  {
    const auto lease = ws.acquire(10 << 20);
    std::memset(lease.data(), 2, 10 << 20);
  }
  EXPECT_GE(ws.mapped_bytes(), std::size_t{10} << 20);
  ws.remove_user(10 << 20);  // the large plan is gone: back to what the small one needs
  EXPECT_LT(ws.mapped_bytes(), std::size_t{4} << 20);
  ws.remove_user(3 << 20);
  EXPECT_EQ(ws.mapped_bytes(), 0u);
}

TEST(Workspace, PlansOfOneBackendShareIt) {
  auto b = backend_of("fp32", 2);
  const auto small = sprt_test::random_plane(240, 320, 1), large = sprt_test::random_plane(480, 640, 2);
  auto e1 = b->plan({240, 320});
  auto e2 = b->plan({480, 640});
  EXPECT_EQ(b->workspace_bytes(), 0u);  // nothing is allocated before a plan runs
  e1->run(small.data(), true);
  const std::vector<float> l1(e1->logits(), e1->logits() + 30 * 40 * 65);
  e2->run(large.data(), true);
  // One workspace, as large as the largest plan that ran, not the sum.
  EXPECT_GE(b->workspace_bytes(), e2->workspace_bytes());
  EXPECT_LT(b->workspace_bytes(), e1->workspace_bytes() + e2->workspace_bytes());
  // The small plan still computes the same bits in the grown (moved) workspace.
  e1->run(small.data(), true);
  EXPECT_EQ(0, std::memcmp(l1.data(), e1->logits(), l1.size() * sizeof(float)));
  e2.reset();  // the large plan is gone: the workspace shrinks to the small one's
  EXPECT_LT(b->workspace_bytes(), e1->workspace_bytes() + 4096);
  std::cout << "workspace: 320x240 " << e1->workspace_bytes() << " B, plan " << e1->plan_bytes() << " B\n";
}

TEST(Stripes, SaveMemoryOnTheDefaultFrame) {
  auto b = backend_of("fp32", 2);
  const std::size_t striped = b->plan({480, 640})->workspace_bytes();
  const std::size_t unstriped = b->plan({480, 640, 0})->workspace_bytes();
  std::cout << "640x480 workspace: striped " << striped << " B, unstriped " << unstriped << " B\n";
  // pool1's output alone is 64 B per frame pixel; the unstriped block holds four times that at once.
  EXPECT_LT(striped, unstriped * 3 / 4);
  EXPECT_THROW(b->plan({480, 640, 6}), sp::Error);  // not a multiple of kStripeAlign
  EXPECT_THROW(b->plan({480, 640, -2}), sp::Error);
}

TEST(Stripes, BitIdenticalFp32) {
  for (const int threads : {2, 3}) {
    auto b = backend_of("fp32", threads);
    expect_all_frames(*b);
  }
}

TEST(Stripes, BitIdenticalBf16AndInt8) {
  // The bf16 plan's block 1 is f32 (default_layer_plan); all-bf16 puts conv1b in bf16 (an f32 -> bf16 reorder into
  // the lane's buffer).
  if (sp::util::cpu_features().avx512_bf16) {
    for (const char* layers : {"", "*=bf16"}) {
      const ScopedEnv plan("SUPERPOINT_RT_LAYER_PRECISION", layers);
      auto b = backend_of("bf16", 2);
      expect_stripes_identical(*b, 97, 123, {8, 16});
      expect_stripes_identical(*b, 300, 40, {24});
    }
  } else {
    EXPECT_THROW(backend_of("bf16", 2), sp::Error);
    std::cout << "no avx512_bf16 here: bf16 not checked\n";
  }
  // int8: the plan (all-int8: conv1a_u8 writes the stripes' u8 rows itself), and conv1b in f32 (Winograd where
  // the CPU has AVX-512, oneDNN's f32 output quantised for conv2a).
  if (sp::util::cpu_features().avx2_fma()) {
    for (const char* layers : {"", "conv1b=f32"}) {
      const ScopedEnv plan("SUPERPOINT_RT_LAYER_PRECISION", layers);
      auto b = be::create_backend("cpu", real_weights(),
                                  {2, "int8", {{64, 96, sprt_test::random_plane(64, 96, 4)}}});  // a short calibration
      expect_stripes_identical(*b, 97, 123, {8, 16});
      expect_stripes_identical(*b, 45, 37, {12});
    }
  } else {
    EXPECT_THROW(backend_of("int8", 2), sp::Error);
    std::cout << "no AVX2 here: int8 not checked\n";
  }
}
