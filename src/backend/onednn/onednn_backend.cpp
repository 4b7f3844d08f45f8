// oneDNN backend: see onednn_backend.hpp.
#include "backend/onednn/onednn_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "backend/onednn/conv1a_u8.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::backend::onednn {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

[[noreturn]] void internal(const std::string& where, const dnnl::error& e) {
  throw Error(ErrorKind::Internal, "oneDNN failure in " + where + ": " + e.what());
}

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

// The layers that read each layer's output (max pooling in between keeps the type).
const std::map<std::string, std::vector<std::string>>& consumers() {
  static const std::map<std::string, std::vector<std::string>> c = {
      {"conv1a", {"conv1b"}},   {"conv1b", {"conv2a"}},
      {"conv2a", {"conv2b"}},   {"conv2b", {"conv3a"}},
      {"conv3a", {"conv3b"}},   {"conv3b", {"conv4a"}},
      {"conv4a", {"conv4b"}},   {"conv4b", {"score_a", "descriptor_a"}},
      {"score_a", {"score_b"}}, {"descriptor_a", {"descriptor_b"}}};
  return c;
}

dt read_type(LayerType t) {
  return t == LayerType::Int8 ? dt::u8 : t == LayerType::Bf16 ? dt::bf16 : dt::f32;
}

bool isa_has_avx512_core() {
  const auto isa = dnnl::get_effective_cpu_isa();
  using I = dnnl::cpu_isa;
  for (I i : {I::avx512_core, I::avx512_core_vnni, I::avx512_core_bf16, I::avx512_core_amx}) {
    if (isa == i) return true;
  }
  return false;
}

// SUPERPOINT_RT_CONV_ALGO is either one algorithm for every layer ("winograd") or a per-layer list
// ("conv1b=winograd,score_a=direct"; "*=direct" sets unlisted layers, otherwise they follow the rule). Returns the
// value for `label` ("" = rule).
std::string layer_override(const char* env, const std::string& label) {
  if (!env || !*env) return {};
  const std::string v = env;
  if (v.find('=') == std::string::npos) return v;
  std::string fallback;  // "*=algo" sets the value for unlisted layers
  std::size_t p = 0;
  while (p <= v.size()) {
    const std::size_t q = std::min(v.find(',', p), v.size());
    const std::string item = v.substr(p, q - p);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw Error(ErrorKind::InvalidArgument, "SUPERPOINT_RT_CONV_ALGO entry \"" + item + "\" is not layer=algorithm");
    }
    if (item.substr(0, eq) == label) return item.substr(eq + 1);
    if (item.substr(0, eq) == "*") fallback = item.substr(eq + 1);
    p = q + 1;
  }
  return fallback;
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : omp_get_num_procs();
}

// 64-byte aligned float storage (oneDNN's JIT kernels prefer cache-line aligned buffers).
struct AlignedBuffer {
  float* p = nullptr;
  std::size_t bytes = 0;
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t b) : bytes((b + 63) / 64 * 64) {
    p = static_cast<float*>(std::aligned_alloc(64, bytes ? bytes : 64));
    if (!p) throw Error(ErrorKind::Internal, "out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, bytes);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept : p(std::exchange(o.p, nullptr)), bytes(o.bytes) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(p, o.p);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~AlignedBuffer() { std::free(p); }
};

struct Step {
  dnnl::primitive prim;
  std::vector<dnnl_exec_arg_t> args;  // prebuilt so that run() allocates nothing of its own
  std::vector<memory> keep;           // the memories `args` points to
  const char* label = nullptr;        // conv layer whose f32 output int8 calibration records (else nullptr)
  memory out;                         // that output
  std::function<void()> fn = {};      // run instead of `prim` when set (our own kernels)
  int threads = 0;                    // OpenMP threads `prim` was created for and runs on (0 = the executor's)
};

// Per-layer maximum of the fp32 activations (after bias + ReLU), keyed by layer label ("conv1a" ... "conv4b",
// "score_a", "descriptor_a"): int8 calibration's result.
using LayerMax = std::map<std::string, float>;

// numpy.percentile(v, q) (linear interpolation between the closest ranks) of n values; q = 100 is the maximum.
// Calibrating int8 at the 99.99th percentile instead of the maximum lets the few largest activations saturate and
// gives every other value finer steps: keypoint F1 against fp32 0.956 / 0.915 against 0.948 / 0.872 in the float
// simulation (bench/quant_sim.py, docs/BENCHMARKS.md), confirmed on the real plan (bench/quality.py).
float percentile(const float* v, std::size_t n, double q) {
  if (n == 0) return 0;
  if (q >= 100) return *std::max_element(v, v + n);
  std::vector<float> c(v, v + n);
  const double pos = q / 100.0 * static_cast<double>(n - 1);
  const auto lo = static_cast<std::size_t>(pos);
  std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(lo), c.end());
  const float a = c[lo];
  if (lo + 1 >= n) return a;
  const float b = *std::min_element(c.begin() + static_cast<std::ptrdiff_t>(lo) + 1, c.end());
  return static_cast<float>(a + (b - a) * (pos - static_cast<double>(lo)));
}

