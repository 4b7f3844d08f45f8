// oneDNN backend precision modes: the precision names, their CPU requirements, the per-layer plans (default and
// SUPERPOINT_RT_LAYER_PRECISION), determinism of every plan (repeated runs, plans and thread counts give the same
// bits) and fidelity against the fp32 path (golden image, awkward frames). On a CPU without avx512_bf16 (or under
// SUPERPOINT_RT_ISA=avx2|scalar) the bf16 tests assert the InvalidArgument instead of the numbers, and so do the
// int8 tests without AVX2 + FMA; ctest also runs these tests under SUPERPOINT_RT_ISA=avx2 (isa_avx2_backend),
// the AVX2-only int8 path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/onednn/kernel_table.hpp"
#include "backend/onednn/onednn_backend.hpp"
#include "common/test_util.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"
#include "util/npz.hpp"

namespace sp = superpoint_rt;
namespace be = superpoint_rt::backend;

namespace {

const sp::model::Weights& real_weights() {
  static const sp::model::Weights w = sp::model::load_weights_dir(sprt_test::weights_dir());
  return w;
}

std::vector<float> copy_out(const float* p, std::size_t n) {
  return std::vector<float>(p, p + n);
}

// A backend of `precision`, or nullptr after checking that the refusal is the documented one when the CPU (or
// the SUPERPOINT_RT_ISA cap) lacks `feature`.
std::unique_ptr<be::Backend> mode_backend(const std::string& precision, int threads, bool cpu_ok, const char* feature,
                                          std::vector<be::CalibrationPlane> calibration = {}) {
  be::BackendOptions o;
  o.threads = threads;
  o.precision = precision;
  o.calibration = std::move(calibration);
  if (cpu_ok) return be::create_backend("cpu", real_weights(), o);
  try {
    be::create_backend("cpu", real_weights(), o);
    ADD_FAILURE() << precision << " accepted on a CPU without " << feature;
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(feature), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(precision), std::string::npos) << e.what();
  }
  std::cout << "no " << feature << " here: checked the refusal only\n";
  return nullptr;
}

std::unique_ptr<be::Backend> bf16_backend(int threads) {
  return mode_backend("bf16", threads, sp::util::cpu_features().avx512_bf16, "avx512_bf16");
}

std::unique_ptr<be::Backend> int8_backend(int threads, std::vector<be::CalibrationPlane> calibration = {}) {
  return mode_backend("int8", threads, sp::util::cpu_features().avx2_fma(), "AVX2", std::move(calibration));
}

// Sets an environment variable for the lifetime of the object (the backend reads it when it is created).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

struct Outputs {
  std::vector<float> logits, desc;
};

Outputs run_once(be::Backend& b, const std::vector<float>& plane, int h, int w) {
  auto ex = b.plan({h, w});
  ex->run(plane.data(), true);
  const std::size_t cells = static_cast<std::size_t>(h / 8) * (w / 8);
  return {copy_out(ex->logits(), cells * 65), copy_out(ex->descriptors(), cells * 256)};
}

// Differences of a mode against fp32 in the quantities the product uses: the softmax keypoint score (per pixel of
// the 8x8 cells, dustbin dropped) and the cosine of the L2-normalised descriptors.
struct Fidelity {
  double max_score_diff = 0, mean_score_diff = 0, min_desc_cos = 1, mean_desc_cos = 0;
};

Fidelity compare(const Outputs& a, const Outputs& ref, std::size_t cells) {
  Fidelity f;
  double cos_sum = 0;
  for (std::size_t c = 0; c < cells; ++c) {
    auto softmax = [](const float* l, double* p) {
      double mx = l[0];
      for (int k = 1; k < 65; ++k) mx = std::max(mx, static_cast<double>(l[k]));
      double s = 0;
      for (int k = 0; k < 65; ++k) s += std::exp(l[k] - mx);
      for (int k = 0; k < 65; ++k) p[k] = std::exp(l[k] - mx) / s;
    };
    double pa[65], pr[65];
    softmax(a.logits.data() + c * 65, pa);
    softmax(ref.logits.data() + c * 65, pr);
    for (int k = 0; k < 64; ++k) {
      f.max_score_diff = std::max(f.max_score_diff, std::fabs(pa[k] - pr[k]));
      f.mean_score_diff += std::fabs(pa[k] - pr[k]);
    }
    const float* da = a.desc.data() + c * 256;
    const float* dr = ref.desc.data() + c * 256;
    double dot = 0, na = 0, nr = 0;
    for (int k = 0; k < 256; ++k) {
      dot += static_cast<double>(da[k]) * dr[k];
      na += static_cast<double>(da[k]) * da[k];
      nr += static_cast<double>(dr[k]) * dr[k];
    }
    const double cs = dot / std::max(std::sqrt(na * nr), 1e-300);
    f.min_desc_cos = std::min(f.min_desc_cos, cs);
    cos_sum += cs;
  }
  f.mean_desc_cos = cos_sum / static_cast<double>(cells);
  f.mean_score_diff /= 64.0 * static_cast<double>(cells);
  return f;
}

}  // namespace

