// decode_jpeg_resized_plane (the engine's fused JPEG decode + resize for one-plane requests) against the two-step
// path it replaces, decode_jpeg + resize_plane of the plane (each compared with Pillow in test_decode.cpp and
// test_resize.cpp): bit-identical on every shared JPEG, for every channel and for several output sizes, and the
// same errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.hpp"
#include "image/decode_internal.hpp"
#include "image/resize.hpp"
#include "superpoint_rt/errors.hpp"

namespace sp = superpoint_rt;
namespace img = superpoint_rt::image;
namespace fs = std::filesystem;

namespace {

struct Fused {
  bool ran = false;
  int width = 0, height = 0, plans = 0;
  std::vector<std::uint8_t> plane;
};

Fused run_fused(const std::vector<std::uint8_t>& bytes, const std::string& name, std::int64_t max_pixels,
                int rgb_channel, int out_w, int out_h) {
  Fused f;
  f.plane.assign(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h), 0xAB);
  img::ResizeScratch scratch;
  const img::PlanFor plan_for = [&](int w, int h) {
    ++f.plans;
    return std::make_shared<const img::ResizePlan>(w, h, out_w, out_h);
  };
  f.ran = img::decode_jpeg_resized_plane(bytes, name, max_pixels, rgb_channel, plan_for, f.plane, scratch, &f.width,
                                         &f.height);
  return f;
}

}  // namespace

TEST(JpegResized, EveryPlaneOfEverySharedJpegMatchesDecodeThenResize) {
  const auto files = sprt_test::shared_jpegs();
  ASSERT_GE(files.size(), 10u) << "shared JPEGs missing under " << sprt_test::shared_dir();
  const std::pair<int, int> sizes[] = {{640, 480}, {97, 61}, {1, 1}, {2001, 17}};
  int compared = 0;
  for (const std::string& path : files) {
    const fs::path p(path);
    const auto bytes = sprt_test::read_bytes(path);
    const std::string name = p.filename().string();
    const sp::Image full = img::decode_jpeg(bytes, name, sp::kDefaultMaxPixels);
    const int ch = sp::channels_of(full.format);
    for (const auto& [ow, oh] : sizes) {
      for (int c = -1; c < 3; ++c) {
        const Fused f = run_fused(bytes, name, sp::kDefaultMaxPixels, c, ow, oh);
        if (!img::resize_rows_available()) {
          EXPECT_FALSE(f.ran) << name << ": the fused path ran without a SIMD resize kernel";
          EXPECT_EQ(f.plans, 0);
          continue;
        }
        if (ch == 3 && c < 0) {  // all three planes needed: refused
          EXPECT_FALSE(f.ran) << name;
          continue;
        }
        if (!f.ran) {  // only CMYK files may be refused otherwise; their full decode goes through cmyk2rgb
          EXPECT_EQ(f.plans, 0) << name;
          continue;
        }
        ASSERT_EQ(f.width, full.width) << name;
        ASSERT_EQ(f.height, full.height) << name;
        EXPECT_EQ(f.plans, 1) << name;
        const img::ResizePlan plan(full.width, full.height, ow, oh);
        img::ResizeScratch scratch;
        std::vector<std::uint8_t> want(f.plane.size());
        const int offset = ch == 3 ? c : 0;
        img::resize_plane(plan, full.pixels.data() + offset, static_cast<std::ptrdiff_t>(full.width) * ch, ch,
                          want.data(), scratch);
        std::size_t diff = 0, first = want.size();
        for (std::size_t i = 0; i < want.size(); ++i) {
          if (f.plane[i] != want[i]) {
            ++diff;
            first = std::min(first, i);
          }
        }
        EXPECT_EQ(diff, 0u) << name << " channel " << c << " -> " << ow << "x" << oh << ": " << diff
                            << " pixels differ, first at " << first;
        ++compared;
      }
    }
  }
  if (img::resize_rows_available()) {
    EXPECT_GE(compared, 40) << "too few files took the fused path";
  }
}

TEST(JpegResized, ErrorsAsTheFullDecode) {
  const auto files = sprt_test::shared_jpegs();
  ASSERT_FALSE(files.empty());
  const auto bytes = sprt_test::read_bytes(files.front());
  if (!img::resize_rows_available()) {
    EXPECT_FALSE(run_fused(bytes, "x.jpg", sp::kDefaultMaxPixels, 0, 640, 480).ran);
    return;
  }
  // The pixel limit: TooLarge before any plan is asked for.
  try {
    (void)run_fused(bytes, "x.jpg", 100, 0, 640, 480);
    ADD_FAILURE() << "no error for a pixel limit of 100";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::TooLarge) << e.what();
  }
  // Truncated at several points, also near the end (rows the resize may not read must still be decoded): the same
  // error kind and message as the full decode.
  for (const double keep : {0.02, 0.5, 0.9, 0.995}) {
    std::vector<std::uint8_t> cut(
        bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(static_cast<double>(bytes.size()) * keep));
    std::string want;
    try {
      (void)img::decode_jpeg(cut, "cut.jpg", sp::kDefaultMaxPixels);
    } catch (const sp::Error& e) {
      want = std::string(sp::to_string(e.kind())) + ": " + e.what();
    }
    ASSERT_FALSE(want.empty()) << "decode_jpeg accepted the file cut at " << keep;
    for (const auto& [ow, oh] : {std::pair<int, int>{640, 480}, std::pair<int, int>{5, 3}}) {
      try {
        (void)run_fused(cut, "cut.jpg", sp::kDefaultMaxPixels, 0, ow, oh);
        ADD_FAILURE() << "no error for the file cut at " << keep;
      } catch (const sp::Error& e) {
        EXPECT_EQ(std::string(sp::to_string(e.kind())) + ": " + e.what(), want) << "cut at " << keep;
      }
    }
  }
}