class OneDnnExecutor final : public Executor {
 public:
  // `plan`: each layer's type. `act_max` (plans with an Int8 layer, else nullptr): the calibration. `record`
  // (fp32 only, else nullptr): run() raises each layer's entry to the `clip` percentile of its output (the
  // calibration pass; 100 = the maximum).
  OneDnnExecutor(const model::Weights& w, const PlanOptions& o, int threads, const LayerPlan& plan,
                 const dnnl::engine& eng, const LayerMax* act_max = nullptr, LayerMax* record = nullptr,
                 double clip = 100);

  int height() const override { return h_; }
  int width() const override { return w_; }
  float* input() override { return input_.p; }
  void run(bool descriptors) override;
  const float* logits() const override { return logits_.p; }
  float* descriptors() override { return descriptors_.p; }
  std::string plan_description() const override { return description_; }

 private:
  // An activation memory whose buffer is arena `arena` (0/1); the arenas are sized and attached at the end of plan.
  memory activation(const memory::desc& d, int arena);
  // Adds conv (+bias, +relu) reading `src`; returns its dst. `dst_external` (if given) is the output memory.
  memory add_conv(std::vector<Step>& seq, const model::Conv& c, memory src, int hh, int ww, bool relu, int dst_arena,
                  const memory* dst_external, const char* label);
  memory add_pool(std::vector<Step>& seq, memory src, int dst_arena, const char* label);
  // int8: conv1a (+bias, +relu) quantised to u8 NHWC as it is written (conv1a_u8.hpp); returns its dst.
  memory add_conv1a_u8(std::vector<Step>& seq, const model::Conv& c, int dst_arena);
  void execute(std::vector<Step>& seq);
  LayerType type_of(const std::string& label) const {
    const auto it = plan_.find(label);
    return it == plan_.end() ? LayerType::F32 : it->second;
  }
  // The type `label` (computing in `self`) writes: what its consumers read when they agree and its kernel can write
  // it (f32 kernels write f32; bf16 kernels f32 or bf16, so a u8 reader gets bf16 and quantises it in its input
  // reorder), else f32.
  dt dst_type(const std::string& label, LayerType self) const {
    const auto it = consumers().find(label);
    if (it == consumers().end() || self == LayerType::F32) return dt::f32;
    const dt want = read_type(type_of(it->second.front()));
    for (const auto& c : it->second)
      if (read_type(type_of(c)) != want) return dt::f32;
    if (self == LayerType::Bf16 && want == dt::u8) return dt::bf16;
    return want;
  }
  // int8: the scale that maps this activation to u8 (q = round(v * scale)); 0 when unknown (not int8).
  float scale_of(const memory& m) const {
    const auto it = scale_.find(m.get());
    return it == scale_.end() ? 0.f : it->second;
  }

  int h_, w_, hc_, wc_, threads_;
  dnnl::engine eng_;
  dnnl::stream stream_;
  AlignedBuffer input_, logits_, descriptors_, arena_[2], scratch_;
  std::vector<AlignedBuffer> reorder_buffers_;
  std::vector<std::pair<memory, int>> placed_;  // activations waiting for their arena pointer
  std::size_t arena_bytes_[2] = {0, 0}, scratch_bytes_ = 0;
  std::vector<memory> weights_;  // reordered weights and biases (kept alive)
  std::vector<Step> trunk_, desc_head_;
  memory scratch_mem_;
  std::string description_;
  const char* algo_override_ = nullptr;
  bool avx512_core_ = false;
  LayerPlan plan_;
  double clip_ = 100;  // calibration pass: the percentile recorded
  int block_ = 8;      // channel block of the activation layout (16 on AVX-512, else 8)
  tag block_tag_ = tag::nChw8c;
  const LayerMax* act_max_ = nullptr;
  LayerMax* record_ = nullptr;
  std::map<dnnl_memory_t, float> scale_;            // int8 activation scales by memory (see scale_of)
  std::vector<float> conv1a_weight_, conv1a_bias_;  // int8 conv1a_u8 (copies: the executor may outlive the Weights)
  detail::Conv1aU8 conv1a_;
  detail::Conv1aU8Row conv1a_row_ = nullptr;
  AlignedBuffer conv1a_scratch_;  // conv1a_u8_scratch_floats(w) per thread
};