TEST(Precision, NamesAndRefusals) {
  EXPECT_EQ(be::onednn::parse_precision("fp32"), be::onednn::Precision::Fp32);
  EXPECT_STREQ(be::onednn::to_string(be::onednn::Precision::Bf16), "bf16");
  if (sp::util::cpu_features().avx2_fma()) {
    EXPECT_EQ(be::onednn::parse_precision("int8"), be::onednn::Precision::Int8);
  } else {
    EXPECT_THROW(be::onednn::parse_precision("int8"), sp::Error);
  }
  for (const char* bad : {"int4", "fp16", "", "BF16"}) {
    try {
      be::create_backend("cpu", real_weights(), {1, bad});
      ADD_FAILURE() << "precision \"" << bad << "\" accepted";
    } catch (const sp::Error& e) {
      EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("\"" + std::string(bad) + "\""), std::string::npos) << e.what();
    }
  }
}

// The plan description's entry of one layer: "conv1b:f32:winograd(jit:...)".
std::string layer_entry(const std::string& d, const std::string& label) {
  const auto at = d.find(label + ":");
  EXPECT_NE(at, std::string::npos) << label << " missing from " << d;
  return at == std::string::npos ? "" : d.substr(at, d.find(' ', at) - at);
}

TEST(Precision, LayerPlansAndTheirOverride) {
  using be::onednn::LayerType;
  using be::onednn::Precision;
  const auto fp32 = be::onednn::default_layer_plan(Precision::Fp32);
  EXPECT_EQ(fp32.size(), 12u);
  for (const auto& [l, t] : fp32) EXPECT_EQ(t, LayerType::F32) << l;
  const auto bf16 = be::onednn::default_layer_plan(Precision::Bf16);
  for (const char* l : {"conv1a", "conv1b", "conv2a", "conv2b"}) EXPECT_EQ(bf16.at(l), LayerType::F32) << l;
  EXPECT_EQ(bf16.at("descriptor_b"), LayerType::Bf16);
  // With AMX the rest is bf16; without it every 3x3 layer stays f32 (Winograd is faster than direct bf16 there), and
  // score_b too (the keypoints stay fp32's).
  const LayerType rest = sp::util::cpu_features().amx ? LayerType::Bf16 : LayerType::F32;
  for (const char* l : {"conv3a", "conv3b", "conv4a", "conv4b", "score_a", "descriptor_a", "score_b"})
    EXPECT_EQ(bf16.at(l), rest) << l;
  const auto int8 = be::onednn::default_layer_plan(Precision::Int8);
  // conv1a f32; conv1b f32 on CPUs without AVX-512 (rounding conv1a's output to 8 bits lost a bright photo's faint
  // corners: issue 33), int8 with it; every other layer int8.
  EXPECT_EQ(int8.at("conv1a"), LayerType::F32);
  EXPECT_EQ(int8.at("conv1b"), sp::util::cpu_features().avx512() ? LayerType::Int8 : LayerType::F32);
  for (const char* l : {"conv2a", "conv2b", "conv3a", "conv4b", "score_a", "score_b", "descriptor_b"})
    EXPECT_EQ(int8.at(l), LayerType::Int8) << l;
  EXPECT_EQ(be::onednn::layer_plan(Precision::Int8, "conv1b=int8").at("conv1b"), LayerType::Int8);
  EXPECT_EQ(be::onednn::layer_plan(Precision::Int8, "conv1b=f32").at("conv1b"), LayerType::F32);
  // The override applies in order; conv1a stays f32 whatever it says.
  const auto o = be::onednn::layer_plan(Precision::Int8, "*=bf16,conv2b=int8,conv1a=int8");
  EXPECT_EQ(o.at("conv1b"), LayerType::Bf16);
  EXPECT_EQ(o.at("conv2b"), LayerType::Int8);
  EXPECT_EQ(o.at("conv1a"), LayerType::F32);
  EXPECT_EQ(be::onednn::layer_plan(Precision::Int8, ""), int8);
  for (const char* bad : {"conv9=f32", "conv1b=fp16", "conv1b"}) {
    try {
      be::onednn::layer_plan(Precision::Int8, bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const sp::Error& e) {
      EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument);
      const std::string b = bad;
      EXPECT_NE(std::string(e.what()).find(b.substr(0, b.find('='))), std::string::npos) << e.what();
    }
  }
}

