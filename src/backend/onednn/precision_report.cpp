// precisions_on_this_cpu() / fastest_precision_on_this_cpu() (superpoint.hpp): what each precision of the oneDNN
// backend gives on this kind of CPU. Whether a precision runs comes from parse_precision (the one rule); the speed
// and quality figures are measurements, by CPU kind, from docs/BENCHMARKS.md ("Choosing a precision"), where each is
// reproduced by a command. A kind no session has measured says "expected" and why.
#include <cmath>
#include <string>
#include <vector>

#include "backend/onednn/kernel_table.hpp"
#include "backend/onednn/onednn_backend.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt {
namespace {

// The quality figures of the homography protocol against fp32 on the same images (bench/quality.py --pairs 440
// --ransac-seeds 10, AMD Zen 4, int8 2026-12-04, bf16 --pairs 880 2026-12-05; docs/BENCHMARKS.md): top-500 keypoint
// F1 at 2 px (mean / worst image), the largest difference of MMA@1-5, repeatability and matching score, and of
// homography accuracy@1-5 (points out of 100; the paired standard error of HA's differences is 0.15-0.9 point at
// these sizes, quality.py prints it). bf16: the plan without AMX (every 3x3 layer f32 Winograd, score_b f32,
// descriptor_b bf16): the keypoints are fp32's.
constexpr const char* kQualityBf16 =
    "F1@2 1.0000 / 1.0000; MMA, rep, MS within 0.01 pt; HA within 0.41 pt (880 pairs x 10 RANSAC draws)";
// The int8 plans with the six built-in calibration planes (default_layer_plan). Without AMX every 3x3 int8 layer runs
// on our 16-bit Winograd kernel with a u8 scale per channel between those layers (wino_u8.hpp; its AVX-512 VNNI,
// AVX-VNNI and AVX2 forms give the same bits). With AVX-512 the plan is all-int8 but conv1a: AVX-512 VNNI on Zen 4,
// seed 0, 2026-12-05 12:30 UTC; a second draw (seed 1, the same bits capped to AVX2, 2026-12-06 07:40 UTC) had one
// view at 0.8768 (HA@1 +1.18, HA@3 0.00). Without AVX-512 conv1b is f32 too (on our fp32 Winograd): measured on an
// Intel Xeon with CPUID capped to AVX2 (scripts/as-cpu.sh avx2-novnni), seeds 0 and 1, 2026-12-06 10:35-10:43 UTC
// (issue 33): F1@2 0.9817 / 0.9511 and 0.9817 / 0.9481, HA@3 +0.48 (paired s.e. 0.69) and -1.36 (0.72).
constexpr const char* kQualityInt8AllWinograd =
    "F1@2 0.9731 / 0.9158 (a second draw: 0.9735 / 0.8768); MMA, rep, MS within 0.24 pt; HA within 1.18 pt (2 x 440 "
    "pairs x 10 RANSAC draws)";
constexpr const char* kQualityInt8Conv1bF32 =
    "F1@2 0.9817 / 0.9481; MMA, rep, MS within 0.24 pt; HA within 1.36 pt (2 x 440 pairs x 10 RANSAC draws; HA@3 "
    "-0.44 over both)";
// With AMX, oneDNN's int8 kernels with GPTQ's weights (capped to AVX2, 2026-12-04; no AMX machine measured).
constexpr const char* kQualityInt8Direct =
    "F1@2 0.9742 / 0.9063; MMA, rep, MS within 0.34 pt; HA within 0.50 pt (440 pairs x 10 RANSAC draws)";

// The kernel table's choice for the int8 plan's 3x3 layers (kernel_table.hpp), from the units alone: oneDNN is not
// asked (this runs before a backend applies SUPERPOINT_RT_ISA's cap to oneDNN's JIT, which must come first).
backend::onednn::KernelChoice int8_kernel(const util::CpuFeatures& f) {
  backend::onednn::KernelCpu c;
  c.avx2_fma = f.avx2_fma();
  c.avx512 = f.avx512();
  c.avx512_vnni = f.avx512() && f.avx512_vnni;
  c.avx_vnni = f.avx2_fma() && f.avx_vnni;
  c.amx = f.amx;
  return backend::onednn::choose_kernel({64, 64, 3, backend::onednn::LayerType::Int8, false}, c);
}

bool int8_winograd(const util::CpuFeatures& f) {
  return int8_kernel(f).kernel == backend::onednn::Kernel::WinoU8;
}

struct Speed {
  double time_vs_fp32;
  bool measured;
  const char* basis;
};

// Forward time / fp32's on the kind of CPU `f` is, per precision (fp32 is 1 by definition): the CPU time of
// `bench_forward --threads 2 --precision fp32,int8,bf16` with the plans interleaved, fp32 on our F(4x4,3x3) Winograd
// (docs/BENCHMARKS.md, 2026-12-06 10:43 UTC, issue 33; an Intel Xeon model 207, uncapped and with CPUID capped by
// scripts/as-cpu.sh; the machine shared with other work: +-10 %).
Speed speed_of(const std::string& precision, const util::CpuFeatures& f) {
  if (precision == "bf16") {
    if (f.amx) return {0.74, false, "expected: AMX, from the plan's f32 share (issue 12's simulation estimate)"};
    return {1.07, true,
            "measured: Intel Xeon, AVX-512 BF16 without AMX, the 3x3 layers in f32 Winograd (fp32's kernels) and "
            "descriptor_b in bf16: no faster than fp32"};
  }
  if (f.amx) return {0.15, false, "expected: AMX, all-int8 at issue 12's 7x the f32 rate"};
  const std::string variant = int8_kernel(f).variant;
  if (variant == "avx512_vnni")
    return {0.63, true, "measured: Intel Xeon, AVX-512 VNNI, 16-bit Winograd, against fp32's Winograd"};
  // AVX-512 without VNNI (Skylake-SP): the all-int8 plan (default_layer_plan) on the 256-bit kernel.
  if (f.avx512() && int8_winograd(f))
    return {0.69, false,
            "expected: AVX-512 without VNNI, the all-int8 plan on the 256-bit 16-bit Winograd (0.69x measured for "
            "that plan capped to AVX2; fp32's Winograd here is AVX-512's)"};
  if (variant == "avx_vnni")
    return {0.77, true,
            "measured: Intel Xeon with CPUID capped to AVX2 + AVX-VNNI, conv1b on fp32 Winograd and the rest on "
            "16-bit Winograd on vpdpwssd ymm, against fp32's Winograd"};
  if (variant == "avx2")
    return {0.85, true,
            "measured: Intel Xeon with CPUID capped to AVX2, conv1b on fp32 Winograd and the rest on 16-bit Winograd "
            "on vpmaddwd, against fp32's Winograd"};
  return {0.9, false, "expected: oneDNN's u8 x s8 direct kernels (not measured)"};
}
}  // namespace

