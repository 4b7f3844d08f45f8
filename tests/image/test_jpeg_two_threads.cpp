// decode_jpeg_resized_plane's two-thread path (task 0 decodes the top rows, task 1 skips to the bottom rows with a
// second decompressor, decode_jpeg.cpp) against its one-thread path: bit-identical on every shared JPEG at the hf
// request's output (640x480, the R plane the engine asks for) and at other output sizes, for every split and both
// ways the split is decided (task 1 chooses it, or task 0 claims it when it gets there first) on synthetic files of
// every chroma subsampling, odd sizes and restart intervals, with the same errors for truncated and corrupt files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// clang-format off
#include <cstdio>  // jpeglib.h needs size_t and FILE first
#include <jpeglib.h>
// clang-format on

#include "common/test_util.hpp"
#include "image/decode_internal.hpp"
#include "image/resize.hpp"
#include "jpeg_synth.hpp"
#include "superpoint_rt/errors.hpp"

namespace sp = superpoint_rt;
namespace img = superpoint_rt::image;
namespace fs = std::filesystem;

namespace {

// The ParallelFor of the tests: task(0) on the calling thread, the others on std::threads.
void on_threads(int n, const std::function<void(int)>& task) {
  std::vector<std::thread> t;
  for (int i = 1; i < n; ++i) t.emplace_back(task, i);
  task(0);
  for (auto& th : t) th.join();
}
// One after the other, in order (task 0 finishes its first rows first: it claims the split) or backwards (task 1
// decides the split, task 0 then extends to it): the two deterministic ends of the race between them.
void in_order(int n, const std::function<void(int)>& task) {
  for (int i = 0; i < n; ++i) task(i);
}
void backwards(int n, const std::function<void(int)>& task) {
  for (int i = n - 1; i >= 0; --i) task(i);
}

struct Result {
  bool ran = false;
  std::string error;  // "<kind>: <message>" when it threw
  std::vector<std::uint8_t> plane;
  img::detail::JpegSplitInfo info;
};

Result run(const std::vector<std::uint8_t>& bytes, int channel, int out_w, int out_h, const img::ParallelFor& parallel,
           const img::detail::JpegSplitHooks& hooks = {}) {
  Result r;
  r.plane.assign(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h), 0xAB);
  const img::PlanFor plan_for = [&](int w, int h) {
    return std::make_shared<const img::ResizePlan>(w, h, out_w, out_h);
  };
  img::ResizeScratch s0, s1;
  int w = 0, h = 0;
  try {
    r.ran = img::detail::decode_jpeg_resized_plane_hooked(bytes, "t.jpg", sp::kDefaultMaxPixels, channel, plan_for,
                                                          r.plane, s0, &w, &h, parallel, &s1, hooks, &r.info);
  } catch (const sp::Error& e) {
    r.error = std::string(sp::to_string(e.kind())) + ": " + e.what();
  }
  return r;
}

// Every split forced: all first_rows / split_row pairs (a step of `stride`), with both serial orders and threads.
img::detail::JpegSplitHooks forced(int first, int split) {
  img::detail::JpegSplitHooks h;
  h.min_pixels = 0;
  h.first_rows = first;
  h.split_row = split;
  return h;
}

using Encoding = sprt_test::JpegEncoding;
using sprt_test::encode_jpeg;
using sprt_test::jpeg_test_pixels;

std::string describe(const Encoding& e, int w, int h, int ow, int oh, int channel) {
  return (e.h0 ? std::to_string(e.h0) + "x" + std::to_string(e.v0) : std::string("gray")) +
         (e.rgb_coded ? " rgb-coded" : "") + (e.restart_rows ? " restart " + std::to_string(e.restart_rows) : "") +
         " " + std::to_string(w) + "x" + std::to_string(h) + " -> " + std::to_string(ow) + "x" + std::to_string(oh) +
         " channel " + std::to_string(channel);
}

}  // namespace