OneDnnExecutor::OneDnnExecutor(const model::Weights& wt, const PlanOptions& o, int threads, const LayerPlan& plan,
                               const dnnl::engine& eng, const LayerMax* act_max, LayerMax* record, double clip)
    : h_(o.height),
      w_(o.width),
      hc_(o.height / 8),
      wc_(o.width / 8),
      threads_(threads),
      eng_(eng),
      plan_(plan),
      clip_(clip),
      act_max_(act_max),
      record_(record) {
  if (h_ < 8 || w_ < 8 || h_ > 16384 || w_ > 16384) {
    throw Error(ErrorKind::InvalidArgument, "network frame " + std::to_string(w_) + "x" + std::to_string(h_) +
                                                " (width x height) out of range: each side must be in [8, 16384]");
  }
  algo_override_ = std::getenv("SUPERPOINT_RT_CONV_ALGO");
  avx512_core_ = isa_has_avx512_core();
  if (avx512_core_) {
    block_ = 16;
    block_tag_ = tag::nChw16c;
  } else {  // AVX2 and SSE4.1 JIT kernels block channels by 8
    block_ = 8;
    block_tag_ = tag::nChw8c;
  }
  omp_set_num_threads(threads_);  // primitive creation reads the thread count (blocking heuristics)
  try {
    stream_ = dnnl::stream(eng_);
    input_ = AlignedBuffer(sizeof(float) * static_cast<std::size_t>(h_) * w_);
    const auto cells = static_cast<std::size_t>(hc_) * wc_;
    logits_ = AlignedBuffer(sizeof(float) * cells * wt.score_b.out_channels);
    descriptors_ = AlignedBuffer(sizeof(float) * cells * wt.descriptor_b.out_channels);

    memory x(memory::desc({1, 1, h_, w_}, dt::f32, tag::nchw), eng_, input_.p);
    int hh = h_, ww = w_, a = 0;
    const char* names[8] = {"conv1a", "conv1b", "conv2a", "conv2b", "conv3a", "conv3b", "conv4a", "conv4b"};
    for (int i = 0; i < 8; ++i) {
      if (i == 0 && type_of("conv1b") == LayerType::Int8)
        x = add_conv1a_u8(trunk_, wt.encoder[0], a);
      else
        x = add_conv(trunk_, wt.encoder[static_cast<std::size_t>(i)], x, hh, ww, true, a, nullptr, names[i]);
      a ^= 1;
      if (i == 1 || i == 3 || i == 5) {  // MaxPool2d(2, 2) after blocks 1-3 (floors odd sizes, as PyTorch)
        static const char* pools[3] = {"pool1", "pool2", "pool3"};
        x = add_pool(trunk_, x, a, pools[(i - 1) / 2]);
        a ^= 1;
        hh /= 2;
        ww /= 2;
      }
    }
    const memory trunk_out = x;  // conv4b output in arena a^1; both heads read it and write to arena a
    memory lg(memory::desc({1, wt.score_b.out_channels, hc_, wc_}, dt::f32, tag::nhwc), eng_, logits_.p);
    memory ds(memory::desc({1, wt.descriptor_b.out_channels, hc_, wc_}, dt::f32, tag::nhwc), eng_, descriptors_.p);
    x = add_conv(trunk_, wt.score_a, trunk_out, hh, ww, true, a, nullptr, "score_a");
    add_conv(trunk_, wt.score_b, x, hh, ww, false, a ^ 1, &lg, "score_b");
    x = add_conv(desc_head_, wt.descriptor_a, trunk_out, hh, ww, true, a, nullptr, "descriptor_a");
    add_conv(desc_head_, wt.descriptor_b, x, hh, ww, false, a ^ 1, &ds, "descriptor_b");

    for (int i = 0; i < 2; ++i) arena_[i] = AlignedBuffer(arena_bytes_[i]);
    for (auto& [m, ar] : placed_) m.set_data_handle(arena_[ar].p);
    placed_.clear();
    scratch_ = AlignedBuffer(scratch_bytes_);
    scratch_mem_ = memory(memory::desc({static_cast<memory::dim>(scratch_bytes_)}, dt::u8, tag::x), eng_, scratch_.p);
    for (auto* seq : {&trunk_, &desc_head_}) {
      for (auto& s : *seq) {
        for (auto& arg : s.args) {
          if (arg.arg == DNNL_ARG_SCRATCHPAD) arg.memory = scratch_mem_.get();
        }
      }
    }
    if (!description_.empty()) description_.pop_back();
  } catch (const dnnl::error& e) {
    internal("plan", e);
  }
}

memory OneDnnExecutor::activation(const memory::desc& d, int arena) {
  memory m(d, eng_, DNNL_MEMORY_NONE);
  arena_bytes_[arena] = std::max(arena_bytes_[arena], d.get_size());
  placed_.emplace_back(m, arena);
  return m;
}

