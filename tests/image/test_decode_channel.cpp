// decode_jpeg_channel (the one-plane JPEG decode for R-, G- or B-only requests) against the planes of the full RGB
// decode_jpeg (itself compared with Pillow in test_decode.cpp): bit-identical on every shared JPEG.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "image/decode_internal.hpp"
#include "superpoint_rt/errors.hpp"

namespace sp = superpoint_rt;
namespace fs = std::filesystem;

namespace {

std::vector<std::uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<fs::path> shared_jpegs() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(sprt_test::shared_dir()) / "images")) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext == ".jpg" || ext == ".jpeg") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(JpegChannel, EveryChannelOfEverySharedJpegMatchesTheRgbDecode) {
  const auto files = shared_jpegs();
  ASSERT_GE(files.size(), 10u) << "shared JPEGs missing under " << sprt_test::shared_dir();
  for (const fs::path& p : files) {
    const auto bytes = read_bytes(p);
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
  const auto files = shared_jpegs();
  ASSERT_FALSE(files.empty());
  auto bytes = read_bytes(files.front());
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