TEST(JpegTwoThreads, SharedJpegsMatchOneThread) {
  if (!img::resize_rows_available()) GTEST_SKIP() << "no SIMD resize kernel on this CPU: the fused path is off";
  const auto files = sprt_test::shared_jpegs();
  ASSERT_GE(files.size(), 10u) << "shared JPEGs missing under " << sprt_test::shared_dir();
  // The hf request: 640x480, the R plane (engine.cpp: rgb_offsets(RGB, bgr)[0], 0 or 2 with bgr); then other sizes
  // and the other channels.
  struct Case {
    int ow, oh, channel;
  };
  const Case cases[] = {{640, 480, 0}, {640, 480, 2}, {320, 240, 1}, {97, 61, 0}, {1283, 721, 0}};
  int parallel = 0;
  for (const std::string& path : files) {
    const auto bytes = sprt_test::read_bytes(path);
    const std::string name = fs::path(path).filename().string();
    for (const Case& k : cases) {
      const Result one = run(bytes, k.channel, k.ow, k.oh, {});
      ASSERT_TRUE(one.ran && one.error.empty()) << name << ": " << one.error;
      const Result two = run(bytes, k.channel, k.ow, k.oh, on_threads);
      ASSERT_TRUE(two.ran && two.error.empty()) << name << ": " << two.error;
      EXPECT_TRUE(two.plane == one.plane) << name << " " << k.ow << "x" << k.oh << " channel " << k.channel
                                          << ": split " << two.info.first_rows << "/" << two.info.split_row;
      parallel += two.info.parallel;
      // Both ends of the race, forced (the default split, decided by task 0 or by task 1).
      const img::detail::JpegSplitHooks any;
      for (const auto& order : {img::ParallelFor(in_order), img::ParallelFor(backwards)}) {
        const Result r = run(bytes, k.channel, k.ow, k.oh, order, any);
        EXPECT_TRUE(r.plane == one.plane) << name << " " << k.ow << "x" << k.oh << ", serial order";
      }
    }
  }
  EXPECT_GE(parallel, 100) << "too few shared files took the two-thread path";
}

