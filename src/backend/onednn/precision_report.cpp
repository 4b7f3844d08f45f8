// precisions_on_this_cpu() / fastest_precision_on_this_cpu() (superpoint.hpp): what each precision of the oneDNN
// backend gives on this kind of CPU. Whether a precision runs comes from parse_precision (the one rule); the speed
// and quality figures are measurements, by CPU kind, from docs/BENCHMARKS.md ("Choosing a precision"), where each is
// reproduced by a command. A kind no session has measured says "expected" and why.
#include <cmath>
#include <string>
#include <vector>

#include "backend/onednn/onednn_backend.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt {
namespace {

// The quality figures of the homography protocol (bench/quality.py, 132 pairs, 10 RANSAC seeds) against fp32 on the
// same images: top-500 keypoint F1 at 2 px (mean / worst image) and the largest difference of homography accuracy,
// MMA, repeatability and matching score (points out of 100). The plans are the same on every CPU that runs them,
// except int8 without VNNI (7-bit weights, see onednn_backend.hpp).
constexpr const char* kQualityBf16 = "F1@2 0.9963 / 0.9878; HA, MMA, rep, MS within 0.3 pt (AVX-512 BF16, 2026-12-04)";
constexpr const char* kQualityInt8 = "F1@2 0.975 / 0.94; HA, MMA, rep, MS within 1 pt (AVX-512 VNNI, 2026-12-04)";
constexpr const char* kQualityInt8NoVnni = "F1@2 0.97 / 0.92; HA, MMA, rep, MS within 1 pt (AVX2, 2026-12-04)";

struct Speed {
  double time_vs_fp32;
  bool measured;
  const char* basis;
};

// Forward time / fp32's on the kind of CPU `f` is, per precision (fp32 is 1 by definition).
Speed speed_of(const std::string& precision, const util::CpuFeatures& f) {
  if (precision == "bf16") {
    if (f.amx) return {0.33, false, "expected: AMX Xeon of issue 12, all-bf16 plan 0.23x / fp32 0.70x ONNX Runtime"};
    return {1.0, true, "measured: AMD Zen 4, AVX-512 BF16 without AMX"};
  }
  if (f.amx) return {0.14, false, "expected: AMX Xeon of issue 12, all-int8 plan 0.10x / fp32 0.70x ONNX Runtime"};
  if (f.avx512() && f.avx512_vnni) return {0.5, true, "measured: AMD Zen 4, AVX-512 VNNI"};
  if (f.avx512()) return {0.8, false, "expected: AVX-512 without VNNI runs u8 x s8 in three instructions"};
  return {0.6, true, "measured: AMD Zen 4 capped to AVX2 (SUPERPOINT_RT_ISA=avx2)"};
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
      r.quality = r.precision == "bf16" ? kQualityBf16 : f.avx512_vnni || f.amx ? kQualityInt8 : kQualityInt8NoVnni;
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
