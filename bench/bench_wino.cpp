// bench_wino: one thread's time for our Winograd kernels on the shapes the 640x480 plan gives them, median of the runs.
//   fp32 (src/backend/onednn/wino_f32.hpp), every kernel this CPU has (after SUPERPOINT_RT_ISA): every 3x3 layer after
//   conv1a (a conv1b stripe: 62 x 640 rows in, 60 rows out, pooled), nChw8c / nChw16c as the plan lays them out, and
//   the multiply-adds of the transformed products per second of the thread's CPU time (36 x in x out per 4x4 tile;
//   a core's FMA peak is 2 x 8 (AVX2) or 2 x 16 (AVX-512) per cycle).
//   int8 (src/backend/onednn/wino_u8.hpp), every kernel this CPU has (AVX-512 VNNI, AVX-VNNI, AVX2): a conv1b stripe,
//   conv2a (240 x 320, unpooled) and conv2b (240 x 320, pooled), 64 -> 64 channels, and the multiply instructions
//   (vpdpwssd / vpmaddwd: 36 x 64 x 64 / (2 x lanes) per 4x4 tile).
//   bench_wino [runs, default 30] [fp32|int8, default both]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "backend/onednn/wino_f32.hpp"
#include "backend/onednn/wino_u8.hpp"
#include "util/cpu.hpp"

namespace d = superpoint_rt::backend::detail;

