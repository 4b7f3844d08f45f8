// The weight preparation and the scalar reference of wino_u8.hpp.
#include "backend/onednn/wino_u8.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace superpoint_rt::backend::detail {

namespace {

// Lavin & Gray's F(4x4,3x3) weight transform G (6x3).
constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                             {0, 0, 1}};
// max |B^T x| over u8 x per row of B^T (the larger of its positive and negative coefficient sums), and the sum of
// |coefficients| per row (what the second pass multiplies a signed value by).
constexpr int kRowU8[6] = {5, 8, 5, 3, 3, 5};
constexpr int kRowAbs[6] = {10, 10, 10, 6, 6, 10};

}  // namespace

int wino_u8_limit(int p, int in_channels) {
  // |V[p]| <= 255 * kRowU8[row] * kRowAbs[column] (rows transformed first), and M sums in_channels products.
  const long long v = 255LL * kRowU8[p / 6] * kRowAbs[p % 6];
  const long long limit = std::numeric_limits<std::int32_t>::max() / (v * std::max(in_channels, 1));
  return static_cast<int>(std::min<long long>(limit, std::numeric_limits<std::int16_t>::max()));
}

WinoU8 wino_u8_prepare(const float* weight, const float* bias, int in_channels, int out_channels,
                       const std::vector<float>& in_scale, const std::vector<float>& out_scale) {
  auto at = [](const std::vector<float>& v, std::size_t c) { return static_cast<double>(v.size() == 1 ? v[0] : v[c]); };
  WinoU8 k;
  k.in_channels = in_channels;
  k.out_channels = out_channels;
  const auto ic = static_cast<std::size_t>(in_channels), oc = static_cast<std::size_t>(out_channels);
  // U = G g G^T in double for every (output, input) channel: [o][i][36].
  std::vector<double> uf(oc * ic * 36);
  for (std::size_t o = 0; o < oc; ++o)
    for (std::size_t i = 0; i < ic; ++i) {
      const float* g = weight + (o * ic + i) * 9;
      const double fold = 1.0 / at(in_scale, i);  // the input channel's u8 scale
      double gg[6][3];                            // G g
      for (int a = 0; a < 6; ++a)
        for (int l = 0; l < 3; ++l) gg[a][l] = (kG[a][0] * g[l] + kG[a][1] * g[3 + l] + kG[a][2] * g[6 + l]) * fold;
      for (int a = 0; a < 6; ++a)
        for (int b = 0; b < 6; ++b)
          uf[(o * ic + i) * 36 + static_cast<std::size_t>(a * 6 + b)] =
              gg[a][0] * kG[b][0] + gg[a][1] * kG[b][1] + gg[a][2] * kG[b][2];
    }
  k.u.assign(36 * ic * oc, 0);
  k.scale.assign(36 * oc, 0.f);
  k.bias.resize(oc);
  for (std::size_t o = 0; o < oc; ++o) k.bias[o] = static_cast<float>(bias[o] * at(out_scale, o));
  for (std::size_t p = 0; p < 36; ++p)
    for (std::size_t o = 0; o < oc; ++o) {
      // One scale per position and output channel: the largest |U| of the input channels maps to the limit.
      double top = 0;
      for (std::size_t i = 0; i < ic; ++i) top = std::max(top, std::abs(uf[(o * ic + i) * 36 + p]));
      const double s = top > 0 ? wino_u8_limit(static_cast<int>(p), in_channels) / top : 1.0;
      for (std::size_t i = 0; i < ic; ++i)
        k.u[((p * (ic / 2) + i / 2) * oc + o) * 2 + i % 2] =
            static_cast<std::int16_t>(std::nearbyint(uf[(o * ic + i) * 36 + p] * s));
      k.scale[p * oc + o] = static_cast<float>(at(out_scale, o) / s);
    }
  return k;
}

WinoTiles wino_tiles(const WinoU8Rows& r) {
  const int across = (r.w + 3) / 4, total = (r.y1 - r.y0 + 3) / 4 * across;
  const int first = r.first_tile < total ? r.first_tile : total;
  const int last = r.tiles < 0 || r.tiles > total - first ? total : first + r.tiles;
  return {first, last, across};
}

std::size_t wino_u8_scratch_bytes(int in_channels, int out_channels) {
  // The AVX-512 kernel's V [36][tiles][in] int16 and m [36][tiles][out] float, 64-byte aligned; the reference needs
  // less (one tile).
  return 64 + 36 * static_cast<std::size_t>(kWinoTiles) *
                  (static_cast<std::size_t>(in_channels) * 2 + static_cast<std::size_t>(out_channels) * 4);
}