TEST(Precision, Bf16PlanUsesBf16KernelsAndNoReferenceKernel) {
  auto b = bf16_backend(1);
  if (!b) return;
  EXPECT_EQ(b->precision(), "bf16");
  auto ex = b->plan({480, 640});
  const std::string d = ex->plan_description();
  std::cout << "bf16 plan: " << d << "\n";
  EXPECT_EQ(d.find("ref:"), std::string::npos) << "a reference (slow) oneDNN kernel was picked: " << d;
  // conv1b..conv2b stay f32 on Winograd (ours, or oneDNN's where the kernel table says so); the plan's bf16 layers
  // run bf16 kernels (avx512_core_bf16 or amx), direct: oneDNN 2.6 has no bf16 Winograd. Without AMX the other 3x3
  // layers are f32 Winograd too, the 128->256 heads included, and score_b is f32 direct.
  auto f32_winograd = [](const std::string& e) {
    return e.find(":f32:winograd") != std::string::npos || e.find(":f32:wino_f32(ours:") != std::string::npos;
  };
  EXPECT_TRUE(f32_winograd(layer_entry(d, "conv1b"))) << d;
  EXPECT_TRUE(f32_winograd(layer_entry(d, "conv2b"))) << d;
  const bool amx = sp::util::cpu_features().amx;
  for (const auto& [l, one_by_one] : {std::pair{"conv3a", false},
                                      {"conv4b", false},
                                      {"score_a", false},
                                      {"descriptor_a", false},
                                      {"score_b", true},
                                      {"descriptor_b", true}}) {
    const std::string e = layer_entry(d, l);
    if (amx || std::string(l) == "descriptor_b") {
      EXPECT_NE(e.find(":bf16:direct("), std::string::npos) << d;
      EXPECT_NE(e.find("bf16"), std::string::npos) << d;
    } else if (one_by_one) {
      EXPECT_NE(e.find(":f32:direct("), std::string::npos) << d;
    } else {
      EXPECT_TRUE(f32_winograd(e)) << d;
    }
  }
}

void check_bit_identical(const std::function<std::unique_ptr<be::Backend>(int)>& make) {
  // 240x320 and an awkward frame (odd cell counts, flooring pools) keep the test short.
  for (const auto& [h, w] : {std::pair{240, 320}, std::pair{104, 152}}) {
    const auto plane = sprt_test::random_plane(h, w, 5);
    const std::size_t cells = static_cast<std::size_t>(h / 8) * (w / 8);
    auto b1 = make(1);
    if (!b1) return;
    auto ex = b1->plan({h, w});
    ex->run(plane.data(), true);
    const auto l0 = copy_out(ex->logits(), cells * 65), d0 = copy_out(ex->descriptors(), cells * 256);
    for (int r = 0; r < 2; ++r) {
      ex->run(plane.data(), true);
      EXPECT_EQ(0, std::memcmp(l0.data(), ex->logits(), l0.size() * sizeof(float))) << h << "x" << w << " run " << r;
      EXPECT_EQ(0, std::memcmp(d0.data(), ex->descriptors(), d0.size() * sizeof(float))) << h << "x" << w;
    }
    for (int t : {2, 3}) {
      auto bt = make(t);
      const Outputs o = run_once(*bt, plane, h, w);
      EXPECT_EQ(0, std::memcmp(l0.data(), o.logits.data(), l0.size() * sizeof(float))) << t << " threads";
      EXPECT_EQ(0, std::memcmp(d0.data(), o.desc.data(), d0.size() * sizeof(float))) << t << " threads";
    }
    // And it is really the reduced precision: not the fp32 bits (bf16 without AMX keeps fp32's logits, every layer
    // but descriptor_b being f32: its descriptors differ).
    auto f32 = be::create_backend("cpu", real_weights(), {1, "fp32"});
    const Outputs o32 = run_once(*f32, plane, h, w);
    EXPECT_TRUE(std::memcmp(l0.data(), o32.logits.data(), l0.size() * sizeof(float)) != 0 ||
                std::memcmp(d0.data(), o32.desc.data(), d0.size() * sizeof(float)) != 0);
  }
}

