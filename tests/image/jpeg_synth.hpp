// Synthetic JPEGs for the decoder tests (test_jpeg_raw.cpp, test_jpeg_two_threads.cpp): an RGB pattern that drives
// the colour conversion into both clamps, encoded by libjpeg-turbo with a chosen sampling, colour space, restart
// interval and progression.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sprt_test {

struct JpegEncoding {
  int h0, v0;            // luma sampling factors (chroma 1x1), or h0 = 0 for a gray file
  bool progressive;      // jpeg_simple_progression
  bool rgb_coded;        // JCS_RGB inside the file (no YCbCr transform)
  int restart_rows = 0;  // restart interval in MCU rows (0: none)
};

/// w x h RGB: smooth colour ramps, saturated blocks (the conversion then clamps at 0 and 255) and noise from `rng`.
std::vector<std::uint8_t> jpeg_test_pixels(int w, int h, std::mt19937& rng);
/// `rgb` (w x h x 3) encoded at quality 90 with `e`.
std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& rgb, int w, int h, const JpegEncoding& e);

}  // namespace sprt_test
