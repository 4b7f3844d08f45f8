// bench_wino: one thread's time for the int8 plan's Winograd kernel (src/backend/onednn/wino_u8.hpp) on the shapes
// the 640x480 plan gives it: a conv1b stripe (62 x 640 u8 rows in, 60 rows out, pooled), conv2a (240 x 320,
// unpooled) and conv2b (240 x 320, pooled), 64 -> 64 channels; median of the runs, and the multiply instructions'
// share of it (vpdpwssd at the rate bench_isa measures: 36 x 64 x 64 / 32 per 4x4 tile).
//   bench_wino [runs, default 30]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/onednn/wino_u8.hpp"
#include "util/cpu.hpp"

namespace d = superpoint_rt::backend::detail;

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 30;
  const auto& f = superpoint_rt::util::cpu_features();
  if (!(f.avx512() && f.avx512_vnni)) {
    std::printf("bench_wino: the kernel needs AVX-512 VNNI, which this CPU lacks\n");
    return 0;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.f, 0.05f);
  std::vector<float> weight(64 * 64 * 9), bias(64);
  for (auto& v : weight) v = n(rng);
  for (auto& v : bias) v = n(rng);
  const d::WinoU8 k = d::wino_u8_prepare(weight.data(), bias.data(), 64, 64, {40.f}, {12.f});
  std::vector<unsigned char> scratch(d::wino_u8_scratch_bytes(64, 64));
  struct Shape {
    const char* name;
    int in_rows, w, rows;
    bool pool;
  };
  for (const Shape& s :
       {Shape{"conv1b stripe 60x640 + pool", 62, 640, 60, true}, Shape{"conv2a 240x320", 240, 320, 240, false},
        Shape{"conv2b 240x320 + pool", 240, 320, 240, true}}) {
    std::vector<std::uint8_t> in(static_cast<std::size_t>(s.in_rows) * s.w * 64), out(in.size());
    std::uniform_int_distribution<int> u(0, 255);
    for (auto& v : in) v = static_cast<std::uint8_t>(u(rng) < 100 ? 0 : u(rng));
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      d::wino_u8_rows_avx512vnni(
          k.view(), {in.data(), s.in_rows == s.rows ? 0 : -1, s.in_rows, s.w, 0, s.rows, out.data(), s.pool},
          scratch.data());
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    const double tiles =
        static_cast<double>((s.rows + 3) / 4) * ((s.w + 3) / 4 + d::kWinoTiles - 1) / d::kWinoTiles * d::kWinoTiles;
    std::printf("  %-30s median %6.2f ms (min %6.2f)  vpdpwssd: %.1f M\n", s.name, t[t.size() / 2], t[0],
                tiles * 36 * 64 * 64 / 32 / 1e6);
  }
  return 0;
}
