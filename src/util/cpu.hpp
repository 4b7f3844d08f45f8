// Run-time CPU feature detection: kernels are chosen from what the CPU offers, never from -march=native.
#pragma once

#include <string>

namespace superpoint_rt::util {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, amx = false;
  /// AVX-VNNI: vpdpwssd / vpdpbusd on ymm registers without AVX-512 (Intel client CPUs since Alder Lake, Zen 5).
  bool avx_vnni = false;
  /// AVX-512 F+BW+VL+DQ: the level our avx512 kernels need.
  bool avx512() const noexcept { return avx512f && avx512bw && avx512vl && avx512dq; }
  bool avx2_fma() const noexcept { return avx2 && fma; }
};

/// Detected once; SUPERPOINT_RT_ISA caps the level (for tests of every path): `scalar` (no vector kernel),
/// `avx2-novnni` (AVX2 + FMA only, as an AMD Zen 3 or an Intel CPU before Alder Lake), `avx2` (the same plus AVX-VNNI
/// where this CPU has it, as an Alder Lake; no AVX-512 of any kind), `avx512` (no cap).
const CpuFeatures& cpu_features();

/// "avx512f avx512bw ... " for `info`.
std::string cpu_features_string();

/// The units that decide which precision can run fast, as `info` and `bench` print them:
/// "AVX2 yes, FMA yes, AVX-512 no, VNNI no, AVX512-BF16 no, AMX no" (AVX-512 = F+BW+VL+DQ, VNNI = avx512_vnni,
/// AMX = amx_tile). The same detection as the kernels', after the SUPERPOINT_RT_ISA cap.
std::string cpu_units_string();

enum class Isa { Scalar, Avx2, Avx512 };
/// The best level available (after the SUPERPOINT_RT_ISA cap).
Isa best_isa();
const char* to_string(Isa isa) noexcept;

}  // namespace superpoint_rt::util