memory OneDnnExecutor::add_conv(std::vector<Step>& seq, const model::Conv& c, memory src, int hh, int ww, bool relu,
                                int dst_arena, const memory* dst_external, const char* label) {
  const memory::dim pad = c.kernel / 2;
  // bf16: activations and weights in bfloat16, accumulation in f32 inside oneDNN's kernels, bias f32; the outputs
  // of the last 1x1s are written as f32. int8: u8 activations, s8 weights, s32 accumulation, see below.
  // conv1a (one input channel) computes in f32 in both: its input is the exact plane, and rounding it (bf16 keeps
  // 8 bits of v / 255) or its 9-tap weights cost the most fidelity per millisecond saved (bf16 keypoint Jaccard vs
  // fp32 on the golden images: 0.917 all-bf16, 0.946 with conv1a f32; conv1a is 3% of the f32 forward). In bf16 its
  // f32 output is converted by the input reorder of conv1b; int8 does not come here for conv1a (add_conv1a_u8
  // rounds its f32 sums straight to u8).
  const LayerType type = c.in_channels == 1 ? LayerType::F32 : type_of(label);
  const bool int8 = type == LayerType::Int8;
  const dt ldt = read_type(type);
  const dt out_dt = dst_external ? dt::f32 : dst_type(label, type);
  const memory::desc src_any({1, c.in_channels, hh, ww}, ldt, tag::any);
  // Activations in oneDNN's blocked layout for this ISA: the Winograd and the classic direct JIT kernels read and
  // write it, so consecutive layers never need a reorder (format_tag::any would let oneDNN 2.6 pick channels-last
  // for its brgemm kernels, which measured slower here and forces reorders around every Winograd layer).
  // bf16 and int8 layers let oneDNN pick (it picks its channels-last brgconv kernels, which also cover AMX on CPUs
  // that have it; for bf16 here the blocked jit_bf16 kernels cost the same CPU time, 620-630 ms per forward).
  const tag act = c.out_channels % block_ == 0 && type == LayerType::F32 ? block_tag_ : tag::any;
  const memory::desc w_any({c.out_channels, c.in_channels, c.kernel, c.kernel}, int8 ? dt::s8 : ldt, tag::any);
  const memory::desc b_md({c.out_channels}, dt::f32, tag::x);
  memory::desc dst_md =
      dst_external ? dst_external->get_desc() : memory::desc({1, c.out_channels, hh, ww}, out_dt, act);

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  // int8 quantisation (oneDNN 2.x semantics: dst = oscale[o] * (acc_s32 + bias[o]), then post-ops, then round and
  // saturate to the dst type):
  //   input q_x = x * s_in (u8; s_in = 255 / calibrated max of the producer), weights q_w = w * ws[o] (s8,
  //   ws[o] = 127 / max|w[o]|, per output channel), acc = sum q_x q_w ~ s_in ws[o] sum x w,
  //   bias' = b[o] s_in ws[o], oscale[o] = s_out / (s_in ws[o]) with s_out = 255 / calibrated max of this layer
  //   (u8 output), or 1 for an f32 / bf16 output (the logits, the descriptors, a layer of another type).
  float s_in = 0, s_out = 1;
  std::vector<float> ws, oscale;
  if (int8) {
    s_in = scale_of(src);
    if (!(s_in > 0)) throw Error(ErrorKind::Internal, std::string("int8: no input scale for ") + label);
    if (out_dt == dt::u8) s_out = act_max_->at(label) > 0 ? 255.f / act_max_->at(label) : 1.f;
    const std::size_t per_out = c.weight.size() / static_cast<std::size_t>(c.out_channels);
    for (int o = 0; o < c.out_channels; ++o) {
      float m = 0;
      for (std::size_t k = 0; k < per_out; ++k) {
        m = std::max(m, std::fabs(c.weight[static_cast<std::size_t>(o) * per_out + k]));
      }
      ws.push_back(m > 0 ? 127.f / m : 1.f);
      oscale.push_back(s_out / (s_in * ws.back()));
    }
    attr.set_output_scales(1 << 1, oscale);
  }
  // oneDNN 2.6 has Winograd kernels for f32 only: bf16 and int8 layers are direct unless SUPERPOINT_RT_CONV_ALGO
  // says otherwise (then the fallback below records "winograd->direct").
  const ConvAlgo algo = choose_conv_algo({c.in_channels, c.out_channels, c.kernel, hh, ww},
                                         avx512_core_ && ldt == dt::f32, layer_override(algo_override_, label).c_str());
  auto make_pd = [&](dnnl::algorithm alg, const memory::desc& src_md) {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src_md, w_any, b_md, dst_md, {1, 1},
                                        {pad, pad}, {pad, pad}),
        attr, eng_);
  };
  const dnnl::algorithm want = algo == ConvAlgo::Winograd ? dnnl::algorithm::convolution_winograd
                               : algo == ConvAlgo::Auto   ? dnnl::algorithm::convolution_auto
                                                          : dnnl::algorithm::convolution_direct;
  std::string used = to_string(algo);
  // Which f32 Winograd kernel oneDNN 2.6 picks depends on the thread count at creation: F(2x2, 3x3)
  // (jit_fp32_wino_2x3) only while the layer's input fits a cache budget that grows with the threads, else F(4x4, 3x3)
  // (jit_wino_4x3); the two round differently. Each kernel on its own gives the same bits at every thread count
  // (measured on AMD Zen 4 for every SuperPoint layer shape at frames from 52x76 to 1600x1200, 1 to 32 threads,
  // tests/backend: Precision.*AcrossRunsPlansAndThreadCounts). So the kernel is the one oneDNN picks at ONE thread,
  // whatever the thread count: it is created (and run, Step::threads) at the largest thread count <= threads_ at
  // which oneDNN still picks it. F(4x4, 3x3) gives way to F(2x2, 3x3) only for small layers (e.g. conv1b at
  // 104x152 from 3 threads on Zen 4), which then run on fewer threads; at 640x480 every layer keeps every thread.
  int step_threads = 0;
  auto make_any_algo = [&](const memory::desc& src_md) {
    try {
      if (want == dnnl::algorithm::convolution_winograd) {
        omp_set_num_threads(1);
        const std::string chosen = make_pd(want, src_md).impl_info_str();  // throws: no Winograd kernel
        for (int t = threads_; t >= 1; --t) {
          omp_set_num_threads(t);
          auto p = make_pd(want, src_md);
          if (chosen != p.impl_info_str()) continue;
          step_threads = t;
          omp_set_num_threads(threads_);
          return p;
        }
      }
      omp_set_num_threads(threads_);
      step_threads = 0;
      return make_pd(want, src_md);
    } catch (const dnnl::error&) {
      omp_set_num_threads(threads_);
      step_threads = 0;
      if (want == dnnl::algorithm::convolution_direct) throw;
      used = std::string(to_string(algo)) + "->direct";  // no Winograd kernel for this shape / ISA
      return make_pd(dnnl::algorithm::convolution_direct, src_md);
    }
  };
  auto is_ref = [](const dnnl::convolution_forward::primitive_desc& p) {
    return std::string(p.impl_info_str()).rfind("ref", 0) == 0;
  };
  // Prefer reading the producer's layout as it is (no reorder); let oneDNN pick when that has no fast kernel.
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = make_any_algo(src.get_desc());
  } catch (const dnnl::error&) {
  }
  if (!pd || is_ref(pd)) pd = make_any_algo(src_any);
  // Channels-last output with an odd channel count (65) has no JIT kernel on AVX2 / SSE4.1: let the convolution
  // write its own layout and reorder into the output buffer instead of running oneDNN's slow reference kernel.
  // The same when the blocked activation layout has no JIT kernel (conv1a on SSE4.1): any layout oneDNN likes.
  bool reorder_out = false;
  if (is_ref(pd)) {
    dst_md = memory::desc({1, c.out_channels, hh, ww}, out_dt, tag::any);
    pd = make_any_algo(src_any);
    reorder_out = dst_external != nullptr;
  }
  // The layout the convolution wants for its input; reorder once per run if the producer wrote another one.
  if (pd.src_desc() != src.get_desc()) {
    // The producer's output is still needed (both heads read conv4b's), so the reordered copy gets a buffer of
    // its own rather than an arena slot (rare: only when two layers disagree on the layout).
    AlignedBuffer buf(pd.src_desc().get_size());
    memory r(pd.src_desc(), eng_, buf.p);
    reorder_buffers_.push_back(std::move(buf));
    dnnl::primitive_attr rattr;
    if (int8 && src.get_desc().data_type() != dt::u8) rattr.set_output_scales(0, {s_in});  // f32/bf16 -> u8
    Step s{dnnl::reorder(src, r, rattr), {{DNNL_ARG_FROM, src.get()}, {DNNL_ARG_TO, r.get()}}, {src, r}, nullptr, {}};
    seq.push_back(std::move(s));
    description_ += std::string(label) + "_in:reorder ";
    src = r;
  }
  // Weights: OIHW user memory -> the primitive's preferred layout, once, here.
  memory w_user(memory::desc({c.out_channels, c.in_channels, c.kernel, c.kernel}, dt::f32, tag::oihw), eng_,
                const_cast<float*>(c.weight.data()));
  memory w_prim(pd.weights_desc(), eng_);
  dnnl::primitive_attr wattr;
  if (int8) wattr.set_output_scales(1 << 0, ws);  // f32 -> s8 per output channel
  dnnl::reorder(w_user, w_prim, wattr).execute(stream_, w_user, w_prim);
  memory b_prim(pd.bias_desc(), eng_);
  if (pd.bias_desc().data_type() != dt::f32) throw Error(ErrorKind::Internal, "oneDNN bias is not f32");
  for (std::size_t o = 0; o < c.bias.size(); ++o) {
    static_cast<float*>(b_prim.get_data_handle())[o] = int8 ? c.bias[o] * s_in * ws[o] : c.bias[o];
  }
  stream_.wait();
  weights_.push_back(w_prim);
  weights_.push_back(b_prim);

  memory dst;
  if (dst_external && !reorder_out) {
    dst = *dst_external;
  } else if (reorder_out) {
    AlignedBuffer buf(pd.dst_desc().get_size());
    dst = memory(pd.dst_desc(), eng_, buf.p);
    reorder_buffers_.push_back(std::move(buf));
  } else {
    dst = activation(pd.dst_desc(), dst_arena);
  }
  scratch_bytes_ = std::max(scratch_bytes_, pd.scratchpad_desc().get_size());
  if (step_threads) omp_set_num_threads(step_threads);  // the JIT kernel is generated for the pd's thread count
  dnnl::convolution_forward prim(pd);
  omp_set_num_threads(threads_);
  Step s{prim,
         {{DNNL_ARG_SRC, src.get()},
          {DNNL_ARG_WEIGHTS, w_prim.get()},
          {DNNL_ARG_BIAS, b_prim.get()},
          {DNNL_ARG_DST, dst.get()},
          {DNNL_ARG_SCRATCHPAD, nullptr}},
         {src, w_prim, b_prim, dst},
         nullptr,
         {}};
  const int run_threads = step_threads != threads_ ? step_threads : 0;
  s.threads = run_threads;
  if (record_ && !dst_external) {
    s.label = label;
    s.out = dst;
  }
  seq.push_back(std::move(s));
  if (act_max_ && !dst_external) scale_[dst.get()] = act_max_->at(label) > 0 ? 255.f / act_max_->at(label) : 1.f;
  description_ += std::string(label) + ":" + to_string(type) + ":" + used + "(" + pd.impl_info_str() +
                  (run_threads ? "@" + std::to_string(run_threads) + "t" : "") + ") ";
  if (reorder_out) {
    Step r{dnnl::reorder(dst, *dst_external),
           {{DNNL_ARG_FROM, dst.get()}, {DNNL_ARG_TO, dst_external->get()}},
           {dst, *dst_external},
           nullptr,
           {}};
    seq.push_back(std::move(r));
    description_ += std::string(label) + "_out:reorder ";
    return *dst_external;
  }
  return dst;
}

