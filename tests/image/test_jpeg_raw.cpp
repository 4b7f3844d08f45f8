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
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace sp = superpoint_rt;
namespace img = superpoint_rt::image;

namespace {

struct Encoding {
  int h0, v0;  // luma sampling factors (chroma 1x1), or h0 = 0 for a gray file
  bool progressive;
  bool rgb_coded;  // JCS_RGB inside the file (no YCbCr transform)
};

// An RGB test image: smooth colour ramps, saturated blocks (the conversion then clamps at 0 and 255) and noise.
std::vector<std::uint8_t> test_pixels(int w, int h, std::mt19937& rng) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(w) * h * 3);
  std::uniform_int_distribution<int> u(0, 255);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      std::uint8_t* p = &px[(static_cast<std::size_t>(y) * w + x) * 3];
      const int zone = (x / 7 + y / 5) % 4;
      if (zone == 0) {
        p[0] = static_cast<std::uint8_t>(x * 255 / (w > 1 ? w - 1 : 1));
        p[1] = static_cast<std::uint8_t>(y * 255 / (h > 1 ? h - 1 : 1));
        p[2] = static_cast<std::uint8_t>((x + y) % 256);
      } else if (zone == 1) {  // saturated: pure red / blue / yellow / cyan
        const int k = (x / 3 + y / 3) % 4;
        p[0] = k == 0 || k == 2 ? 255 : 0;
        p[1] = k >= 2 ? 255 : 0;
        p[2] = k == 1 || k == 3 ? 255 : 0;
      } else {
        for (int c = 0; c < 3; ++c) p[c] = static_cast<std::uint8_t>(u(rng));
      }
    }
  return px;
}

std::vector<std::uint8_t> encode(const std::vector<std::uint8_t>& rgb, int w, int h, const Encoding& e) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  if (e.h0 == 0) {
    jpeg_set_colorspace(&c, JCS_GRAYSCALE);
  } else if (e.rgb_coded) {
    jpeg_set_colorspace(&c, JCS_RGB);
  } else {
    c.comp_info[0].h_samp_factor = e.h0;
    c.comp_info[0].v_samp_factor = e.v0;
    for (int k = 1; k < 3; ++k) c.comp_info[k].h_samp_factor = c.comp_info[k].v_samp_factor = 1;
  }
  if (e.progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<std::uint8_t*>(&rgb[static_cast<std::size_t>(c.next_scanline) * w * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<std::uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

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
      const auto px = test_pixels(w, h, rng);
      const auto bytes = encode(px, w, h, e);
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
