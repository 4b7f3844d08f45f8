// The weight transform, the blocking and the scalar reference of wino_f32.hpp.
#include "backend/onednn/wino_f32.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>

namespace superpoint_rt::backend::detail {

namespace {

// Lavin & Gray's F(4x4,3x3) weight transform G (6x3).
constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                             {0, 0, 1}};

}  // namespace

void AlignedFloats::Free::operator()(float* q) const noexcept {
  std::free(q);
}

AlignedFloats::AlignedFloats(std::size_t n) : size(n) {
  if (n == 0) return;
  const std::size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  p.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (!p) throw std::bad_alloc();
}

WinoF32 wino_f32_prepare(const float* weight, const float* bias, int in_channels, int out_channels, int oc_block) {
  WinoF32 k;
  k.in_channels = in_channels;
  k.out_channels = out_channels;
  k.oc_block = oc_block;
  const auto ic = static_cast<std::size_t>(in_channels), oc = static_cast<std::size_t>(out_channels);
  const auto ob = static_cast<std::size_t>(oc_block);
  k.u = AlignedFloats(36 * ic * oc);
  k.bias.assign(bias, bias + oc);
  for (std::size_t o = 0; o < oc; ++o)
    for (std::size_t i = 0; i < ic; ++i) {
      const float* g = weight + (o * ic + i) * 9;
      double gg[6][3];  // G g
      for (int a = 0; a < 6; ++a)
        for (int l = 0; l < 3; ++l) gg[a][l] = kG[a][0] * g[l] + kG[a][1] * g[3 + l] + kG[a][2] * g[6 + l];
      for (int a = 0; a < 6; ++a)
        for (int b = 0; b < 6; ++b) {
          const auto p = static_cast<std::size_t>(a * 6 + b);
          const double u = gg[a][0] * kG[b][0] + gg[a][1] * kG[b][1] + gg[a][2] * kG[b][2];
          k.u.data()[((p * (oc / ob) + o / ob) * ic + i) * ob + o % ob] = static_cast<float>(u);
        }
    }
  return k;
}

int wino_f32_block_tiles(int in_channels, int out_channels) {
  // A block re-reads every transformed weight (36 x in x out floats: 0.6 MB for 64 -> 64, 4.7 MB for 128 -> 256), so
  // the wider layers want more tiles per block; the block's transformed input and products (36 x tiles x (in + out)
  // floats) are the price. Measured (bench_wino's shapes, one thread, Intel Xeon, AVX2 and AVX-512): 64 input
  // channels run as fast with 12 to 48 tiles (12 best by up to 7% for 64 -> 128); 128 input channels gain up to 60%
  // from 6 to 48 (AVX-512 128 -> 256: 30 -> 49 G multiply-adds/s; AVX2: 24 -> 28).
  (void)out_channels;
  return in_channels <= 64 ? 12 : 48;
}

std::size_t wino_f32_scratch_bytes(int in_channels, int out_channels) {
  return 64 + 36 * static_cast<std::size_t>(wino_f32_block_tiles(in_channels, out_channels)) *
                  (static_cast<std::size_t>(in_channels) + static_cast<std::size_t>(out_channels)) * sizeof(float);
}

WinoF32Tiles wino_f32_tiles(const WinoF32Rows& r) {
  const int across = (r.w + 3) / 4, total = (r.y1 - r.y0 + 3) / 4 * across;
  const int first = std::min(r.first_tile, total);
  const int last = r.tiles < 0 || r.tiles > total - first ? total : first + r.tiles;
  return {first, last, across};
}

void wino_f32_rows_reference(const WinoF32View& k, const WinoF32Rows& r, void* scratch) {
  (void)scratch;  // one tile at a time: no scratch
  const int ic = k.in_channels, oc = k.out_channels, ob = k.oc_block;
  const WinoF32Tiles range = wino_f32_tiles(r);
  std::vector<float> v(36 * static_cast<std::size_t>(ic));
  for (int id = range.first; id < range.last; ++id) {
    const int ty = r.y0 + 4 * (id / range.across), tx = 4 * (id % range.across);
    for (int c = 0; c < ic; ++c) {
      float t[6][6];  // B^T d: down the columns first
      for (int j = 0; j < 6; ++j) {
        const int x = tx - 1 + j;
        float d[6];
        for (int i = 0; i < 6; ++i) {
          const int row = ty - 1 + i - r.in_row0;
          d[i] = row >= 0 && row < r.in_rows && x >= 0 && x < r.w ? *r.in.at(c, row, x) : 0.f;
        }
        float o[6];
        wino_f32_input_1d(d, o);
        for (int i = 0; i < 6; ++i) t[i][j] = o[i];
      }
      for (int i = 0; i < 6; ++i) {
        float o[6];
        wino_f32_input_1d(t[i], o);
        for (int j = 0; j < 6; ++j) v[static_cast<std::size_t>(i * 6 + j) * ic + c] = o[j];
      }
    }
    for (int o = 0; o < oc; ++o) {
      float m[6][6];
      for (int p = 0; p < 36; ++p) {
        const float* u = k.u + ((static_cast<std::size_t>(p) * (oc / ob) + o / ob) * ic) * ob + o % ob;
        float acc = 0.f;
        for (int i = 0; i < ic; ++i)
          acc = std::fma(v[static_cast<std::size_t>(p) * ic + i], u[static_cast<std::size_t>(i) * ob], acc);
        m[p / 6][p % 6] = acc;
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
      const float b = k.bias[o];
      auto relu = [](float q) { return q > 0.f ? q : 0.f; };
      auto max = [](float a, float c) { return a > c ? a : c; };
      if (!r.pool) {
        for (int a = 0; a < 4; ++a)
          for (int c = 0; c < 4; ++c)
            if (ty + a < r.y1 && tx + c < r.w) *r.out.at(o, ty - r.y0 + a, tx + c) = relu(y[a][c] + b);
        continue;
      }
      for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 2; ++c) {
          const int py = (ty - r.y0) / 2 + a, px = tx / 2 + c;
          if (ty + 2 * a >= r.y1 || px >= r.w / 2) continue;
          const float top =
              max(max(y[2 * a][2 * c], y[2 * a][2 * c + 1]), max(y[2 * a + 1][2 * c], y[2 * a + 1][2 * c + 1]));
          *r.out.at(o, py, px) = relu(top + b);
        }
    }
  }
}

}  // namespace superpoint_rt::backend::detail