TEST(JpegTwoThreads, EverySplitOfSyntheticFiles) {
  if (!img::resize_rows_available()) GTEST_SKIP() << "no SIMD resize kernel on this CPU: the fused path is off";
  std::mt19937 rng(12);
  const Encoding encodings[] = {{1, 1, false, false, 0}, {2, 1, false, false, 0}, {1, 2, false, false, 0},
                                {2, 2, false, false, 0}, {4, 1, false, false, 0}, {0, 0, false, false, 0},
                                {1, 1, false, true, 0},  {2, 2, false, false, 1}, {2, 1, false, false, 3},
                                {1, 2, false, false, 2}};
  const std::pair<int, int> sizes[] = {{8, 8}, {37, 29}, {101, 67}, {160, 121}, {61, 203}};
  int compared = 0;
  for (const Encoding& e : encodings) {
    for (const auto& [w, h] : sizes) {
      const auto bytes = encode_jpeg(jpeg_test_pixels(w, h, rng), w, h, e);
      // Downscale in both directions, height only, upscale, and an odd output.
      const std::pair<int, int> outs[] = {
          {(w + 1) / 2, (h + 2) / 3}, {w, h - 1 > 0 ? h - 1 : 2}, {w + 3, 2 * h}, {7, 5}};
      for (const auto& [ow, oh] : outs) {
        for (int channel = 0; channel < 3; ++channel) {
          const std::string what = describe(e, w, h, ow, oh, channel);
          const Result one = run(bytes, channel, ow, oh, {});
          ASSERT_TRUE(one.ran && one.error.empty()) << what << ": " << one.error;
          const int step = std::max(1, oh / 7);
          for (int first = 1; first < oh; first += step) {
            for (int split = first; split < oh; split += step) {
              for (const auto& order :
                   {img::ParallelFor(in_order), img::ParallelFor(backwards), img::ParallelFor(on_threads)}) {
                const Result r = run(bytes, channel, ow, oh, order, forced(first, split));
                ASSERT_TRUE(r.error.empty()) << what << ": " << r.error;
                ASSERT_TRUE(r.info.parallel) << what;
                ASSERT_TRUE(r.plane == one.plane)
                    << what << ", first " << first << " split " << split << " (took " << r.info.first_rows << "/"
                    << r.info.split_row << ", decided by task " << (r.info.bottom_decided ? 1 : 0) << ")";
                ++compared;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GE(compared, 5000);
}

TEST(JpegTwoThreads, RawPathOnTopBandBelow) {
  // The top part takes the raw-component path when it applies (R or B of YCbCr 4:4:4 / 4:2:2 / 4:4:0 / 4:2:0), the
  // bottom part always the scanline band (jpeg_skip_scanlines is scanline-mode only); gray files take the band in both.
  if (!img::resize_rows_available()) GTEST_SKIP() << "no SIMD resize kernel on this CPU: the fused path is off";
  std::mt19937 rng(3);
  const auto color = encode_jpeg(jpeg_test_pixels(64, 64, rng), 64, 64, {2, 2, false, false, 0});
  EXPECT_TRUE(run(color, 0, 32, 32, in_order, forced(5, 9)).info.top_raw);
  EXPECT_FALSE(run(color, 1, 32, 32, in_order, forced(5, 9)).info.top_raw);
  const auto gray = encode_jpeg(jpeg_test_pixels(64, 64, rng), 64, 64, {0, 0, false, false, 0});
  const Result g = run(gray, 0, 32, 32, in_order, forced(5, 9));
  EXPECT_TRUE(g.info.parallel);
  EXPECT_FALSE(g.info.top_raw);
  // Who decided: in order, task 0 finishes its first rows before task 1 runs and claims split = first; backwards,
  // task 1 decides.
  const Result a = run(color, 0, 32, 32, in_order, forced(5, 9));
  EXPECT_FALSE(a.info.bottom_decided);
  EXPECT_EQ(a.info.split_row, 5);
  const Result b = run(color, 0, 32, 32, backwards, forced(5, 9));
  EXPECT_TRUE(b.info.bottom_decided);
  EXPECT_EQ(b.info.split_row, 9);
}

TEST(JpegTwoThreads, OneThreadWhereItDoesNotApply) {
  if (!img::resize_rows_available()) GTEST_SKIP() << "no SIMD resize kernel on this CPU: the fused path is off";
  std::mt19937 rng(4);
  const auto base = encode_jpeg(jpeg_test_pixels(96, 80, rng), 96, 80, {2, 2, false, false, 0});
  const auto prog = encode_jpeg(jpeg_test_pixels(96, 80, rng), 96, 80, {2, 2, true, false, 0});
  // Progressive: one thread (the whole file is entropy-decoded in jpeg_start_decompress).
  const Result p = run(prog, 0, 40, 30, on_threads, forced(5, 9));
  EXPECT_TRUE(p.ran);
  EXPECT_FALSE(p.info.parallel);
  EXPECT_TRUE(p.plane == run(prog, 0, 40, 30, {}).plane);
  // No vertical pass to split (the height is kept).
  EXPECT_FALSE(run(base, 0, 40, 80, on_threads, forced(5, 9)).info.parallel);
  // Below the pixel threshold by default.
  EXPECT_FALSE(run(base, 0, 40, 30, on_threads).info.parallel);
  // A real one: the default threshold is met.
  const int bw = 800, bh = 600;
  const auto big = encode_jpeg(jpeg_test_pixels(bw, bh, rng), bw, bh, {2, 2, false, false, 0});
  const Result r = run(big, 0, 640, 480, on_threads);
  EXPECT_TRUE(r.info.parallel);
  EXPECT_GE(r.info.split_row, r.info.first_rows);
  EXPECT_TRUE(r.plane == run(big, 0, 640, 480, {}).plane);
}

TEST(JpegTwoThreads, TruncatedAndCorruptFilesFailAsOneThread) {
  if (!img::resize_rows_available()) GTEST_SKIP() << "no SIMD resize kernel on this CPU: the fused path is off";
  std::mt19937 rng(9);
  std::vector<std::vector<std::uint8_t>> files;
  files.push_back(encode_jpeg(jpeg_test_pixels(160, 121, rng), 160, 121, {2, 2, false, false, 0}));
  files.push_back(encode_jpeg(jpeg_test_pixels(160, 121, rng), 160, 121, {1, 2, false, false, 2}));
  files.push_back(encode_jpeg(jpeg_test_pixels(160, 121, rng), 160, 121, {0, 0, false, false, 0}));
  const auto shared = sprt_test::shared_jpegs();
  if (!shared.empty()) files.push_back(sprt_test::read_bytes(shared.front()));
  int failures = 0;
  for (const auto& bytes : files) {
    std::vector<std::vector<std::uint8_t>> bad;
    // Cut at many points, down to just before the end (rows below the resize's last input row must still be
    // decoded), and with corrupt bytes in the entropy-coded data (corrupt-data warnings or errors, as one thread).
    for (const double keep : {0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.97, 0.995})
      bad.emplace_back(bytes.begin(),
                       bytes.begin() + static_cast<std::ptrdiff_t>(static_cast<double>(bytes.size()) * keep));
    bad.emplace_back(bytes.begin(), bytes.end() - 2);  // no EOI marker: accepted, as Pillow does
    for (const double at : {0.3, 0.6, 0.9}) {
      auto b = bytes;
      const auto i = static_cast<std::size_t>(static_cast<double>(b.size()) * at);
      for (std::size_t k = i; k < i + 16 && k + 2 < b.size(); ++k) b[k] = static_cast<std::uint8_t>(b[k] * 7 + 13);
      bad.push_back(std::move(b));
    }
    for (const auto& b : bad) {
      const Result one = run(b, 0, 64, 48, {});
      failures += !one.error.empty();
      for (const auto& [first, split] : {std::pair<int, int>{5, 20}, std::pair<int, int>{24, 24}, {40, 47}}) {
        for (const auto& order :
             {img::ParallelFor(in_order), img::ParallelFor(backwards), img::ParallelFor(on_threads)}) {
          const Result r = run(b, 0, 64, 48, order, forced(first, split));
          EXPECT_EQ(r.error, one.error) << "file of " << b.size() << " bytes, split " << first << "/" << split;
          if (one.error.empty()) {
            EXPECT_TRUE(r.plane == one.plane) << "file of " << b.size() << " bytes";
          }
        }
      }
    }
  }
  EXPECT_GE(failures, 30) << "too few of the damaged files failed";
}

TEST(JpegTwoThreads, SliceOfAPlanIsItsRows) {
  // slice_resize_plan: the rows of a slice resized alone are the same rows of the whole resize.
  if (!img::resize_rows_available()) GTEST_SKIP() << "no SIMD resize kernel on this CPU";
  std::mt19937 rng(2);
  const int w = 203, h = 157;
  std::vector<std::uint8_t> src(static_cast<std::size_t>(w) * h);
  for (auto& v : src) v = static_cast<std::uint8_t>(rng());
  for (const auto& [ow, oh] : {std::pair<int, int>{64, 48}, {203, 40}, {500, 400}}) {
    const img::ResizePlan plan(w, h, ow, oh);
    img::ResizeScratch s;
    std::vector<std::uint8_t> whole(static_cast<std::size_t>(ow) * oh);
    img::resize_plane(plan, src.data(), w, 1, whole.data(), s);
    struct Ctx {
      const std::uint8_t* src;
      int w;
    } ctx{src.data(), w};
    const img::ResizeRowFn rows = [](void* c, int y) {
      auto* k = static_cast<Ctx*>(c);
      return k->src + static_cast<std::ptrdiff_t>(y) * k->w;
    };
    for (const auto& [a, b] : {std::pair<int, int>{0, 1}, {0, oh}, {oh / 3, oh / 3 + 1}, {oh / 2, oh}, {5, 17}}) {
      const img::ResizePlan slice = img::slice_resize_plan(plan, a, b);
      std::vector<std::uint8_t> part(static_cast<std::size_t>(ow) * (b - a));
      ASSERT_TRUE(img::resize_plane_rows(slice, rows, &ctx, 1, part.data(), s));
      EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + static_cast<std::ptrdiff_t>(a) * ow))
          << ow << "x" << oh << " rows " << a << ".." << b;
    }
  }
  const img::ResizePlan keep_height(50, 40, 20, 40);
  EXPECT_THROW((void)img::slice_resize_plan(keep_height, 0, 10), sp::Error);
  const img::ResizePlan p(50, 40, 20, 30);
  EXPECT_THROW((void)img::slice_resize_plan(p, 5, 5), sp::Error);
  EXPECT_THROW((void)img::slice_resize_plan(p, 0, 31), sp::Error);
}
