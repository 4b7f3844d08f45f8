// The float32 plane resizes (src/image/resize_float.hpp) on the C++ side, so that the sanitizer build runs them too
// (the comparisons with cv2.resize and kornia are in tests/python/test_resize_float.py, which needs the Python
// module): the fast INTER_AREA kernel equals the literal transcription bit for bit, strides are honoured, values
// worked out by hand from OpenCV's and torch's formulas, the size helpers, and the errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "image/resize_float.hpp"
#include "superpoint_rt/errors.hpp"

namespace im = superpoint_rt::image;
using superpoint_rt::Error;
using superpoint_rt::ErrorKind;

namespace {

std::vector<float> random_plane(int w, int h, std::ptrdiff_t stride, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 255.f);
  std::vector<float> p(static_cast<std::size_t>(stride) * static_cast<std::size_t>(h), -7.f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) p[static_cast<std::size_t>(y * stride + x)] = u(rng);
  return p;
}

std::uint32_t bits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

using Fn = void (*)(const float*, int, int, std::ptrdiff_t, float*, int, int, std::ptrdiff_t, im::FloatResizeScratch&);

std::vector<float> run(Fn fn, const std::vector<float>& src, int sw, int sh, std::ptrdiff_t ss, int dw, int dh,
                       std::ptrdiff_t ds, im::FloatResizeScratch& scratch) {
  std::vector<float> dst(static_cast<std::size_t>(ds) * static_cast<std::size_t>(dh), 12345.f);
  fn(src.data(), sw, sh, ss, dst.data(), dw, dh, ds, scratch);
  return dst;
}

}  // namespace

TEST(ResizeFloat, AreaFastEqualsReferenceBitwise) {
  struct Case {
    int sw, sh, dw, dh;
  };
  const Case cases[] = {{403, 302, 102, 77}, {1063, 78, 1024, 75}, {97, 61, 13, 9}, {50, 40, 50, 13},
                        {50, 40, 17, 40},    {30, 1, 7, 1},        {1, 30, 1, 7},   {301, 3, 100, 2},
                        {64, 48, 32, 24},    {63, 48, 21, 16},     {7, 5, 9, 3},    {1, 1, 1, 1}};
  im::FloatResizeScratch fast_scratch, ref_scratch;
  unsigned seed = 1;
  for (const Case& c : cases) {
    const std::ptrdiff_t ss = c.sw + 3, ds = c.dw + 5;  // padded rows: strides must be used, padding untouched
    const auto src = random_plane(c.sw, c.sh, ss, seed++);
    const auto fast = run(im::cv2_resize_area, src, c.sw, c.sh, ss, c.dw, c.dh, ds, fast_scratch);
    const auto ref = run(im::cv2_resize_area_reference, src, c.sw, c.sh, ss, c.dw, c.dh, ds, ref_scratch);
    const std::string what =
        std::to_string(c.sw) + "x" + std::to_string(c.sh) + "->" + std::to_string(c.dw) + "x" + std::to_string(c.dh);
    for (int y = 0; y < c.dh; ++y)
      for (int x = 0; x < static_cast<int>(ds); ++x) {
        const float f = fast[static_cast<std::size_t>(y * ds + x)], r = ref[static_cast<std::size_t>(y * ds + x)];
        if (x < c.dw) {
          ASSERT_EQ(bits(f), bits(r)) << what << " at " << x << "," << y;
          ASSERT_GE(f, 0.f) << what;  // a convex combination of values in [0, 255]
          ASSERT_LE(f, 255.f * 1.0001f) << what;
        } else {
          ASSERT_EQ(f, 12345.f) << what << ": wrote into the row padding";
        }
      }
  }
}

