// The oneDNN backend (the Backend of backend.hpp): precision, layer plans, int8 calibration; its plans are
// OneDnnExecutor (executor.hpp). See onednn_backend.hpp.
#include "backend/onednn/onednn_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backend/onednn/calibration.hpp"
#include "backend/onednn/executor.hpp"
#include "backend/onednn/gptq.hpp"
#include "backend/workspace.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::backend::onednn {
namespace {

// SUPERPOINT_RT_ISA caps our own kernels; apply the same cap to oneDNN's JIT so that "avx2" really exercises an
// AVX2-only process. oneDNN only accepts this before its first JIT use, hence once per process.
void apply_isa_cap_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* cap = std::getenv("SUPERPOINT_RT_ISA");
    if (!cap || !*cap) return;
    const util::Isa isa = util::best_isa();
    try {
      if (isa == util::Isa::Avx2) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
      if (isa == util::Isa::Scalar) dnnl::set_max_cpu_isa(dnnl::cpu_isa::sse41);  // oneDNN's lowest JIT level
    } catch (const dnnl::error&) {
      // Too late (oneDNN already dispatched): keep its default.
    }
  });
}

// oneDNN's primitive cache (1024 primitives by default) would keep the JIT code of every frame size ever planned: our
// plans own their primitives, so the cache only grows the process with the number of sizes (issue 19: a server
// whose requests change frame measured ~30 MB more after 6 x 15 s of random frames, still rising, 0 with no cache).
// Off unless ONEDNN_PRIMITIVE_CACHE_CAPACITY says otherwise; a frame planned again is then JIT-compiled again
// (`superpoint-rt bench` reports that time: plan ms).
void primitive_cache_off_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY")) return;
    try {
      dnnl::set_primitive_cache_capacity(0);
    } catch (const dnnl::error&) {
    }
  });
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : omp_get_num_procs();
}

// SUPERPOINT_RT_INT8_CLIP (experiments): "max" or "pP" (0 < P <= 100), the calibration percentile; default
// kDefaultClip.
constexpr double kDefaultClip = 99.99;
double clip_percentile(const char* env) {
  if (!env || !*env) return kDefaultClip;
  const std::string v = env;
  if (v == "max") return 100;
  char* end = nullptr;
  const double p = v.size() > 1 && v[0] == 'p' ? std::strtod(v.c_str() + 1, &end) : 0;
  if (!end || *end || !(p > 0 && p <= 100))
    throw Error(ErrorKind::InvalidArgument, "SUPERPOINT_RT_INT8_CLIP=\"" + v + "\" is not max or pP (0 < P <= 100)");
  return p;
}

// SUPERPOINT_RT_INT8_WEIGHTS (experiments): "gptq" (the default) or "nearest", how int8 layers round their weights.
bool int8_weight_rounding(const char* env) {
  if (!env || !*env || std::string(env) == "gptq") return true;
  if (std::string(env) == "nearest") return false;
  throw Error(ErrorKind::InvalidArgument,
              std::string("SUPERPOINT_RT_INT8_WEIGHTS=\"") + env + "\" is not gptq or nearest");
}

