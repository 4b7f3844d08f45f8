#include "jpeg_synth.hpp"

#include <cstdio>
#include <cstdlib>

// clang-format off
#include <jpeglib.h>
// clang-format on

namespace sprt_test {

// An RGB test image: smooth colour ramps, saturated blocks (the conversion then clamps at 0 and 255) and noise.
std::vector<std::uint8_t> jpeg_test_pixels(int w, int h, std::mt19937& rng) {
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

std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& rgb, int w, int h, const JpegEncoding& e) {
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
  c.restart_in_rows = e.restart_rows;
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

}  // namespace sprt_test