namespace {

// This thread's CPU time: on a machine shared with other work the wall time of a one-thread kernel measures the
// machine's load as much as the kernel.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

void bench_f32(int runs) {
  const auto& f = superpoint_rt::util::cpu_features();
  struct Kernel {
    const char* name;
    d::WinoF32Kernel fn;
    int oc_block, block;
  };
  std::vector<Kernel> kernels;
  if (f.avx2_fma()) kernels.push_back({"avx2", d::wino_f32_rows_avx2, d::kWinoF32OcBlockAvx2, 8});
  if (f.avx512()) kernels.push_back({"avx512", d::wino_f32_rows_avx512, d::kWinoF32OcBlockAvx512, 16});
  if (kernels.empty()) std::printf("bench_wino fp32: no vector kernel on this CPU\n");
  struct Shape {
    const char* name;
    int in_rows, w, rows, ic, oc;
    bool pool;
  };
  const Shape shapes[] = {{"conv1b stripe 60x640 + pool", 62, 640, 60, 64, 64, true},
                          {"conv2a 240x320", 240, 320, 240, 64, 64, false},
                          {"conv2b 240x320 + pool", 240, 320, 240, 64, 64, true},
                          {"conv3a 120x160 64->128", 120, 160, 120, 64, 128, false},
                          {"conv3b 120x160 + pool", 120, 160, 120, 128, 128, true},
                          {"conv4a 60x80 128->128", 60, 80, 60, 128, 128, false},
                          {"score_a 60x80 128->256", 60, 80, 60, 128, 256, false}};
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.f, 0.05f);
  std::uniform_real_distribution<float> u(0.f, 2.f);
  for (const Kernel& kern : kernels) {
    std::printf("fp32 Winograd F(4x4,3x3), %s, one thread:\n", kern.name);
    double total = 0;
    for (const Shape& s : shapes) {
      std::vector<float> weight(static_cast<std::size_t>(s.oc) * s.ic * 9), bias(static_cast<std::size_t>(s.oc));
      for (auto& v : weight) v = n(rng);
      for (auto& v : bias) v = n(rng);
      const d::WinoF32 k = d::wino_f32_prepare(weight.data(), bias.data(), s.ic, s.oc, kern.oc_block);
      const std::size_t in_piece = static_cast<std::size_t>(s.in_rows) * s.w * kern.block;
      std::vector<float> in(in_piece * static_cast<std::size_t>(s.ic / kern.block));
      for (auto& v : in) v = u(rng) < 0.8f ? 0.f : u(rng);
      const int oh = s.pool ? s.rows / 2 : s.rows, ow = s.pool ? s.w / 2 : s.w;
      const std::size_t out_piece = static_cast<std::size_t>(oh) * ow * kern.block;
      std::vector<float> out(out_piece * static_cast<std::size_t>(s.oc / kern.block));
      std::vector<unsigned char> scratch(d::wino_f32_scratch_bytes(s.ic, s.oc));
      d::WinoF32Rows r;
      r.in = {in.data(), kern.block, in_piece, static_cast<std::size_t>(s.w) * kern.block};
      r.in_row0 = s.in_rows == s.rows ? 0 : -1;
      r.in_rows = s.in_rows;
      r.w = s.w;
      r.y1 = s.rows;
      r.out = {out.data(), kern.block, out_piece, static_cast<std::size_t>(ow) * kern.block};
      r.pool = s.pool;
      std::vector<double> t, cpu;
      for (int i = 0; i < runs; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = thread_cpu_ms();
        kern.fn(k.view(), r, scratch.data());
        cpu.push_back(thread_cpu_ms() - c0);
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(t.begin(), t.end());
      std::sort(cpu.begin(), cpu.end());
      const double tiles = static_cast<double>((s.rows + 3) / 4) * ((s.w + 3) / 4);
      const double med = cpu[cpu.size() / 2];
      total += med;
      std::printf("  %-30s CPU median %7.2f ms (wall median %7.2f)  %5.1f G multiply-adds/s in the products\n", s.name,
                  med, t[t.size() / 2], tiles * 36 * s.ic * s.oc / med / 1e6);
    }
    std::printf("  (sum of the CPU medians %.2f ms)\n", total);
  }
}

void bench_u8(int runs) {
  const auto& f = superpoint_rt::util::cpu_features();
  struct Kernel {
    const char* name;
    d::WinoU8Kernel fn;
    int lanes;  // int32 lanes of one multiply instruction
  };
  std::vector<Kernel> kernels;
  if (f.avx512() && f.avx512_vnni) kernels.push_back({"AVX-512 VNNI (vpdpwssd zmm)", d::wino_u8_rows_avx512vnni, 16});
  if (f.avx2_fma() && f.avx_vnni) kernels.push_back({"AVX-VNNI (vpdpwssd ymm)", d::wino_u8_rows_avxvnni, 8});
  if (f.avx2_fma()) kernels.push_back({"AVX2 (vpmaddwd + vpaddd ymm)", d::wino_u8_rows_avx2, 8});
  if (kernels.empty()) std::printf("bench_wino int8: no vector kernel on this CPU\n");
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
  for (const Kernel& kern : kernels) {
    std::printf("int8 Winograd F(4x4,3x3) s16, %s, one thread:\n", kern.name);
    for (const Shape& s :
         {Shape{"conv1b stripe 60x640 + pool", 62, 640, 60, true}, Shape{"conv2a 240x320", 240, 320, 240, false},
          Shape{"conv2b 240x320 + pool", 240, 320, 240, true}}) {
      std::vector<std::uint8_t> in(static_cast<std::size_t>(s.in_rows) * s.w * 64), out(in.size());
      std::uniform_int_distribution<int> u(0, 255);
      for (auto& v : in) v = static_cast<std::uint8_t>(u(rng) < 100 ? 0 : u(rng));
      std::vector<double> t, cpu;
      for (int r = 0; r < runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = thread_cpu_ms();
        kern.fn(k.view(), {in.data(), s.in_rows == s.rows ? 0 : -1, s.in_rows, s.w, 0, s.rows, out.data(), s.pool},
                scratch.data());
        cpu.push_back(thread_cpu_ms() - c0);
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(t.begin(), t.end());
      std::sort(cpu.begin(), cpu.end());
      const double tiles =
          static_cast<double>((s.rows + 3) / 4) * ((s.w + 3) / 4 + d::kWinoTiles - 1) / d::kWinoTiles * d::kWinoTiles;
      std::printf("  %-30s CPU median %6.2f ms (wall median %6.2f)  multiply instructions: %.1f M\n", s.name,
                  cpu[cpu.size() / 2], t[t.size() / 2], tiles * 36 * 64 * 64 / (2 * kern.lanes) / 1e6);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 30;
  const std::string which = argc > 2 ? argv[2] : "";
  if (which.empty() || which == "fp32") bench_f32(runs);
  if (which.empty() || which == "int8") bench_u8(runs);
  return 0;
}