std::vector<PrecisionReport> precisions_on_this_cpu() {
  const util::CpuFeatures& f = util::cpu_features();
  std::vector<PrecisionReport> out;
  for (const char* name : {"fp32", "bf16", "int8"}) {
    PrecisionReport r;
    r.precision = name;
    try {
      (void)backend::onednn::parse_precision(name);
      r.runs = true;
    } catch (const Error& e) {
      r.basis = e.what();  // names the missing unit
    }
    if (r.precision == "fp32") {
      r.time_vs_fp32 = 1;
      r.measured = true;
      r.basis = "the exact path";
      r.quality = "exact: bit-identical with the PyTorch reference";
    } else if (r.runs) {
      const Speed s = speed_of(r.precision, f);
      r.time_vs_fp32 = s.time_vs_fp32;
      r.measured = s.measured;
      r.basis = s.basis;
      r.quality = r.precision == "bf16" ? kQualityBf16
                  : !int8_winograd(f)   ? kQualityInt8Direct
                  : f.avx512()          ? kQualityInt8AllWinograd
                                        : kQualityInt8Conv1bF32;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string fastest_precision_on_this_cpu() {
  std::string best = "fp32";
  double best_time = 1;
  for (const PrecisionReport& r : precisions_on_this_cpu())
    if (r.runs && r.time_vs_fp32 > 0 && r.time_vs_fp32 < best_time) {
      best = r.precision;
      best_time = r.time_vs_fp32;
    }
  return best;
}

}  // namespace superpoint_rt
