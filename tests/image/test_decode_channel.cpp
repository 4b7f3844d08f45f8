// decode_jpeg_channel (the one-plane JPEG decode for R-, G- or B-only requests) against the planes of the full RGB
// decode_jpeg (itself compared with Pillow in test_decode.cpp): bit-identical on every shared JPEG.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "image/decode_internal.hpp"
#include "superpoint_rt/errors.hpp"

namespace sp = superpoint_rt;
namespace fs = std::filesystem;

TEST(JpegChannel, EveryChannelOfEverySharedJpegMatchesTheRgbDecode) {
  const auto files = sprt_test::shared_jpegs();
  ASSERT_GE(files.size(), 10u) << "shared JPEGs missing under " << sprt_test::shared_dir();
  for (const std::string& path : files) {
    const fs::path p(path);
    const auto bytes = sprt_test::read_bytes(path);
    const sp::Image rgb = sp::image::decode_jpeg(bytes, p.filename().string(), sp::kDefaultMaxPixels);
    const std::size_t n = static_cast<std::size_t>(rgb.width) * static_cast<std::size_t>(rgb.height);
    const int ch = rgb.format == sp::PixelFormat::RGB ? 3 : 1;
    for (int c = 0; c < 3; ++c) {
      const sp::Image plane = sp::image::decode_jpeg_channel(bytes, p.filename().string(), sp::kDefaultMaxPixels, c);
      ASSERT_EQ(plane.format, sp::PixelFormat::Gray);
      ASSERT_EQ(plane.width, rgb.width);
      ASSERT_EQ(plane.height, rgb.height);
      ASSERT_EQ(plane.pixels.size(), n);
      std::size_t diff = 0, first = n;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t want =
            rgb.pixels[i * static_cast<std::size_t>(ch) + (ch == 3 ? static_cast<std::size_t>(c) : 0)];
        if (plane.pixels[i] != want) {
          ++diff;
          first = std::min(first, i);
        }
      }
      EXPECT_EQ(diff, 0u) << p.filename() << " channel " << c << ": " << diff << " pixels differ, first at " << first;
    }
  }
}

TEST(JpegChannel, ErrorsAsTheFullDecode) {
  const auto files = sprt_test::shared_jpegs();
  ASSERT_FALSE(files.empty());
  auto bytes = sprt_test::read_bytes(files.front());
  EXPECT_THROW(sp::image::decode_jpeg_channel(bytes, "x.jpg", sp::kDefaultMaxPixels, 3), sp::Error);
  EXPECT_THROW(sp::image::decode_jpeg_channel(bytes, "x.jpg", sp::kDefaultMaxPixels, -1), sp::Error);
  try {
    sp::image::decode_jpeg_channel(bytes, "x.jpg", 100, 0);
    ADD_FAILURE() << "no error for a pixel limit of 100";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::TooLarge) << e.what();
  }
  bytes.resize(bytes.size() / 2);  // truncated
  try {
    sp::image::decode_jpeg_channel(bytes, "half.jpg", sp::kDefaultMaxPixels, 0);
    ADD_FAILURE() << "no error for a truncated JPEG";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::DecodeError) << e.what();
  }
}