class OneDnnBackend final : public Backend {
 public:
  OneDnnBackend(const model::Weights& w, const BackendOptions& o)
      : weights_(w), threads_(resolve_threads(o.threads)), precision_(parse_precision(o.precision)) {
    if (o.threads < 0) {
      throw Error(ErrorKind::InvalidArgument,
                  "threads = " + std::to_string(o.threads) + " is out of range (0 = all cores, or >= 1)");
    }
    apply_isa_cap_once();
    primitive_cache_off_once();
    try {
      eng_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      internal("engine creation", e);
    }
    plan_ = layer_plan(precision_, std::getenv("SUPERPOINT_RT_LAYER_PRECISION"));
    int8_ = std::any_of(plan_.begin(), plan_.end(), [](const auto& e) { return e.second == LayerType::Int8; });
    if (int8_) {
      stream_ = dnnl::stream(eng_);
      calibrate(o.calibration, clip_percentile(std::getenv("SUPERPOINT_RT_INT8_CLIP")),
                int8_weight_rounding(std::getenv("SUPERPOINT_RT_INT8_WEIGHTS")));
    }
  }
  std::string name() const override { return "onednn"; }
  std::string device() const override { return "cpu"; }
  std::string precision() const override { return to_string(precision_); }
  int threads() const override { return threads_; }
  std::size_t workspace_bytes() const override {
    std::size_t total = 0;
    for (const auto& w : workspaces_) total += w->mapped_bytes();
    return total;
  }
  std::size_t weights_bytes() const override { return weight_cache_->bytes(); }
  std::unique_ptr<Executor> plan(const PlanOptions& options) override {
    if (options.threads < 0 || options.threads > threads_)
      throw Error(ErrorKind::InvalidArgument, "plan threads = " + std::to_string(options.threads) +
                                                  " is out of range (0 = the backend's " + std::to_string(threads_) +
                                                  ", or 1.." + std::to_string(threads_) + ")");
    if (options.slot < 0 || options.slot >= kWorkspaceSlots)
      throw Error(ErrorKind::InvalidArgument, "plan slot = " + std::to_string(options.slot) + " is out of range (0.." +
                                                  std::to_string(kWorkspaceSlots - 1) + ")");
    return std::make_unique<OneDnnExecutor>(weights_, options, options.threads ? options.threads : threads_, plan_,
                                            eng_, workspaces_[static_cast<std::size_t>(options.slot)], weight_cache_,
                                            int8_ ? &act_max_ : nullptr, nullptr, 100,
                                            int8_ ? &int8_weights_ : nullptr);
  }