void wino_u8_rows_reference(const WinoU8View& k, const WinoU8Rows& r, void* scratch) {
  const auto ic = static_cast<std::size_t>(k.in_channels), oc = static_cast<std::size_t>(k.out_channels);
  const std::size_t row_bytes = static_cast<std::size_t>(r.w) * ic;
  const int pw = r.w / 2;
  // [36][in], 64-byte aligned as the AVX-512 kernel's (the scratch may have any alignment; its size has the slack).
  auto* v = reinterpret_cast<std::int16_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) & ~std::uintptr_t{63});
  const WinoTiles range = wino_tiles(r);
  for (int id = range.first; id < range.last; ++id) {
    const int ty = r.y0 + 4 * (id / range.across), tx = 4 * (id % range.across);
    const std::uint8_t* rows[6];
    for (int i = 0; i < 6; ++i) {
      const int row = ty - 1 + i - r.in_row0;
      rows[i] = row >= 0 && row < r.in_rows ? r.in + static_cast<std::size_t>(row) * row_bytes : nullptr;
    }
    for (std::size_t c = 0; c < ic; ++c) {
      std::int16_t t[6][6];  // B^T d: down the columns first
      for (int j = 0; j < 6; ++j) {
        const int x = tx - 1 + j;
        std::int16_t d[6];
        for (int i = 0; i < 6; ++i)
          d[i] = rows[i] && x >= 0 && x < r.w ? rows[i][static_cast<std::size_t>(x) * ic + c] : std::int16_t{0};
        std::int16_t o[6];
        wino_input_1d(d, o);
        for (int i = 0; i < 6; ++i) t[i][j] = o[i];
      }
      for (int i = 0; i < 6; ++i) {
        std::int16_t o[6];
        wino_input_1d(t[i], o);
        for (int j = 0; j < 6; ++j) v[static_cast<std::size_t>(i * 6 + j) * ic + c] = o[j];
      }
    }
    for (std::size_t o = 0; o < oc; ++o) {
      float m[6][6];
      for (std::size_t p = 0; p < 36; ++p) {
        std::int32_t acc = 0;
        for (std::size_t i = 0; i < ic; ++i)
          acc += static_cast<std::int32_t>(v[p * ic + i]) * k.u[((p * (ic / 2) + i / 2) * oc + o) * 2 + i % 2];
        m[p / 6][p % 6] = static_cast<float>(acc) * k.scale[p * oc + o];
      }
      float cols[4][6];  // A^T down each column
      for (int j = 0; j < 6; ++j) {
        const float col[6] = {m[0][j], m[1][j], m[2][j], m[3][j], m[4][j], m[5][j]};
        float y[4];
        wino_output_1d(col, y);
        for (int i = 0; i < 4; ++i) cols[i][j] = y[i];
      }
      float y[4][4];
      for (int i = 0; i < 4; ++i) wino_output_1d(cols[i], y[i]);
      if (!r.pool) {
        for (int a = 0; a < 4; ++a)
          for (int b = 0; b < 4; ++b) {
            if (ty + a >= r.y1 || tx + b >= r.w) continue;
            float q = y[a][b] + k.bias[o];
            q = q > 0.f ? q : 0.f;
            q = q < 255.f ? q : 255.f;
            r.out[(static_cast<std::size_t>(ty - r.y0 + a) * static_cast<std::size_t>(r.w) +
                   static_cast<std::size_t>(tx + b)) *
                      oc +
                  o] = static_cast<std::uint8_t>(std::nearbyint(q));  // half-even
          }
        continue;
      }
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          const int py = (ty - r.y0) / 2 + a, px = tx / 2 + b;
          if (ty + 2 * a >= r.y1 || px >= pw) continue;
          const float top = std::max(std::max(y[2 * a][2 * b], y[2 * a][2 * b + 1]),
                                     std::max(y[2 * a + 1][2 * b], y[2 * a + 1][2 * b + 1]));
          float q = top + k.bias[o];
          q = q > 0.f ? q : 0.f;
          q = q < 255.f ? q : 255.f;
          r.out[(static_cast<std::size_t>(py) * static_cast<std::size_t>(pw) + static_cast<std::size_t>(px)) * oc + o] =
              static_cast<std::uint8_t>(std::nearbyint(q));  // half-even
        }
    }
  }
}

}  // namespace superpoint_rt::backend::detail