TEST(Precision, Bf16IsBitIdenticalAcrossRunsPlansAndThreadCounts) {
  check_bit_identical(bf16_backend);
}

TEST(Precision, Int8IsBitIdenticalAcrossRunsPlansAndThreadCounts) {
  // A small calibration plane keeps the test short (the default calibration runs six 640x480 fp32 forwards).
  check_bit_identical([](int t) { return int8_backend(t, {{64, 96, sprt_test::random_plane(64, 96, 4)}}); });
}

TEST(Precision, MixedInt8PlansAreBitIdenticalAcrossRunsPlansAndThreadCounts) {
  // int8 layers beside bf16 or f32 ones: every conversion between them (bf16 -> u8 reorders, u8 -> bf16 or f32
  // outputs) is deterministic too. bf16 layers only where the CPU has them.
  const bool bf16 = sp::util::cpu_features().avx512_bf16;
  const ScopedEnv plan("SUPERPOINT_RT_LAYER_PRECISION",
                       bf16 ? "conv1b=bf16,conv2a=bf16,conv4a=f32,score_a=bf16" : "conv1b=f32,conv4a=f32");
  check_bit_identical([](int t) { return int8_backend(t, {{64, 96, sprt_test::random_plane(64, 96, 4)}}); });
}

namespace {

// A reduced-precision backend against fp32 on the golden dense input plane of icl_250 (printed for the log).
Fidelity golden_fidelity(be::Backend& b, const char* mode) {
  const auto z = sp::util::load_npz(sprt_test::golden_dir() + "/dense/icl_250.png.npz");
  const auto pv = z.at("pixel_values").as_float();
  EXPECT_EQ(pv.size(), 480u * 640u);
  auto f32 = be::create_backend("cpu", real_weights(), {0, "fp32"});
  const Fidelity f = compare(run_once(b, pv, 480, 640), run_once(*f32, pv, 480, 640), 60 * 80);
  std::cout << mode << " vs fp32 on icl_250: score diff max " << f.max_score_diff << " mean " << f.mean_score_diff
            << ", descriptor cosine min " << f.min_desc_cos << " mean " << f.mean_desc_cos << "\n";
  return f;
}

}  // namespace

TEST(Precision, Bf16StaysCloseToFp32OnTheGoldenImage) {
  auto b = bf16_backend(0);
  if (!b) return;
  const Fidelity f = golden_fidelity(*b, "bf16");
  // Bounds from measurement with margin (bf16 keeps 8 mantissa bits, relative error ~4e-3 per rounding, over 12
  // layers; conv1a stays f32): measured max score diff 0.020, cosine min 0.9992, mean 0.9998 (Xeon, oneDNN
  // 2.6.3). A broken path
  // (wrong layout, unconverted weights) gives score diffs near 1 and cosines near 0.
  EXPECT_LT(f.max_score_diff, 0.1);
  EXPECT_GT(f.min_desc_cos, 0.98);
  EXPECT_GT(f.mean_desc_cos, 0.998);
}

TEST(Precision, Bf16StaysCloseToFp32OnAwkwardFrames) {
  auto b = bf16_backend(2);
  if (!b) return;
  auto f32 = be::create_backend("cpu", real_weights(), {2, "fp32"});
  for (const auto& [h, w] : {std::pair{8, 8}, std::pair{24, 40}, std::pair{56, 88}, std::pair{120, 16}}) {
    const auto plane = sprt_test::random_plane(h, w, static_cast<unsigned>(h * 1000 + w));
    const Outputs r = run_once(*f32, plane, h, w);
    const Outputs o = run_once(*b, plane, h, w);
    const Fidelity f = compare(o, r, static_cast<std::size_t>(h / 8) * (w / 8));
    std::cout << h << "x" << w << ": max score diff " << f.max_score_diff << ", cosine min " << f.min_desc_cos << "\n";
    EXPECT_LT(f.max_score_diff, 0.05) << h << "x" << w;
    EXPECT_GT(f.min_desc_cos, 0.98) << h << "x" << w;
  }
}