memory OneDnnExecutor::add_conv1a_u8(std::vector<Step>& seq, const model::Conv& c, int dst_arena) {
  conv1a_weight_ = c.weight;
  conv1a_bias_ = c.bias;
  const float m = act_max_->at("conv1a");
  conv1a_ = {conv1a_weight_.data(), conv1a_bias_.data(), c.out_channels, m > 0 ? 255.f / m : 1.f};
  const util::Isa isa = util::best_isa();
  const char* kernel = "reference";
  conv1a_row_ = detail::conv1a_u8_row_reference;
  if (isa == util::Isa::Avx512 && c.out_channels % 16 == 0) {
    kernel = "avx512";
    conv1a_row_ = detail::conv1a_u8_row_avx512;
  } else if (isa != util::Isa::Scalar && c.out_channels % 8 == 0) {
    kernel = "avx2";
    conv1a_row_ = detail::conv1a_u8_row_avx2;
  }
  conv1a_scratch_ =
      AlignedBuffer(sizeof(float) * detail::conv1a_u8_scratch_floats(w_) * static_cast<std::size_t>(threads_));
  // Channels-last u8: what oneDNN's int8 brgconv kernels read (conv1b takes it without a reorder).
  memory dst = activation(memory::desc({1, c.out_channels, h_, w_}, dt::u8, tag::nhwc), dst_arena);
  scale_[dst.get()] = conv1a_.scale;
  Step s;
  s.keep = {dst};
  s.fn = [this, dst] {
    auto* out = static_cast<std::uint8_t*>(dst.get_data_handle());
    auto* scratch = static_cast<float*>(conv1a_scratch_.p);
    const std::size_t per_thread = detail::conv1a_u8_scratch_floats(w_);
    // Rows split evenly over the threads; every row depends on the input only (same bytes for any split).
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      detail::conv1a_u8_rows(conv1a_, conv1a_row_, input_.p, h_, w_, h_ * t / n, h_ * (t + 1) / n, out,
                             scratch + static_cast<std::size_t>(t) * per_thread);
    }
  };
  seq.push_back(std::move(s));
  description_ += std::string("conv1a:f32:direct_u8(") + kernel + ") ";
  return dst;
}

