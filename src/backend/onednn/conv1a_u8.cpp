// The scalar reference and the row driver of conv1a_u8.hpp.
#include "backend/onednn/conv1a_u8.hpp"

#include <cmath>

namespace superpoint_rt::backend::detail {

void conv1a_u8_row_reference(const Conv1aU8& k, const float* r0, const float* r1, const float* r2, int w,
                             std::uint8_t* out) {
  const auto ch = static_cast<std::size_t>(k.channels);
  const float* rows[3] = {r0, r1, r2};
  for (int x = 0; x < w; ++x) {
    for (std::size_t c = 0; c < ch; ++c) {
      float acc = k.bias[c];
      for (std::size_t ky = 0; ky < 3; ++ky)
        for (std::size_t kx = 0; kx < 3; ++kx)
          acc = std::fma(k.weight[c * 9 + ky * 3 + kx], rows[ky][static_cast<std::size_t>(x) + kx], acc);
      float q = (acc > 0.f ? acc : 0.f) * (k.channel_scale ? k.channel_scale[c] : k.scale);
      q = q < 255.f ? q : 255.f;
      out[static_cast<std::size_t>(x) * ch + c] = static_cast<std::uint8_t>(std::nearbyint(q));  // half-even
    }
  }
}

void conv1a_u8_rows(const Conv1aU8& k, Conv1aU8Row row, const float* in, int h, int w, int y0, int y1,
                    std::uint8_t* out, int out_row0, float* scratch) {
  const std::size_t stride = static_cast<std::size_t>(w) + 2;
  for (int y = y0; y < y1; ++y) {
    for (int i = 0; i < 3; ++i) {
      float* r = scratch + static_cast<std::size_t>(i) * stride;
      const int sy = y + i - 1;
      r[0] = 0.f;
      r[w + 1] = 0.f;
      for (int x = 0; x < w; ++x)
        r[x + 1] = sy < 0 || sy >= h ? 0.f : in[static_cast<std::size_t>(sy) * static_cast<std::size_t>(w) + x];
    }
    row(k, scratch, scratch + stride, scratch + 2 * stride, w,
        out + static_cast<std::size_t>(y - out_row0) * static_cast<std::size_t>(w) *
                  static_cast<std::size_t>(k.channels));
  }
}

}  // namespace superpoint_rt::backend::detail