TEST(Precision, Int8PlanUsesIntegerKernelsAndNoReferenceKernel) {
  // Both int8 plans: this CPU's default (default_layer_plan: conv1b f32 without AVX-512, else int8) and the other one
  // (SUPERPOINT_RT_LAYER_PRECISION=conv1b=...), each checked by what its conv1b is.
  using be::onednn::LayerType;
  const LayerType here = be::onednn::default_layer_plan(be::onednn::Precision::Int8).at("conv1b");
  for (const LayerType conv1b : {here, here == LayerType::F32 ? LayerType::Int8 : LayerType::F32}) {
    std::unique_ptr<be::Backend> b;
    {
      const ScopedEnv lp("SUPERPOINT_RT_LAYER_PRECISION", conv1b == here             ? ""
                                                          : conv1b == LayerType::F32 ? "conv1b=f32"
                                                                                     : "conv1b=int8");
      b = int8_backend(1);
    }
    if (!b) return;
    EXPECT_EQ(b->precision(), "int8");
    const std::string d = b->plan({480, 640})->plan_description();
    std::cout << "int8 plan" << (conv1b == here ? " (this CPU's)" : "") << ": " << d << "\n";
    EXPECT_EQ(d.find("ref:"), std::string::npos) << "a reference (slow) oneDNN kernel was picked: " << d;
    // Every int8 3x3 layer: the kernel the table chooses on this CPU (kernel_table.hpp, after the SUPERPOINT_RT_ISA
    // cap): our 16-bit Winograd kernel (wino_u8.hpp) where it applies, pools fused; else oneDNN's int8 direct
    // kernels. The 1x1 layers: oneDNN's. What runs where is the table's answer (KernelTable.* tests each row), never
    // re-derived here from the CPU's units.
    const auto& wt = real_weights();
    const be::onednn::KernelCpu cpu = be::onednn::kernel_cpu();
    const be::onednn::KernelChoice k3 =
        be::onednn::choose_kernel({wt.encoder[1].in_channels, wt.encoder[1].out_channels, 3, LayerType::Int8}, cpu);
    const bool wino = k3.kernel == be::onednn::Kernel::WinoU8;
    const std::string kernel = std::string(":int8:wino_u8(ours:") + k3.variant + ")";
    for (const char* l : {"conv2a", "conv2b", "conv3a", "conv3b", "conv4a", "conv4b", "score_a", "descriptor_a"})
      EXPECT_NE(layer_entry(d, l).find(wino ? kernel : ":int8:direct("), std::string::npos) << l << ": " << d;
    for (const char* l : {"score_b", "descriptor_b"})
      EXPECT_NE(layer_entry(d, l).find(":int8:direct("), std::string::npos) << d;
    // Between the kernel's layers (up to conv4b's output) the u8 activations have a scale per channel; the 1x1
    // layers' inputs (score_a's, descriptor_a's outputs) one, as oneDNN reads them.
    for (const char* l : {"conv2a", "conv2b", "conv3a", "conv3b", "conv4a", "conv4b"})
      EXPECT_EQ(layer_entry(d, l).find("+u8_per_channel") != std::string::npos, wino) << l << ": " << d;
    for (const char* l : {"score_a", "descriptor_a"})
      EXPECT_EQ(layer_entry(d, l).find("+u8_per_channel"), std::string::npos) << d;
    for (const char* pool : {"pool2", "pool3"})
      EXPECT_EQ(layer_entry(d, pool).find("in_conv") != std::string::npos, wino) << d;
    EXPECT_EQ(d.find("jit_int8_wino"), std::string::npos) << d;  // oneDNN's 8-bit Winograd costs homography accuracy
    if (conv1b == LayerType::F32) {
      // conv1b f32 (with pool1; on our fp32 Winograd where the table chooses it); its output quantised once for
      // conv2a, per channel where the kernel reads it.
      EXPECT_NE(layer_entry(d, "conv1b").find(":f32:"), std::string::npos) << d;
      EXPECT_NE(layer_entry(d, "conv2a_in").find(wino ? "quantise(u8_per_channel)" : "reorder"), std::string::npos)
          << d;
    } else if (wino) {
      // All-int8: conv1a computes in f32 and writes u8 channels-last itself (conv1a_u8.hpp, the table's kernel for
      // this CPU), which conv1b's kernel reads as it is.
      const be::onednn::KernelChoice k1 =
          be::onednn::choose_kernel({1, wt.encoder[0].out_channels, 3, LayerType::F32, true}, cpu);
      ASSERT_EQ(k1.kernel, be::onednn::Kernel::Conv1aU8);
      EXPECT_NE(d.find(std::string("conv1a:f32:conv1a_u8(ours:") + k1.variant + ")"), std::string::npos) << d;
      for (const char* l : {"conv1a", "conv1b"})
        EXPECT_NE(layer_entry(d, l).find("+u8_per_channel"), std::string::npos) << l << ": " << d;
      EXPECT_NE(layer_entry(d, "conv1b").find(kernel), std::string::npos) << d;
      EXPECT_NE(layer_entry(d, "pool1").find("in_conv1b"), std::string::npos) << d;
      EXPECT_EQ(d.find("reorder"), std::string::npos) << d;
      EXPECT_EQ(d.find("quantise"), std::string::npos) << d;
    }
  }
}

