// The raw-component path of decode_jpeg_resized_plane (R or B computed from libjpeg-turbo's raw YCbCr rows,
// src/image/ycc_rows.hpp) against libjpeg-turbo's own upsampling and colour conversion (decode_jpeg, itself compared
// with Pillow in test_decode.cpp): the full-resolution plane (an identity resize) must be bit-identical for every
// chroma subsampling the raw path takes (4:4:4, 4:2:2, 4:4:0, 4:2:0), odd sizes, progressive files and content
// that drives the conversion into both clamps; files it does not take (4:1:1, gray, RGB-coded, G) still match
// through the scanline path. And the AVX2 build of the row kernel equals its scalar reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

// clang-format off
#include <jpeglib.h>
// clang-format on

#include "image/decode_internal.hpp"
#include "image/resize.hpp"
#include "image/ycc_rows.hpp"
#include "jpeg_synth.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace sp = superpoint_rt;
namespace img = superpoint_rt::image;

namespace {

using Encoding = sprt_test::JpegEncoding;
using sprt_test::encode_jpeg;
using sprt_test::jpeg_test_pixels;

// The fused decode with an identity resize: the full-resolution plane of `channel`.
std::vector<std::uint8_t> fused_plane(const std::vector<std::uint8_t>& bytes, int channel, int w, int h) {
  std::vector<std::uint8_t> plane(static_cast<std::size_t>(w) * h, 0xAB);
  img::ResizeScratch scratch;
  const img::PlanFor plan_for = [](int iw, int ih) { return std::make_shared<const img::ResizePlan>(iw, ih, iw, ih); };
  int fw = 0, fh = 0;
  if (!img::decode_jpeg_resized_plane(bytes, "t.jpg", sp::kDefaultMaxPixels, channel, plan_for, plane, scratch, &fw,
                                      &fh))
    return {};
  EXPECT_EQ(fw, w);
  EXPECT_EQ(fh, h);
  return plane;
}

}  // namespace

TEST(JpegRaw, IdentityResizeIsTheDecodedChannel) {
  if (!img::resize_rows_available()) GTEST_SKIP() << "no SIMD resize kernel on this CPU: the fused path is off";
  std::mt19937 rng(5);
  const Encoding encodings[] = {{1, 1, false, false}, {2, 1, false, false}, {1, 2, false, false},
                                {2, 2, false, false}, {2, 2, true, false},  {2, 1, true, false},
                                {4, 1, false, false}, {0, 0, false, false}, {1, 1, false, true}};
  const std::pair<int, int> sizes[] = {{8, 8}, {9, 11}, {17, 13}, {33, 40}, {64, 48}, {101, 67}, {160, 121}};
  int compared = 0;
  for (const Encoding& e : encodings) {
    for (const auto& [w, h] : sizes) {
      const auto px = jpeg_test_pixels(w, h, rng);
      const auto bytes = encode_jpeg(px, w, h, e);
      const sp::Image full = img::decode_jpeg(bytes, "t.jpg", sp::kDefaultMaxPixels);
      const int ch = sp::channels_of(full.format);
      for (int channel = 0; channel < 3; ++channel) {
        const auto got = fused_plane(bytes, channel, w, h);
        ASSERT_EQ(got.size(), static_cast<std::size_t>(w) * h) << "the fused path refused " << e.h0 << "x" << e.v0;
        std::size_t diff = 0, first = got.size();
        for (std::size_t i = 0; i < got.size(); ++i) {
          const std::uint8_t want = full.pixels[i * ch + (ch == 3 ? channel : 0)];
          if (got[i] != want) {
            ++diff;
            first = std::min(first, i);
          }
        }
        EXPECT_EQ(diff, 0u) << "sampling " << e.h0 << "x" << e.v0 << (e.progressive ? " progressive" : "")
                            << (e.rgb_coded ? " rgb-coded" : "") << " " << w << "x" << h << " channel " << channel
                            << ": " << diff << " pixels differ, first at (" << first % w << ", " << first / w << ")";
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 9 * 7 * 3);
}

TEST(JpegRaw, RowKernelAvx2EqualsReference) {
  if (!sp::util::cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> u(0, 255);
  for (int hfac = 1; hfac <= 2; ++hfac)
    for (int vfac = 1; vfac <= 2; ++vfac)
      for (int odd = 0; odd < vfac; ++odd)
        for (int red = 0; red < 2; ++red)
          for (int w = 5; w <= 1601; w += (w < 80 ? 1 : 131)) {  // every tail length, then long rows
            const int cw = (w + hfac - 1) / hfac;
            std::vector<std::uint8_t> luma(w), a(cw), b(cw);
            for (auto& v : luma) v = static_cast<std::uint8_t>(u(rng));
            for (auto& v : a) v = static_cast<std::uint8_t>(u(rng));
            for (auto& v : b) v = static_cast<std::uint8_t>(u(rng));
            const img::YccRow r{luma.data(), a.data(), vfac == 2 ? b.data() : a.data(), w, cw, hfac, vfac,
                                odd,         red == 1};
            std::vector<std::int16_t> sums(static_cast<std::size_t>(img::ycc_scratch_size(w, cw)));
            std::vector<std::uint8_t> ref(w), fast(w);
            img::ycc_channel_row_reference(r, sums.data(), ref.data());
            img::detail::ycc_channel_row_avx2(r, sums.data(), fast.data());
            ASSERT_EQ(ref, fast) << "h" << hfac << " v" << vfac << " odd " << odd << " red " << red << " w " << w;
          }
}