TEST(ResizeFloat, ScratchReuseGivesTheSameBits) {
  const auto big = random_plane(301, 211, 301, 9);
  const auto small = random_plane(37, 29, 37, 10);
  im::FloatResizeScratch shared;
  for (Fn fn : {im::cv2_resize_area, im::cv2_resize_linear, im::kornia_resize_antialias}) {
    (void)run(fn, big, 301, 211, 301, 77, 50, 77, shared);
    const auto reused = run(fn, small, 37, 29, 37, 11, 9, 11, shared);
    im::FloatResizeScratch fresh;
    const auto alone = run(fn, small, 37, 29, 37, 11, 9, 11, fresh);
    ASSERT_EQ(reused.size(), alone.size());
    for (std::size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(bits(reused[i]), bits(alone[i])) << i;
  }
}

TEST(ResizeFloat, HandComputedValues) {
  im::FloatResizeScratch s;
  // 2x2 -> 1x1 INTER_AREA (resizeAreaFast_, 2x2 scalar tail): ((1 + 2) + 3 + 4) with a 0 start, times 0.25f.
  const std::vector<float> q{1.f, 2.f, 3.f, 4.f};
  EXPECT_EQ(run(im::cv2_resize_area, q, 2, 2, 2, 1, 1, 1, s)[0], 2.5f);
  // INTER_LINEAR at exactly 2x2 is the area code too.
  EXPECT_EQ(run(im::cv2_resize_linear, q, 2, 2, 2, 1, 1, 1, s)[0], 2.5f);
  // 4x1 -> 2x1 INTER_LINEAR: fx = (dx + 0.5) * 2 - 0.5 = 0.5 / 2.5 -> 0.5 * (S[0], S[1]) and 0.5 * (S[2], S[3]).
  const std::vector<float> r{0.f, 10.f, 20.f, 40.f};
  const auto lin = run(im::cv2_resize_linear, r, 4, 1, 4, 2, 1, 2, s);
  EXPECT_EQ(lin[0], 5.f);
  EXPECT_EQ(lin[1], 30.f);
  // 3x1 -> 1x1 INTER_AREA (integer factor 3, no SIMD): (0 + 10 + 20) * (1.f / 3).
  EXPECT_EQ(run(im::cv2_resize_area, std::vector<float>{0.f, 10.f, 20.f}, 3, 1, 3, 1, 1, 1, s)[0], 30.f * (1.f / 3.f));
  // 1x1 -> 3x2 enlarges: every output is the single pixel (OpenCV's S[0] * 1; torch's i0 = i1 = 0, whose two
  // weights add up to 1 within rounding).
  for (Fn fn : {im::cv2_resize_area, im::cv2_resize_linear, im::kornia_resize_antialias})
    for (float v : run(fn, std::vector<float>{0.75f}, 1, 1, 1, 3, 2, 3, s)) EXPECT_FLOAT_EQ(v, 0.75f);
  // kornia 2x1 -> 4x1 (no blur when enlarging): scale 0.5, real = max(0.5 * (d + 0.5) - 0.5, 0) = 0, 0.25, 0.75, 1.25
  // clamped to the last pixel: 0, 2.5, 7.5, 10.
  const auto up = run(im::kornia_resize_antialias, std::vector<float>{0.f, 10.f}, 2, 1, 2, 4, 1, 4, s);
  EXPECT_EQ(up[0], 0.f);
  EXPECT_EQ(up[1], 2.5f);
  EXPECT_EQ(up[2], 7.5f);
  EXPECT_EQ(up[3], 10.f);
}

TEST(ResizeFloat, KorniaKeepsConstantsAndCopiesAtSameSize) {
  im::FloatResizeScratch s;
  std::vector<float> flat(97 * 61, 0.4f);
  for (float v : run(im::kornia_resize_antialias, flat, 97, 61, 97, 13, 9, 13, s)) EXPECT_NEAR(v, 0.4f, 1e-6f);
  const auto src = random_plane(41, 23, 41, 3);
  const auto same = run(im::kornia_resize_antialias, src, 41, 23, 41, 41, 23, 41, s);
  for (std::size_t i = 0; i < src.size(); ++i) ASSERT_EQ(bits(same[i]), bits(src[i]));
}

TEST(ResizeFloat, SizeHelpers) {
  EXPECT_EQ(im::hloc_resize_size(4032, 3024, 1024), std::make_pair(1024, 768));
  EXPECT_EQ(im::hloc_resize_size(1063, 780, 1024), std::make_pair(1024, 751));   // 780 * 1024 / 1063 = 751.4
  EXPECT_EQ(im::hloc_resize_size(2002, 1001, 1001), std::make_pair(1001, 500));  // 500.5: half to even
  EXPECT_EQ(im::hloc_resize_size(2006, 1003, 1003), std::make_pair(1003, 502));  // 501.5: half to even
  EXPECT_EQ(im::hloc_resize_size(640, 480, 1600), std::make_pair(1600, 1200));   // hloc's _max enlarges
  EXPECT_EQ(im::kornia_long_side_size(4032, 3024, 1024), std::make_pair(1024, 768));
  EXPECT_EQ(im::kornia_long_side_size(3024, 4032, 1024), std::make_pair(768, 1024));
  EXPECT_EQ(im::kornia_long_side_size(1063, 780, 1024), std::make_pair(1024, 751));
  EXPECT_EQ(im::kornia_long_side_size(333, 1001, 1024), std::make_pair(340, 1024));  // int() truncates 340.65
  EXPECT_EQ(im::kornia_long_side_size(1000, 1000, 1024), std::make_pair(1024, 1024));
  // Panoramas: sides over 16384 are ordinary inputs of both tools (issue 19 §3).
  EXPECT_EQ(im::hloc_resize_size(17000, 300, 1024), std::make_pair(1024, 18));  // round(18.07)
  EXPECT_EQ(im::kornia_long_side_size(17000, 300, 1024), std::make_pair(1024, 18));
  EXPECT_EQ(im::hloc_resize_size(300, 40000, 1600), std::make_pair(12, 1600));
}

TEST(ResizeFloat, SourcesWiderThan16384) {
  // A 17000 x 37 plane (and its transpose) to a 1024 x 2 frame: the fast INTER_AREA is its reference bit for bit, and
  // the linear and kornia paths run (no side limit on the source).
  im::FloatResizeScratch s;
  for (const auto& [w, h] : {std::pair{17000, 37}, std::pair{37, 17000}}) {
    const auto src = random_plane(w, h, w, 5);
    const int dw = w > h ? 1024 : 2, dh = w > h ? 2 : 1024;
    const auto fast = run(im::cv2_resize_area, src, w, h, w, dw, dh, dw, s);
    const auto ref = run(im::cv2_resize_area_reference, src, w, h, w, dw, dh, dw, s);
    for (std::size_t i = 0; i < fast.size(); ++i) ASSERT_EQ(bits(fast[i]), bits(ref[i])) << w << "x" << h << " " << i;
    for (Fn fn : {im::cv2_resize_linear, im::kornia_resize_antialias})
      for (float v : run(fn, src, w, h, w, dw, dh, dw, s)) ASSERT_TRUE(v >= -1e-3f && v <= 255.001f) << v;
  }
}

TEST(ResizeFloat, BadSizesThrowNamingThem) {
  im::FloatResizeScratch s;
  std::vector<float> src(100, 1.f), dst(100);
  auto expect_invalid = [](auto&& f, const std::string& needle) {
    try {
      f();
      FAIL() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  for (Fn fn :
       {im::cv2_resize_area, im::cv2_resize_area_reference, im::cv2_resize_linear, im::kornia_resize_antialias}) {
    expect_invalid([&] { fn(src.data(), 10, 10, 10, dst.data(), 0, 5, 10, s); }, "0x5");
    expect_invalid([&] { fn(src.data(), 10, 10, 10, dst.data(), 5, 16385, 5, s); }, "5x16385");
    expect_invalid([&] { fn(src.data(), -1, 10, 10, dst.data(), 5, 5, 5, s); }, "-1x10");
    expect_invalid([&] { fn(src.data(), 10, 10, 9, dst.data(), 5, 5, 5, s); }, "stride 9");
  }
  // A short side that rounds to 0 is the caller's to refuse (ResolvedParams::network_frame names the parameter).
  EXPECT_EQ(im::hloc_resize_size(10000, 1, 100), std::make_pair(100, 0));
  EXPECT_EQ(im::kornia_long_side_size(10000, 1, 100), std::make_pair(100, 0));
  expect_invalid([] { (void)im::hloc_resize_size(0, 10, 100); }, "0x10");
  expect_invalid([] { (void)im::kornia_long_side_size(10, 10, 0); }, "side 0");
}