TEST(Precision, Int8WinogradLayersStayCloseToTheDirectKernel) {
  // The same int8 plan on oneDNN's direct kernels (SUPERPOINT_RT_CONV_ALGO=conv1b=direct, which keeps every layer
  // there): the two differ by the weights' rounding only (8-bit codes against 11-13-bit
  // transformed weights), so their outputs agree to about the int8 plan's own distance from fp32 or better.
  const auto& wt = real_weights();
  if (be::onednn::choose_kernel({wt.encoder[1].in_channels, wt.encoder[1].out_channels, 3, be::onednn::LayerType::Int8},
                                be::onednn::kernel_cpu())
          .kernel != be::onednn::Kernel::WinoU8) {
    std::cout << "the kernel table chooses oneDNN's direct kernels here: the same kernels in both\n";
    auto b = int8_backend(1);
    if (b) {
      EXPECT_EQ(b->plan({64, 64})->plan_description().find("wino_u8"), std::string::npos);
    }
    return;
  }
  const auto z = sp::util::load_npz(sprt_test::golden_dir() + "/dense/icl_250.png.npz");
  const auto pv = z.at("pixel_values").as_float();
  auto wino = int8_backend(2);
  std::unique_ptr<be::Backend> direct;
  Outputs od;
  {
    // Read when the backend calibrates (GPTQ's weights for the direct kernels) and when a plan is made.
    const ScopedEnv algo("SUPERPOINT_RT_CONV_ALGO", "conv1b=direct");
    direct = int8_backend(2);
    EXPECT_NE(layer_entry(direct->plan({480, 640})->plan_description(), "conv2a").find(":int8:direct("),
              std::string::npos);
    od = run_once(*direct, pv, 480, 640);
  }
  const Outputs ow = run_once(*wino, pv, 480, 640);
  EXPECT_NE(layer_entry(wino->plan({480, 640})->plan_description(), "conv2a").find("wino_u8"), std::string::npos);
  const Fidelity f1 = compare(ow, od, 60 * 80);
  std::cout << "int8 Winograd layers vs direct on icl_250: score diff max " << f1.max_score_diff << " mean "
            << f1.mean_score_diff << ", descriptor cosine min " << f1.min_desc_cos << " mean " << f1.mean_desc_cos
            << "\n";
  EXPECT_GT(f1.max_score_diff, 0.f) << "the two kernels were the same one";
  EXPECT_LT(f1.max_score_diff, 0.3);
  EXPECT_GT(f1.min_desc_cos, 0.85);
  EXPECT_GT(f1.mean_desc_cos, 0.98);
}