 private:
  // int8: per layer, the largest over the calibration planes of the `clip` percentile of the fp32 network's
  // activations (a plain unstriped fp32 plan per plane size, run once per plane); default_calibration_planes() when
  // none are given. With `gptq`, the same pass sums each int8 layer's input Hessian (its producer's output, pooled
  // where the network pools, every hessian_stride()-th row and column) and the layer's s8 weights are GPTQ's
  // (gptq.hpp), else the nearest codes.
  void calibrate(const std::vector<CalibrationPlane>& given, double clip, bool gptq) {
    const std::vector<CalibrationPlane> planes = given.empty() ? default_calibration_planes() : given;
    // The layers GPTQ rounds, by producer: the int8 layers the keypoints depend on (the trunk and the score head).
    // The descriptor head keeps the nearest codes: with GPTQ there (Hessians from the synthetic calibration planes),
    // the all-int8 plan's descriptor cosine against fp32 fell from 0.9989 to 0.9867 on bench/quality.py's 44 pairs,
    // for no gain in keypoints.
    std::map<std::string, std::vector<std::string>> readers;
    for (const auto& [producer, layers] : consumers())
      for (const std::string& l : layers)
        if (plan_.at(l) == LayerType::Int8 && l != "descriptor_a" && l != "descriptor_b" &&
            !winograd_expected(l, conv_of(l), std::getenv("SUPERPOINT_RT_CONV_ALGO")))
          readers[producer].push_back(l);
    std::map<std::string, std::vector<float>> hessian;  // by producer
    std::vector<float> plain;
    OutputTap tap;
    if (gptq)
      tap = [&](const char* label, const memory& out) {
        const auto it = readers.find(label);
        if (it == readers.end()) return;
        const model::Conv& c = conv_of(it->second.front());
        const memory::dims d = out.get_desc().dims();
        std::optional<detail::ActivationView> v = view_of(out);
        if (!v) {  // another layout: a planar copy
          const memory::desc plain_md(d, dt::f32, tag::nchw);
          plain.resize(plain_md.get_size() / sizeof(float));
          memory pm(plain_md, eng_, plain.data());
          dnnl::reorder(out, pm).execute(stream_, const_cast<memory&>(out), pm);
          stream_.wait();
          v = detail::ActivationView::planar(plain.data(), static_cast<int>(d[1]), static_cast<int>(d[2]),
                                             static_cast<int>(d[3]));
        }
        const std::size_t k = static_cast<std::size_t>(c.in_channels) * c.kernel * c.kernel;
        std::vector<float>& h = hessian[label];
        h.resize(k * k, 0.f);
        const bool pool = pooled_after(label);
        const int fh = static_cast<int>(pool ? d[2] / 2 : d[2]), fw = static_cast<int>(pool ? d[3] / 2 : d[3]);
        detail::add_patch_hessian(*v, pool, c.kernel,
                                  detail::hessian_stride(fh, fw, static_cast<int>(planes.size()), k), h);
      };
    for (const auto& p : planes) {
      if (p.pixels.size() != static_cast<std::size_t>(p.height) * p.width || p.pixels.empty()) {
        throw Error(ErrorKind::InvalidArgument, "int8 calibration plane of " + std::to_string(p.width) + "x" +
                                                    std::to_string(p.height) + " has " +
                                                    std::to_string(p.pixels.size()) + " pixels");
      }
      OneDnnExecutor ex(weights_, {p.height, p.width, 0}, threads_, default_layer_plan(Precision::Fp32), eng_,
                        workspaces_[0], weight_cache_, nullptr, &act_max_, clip, nullptr, tap);
      ex.run(p.pixels.data(), true);
    }
    if (!gptq) return;
    // GPTQ, one layer per task (each is sequential: the same codes at any thread count).
    std::vector<std::pair<std::string, const std::vector<float>*>> jobs;
    for (const auto& [producer, layers] : readers)
      for (const std::string& l : layers) jobs.emplace_back(l, &hessian.at(producer));
    std::vector<detail::S8Weights> done(jobs.size());
    std::exception_ptr error;
    std::mutex error_mu;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
    for (int i = 0; i < static_cast<int>(jobs.size()); ++i) {
      try {
        const model::Conv& c = conv_of(jobs[static_cast<std::size_t>(i)].first);
        done[static_cast<std::size_t>(i)] =
            detail::s8_gptq(c.weight, c.out_channels, *jobs[static_cast<std::size_t>(i)].second);
      } catch (...) {  // an exception must not leave an OpenMP region
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
    omp_set_num_threads(threads_);
    if (error) std::rethrow_exception(error);
    for (std::size_t i = 0; i < jobs.size(); ++i) int8_weights_[jobs[i].first] = std::move(done[i]);
  }

  const model::Conv& conv_of(const std::string& label) const {
    for (std::size_t i = 0; i < kTrunkLayers; ++i)
      if (label == kLayerLabels[i]) return weights_.encoder[i];
    if (label == "score_a") return weights_.score_a;
    if (label == "score_b") return weights_.score_b;
    if (label == "descriptor_a") return weights_.descriptor_a;
    if (label == "descriptor_b") return weights_.descriptor_b;
    throw Error(ErrorKind::Internal, "no layer " + label);
  }

  model::Weights weights_;
  int threads_;
  Precision precision_;
  LayerPlan plan_;
  bool int8_ = false;  // the plan has an Int8 layer
  dnnl::engine eng_;
  // One per slot, shared by every plan of that slot (workspace.hpp).
  std::array<std::shared_ptr<Workspace>, kWorkspaceSlots> workspaces_{std::make_shared<Workspace>(),
                                                                      std::make_shared<Workspace>()};
  std::shared_ptr<WeightCache> weight_cache_ = std::make_shared<WeightCache>();
  LayerMax act_max_;          // int8 calibration (empty otherwise)
  Int8Weights int8_weights_;  // int8 calibration: GPTQ's codes (empty with SUPERPOINT_RT_INT8_WEIGHTS=nearest)
  dnnl::stream stream_;       // the calibration's reorders
};

}  // namespace

const char* to_string(Precision p) noexcept {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Int8: return "int8";
  }
  return "fp32";
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "bf16") {
    // oneDNN would emulate bf16 on plain AVX-512 (slower than f32, no point) and has no bf16 kernels below it.
    if (!util::cpu_features().avx512_bf16) {
      throw Error(ErrorKind::InvalidArgument,
                  "precision \"bf16\" needs a CPU with the avx512_bf16 feature, which this CPU lacks (or "
                  "SUPERPOINT_RT_ISA caps it); use precision \"fp32\"");
    }
    return Precision::Bf16;
  }
  if (name == "int8") {
    // oneDNN 2.6 has u8 x s8 JIT convolutions from AVX2 on (VNNI / AMX make them fast) and conv1a_u8 an AVX2 kernel;
    // below AVX2 only reference kernels.
    if (!util::cpu_features().avx2_fma()) {
      throw Error(ErrorKind::InvalidArgument,
                  "precision \"int8\" needs a CPU with AVX2 and FMA, which this CPU lacks (or SUPERPOINT_RT_ISA caps "
                  "it); use precision \"fp32\"");
    }
    return Precision::Int8;
  }
  throw Error(ErrorKind::InvalidArgument,
              "precision \"" + name + "\" is not offered by the oneDNN backend (supported: fp32, bf16, int8)");
}

