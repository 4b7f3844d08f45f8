#include "image/synthetic.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace superpoint_rt::image {
namespace {

// xorshift32: tiny, fast and identical everywhere (std:: distributions are not specified bit-for-bit).
struct Rng {
  std::uint32_t s;
  std::uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
  int uniform(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint32_t>(hi - lo + 1)); }
};

void put(Image& im, int x, int y, const std::uint8_t c[3]) {
  if (x < 0 || y < 0 || x >= im.width || y >= im.height) return;
  std::uint8_t* p = &im.pixels[(static_cast<std::size_t>(y) * im.width + x) * 3];
  p[0] = c[0];
  p[1] = c[1];
  p[2] = c[2];
}

}  // namespace

Image synthetic_image(int width, int height, std::uint32_t seed) {
  Image im;
  im.width = std::max(width, 1);
  im.height = std::max(height, 1);
  im.format = PixelFormat::RGB;
  im.pixels.resize(static_cast<std::size_t>(im.width) * im.height * 3);
  Rng rng{seed * 2654435761u + 12345u};
  // Low-amplitude noise background.
  for (auto& v : im.pixels) v = static_cast<std::uint8_t>(96 + rng.uniform(0, 24));
  const int scale = std::max(1, std::min(im.width, im.height) / 60);
  // Checkerboard in one quadrant: many strong corners.
  const int cb = 4 * scale;
  for (int y = 0; y < im.height / 3; ++y)
    for (int x = 0; x < im.width / 3; ++x)
      if (((x / cb) + (y / cb)) % 2 == 0) {
        const std::uint8_t c[3] = {230, 230, 230};
        put(im, x, y, c);
      }
  // Rectangles, discs and lines with random colours.
  const int shapes = 40;
  for (int i = 0; i < shapes; ++i) {
    const std::uint8_t c[3] = {static_cast<std::uint8_t>(rng.uniform(0, 255)),
                               static_cast<std::uint8_t>(rng.uniform(0, 255)),
                               static_cast<std::uint8_t>(rng.uniform(0, 255))};
    const int cx = rng.uniform(0, im.width - 1), cy = rng.uniform(0, im.height - 1);
    const int r = rng.uniform(2, 10) * scale;
    switch (i % 3) {
      case 0:
        for (int y = cy - r; y < cy + r; ++y)
          for (int x = cx - r / 2; x < cx + r / 2 + 1; ++x) put(im, x, y, c);
        break;
      case 1:
        for (int y = cy - r; y <= cy + r; ++y)
          for (int x = cx - r; x <= cx + r; ++x)
            if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r) put(im, x, y, c);
        break;
      default: {
        const int dx = rng.uniform(-8, 8) * scale, dy = rng.uniform(-8, 8) * scale;
        const int n = std::max(std::abs(dx), std::abs(dy)) + 1;
        for (int t = 0; t < n; ++t)
          for (int w = 0; w < scale; ++w) put(im, cx + dx * t / n + w, cy + dy * t / n, c);
      }
    }
  }
  return im;
}

}  // namespace superpoint_rt::image