TEST(Precision, Int8CalibrationPercentile) {
  // The default calibration takes the 99.99th percentile of each layer's activations; "max" (the largest value)
  // gives other scales and so other bits, and a bad value is refused by name.
  const std::vector<be::CalibrationPlane> c{{64, 96, sprt_test::random_plane(64, 96, 4)}};
  auto def = int8_backend(1, c);
  if (!def) return;
  const auto plane = sprt_test::random_plane(64, 96, 8);
  const Outputs od = run_once(*def, plane, 64, 96);
  Outputs om;
  {
    const ScopedEnv clip("SUPERPOINT_RT_INT8_CLIP", "max");
    om = run_once(*int8_backend(1, c), plane, 64, 96);
  }
  EXPECT_NE(0, std::memcmp(od.logits.data(), om.logits.data(), od.logits.size() * sizeof(float)));
  {
    const ScopedEnv clip("SUPERPOINT_RT_INT8_CLIP", "p99.99");  // the default, spelled out
    const Outputs o = run_once(*int8_backend(1, c), plane, 64, 96);
    EXPECT_EQ(0, std::memcmp(od.logits.data(), o.logits.data(), od.logits.size() * sizeof(float)));
  }
  const ScopedEnv bad("SUPERPOINT_RT_INT8_CLIP", "p101");
  EXPECT_THROW(int8_backend(1, c), sp::Error);
}

TEST(Precision, Int8CalibrationFromUserPlanes) {
  // Calibrating on a dim plane (max 0.2) gives smaller activation maxima, hence other scales, hence other bits;
  // the same calibration twice gives the same bits (calibration is deterministic too).
  std::vector<be::CalibrationPlane> dim{{96, 128, sprt_test::random_plane(96, 128, 3)}};
  for (auto& v : dim[0].pixels) v *= 0.2f;
  auto a = int8_backend(2, dim);
  if (!a) return;
  auto a2 = int8_backend(2, dim);
  auto d = int8_backend(2);
  const auto plane = sprt_test::random_plane(120, 160, 9);
  const Outputs oa = run_once(*a, plane, 120, 160), oa2 = run_once(*a2, plane, 120, 160);
  const Outputs od = run_once(*d, plane, 120, 160);
  EXPECT_EQ(0, std::memcmp(oa.logits.data(), oa2.logits.data(), oa.logits.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(oa.desc.data(), oa2.desc.data(), oa.desc.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(oa.logits.data(), od.logits.data(), oa.logits.size() * sizeof(float)));
  // A plane whose pixel count does not match its size is refused, naming the size.
  std::vector<be::CalibrationPlane> bad{{48, 64, std::vector<float>(10)}};
  try {
    int8_backend(1, bad);
    ADD_FAILURE() << "bad calibration plane accepted";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("64x48"), std::string::npos) << e.what();
  }
}

TEST(Precision, Int8StaysCloseToFp32OnTheGoldenImage) {
  auto b = int8_backend(0);
  if (!b) return;
  const Fidelity f = golden_fidelity(*b, "int8");
  // Bounds from measurement with margin (default calibration): measured max score diff 0.123, cosine min 0.936,
  // mean 0.990. A wrong scale or bias convention gives score diffs near 1 and cosines far below.
  EXPECT_LT(f.max_score_diff, 0.3);
  EXPECT_GT(f.min_desc_cos, 0.85);
  EXPECT_GT(f.mean_desc_cos, 0.98);
}

TEST(Precision, Int8GptqWeightsAreCloserToFp32ThanNearestRounding) {
  // The int8 layers the keypoints depend on round their weights by GPTQ (backend/onednn/gptq.hpp): on the golden
  // image, the all-int8 plan's scores move less from fp32's than with every weight at its nearest code
  // (SUPERPOINT_RT_INT8_WEIGHTS=nearest, the rounding before). The descriptor head keeps the nearest codes, so the
  // descriptors may only move through the trunk.
  // oneDNN's direct kernels for every layer: the Winograd kernel takes the weights in f32 (read when a plan is made).
  const ScopedEnv direct("SUPERPOINT_RT_CONV_ALGO", "conv1b=direct");
  std::unique_ptr<be::Backend> g, n;
  {
    const ScopedEnv all("SUPERPOINT_RT_LAYER_PRECISION", "*=int8");  // the backends read it when created
    g = int8_backend(0);
    if (!g) return;
    const ScopedEnv nearest("SUPERPOINT_RT_INT8_WEIGHTS", "nearest");
    n = int8_backend(0);
  }
  const Fidelity fg = golden_fidelity(*g, "all-int8 (GPTQ)"), fn = golden_fidelity(*n, "all-int8 (nearest)");
  EXPECT_LT(fg.mean_score_diff, fn.mean_score_diff);
  EXPECT_GT(fg.mean_desc_cos, fn.mean_desc_cos);
  const ScopedEnv bad("SUPERPOINT_RT_INT8_WEIGHTS", "rounded");
  EXPECT_THROW(int8_backend(1), sp::Error);
}
