// bench_isa: peak instruction throughput of the multiply-accumulate instructions the precision modes rely on, on
// one thread: f32 FMA (vfmadd231ps zmm, 32 flop), bf16 dot product (vdpbf16ps zmm, 64 flop) and u8 x s8 dot product
// (vpdpbusd zmm, 128 int ops) and s16 x s16 dot product (vpdpwssd zmm, 64 int ops: the int8 plan's Winograd layers,
// src/backend/onednn/wino_u8.hpp), each in 12 independent accumulator chains so that latency does not limit it.
// Whether bf16 / int8 can beat fp32 at all depends on these rates (the fp32 path also has Winograd, which
// removes ~2-4x of its multiplies).
//   bench_isa [iterations in millions, default 100]
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "util/cpu.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

__attribute__((target("avx512f"))) double fma_f32(long n, float* sink) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.5f), y = _mm512_set1_ps(0.25f);
  const auto t0 = Clock::now();
  for (long k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
  const double s = seconds_since(t0);
  for (int i = 1; i < 12; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, a[0]);
  *sink = lanes[0];
  return s;
}

__attribute__((target("avx512f,avx512bf16"))) double dp_bf16(long n, float* sink) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_setzero_ps();
  const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f00));  // 0.5
  const auto t0 = Clock::now();
  for (long k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, x);
  const double s = seconds_since(t0);
  for (int i = 1; i < 12; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, a[0]);
  *sink = lanes[0];
  return s;
}

__attribute__((target("avx512f,avx512vnni"))) double dp_u8s8(long n, int* sink) {
  __m512i a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_setzero_si512();
  const __m512i x = _mm512_set1_epi8(1);
  const auto t0 = Clock::now();
  for (long k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbusd_epi32(a[i], x, x);
  const double s = seconds_since(t0);
  for (int i = 1; i < 12; ++i) a[0] = _mm512_add_epi32(a[0], a[i]);
  alignas(64) int lanes[16];
  _mm512_store_si512(lanes, a[0]);
  *sink = lanes[0];
  return s;
}

__attribute__((target("avx512f,avx512vnni"))) double dp_s16(long n, int* sink) {
  __m512i a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_setzero_si512();
  const __m512i x = _mm512_set1_epi16(1);
  const auto t0 = Clock::now();
  for (long k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpwssd_epi32(a[i], x, x);
  const double s = seconds_since(t0);
  for (int i = 1; i < 12; ++i) a[0] = _mm512_add_epi32(a[0], a[i]);
  alignas(64) int lanes[16];
  _mm512_store_si512(lanes, a[0]);
  *sink += lanes[0];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const long n = (argc > 1 ? std::atol(argv[1]) : 100) * 1000000L / 12;
  const auto& f = superpoint_rt::util::cpu_features();
  if (!f.avx512f) {
    std::printf("bench_isa: no AVX-512 on this CPU\n");
    return 0;
  }
  float fs = 0;
  int is = 0;
  const double instr = 12.0 * static_cast<double>(n);
  const double t_fma = fma_f32(n, &fs);
  std::printf("  %-34s %6.2f G instr/s  %7.1f GFLOP/s\n", "vfmadd231ps zmm (f32 FMA)", instr / t_fma / 1e9,
              instr / t_fma / 1e9 * 32);
  if (f.avx512_bf16) {
    const double t = dp_bf16(n, &fs);
    std::printf("  %-34s %6.2f G instr/s  %7.1f GFLOP/s  (%.2fx f32 FMA)\n", "vdpbf16ps zmm (bf16 dot)",
                instr / t / 1e9, instr / t / 1e9 * 64, t_fma / t * 2);
  }
  if (f.avx512_vnni) {
    const double t = dp_u8s8(n, &is);
    std::printf("  %-34s %6.2f G instr/s  %7.1f GOP/s    (%.2fx f32 FMA)\n", "vpdpbusd zmm (u8 x s8 dot)",
                instr / t / 1e9, instr / t / 1e9 * 128, t_fma / t * 4);
    const double t16 = dp_s16(n, &is);
    std::printf("  %-34s %6.2f G instr/s  %7.1f GOP/s    (%.2fx f32 FMA)\n", "vpdpwssd zmm (s16 x s16 dot)",
                instr / t16 / 1e9, instr / t16 / 1e9 * 64, t_fma / t16 * 2);
  }
  std::printf("  (checksums %g %d)\n", static_cast<double>(fs), is);
  return 0;
}