memory OneDnnExecutor::add_pool(std::vector<Step>& seq, memory src, int dst_arena, const char* label) {
  const auto sd = src.get_desc();
  const auto dims = sd.dims();
  const memory::desc dst_any({dims[0], dims[1], dims[2] / 2, dims[3] / 2}, sd.data_type(), tag::any);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::pooling_forward::primitive_desc pd(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, sd, dst_any, {2, 2},
                                  {2, 2}, {0, 0}, {0, 0}),
      attr, eng_);
  memory dst = activation(pd.dst_desc(), dst_arena);
  if (scale_.count(src.get())) scale_[dst.get()] = scale_of(src);  // max pooling keeps the quantisation
  scratch_bytes_ = std::max(scratch_bytes_, pd.scratchpad_desc().get_size());
  Step s{dnnl::pooling_forward(pd),
         {{DNNL_ARG_SRC, src.get()}, {DNNL_ARG_DST, dst.get()}, {DNNL_ARG_SCRATCHPAD, nullptr}},
         {src, dst},
         nullptr,
         {}};
  seq.push_back(std::move(s));
  description_ += std::string(label) + ":max2x2(" + pd.impl_info_str() + ") ";
  return dst;
}

void OneDnnExecutor::execute(std::vector<Step>& seq) {
  for (auto& s : seq) {
    if (s.fn) {
      s.fn();
      continue;
    }
    if (s.threads) omp_set_num_threads(s.threads);
    const dnnl_status_t st =
        dnnl_primitive_execute(s.prim.get(), stream_.get(), static_cast<int>(s.args.size()), s.args.data());
    if (s.threads) omp_set_num_threads(threads_);
    if (st != dnnl_success) {
      throw Error(ErrorKind::Internal, "oneDNN primitive execution failed (status " + std::to_string(st) + ")");
    }
    if (record_ && s.label) {  // calibration pass (f32): raise the layer's entry to this plane's percentile
      stream_.wait();
      const float* v = static_cast<const float*>(s.out.get_data_handle());
      const std::size_t n = s.out.get_desc().get_size() / sizeof(float);  // no padding: channels are multiples of 8
      float& r = (*record_)[s.label];
      r = std::max(r, percentile(v, n, clip_));
    }
  }
}