const char* to_string(LayerType t) noexcept {
  switch (t) {
    case LayerType::F32: return "f32";
    case LayerType::Bf16: return "bf16";
    case LayerType::Int8: return "int8";
  }
  return "f32";
}

LayerPlan default_layer_plan(Precision p) {
  LayerPlan plan;
  for (const char* l : kLayerLabels) plan[l] = LayerType::F32;
  if (p == Precision::Fp32) return plan;
  const LayerType low = p == Precision::Bf16 ? LayerType::Bf16 : LayerType::Int8;
  for (const char* l : kLayerLabels) plan[l] = low;
  plan["conv1a"] = LayerType::F32;  // one input channel: the exact plane, 3% of the f32 forward
  if (p == Precision::Int8 && !util::cpu_features().avx512()) plan["conv1b"] = LayerType::F32;  // below
  // Rounding the early full-resolution layers moves keypoints the most (bench/quality.py, top-500 keypoint F1 at
  // 2 px against fp32, mean / worst image, 44 pairs on AMD Zen 4; docs/BENCHMARKS.md "Mixed plans"):
  //   bf16 all-bf16 0.9920 / 0.9719; conv1b, conv2a, conv2b in f32 0.9962 / 0.9893 (issue 21 asks 0.995 / 0.97);
  //   only the 1x1 layers in bf16 0.9991 / 0.9877 (880 pairs); only descriptor_b (the plan without AMX, below)
  //   1.0000 / 1.0000 (880 pairs: the keypoints are fp32's).
  //   int8 (asked: 0.97 / 0.90) all-int8 with every weight at its nearest code 0.9525 / 0.8679; with GPTQ's codes
  //   (gptq.hpp) and six calibration planes 0.9745 / 0.9037 with AVX-512 VNNI, 0.9738 / 0.9091 capped to AVX2.
  //   conv1b and conv2a in f32 (0.9837 / 0.9632 with GPTQ) cost 1.4x the all-int8 forward on oneDNN's direct
  //   kernels. With AVX-512 VNNI (no AMX) every 3x3 layer after conv1a runs on our 16-bit Winograd kernel
  //   (wino_u8.hpp: exact integer transforms, 10-13-bit transformed weights instead of GPTQ's 8-bit codes, a u8
  //   scale per channel between those layers; plan_wino), 0.71x the forward of oneDNN's direct kernels, F1 0.9731 /
  //   0.9158 (docs/BENCHMARKS.md). But a second draw of 440 pairs (seed 1) had a view at 0.877 (issue 33 asks
  //   0.90): a bright, low-contrast photo whose conv1a outputs, rounded to 8 bits for conv1b, lost the faint
  //   corners (int8 found 352 keypoints where fp32 found 419). conv1b in f32 on our fp32 Winograd (its output
  //   quantised per channel for conv2a's kernel) keeps them (0.948 on that view; 0.9817 / 0.9481 and 0.9817 /
  //   0.9511 on the two draws) for 1.22x the all-int8 forward on AVX2. Issue 33 asks int8 on AVX2-only CPUs for
  //   both F1 0.90 worst and 0.6x OpenVINO's int8: there conv1b is f32 (0.60x OpenVINO's NNCF int8 without VNNI,
  //   capped, noisy). With AVX-512 the plan stays all-int8 (0.93x OpenVINO's int8 there; with conv1b in f32 it was
  //   1.13x, and the issue asks that nothing get slower on AVX-512): the same integer bits, so the same worst view.
  //   SUPERPOINT_RT_LAYER_PRECISION=conv1b=int8 / conv1b=f32 picks either plan anywhere.
  if (p == Precision::Bf16) {
    for (const char* l : {"conv1b", "conv2a", "conv2b"}) plan[l] = LayerType::F32;
    // Without AMX, oneDNN's bf16 convolutions are direct (avx512_core_bf16: two multiply-adds per 32-bit lane), and
    // its f32 Winograd F(4x4,3x3) does a quarter of direct's multiplies: every 3x3 layer measured as fast or faster
    // in f32 Winograd (bench_forward --threads 2, AMD Zen 4, interleaved: conv3b 10.1 vs 12.3 ms, conv4a/b 2.6 vs
    // 3.0, score_a / descriptor_a 5.0 vs 6.1, conv3a 6.4 vs 6.2; the whole forward 0.95x the plan with those in
    // bf16) and it is f32's accuracy. descriptor_b (1x1: no Winograd) stays bf16: 1.6 vs 3.3 ms. score_b is f32:
    // in bf16 it saved 0.7 ms but moved keypoints (F1 0.9991 / 0.9877); in f32 the whole forward is 1.006x and the
    // keypoints are fp32's (F1 1.0000 / 1.0000, homography accuracy within 0.41 point, 880 pairs x 10 RANSAC draws;
    // docs/BENCHMARKS.md). On Zen 5 both units are twice as wide, so the ratios hold. With AMX (tile multiplies:
    // several times the bf16 multiply-adds per cycle) the bf16 kernels are expected to win: the plan of the
    // simulation study, not measured (no AMX here).
    if (!util::cpu_features().amx) {
      for (auto& e : plan) e.second = LayerType::F32;
      plan["descriptor_b"] = LayerType::Bf16;
    }
  }
  return plan;
}

