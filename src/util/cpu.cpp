#include "util/cpu.hpp"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace superpoint_rt::util {
namespace {

bool os_saves_zmm() {
  // XGETBV: the OS must save the AVX-512 state (opmask, ZMM hi256, hi16 ZMM) and the AVX state.
  unsigned int eax = 0, edx = 0;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (eax & 0xE6u) == 0xE6u;
}

bool os_saves_ymm() {
  unsigned int eax = 0, edx = 0;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (eax & 0x6u) == 0x6u;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned int a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1u;
  const bool ymm = osxsave && os_saves_ymm();
  const bool zmm = osxsave && os_saves_zmm();
  f.fma = ymm && ((c >> 12) & 1u);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = ymm && ((b >> 5) & 1u);
  f.avx512f = zmm && ((b >> 16) & 1u);
  f.avx512dq = zmm && ((b >> 17) & 1u);
  f.avx512bw = zmm && ((b >> 30) & 1u);
  f.avx512vl = zmm && ((b >> 31) & 1u);
  f.avx512_vnni = zmm && ((c >> 11) & 1u);
  f.amx = (d >> 24) & 1u;  // AMX-TILE (the OS permission is requested separately by the compute library)
  unsigned int a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
    f.avx_vnni = ymm && ((a1 >> 4) & 1u);
    f.avx512_bf16 = zmm && ((a1 >> 5) & 1u);
  }

  // SUPERPOINT_RT_ISA caps the level so that tests and benchmarks can exercise every kernel on one machine.
  if (const char* cap = std::getenv("SUPERPOINT_RT_ISA")) {
    if (std::strcmp(cap, "scalar") == 0) {
      f = CpuFeatures{};
    } else if (std::strcmp(cap, "avx2") == 0 || std::strcmp(cap, "avx2-novnni") == 0) {
      f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_bf16 = f.avx512_vnni = f.amx = false;
      if (cap[4] == '-') f.avx_vnni = false;
    }
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

Isa best_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512()) return Isa::Avx512;
  if (f.avx2_fma()) return Isa::Avx2;
  return Isa::Scalar;
}

const char* to_string(Isa isa) noexcept {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Scalar: return "scalar";
  }
  return "scalar";
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx_vnni, "avx_vnni");
  add(f.amx, "amx");
  return s.empty() ? "baseline x86-64" : s;
}

std::string cpu_units_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](const char* name, bool on) {
    if (!s.empty()) s += ", ";
    s += name;
    s += on ? " yes" : " no";
  };
  add("AVX2", f.avx2);
  add("FMA", f.fma);
  add("AVX-512", f.avx512());
  add("VNNI", f.avx512_vnni);
  add("AVX512-BF16", f.avx512_bf16);
  add("AMX", f.amx);
  return s;
}

}  // namespace superpoint_rt::util