void OneDnnExecutor::run(bool descriptors) {
  omp_set_num_threads(threads_);
  execute(trunk_);
  if (descriptors) execute(desc_head_);
  if (dnnl_stream_wait(stream_.get()) != dnnl_success) throw Error(ErrorKind::Internal, "oneDNN stream wait failed");
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

class OneDnnBackend final : public Backend {
 public:
  OneDnnBackend(const model::Weights& w, const BackendOptions& o)
      : weights_(w), threads_(resolve_threads(o.threads)), precision_(parse_precision(o.precision)) {
    if (o.threads < 0) {
      throw Error(ErrorKind::InvalidArgument,
                  "threads = " + std::to_string(o.threads) + " is out of range (0 = all cores, or >= 1)");
    }
    apply_isa_cap_once();
    try {
      eng_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      internal("engine creation", e);
    }
    plan_ = layer_plan(precision_, std::getenv("SUPERPOINT_RT_LAYER_PRECISION"));
    int8_ = std::any_of(plan_.begin(), plan_.end(), [](const auto& e) { return e.second == LayerType::Int8; });
    if (int8_) calibrate(o.calibration, clip_percentile(std::getenv("SUPERPOINT_RT_INT8_CLIP")));
  }
  std::string name() const override { return "onednn"; }
  std::string device() const override { return "cpu"; }
  std::string precision() const override { return to_string(precision_); }
  int threads() const override { return threads_; }
  std::unique_ptr<Executor> plan(const PlanOptions& options) override {
    return std::make_unique<OneDnnExecutor>(weights_, options, threads_, plan_, eng_, int8_ ? &act_max_ : nullptr);
  }

 private:
  // int8: per layer, the largest over the calibration planes of the `clip` percentile of the fp32 network's
  // activations (a plain fp32 plan per plane size, run once per plane); default_calibration_planes() when none
  // are given.
  void calibrate(const std::vector<CalibrationPlane>& given, double clip) {
    const std::vector<CalibrationPlane> planes = given.empty() ? default_calibration_planes() : given;
    for (const auto& p : planes) {
      if (p.pixels.size() != static_cast<std::size_t>(p.height) * p.width || p.pixels.empty()) {
        throw Error(ErrorKind::InvalidArgument, "int8 calibration plane of " + std::to_string(p.width) + "x" +
                                                    std::to_string(p.height) + " has " +
                                                    std::to_string(p.pixels.size()) + " pixels");
      }
      OneDnnExecutor ex(weights_, {p.height, p.width}, threads_, default_layer_plan(Precision::Fp32), eng_, nullptr,
                        &act_max_, clip);
      std::memcpy(ex.input(), p.pixels.data(), p.pixels.size() * sizeof(float));
      ex.run(true);
    }
  }

  model::Weights weights_;
  int threads_;
  Precision precision_;
  LayerPlan plan_;
  bool int8_ = false;  // the plan has an Int8 layer
  dnnl::engine eng_;
  LayerMax act_max_;  // int8 calibration (empty otherwise)
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
  static const char* kLayers[] = {"conv1a", "conv1b", "conv2a",  "conv2b",  "conv3a",       "conv3b",
                                  "conv4a", "conv4b", "score_a", "score_b", "descriptor_a", "descriptor_b"};
  LayerPlan plan;
  for (const char* l : kLayers) plan[l] = LayerType::F32;
  if (p == Precision::Fp32) return plan;
  const LayerType low = p == Precision::Bf16 ? LayerType::Bf16 : LayerType::Int8;
  for (const char* l : kLayers) plan[l] = low;
  plan["conv1a"] = LayerType::F32;  // one input channel: the exact plane, 3% of the f32 forward
  // Rounding the early full-resolution layers moves keypoints the most (bench/quality.py, top-500 keypoint F1 at
  // 2 px against fp32, mean / worst image, 44 pairs on AMD Zen 4; docs/BENCHMARKS.md "Mixed plans"):
  //   bf16 all-bf16 0.9920 / 0.9719; conv1b, conv2a, conv2b in f32 0.9962 / 0.9893 (issue 21 asks 0.995 / 0.97).
  //   int8 all-int8 0.9524 / 0.8794; conv1b and conv2a in bf16 0.9760 / 0.9430 (asked: 0.97 / 0.90).
  // The price: both mixed plans take 1.45-1.6x the all-bf16 / all-int8 forward without AMX (measured), so int8
  // keeps its integer conv1b where the CPU has no bf16 kernels: there f32 would cost more still (AVX2: int8 must
  // stay 1.6x faster than fp32).
  if (p == Precision::Bf16) {
    for (const char* l : {"conv1b", "conv2a", "conv2b"}) plan[l] = LayerType::F32;
  } else if (util::cpu_features().avx512_bf16) {
    for (const char* l : {"conv1b", "conv2a"}) plan[l] = LayerType::Bf16;
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

ConvAlgo choose_conv_algo(const ConvShape& s, bool avx512_core, const char* override_value) {
  if (override_value && *override_value) {
    const std::string v = override_value;
    if (v == "direct") return ConvAlgo::Direct;
    if (v == "winograd") return ConvAlgo::Winograd;
    if (v == "auto") return ConvAlgo::Auto;
    throw Error(ErrorKind::InvalidArgument,
                "SUPERPOINT_RT_CONV_ALGO=\"" + v + "\" is not one of direct, winograd, auto");
  }
  // The rule, from measurements on the development machine (Xeon with AVX-512, no AMX; oneDNN 2.6.3), see
  // tests/backend/test_onednn.cpp and the numbers in the comments here:
  //  * oneDNN's f32 Winograd needs avx512_core, 3x3 stride 1, IC and OC multiples of 16.
  //  * With OC <= 128 oneDNN picks jit_fp32_wino_2x3 (F(2x2,3x3)) on that Xeon, jit_wino_4x3 (F(4x4,3x3)) for most
  //    frames on AMD Zen 4 (which kernel: see add_conv's make_any_algo, the kernel of one thread): 1.5-2x faster
  //    than direct on conv1b..conv4b (conv1b: 83 vs 135 ms per call at 1 thread), and NOT less accurate
  //    here: against a float64 evaluation of the network on golden/dense/icl_250 the softmax score error is
  //    1.23e-6 with it, 1.79e-6 all-direct, 1.68e-6 for PyTorch itself (vs the PyTorch golden: 1.74e-6 / 4.9e-7).
  //  * With OC = 256 (score_a, descriptor_a) oneDNN picks jit_wino_4x3 (F(4x4,3x3)), which is less accurate there
  //    (all-Winograd: 2.6e-6 vs float64): direct.
  //  * conv1a (IC = 1; Winograd measured 3x slower) and the 1x1 convolutions: direct.
  if (!avx512_core || s.kernel != 3 || s.in_channels % 16 != 0 || s.out_channels % 16 != 0) return ConvAlgo::Direct;
  if (s.out_channels > 128) return ConvAlgo::Direct;
  return ConvAlgo::Winograd;
}

std::unique_ptr<Backend> make_onednn_backend(const model::Weights& weights, const BackendOptions& options) {
  return std::make_unique<OneDnnBackend>(weights, options);
}

}  // namespace superpoint_rt::backend::onednn