LayerPlan layer_plan(Precision p, const char* override_value) {
  LayerPlan plan = default_layer_plan(p);
  if (!override_value || !*override_value) return plan;
  const std::string v = override_value;
  std::size_t at = 0;
  while (at <= v.size()) {
    const std::size_t end = std::min(v.find(',', at), v.size());
    const std::string item = v.substr(at, end - at);
    const std::size_t eq = item.find('=');
    const std::string layer = item.substr(0, eq), type = eq == std::string::npos ? "" : item.substr(eq + 1);
    LayerType t;
    if (type == "f32")
      t = LayerType::F32;
    else if (type == "bf16")
      t = LayerType::Bf16;
    else if (type == "int8")
      t = LayerType::Int8;
    else
      throw Error(ErrorKind::InvalidArgument,
                  "SUPERPOINT_RT_LAYER_PRECISION entry \"" + item + "\" is not layer=f32|bf16|int8");
    if (layer == "*") {
      for (auto& e : plan) e.second = t;
    } else if (plan.count(layer)) {
      plan[layer] = t;
    } else {
      throw Error(ErrorKind::InvalidArgument, "SUPERPOINT_RT_LAYER_PRECISION: unknown layer \"" + layer + "\"");
    }
    at = end + 1;
  }
  plan["conv1a"] = LayerType::F32;
  return plan;
}

const char* to_string(ConvAlgo a) noexcept {
  switch (a) {
    case ConvAlgo::Direct: return "direct";
    case ConvAlgo::Winograd: return "winograd";
    case ConvAlgo::Auto: return "auto";
  }
  return "direct";
}

std::unique_ptr<Backend> make_onednn_backend(const model::Weights& weights, const BackendOptions& options) {
  return std::make_unique<OneDnnBackend>(weights, options);
}

}  // namespace superpoint_rt::backend::onednn
