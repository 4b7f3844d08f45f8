// oneDNN backend: see onednn_backend.hpp.
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
#include "backend/onednn/conv1a_u8.hpp"
#include "backend/onednn/gptq.hpp"
#include "backend/onednn/kernel_table.hpp"
#include "backend/onednn/stripes.hpp"
#include "backend/onednn/wino_f32.hpp"
#include "backend/onednn/wino_u8.hpp"
#include "backend/workspace.hpp"
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

// The convolutions by label in the network's order (HF's): the trunk's eight (model::Weights::encoder), then the
// heads' four.
constexpr const char* kLayerLabels[12] = {"conv1a", "conv1b", "conv2a",  "conv2b",  "conv3a",       "conv3b",
                                          "conv4a", "conv4b", "score_a", "score_b", "descriptor_a", "descriptor_b"};
constexpr std::size_t kTrunkLayers = 8;

// MaxPool2d(2, 2) follows these (it floors odd sizes, as PyTorch's).
bool pooled_after(const std::string& label) {
  return label == "conv1b" || label == "conv2b" || label == "conv3b";
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

// Whether the int8 layer `label` (convolution `c`) is expected on our u8 Winograd kernel (wino_u8.hpp;
// OneDnnExecutor::plan_wino has the full rule, which also needs the layer's neighbours in u8): where the kernel table
// chooses it, unless `algo` (SUPERPOINT_RT_CONV_ALGO) keeps conv1b, whose u8 channels-last output the others read, on
// oneDNN's kernels. Calibration skips GPTQ for those (the kernel takes the f32 weights).
bool winograd_expected(const std::string& label, const model::Conv& c, const char* algo) {
  if (layer_override(algo, "conv1b") == "direct") return false;
  const KernelLayer l{c.in_channels, c.out_channels, c.kernel, LayerType::Int8, false};
  return choose_kernel(l, kernel_cpu(), layer_override(algo, label).c_str()).kernel == Kernel::WinoU8;
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : omp_get_num_procs();
}

// 64-byte aligned float storage for our own kernels' per-thread scratch (small; the network's buffers are blocks of
// the backend's workspace).
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
  std::vector<memory> keep;           // every memory the step reads or writes (lifetimes; kept alive)
  const char* label = nullptr;        // conv layer whose f32 output int8 calibration records (else nullptr)
  memory out;                         // that output
  std::function<void()> fn = {};      // run instead of `prim` when set (our own kernels)
  int threads = 0;                    // OpenMP threads `prim` was created for and runs on (0 = the caller's)
};

// Per-layer maximum of the fp32 activations (after bias + ReLU), keyed by layer label ("conv1a" ... "conv4b",
// "score_a", "descriptor_a"): int8 calibration's result. `channel`: the same per output channel, for the layers whose
// readers are all our Winograd kernel (which takes a u8 scale per channel at no cost; see output_scales).
struct LayerMax {
  std::map<std::string, float> layer;
  std::map<std::string, std::vector<float>> channel;
  float at(const std::string& label) const { return layer.at(label); }
};

// The int8 layers' s8 weights (codes and per-output-channel scales) by layer label: int8 calibration's other result
// (GPTQ, gptq.hpp). A layer without an entry rounds to the nearest code (detail::s8_nearest).
using Int8Weights = std::map<std::string, detail::S8Weights>;

// The calibration pass's view of each recorded layer output (label, the f32 memory in the plan's layout).
using OutputTap = std::function<void(const char* label, const memory& out)>;

// The activation layouts whose row ranges the striped block addresses: `block` channels per piece, each piece
// rows x width x block values contiguous (nChw16c / nChw8c: 16 / 8; nhwc: every channel, one piece; nchw: 1).
struct RowLayout {
  tag t = tag::undef;
  int block = 0;
  explicit operator bool() const { return block > 0; }
};

RowLayout row_layout_of(const memory::desc& d) {
  const auto dims = d.dims();
  if (dims.size() != 4) return {};
  const int c = static_cast<int>(dims[1]);
  for (const auto& [t, block] : {std::pair{tag::nChw16c, 16}, {tag::nChw8c, 8}, {tag::nhwc, c}, {tag::nchw, 1}}) {
    if (c % block != 0) continue;
    if (memory::desc(dims, d.data_type(), t) == d) return {t, block};
  }
  return {};
}

// Bytes of `rows` rows of one piece (rows x width x block values) of a tensor `width` wide.
std::size_t piece_bytes(const RowLayout& l, dt type, std::int64_t rows, std::int64_t width) {
  return static_cast<std::size_t>(rows * width * l.block) * memory::data_type_size(type);
}

// The f32 activation `m` (1 x C x H x W in row layout `l`) as our kernels address it (wino_f32.hpp), at its data
// handle now.
detail::F32Act act_of(const memory& m, const RowLayout& l) {
  const auto dims = m.get_desc().dims();
  const auto rows = static_cast<std::size_t>(dims[2]), width = static_cast<std::size_t>(dims[3]);
  const auto block = static_cast<std::size_t>(l.block);
  return {static_cast<float*>(m.get_data_handle()), l.block, rows * width * block, width * block};
}

// The label's own static string (kLayerLabels, the pools), which a Step may keep.
const char* static_label(const std::string& label) {
  for (const char* l : kLayerLabels)
    if (label == l) return l;
  throw Error(ErrorKind::Internal, "no layer " + label);
}

// Weights in a primitive's layout, shared by every plan of a backend that wants the same layout for a layer: frame
// sizes mostly change activations, not weight layouts, so a folder of photos of 10 sizes keeps one copy of the
// weights (about 12 MB in fp32) instead of ten. Thread-safe; an entry lives while a plan uses it.
class WeightCache {
 public:
  struct Entry {
    memory w, b;
  };
  // The entry for `label` in layout `wd` (int8: with input scale `s_in`), made by `make` when no live plan has it.
  std::shared_ptr<const Entry> get(const std::string& label, const memory::desc& wd, float s_in,
                                   const std::function<Entry()>& make) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto live = it->entry.lock();
      if (!live) {
        it = entries_.erase(it);
        continue;
      }
      if (it->label == label && it->wd == wd && it->s_in == s_in) return live;
      ++it;
    }
    auto e = std::make_shared<const Entry>(make());
    entries_.push_back({label, wd, s_in, e});
    return e;
  }
  // Our fp32 Winograd weights of `label` packed in panels of `oc_block` (wino_f32.hpp), made by `make` when no live
  // plan has them.
  std::shared_ptr<const detail::WinoF32> wino_f32(const std::string& label, int oc_block,
                                                  const std::function<detail::WinoF32()>& make) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = wino_f32_.begin(); it != wino_f32_.end();) {
      auto live = it->second.lock();
      if (!live) {
        it = wino_f32_.erase(it);
        continue;
      }
      if (it->first == label && live->oc_block == oc_block) return live;
      ++it;
    }
    auto e = std::make_shared<const detail::WinoF32>(make());
    wino_f32_.emplace_back(label, e);
    return e;
  }
  // Bytes of the entries plans use now.
  std::size_t bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t total = 0;
    for (const auto& k : entries_)
      if (const auto live = k.entry.lock()) total += live->w.get_desc().get_size() + live->b.get_desc().get_size();
    for (const auto& [label, entry] : wino_f32_)
      if (const auto live = entry.lock()) total += live->bytes();
    return total;
  }

 private:
  struct Key {
    std::string label;
    memory::desc wd;
    float s_in;
    std::weak_ptr<const Entry> entry;
  };
  mutable std::mutex mu_;
  std::vector<Key> entries_;
  std::vector<std::pair<std::string, std::weak_ptr<const detail::WinoF32>>> wino_f32_;
};

// A convolution's rows; its width keeps its size, zero padding kernel / 2 on both sides.
struct ConvRows {
  int ih = 0, oh = 0;       // input and output rows
  int top = 0, bottom = 0;  // zero padding rows
};

// One convolution as a plan runs it: made once per input layout and geometry (the stripes of one shape share it),
// its primitive and weights made when a step first uses it.
struct ConvKind {
  std::string label;
  memory::desc src;  // the producer's layout it was made for
  ConvRows rows;
  memory::desc dst_given;  // the dst the caller asked for (zero desc: any)
  dnnl::convolution_forward::primitive_desc pd;
  std::string algo;                                           // "direct", "winograd", "winograd->direct" ...
  dnnl::algorithm alg = dnnl::algorithm::convolution_direct;  // the one pd was made with
  bool reorder_out = false;  // writes its own layout, a reorder fills the given dst (outputs on AVX2 / SSE4.1)
  LayerType type = LayerType::F32;
  float s_in = 0, s_out = 1;  // int8 scales (s_out: of a u8 output, else 1)
  std::vector<float> ws;      // int8 weight scales per output channel
  int threads = 0;            // the OpenMP threads pd was made for, its primitive is made and runs on (f32
                              // Winograd, see make_any_algo; 0 = the plan's)
  dnnl::primitive prim;       // made by realise()
  dnnl::primitive src_reorder;
  std::shared_ptr<const WeightCache::Entry> weights;  // the weights and bias in the primitive's layout
};

struct PoolKind {
  memory::desc src, dst_given;
  dnnl::pooling_forward::primitive_desc pd;
  dnnl::primitive prim;
};

// A stripe shape oneDNN cannot run with the unstriped plan's implementation (the plan then runs unstriped).
class StripeUnsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::optional<detail::ActivationView> view_of(const memory& m);

class OneDnnExecutor final : public Executor {
 public:
  // `plan`: each layer's type. `act_max` (plans with an Int8 layer, else nullptr): the calibration. `record`
  // (fp32 only, else nullptr): run() raises each layer's entry to the `clip` percentile of its output (the
  // calibration pass, 100 = the maximum; such a plan is unstriped) and hands the output to `tap` when given.
  // `int8_weights`: the int8 layers' codes (else nearest rounding).
  OneDnnExecutor(const model::Weights& w, const PlanOptions& o, int threads, const LayerPlan& plan,
                 const dnnl::engine& eng, std::shared_ptr<Workspace> workspace,
                 std::shared_ptr<WeightCache> weight_cache, const LayerMax* act_max = nullptr,
                 LayerMax* record = nullptr, double clip = 100, const Int8Weights* int8_weights = nullptr,
                 OutputTap tap = nullptr);
  ~OneDnnExecutor() override;

  int height() const override { return h_; }
  int width() const override { return w_; }
  void run(const float* input, bool descriptors) override;
  const float* logits() const override { return at<const float>(logits_block_); }
  float* descriptors() override { return at<float>(descriptors_block_); }
  std::string plan_description() const override { return description_; }
  std::size_t workspace_bytes() const override { return workspace_bytes_; }
  std::size_t plan_bytes() const override { return plan_bytes_; }

 private:
  template <class T>
  T* at(int block) const {
    return bound_ ? reinterpret_cast<T*>(bound_ + mplan_.offset(block)) : nullptr;
  }
  // A memory `offset` bytes into workspace block `block`, bound when the plan runs.
  memory block_memory(const memory::desc& d, int block, std::size_t offset = 0);
  // A memory in a new block of its own.
  memory new_activation(const memory::desc& d) { return block_memory(d, mplan_.add(d.get_size())); }
  // A memory reading the caller's input plane `offset` bytes in, bound when the plan runs.
  memory input_memory(const memory::desc& d, std::size_t offset);
  // A step's temporary (an input reorder) or scratchpad: a block of its own, or the current lane's (stripes).
  memory temp_memory(const memory::desc& d, bool scratch);
  int block_of(const memory& m) const { return block_of_.at(m.get()); }

  // conv1a relu conv1b relu pool1 over the whole frame; returns pool1's output.
  memory add_block1(const model::Weights& wt, const memory& x);
  // The unstriped block 1 as the stripes' template (descriptors only): the implementations and layouts every
  // stripe must reproduce. Throws StripeUnsupported for layouts the stripes cannot address.
  struct Block1Template {
    std::string a_impl, b_impl;  // conv1a's (empty for int8: ours), conv1b's
    dnnl::algorithm a_alg = dnnl::algorithm::convolution_direct, b_alg = dnnl::algorithm::convolution_direct;
    std::size_t b_scratch = 0;  // conv1b's scratchpad
    bool b_ours = false;        // conv1b (+ pool1) by our fp32 Winograd kernel (b_impl, b_out unused)
    memory::desc a_out, b_out, p1;
    RowLayout a_layout, b_layout, p_layout;
  };
  Block1Template block1_template(const model::Weights& wt);
  // Workspace bytes of one lane for stripes of `rows` rows (its buffers and its primitives' scratch), from the
  // primitive descriptors of every stripe height of the frame; throws StripeUnsupported when oneDNN cannot run one.
  std::size_t stripe_lane_bytes(const model::Weights& wt, const Block1Template& t, int rows);
  // conv1b over a stripe of `rows` output rows, reading `s1` (rows + 2 rows): "valid" in height, writing `rows`
  // rows; or, where oneDNN's one-thread choice for that shape is F(2x2,3x3) Winograd while the unstriped layer's is
  // F(4x4,3x3) (a narrow stripe: F(2x2,3x3) takes inputs that fit its cache budget), with bottom padding 1, which
  // F(2x2,3x3) refuses (it needs equal top and bottom padding), writing one more row that nothing reads. Its
  // dst_given is the lane buffer's layout. Throws StripeUnsupported when oneDNN has no such implementation.
  ConvKind& stripe_conv1b(const model::Conv& cb, const Block1Template& t, const memory::desc& s1, int rows);
  // The candidates (stripes.hpp) in the order to try: those whose lanes fit the stripe budget, largest first, then
  // the others that still need less than the unstriped block, cheapest first; those oneDNN cannot run are left out.
  std::vector<int> stripe_rows_to_try(const model::Weights& wt, const Block1Template& t);
  // The block in stripes of `stripe_rows` rows (stripes.hpp); throws StripeUnsupported when oneDNN cannot.
  memory add_block1_striped(const model::Weights& wt, const Block1Template& t, int stripe_rows);
  void run_stripes(std::byte* p1);
  // conv (+bias, +relu) reading `src`; returns its dst: `dst` when given (`output`: the executor's logits /
  // descriptors), else a new block. `impl`: the oneDNN implementation it must use (StripeUnsupported if none).
  memory add_conv(std::vector<Step>& seq, const model::Conv& c, const memory& src, int ww, bool relu,
                  const ConvRows& rows, const memory* dst, bool output, const char* label, const char* impl = nullptr,
                  dnnl::algorithm impl_alg = dnnl::algorithm::convolution_direct);
  // impl (a stripe): the implementation to use, with the descriptor's algorithm impl_alg.
  ConvKind& conv_kind(const model::Conv& c, const memory::desc& src, float s_in, int ww, bool relu,
                      const ConvRows& rows, const memory::desc* dst, bool output, const char* label, const char* impl,
                      dnnl::algorithm impl_alg = dnnl::algorithm::convolution_direct);
  void realise(ConvKind& k, const model::Conv& c);
  // 2x2 max pooling of `src` into `dst` (when given) or a new block.
  memory add_pool(std::vector<Step>& seq, const memory& src, const char* label, const memory* dst = nullptr);
  PoolKind& pool_kind(const memory::desc& src, const memory::desc* dst, const char* label);
  // int8: conv1a (+bias, +relu) quantised to u8 NHWC as it is written (conv1a_u8.hpp): frame rows [y0, y1) into
  // `dst` (its first row is frame row y0; rows outside the frame are set to zero).
  // `y0` is read when the step runs (a lane aims its program at each stripe); `lane` >= 0: the step runs on that
  // lane's thread alone, else on the plan's threads.
  void add_conv1a_u8(std::vector<Step>& seq, std::shared_ptr<const int> y0, int rows, const memory& dst, int lane);
  void init_conv1a_u8(const model::Conv& c);
  // Copies the input rows [*first_row - 1, ...) of a stripe into `m` (1 x 1 x rows x w), zeros outside the frame.
  void add_input_rows(std::vector<Step>& seq, const memory& m, std::shared_ptr<const int> first_row);
  // Sets rows [r0, r1) of `m` (layout `l`) to zero.
  void add_zero_rows(std::vector<Step>& seq, const memory& m, const RowLayout& l, int r0, int r1);
  void execute(std::vector<Step>& seq, dnnl::stream& stream);
  void bind(std::byte* base, const float* input);
  // int8: the scale that maps this activation to u8 (q = round(v * scale)); 0 when unknown (not int8).
  float scale_of(const memory& m) const {
    const auto it = scale_.find(m.get());
    return it == scale_.end() ? 0.f : it->second;
  }
  float out_scale(const char* label) const {
    return act_max_ && act_max_->at(label) > 0 ? 255.f / act_max_->at(label) : 1.f;
  }
  // The s8 weights of int8 layer `label`: the calibration's (GPTQ) or, without, the nearest codes.
  detail::S8Weights s8_weights_of(const char* label, const model::Conv& c) const {
    if (int8_weights_)
      if (const auto it = int8_weights_->find(label); it != int8_weights_->end()) return it->second;
    return detail::s8_nearest(c.weight, c.out_channels);
  }
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
  // conv1a writes u8 itself (add_conv1a_u8) when conv1b reads u8.
  bool conv1a_u8() const { return type_of("conv1b") == LayerType::Int8; }
  // int8: the 3x3 layers after conv1a (+ pool1, pool2, pool3) by our Winograd kernel (wino_u8.hpp) where it runs
  // here: prepare_wino made the layer's weights (init_wino_conv1b for conv1b, at the plan's start: the stripes need
  // it).
  bool wino(const std::string& label) const { return wino_.count(label) > 0; }
  // The layers the kernel will take (wino_planned_): winograd_expected, a 3x3 int8 layer writing u8 with the
  // shapes the kernel takes, in an int8 plan, and conv1b among them (the kernel reads u8 channels-last, from conv1b
  // on).
  void plan_wino(const model::Weights& wt);
  // The u8 scales layer `label` writes (one per channel where every reader of its output is planned on the kernel
  // and the calibration has per-channel figures, else one for all): 255 / the calibrated maximum.
  std::vector<float> output_scales(const std::string& label) const;
  // Prepares planned layer `label`, reading u8 at in_scales (one, or one per input channel).
  void prepare_wino(const std::string& label, const model::Conv& c, const std::vector<float>& in_scales);
  void init_wino_conv1b(const model::Conv& c) {
    prepare_wino("conv1b", c, conv1a_.channel_scale ? conv1a_channel_scale_ : std::vector<float>{conv1a_.scale});
  }
  // The input scales of an activation: its channels' (channel_scale_) or its one (scale_of).
  std::vector<float> input_scales(const memory& x) const {
    const auto it = channel_scale_.find(x.get());
    return it != channel_scale_.end() ? it->second : std::vector<float>{scale_of(x)};
  }
  // Calibration pass: raises record_->channel[label] to this plane's percentile of each channel of `out`.
  void record_channel_percentiles(const char* label, const memory& out);
  // Layer `label` (+ its pool where pooled_after) by the kernel: conv rows [y0, y0 + rows) of an hh x ww activation
  // from `in` (its row 0 is frame row y0 - 1 when `first_row` is given, a stripe, else the whole activation: rows
  // [0, hh)) into their rows of `out`; `lane` as add_conv1a_u8's.
  void add_wino(std::vector<Step>& seq, const std::string& label, std::shared_ptr<const int> first_row, int rows,
                int hh, int ww, const memory& in, const memory& out, int lane);
  // A 3x3 layer after conv1b (+ its pool where pooled_after) by the kernel when conv1b's runs there, its input `x`
  // (hh x ww) is u8 channels-last and prepare_wino takes it; else an empty memory (the caller adds oneDNN's).
  memory add_wino_layer(std::vector<Step>& seq, const model::Conv& c, const memory& x, int hh, int ww,
                        const std::string& label);
  // conv1b (+ pool1) over the whole frame / a stripe.
  void add_wino_conv1b(std::vector<Step>& seq, std::shared_ptr<const int> first_row, int rows, const memory& in,
                       const memory& p1, int lane) {
    add_wino(seq, "conv1b", std::move(first_row), rows, h_, w_, in, p1, lane);
  }
  void describe(const std::string& label, const std::string& what);
  // The kernel table's choice for layer `label` (convolution `c`) in this plan (kernel_table.hpp). conv1a in an int8
  // plan writes conv1b's u8 input itself whatever SUPERPOINT_RT_CONV_ALGO says.
  KernelChoice choice(const std::string& label, const model::Conv& c) const;
  // A 3x3 layer after conv1a (+ its pool where pooled_after) by one of our Winograd kernels where the table chose it
  // and its input `x` (hh x ww) is what the kernel reads (add_wino_layer: int8; add_wino_f32_layer: fp32); else an
  // empty memory (the caller adds oneDNN's).
  memory add_ours(std::vector<Step>& seq, const model::Conv& c, const memory& x, int hh, int ww,
                  const std::string& label) {
    if (memory y = add_wino_layer(seq, c, x, hh, ww, label)) return y;
    return add_wino_f32_layer(seq, c, x, hh, ww, label);
  }
  // fp32: layer `label` by our Winograd kernel (wino_f32.hpp) reading `x` (hh x ww), f32 in a row layout; with its
  // pool fused where pooled_after, except in the calibration pass, which records the unpooled output (a oneDNN pool
  // follows there). Empty where prepare_wino_f32 refuses.
  memory add_wino_f32_layer(std::vector<Step>& seq, const model::Conv& c, const memory& x, int hh, int ww,
                            const std::string& label);
  // Prepares layer `label` on our fp32 kernel for an input in layout `in` (the shared packed weights, the vector
  // kernel, the per-thread scratch); false where the table did not choose it or the kernel cannot read `in`.
  bool prepare_wino_f32(const std::string& label, const model::Conv& c, const RowLayout& in);
  bool wino_f32(const std::string& label) const { return wino_f32_.count(label) > 0; }
  // The channel block of what prepared layer `label` writes (its vector kernel's width).
  int wino_f32_block(const std::string& label) const { return wino_f32_variant_.at(label) == "avx512" ? 16 : 8; }
  // conv1b + pool1 of a stripe by our fp32 kernel: the lane buffer `s1` (rows + 2 conv1a rows from frame row
  // *first_row) into its rows of `p1`, on lane `lane`'s thread.
  void add_wino_f32_stripe(std::vector<Step>& seq, std::shared_ptr<const int> first_row, int rows, const memory& s1,
                           const memory& p1, int lane);

  int h_, w_, hc_, wc_, threads_;
  dnnl::engine eng_;
  dnnl::stream stream_;
  std::shared_ptr<Workspace> workspace_;
  std::shared_ptr<WeightCache> weight_cache_;
  MemoryPlan mplan_;
  std::size_t workspace_bytes_ = 0, plan_bytes_ = 0;
  struct Binding {
    memory m;
    int block;           // workspace block, or -1: the caller's input
    std::size_t offset;  // bytes into the block / the input
  };
  std::vector<Binding> bindings_;
  std::map<dnnl_memory_t, int> block_of_;  // memory -> its workspace block
  std::byte* bound_ = nullptr;             // the workspace base the bindings point into
  const float* bound_input_ = nullptr;
  int logits_block_ = -1, descriptors_block_ = -1;
  std::vector<Step> trunk_, desc_head_;
  std::vector<std::unique_ptr<ConvKind>> conv_kinds_;
  std::vector<std::unique_ptr<PoolKind>> pool_kinds_;
  std::map<std::string, bool> described_;
  std::string description_;
  const char* algo_override_ = nullptr;
  KernelCpu cpu_;  // what the kernel table sees (kernel_cpu())
  LayerPlan plan_;
  double clip_ = 100;  // calibration pass: the percentile recorded
  int block_ = 8;      // channel block of the activation layout (16 on AVX-512, else 8)
  tag block_tag_ = tag::nChw8c;
  const LayerMax* act_max_ = nullptr;
  LayerMax* record_ = nullptr;
  const Int8Weights* int8_weights_ = nullptr;
  OutputTap tap_;
  std::map<dnnl_memory_t, float> scale_;            // int8 activation scales by memory (see scale_of)
  std::vector<float> conv1a_weight_, conv1a_bias_;  // int8 conv1a_u8 (copies: the executor may outlive the Weights)
  detail::Conv1aU8 conv1a_;
  detail::Conv1aU8Row conv1a_row_ = nullptr;
  std::map<std::string, detail::WinoU8> wino_;  // by layer label
  std::set<std::string> wino_planned_;
  std::map<std::string, std::vector<float>> wino_out_scales_;  // what each prepared layer writes (output_scales)
  std::map<dnnl_memory_t, std::vector<float>> channel_scale_;  // u8 activations with a scale per channel
  std::vector<float> conv1a_channel_scale_;                    // conv1a_.channel_scale's storage
  std::set<std::string> record_channels_;                      // calibration: the layers recorded per channel
  detail::WinoU8Kernel wino_kernel_ = nullptr;
  AlignedBuffer wino_scratch_;  // wino_u8_scratch_bytes per thread
  // Our fp32 Winograd layers by label: packed weights (shared by the backend's plans), vector kernel, its name.
  std::map<std::string, std::shared_ptr<const detail::WinoF32>> wino_f32_;
  std::map<std::string, detail::WinoF32Kernel> wino_f32_kernel_;
  std::map<std::string, std::string> wino_f32_variant_;
  AlignedBuffer wino_f32_scratch_;  // the largest wino_f32_scratch_bytes per thread
  AlignedBuffer conv1a_scratch_;    // conv1a_u8_scratch_floats(w) per thread
  // Stripes of the full-resolution block (add_block1_striped): one program per stripe shape per lane.
  struct StripeShape {
    int rows = 0;
    bool top = false, bottom = false;  // the first stripe / a stripe whose halo reaches past the frame's end
    bool operator==(const StripeShape&) const = default;
  };
  struct StripeProgram {
    StripeShape shape;
    std::vector<Step> steps;
    std::shared_ptr<int> first_row;        // the frame row of conv1a's first output row (y0 - 1), set per stripe
    std::vector<memory> pool_dst;          // pool1's output pieces, aimed per stripe
    std::vector<std::size_t> pool_offset;  // each piece's offset in pool1's output
    std::size_t pool_row_bytes = 0;        // one row of a piece of pool1's output
  };
  struct Lane {
    dnnl::stream stream;
    int index = 0;
    int input = -1, s1 = -1, s2 = -1, temp = -1, scratch = -1;  // workspace blocks
    std::vector<StripeProgram> programs;
  };
  std::vector<Stripe> stripes_;
  std::vector<Lane> lanes_;
  Lane* lane_ = nullptr;  // the lane whose program is being built
};

OneDnnExecutor::OneDnnExecutor(const model::Weights& wt, const PlanOptions& o, int threads, const LayerPlan& plan,
                               const dnnl::engine& eng, std::shared_ptr<Workspace> workspace,
                               std::shared_ptr<WeightCache> weight_cache, const LayerMax* act_max, LayerMax* record,
                               double clip, const Int8Weights* int8_weights, OutputTap tap)
    : h_(o.height),
      w_(o.width),
      hc_(o.height / 8),
      wc_(o.width / 8),
      threads_(threads),
      eng_(eng),
      workspace_(std::move(workspace)),
      weight_cache_(std::move(weight_cache)),
      plan_(plan),
      clip_(clip),
      act_max_(act_max),
      record_(record),
      int8_weights_(int8_weights),
      tap_(std::move(tap)) {
  if (h_ < 8 || w_ < 8 || h_ > 16384 || w_ > 16384) {
    throw Error(ErrorKind::InvalidArgument, "network frame " + std::to_string(w_) + "x" + std::to_string(h_) +
                                                " (width x height) out of range: each side must be in [8, 16384]");
  }
  if (o.stripe_rows < -1 || (o.stripe_rows > 0 && o.stripe_rows % kStripeAlign != 0)) {
    throw Error(ErrorKind::InvalidArgument, "stripe_rows = " + std::to_string(o.stripe_rows) +
                                                " must be -1 (the rule), 0 (no stripes) or a positive multiple of " +
                                                std::to_string(kStripeAlign));
  }
  algo_override_ = std::getenv("SUPERPOINT_RT_CONV_ALGO");
  cpu_ = kernel_cpu();
  if (cpu_.onednn_avx512_core) {
    block_ = 16;
    block_tag_ = tag::nChw16c;
  } else {  // AVX2 and SSE4.1 JIT kernels block channels by 8
    block_ = 8;
    block_tag_ = tag::nChw8c;
  }
  omp_set_num_threads(threads_);  // primitive creation reads the thread count (blocking heuristics)
  try {
    stream_ = dnnl::stream(eng_);
    plan_wino(wt);
    // Calibration records the trunk's activations per channel too where the int8 plan's kernel can use them.
    if (record_ && winograd_expected("conv1b", wt.encoder[1], algo_override_))
      record_channels_ = {"conv1a", "conv1b", "conv2a", "conv2b", "conv3a", "conv3b", "conv4a", "conv4b"};
    if (conv1a_u8()) init_conv1a_u8(wt.encoder[0]);
    if (conv1a_u8()) init_wino_conv1b(wt.encoder[1]);
    // Stripes (stripes.hpp) unless asked not to; the calibration pass records whole layers. A stripe height whose
    // first or last stripe oneDNN cannot run is refused and the next one tried; whatever a refused attempt planned
    // stays unused.
    memory x;
    if (!record_ && o.stripe_rows != 0) {
      std::string refused = "no stripe height fits";
      try {
        const Block1Template t = block1_template(wt);
        const std::vector<int> tries = o.stripe_rows > 0 ? std::vector<int>{o.stripe_rows} : stripe_rows_to_try(wt, t);
        for (const int rows : tries) {
          if (rows >= h_ / 2 * 2) continue;
          const std::string description = description_;
          const auto described = described_;
          try {
            x = add_block1_striped(wt, t, rows);
            break;
          } catch (const StripeUnsupported& e) {
            trunk_.clear();
            lanes_.clear();
            description_ = description;
            described_ = described;
            refused = e.what();
          }
        }
      } catch (const StripeUnsupported& e) {
        refused = e.what();
      }
      if (!x) describe("block1", "unstriped(" + refused + ")");
    }
    if (!x) x = add_block1(wt, input_memory(memory::desc({1, 1, h_, w_}, dt::f32, tag::nchw), 0));
    int hh = h_ / 2, ww = w_ / 2;
    for (std::size_t i = 2; i < kTrunkLayers; ++i) {
      if (const memory y = add_ours(trunk_, wt.encoder[i], x, hh, ww, kLayerLabels[i])) {
        x = y;
        if (pooled_after(kLayerLabels[i])) {  // the kernel pooled it
          hh /= 2;
          ww /= 2;
        }
        continue;
      }
      x = add_conv(trunk_, wt.encoder[i], x, ww, true, {hh, hh, 1, 1}, nullptr, false, kLayerLabels[i]);
      if (pooled_after(kLayerLabels[i])) {
        x = add_pool(trunk_, x, i == 3 ? "pool2" : "pool3");
        hh /= 2;
        ww /= 2;
      }
    }
    const memory trunk_out = x;  // conv4b's output; both heads read it
    const memory::desc lg_md({1, wt.score_b.out_channels, hc_, wc_}, dt::f32, tag::nhwc);
    const memory::desc ds_md({1, wt.descriptor_b.out_channels, hc_, wc_}, dt::f32, tag::nhwc);
    logits_block_ = mplan_.add(lg_md.get_size());
    descriptors_block_ = mplan_.add(ds_md.get_size());
    const memory lg = block_memory(lg_md, logits_block_), ds = block_memory(ds_md, descriptors_block_);
    const ConvRows same{hh, hh, 1, 1}, pointwise{hh, hh, 0, 0};
    x = add_ours(trunk_, wt.score_a, trunk_out, hh, ww, "score_a");
    if (!x) x = add_conv(trunk_, wt.score_a, trunk_out, ww, true, same, nullptr, false, "score_a");
    add_conv(trunk_, wt.score_b, x, ww, false, pointwise, &lg, true, "score_b");
    x = add_ours(desc_head_, wt.descriptor_a, trunk_out, hh, ww, "descriptor_a");
    if (!x) x = add_conv(desc_head_, wt.descriptor_a, trunk_out, ww, true, same, nullptr, false, "descriptor_a");
    add_conv(desc_head_, wt.descriptor_b, x, ww, false, pointwise, &ds, true, "descriptor_b");

    // Lifetimes: the steps run in order, the trunk then the descriptor head. The logits stay valid through the
    // descriptor head, and the descriptor map is live for the whole run: run(false) leaves it as it was.
    int step = 0;
    for (const auto* seq : {&trunk_, &desc_head_}) {
      for (const Step& s : *seq) {
        for (const memory& m : s.keep)
          if (const auto it = block_of_.find(m.get()); it != block_of_.end()) mplan_.use(it->second, step);
        ++step;
      }
    }
    mplan_.use(logits_block_, step);
    mplan_.use(descriptors_block_, 0);
    mplan_.use(descriptors_block_, step);
    workspace_bytes_ = mplan_.place();
    workspace_->add_user(workspace_bytes_);
    // The weights are the backend's (WeightCache).
    plan_bytes_ = conv1a_scratch_.bytes + wino_scratch_.bytes + wino_f32_scratch_.bytes;
    if (!description_.empty()) description_.pop_back();
  } catch (const dnnl::error& e) {
    internal("plan", e);
  }
}

OneDnnExecutor::~OneDnnExecutor() {
  if (workspace_bytes_) workspace_->remove_user(workspace_bytes_);
}

memory OneDnnExecutor::block_memory(const memory::desc& d, int block, std::size_t offset) {
  memory m(d, eng_, DNNL_MEMORY_NONE);
  bindings_.push_back({m, block, offset});
  block_of_[m.get()] = block;
  return m;
}

memory OneDnnExecutor::temp_memory(const memory::desc& d, bool scratch) {
  if (!lane_) return new_activation(d);
  const int block = scratch ? lane_->scratch : lane_->temp;
  mplan_.grow(block, d.get_size());
  return block_memory(d, block);
}

memory OneDnnExecutor::input_memory(const memory::desc& d, std::size_t offset) {
  memory m(d, eng_, DNNL_MEMORY_NONE);
  bindings_.push_back({m, -1, offset});
  return m;
}

void OneDnnExecutor::describe(const std::string& label, const std::string& what) {
  if (described_[label]) return;
  described_[label] = true;
  description_ += label + ":" + what + " ";
}

memory OneDnnExecutor::add_block1(const model::Weights& wt, const memory& x) {
  memory a;
  if (conv1a_u8()) {
    a = new_activation(memory::desc({1, wt.encoder[0].out_channels, h_, w_}, dt::u8, tag::nhwc));
    add_conv1a_u8(trunk_, std::make_shared<const int>(0), h_, a, -1);
    if (wino("conv1b")) {
      const memory p1 =
          new_activation(memory::desc({1, wt.encoder[1].out_channels, h_ / 2, w_ / 2}, dt::u8, tag::nhwc));
      add_wino_conv1b(trunk_, nullptr, h_ / 2 * 2, a, p1, -1);
      return p1;
    }
  } else {
    a = add_conv(trunk_, wt.encoder[0], x, w_, true, {h_, h_, 1, 1}, nullptr, false, "conv1a");
  }
  if (const memory p1 = add_wino_f32_layer(trunk_, wt.encoder[1], a, h_, w_, "conv1b")) return p1;
  const memory b = add_conv(trunk_, wt.encoder[1], a, w_, true, {h_, h_, 1, 1}, nullptr, false, "conv1b");
  return add_pool(trunk_, b, "pool1");
}

OneDnnExecutor::Block1Template OneDnnExecutor::block1_template(const model::Weights& wt) {
  Block1Template t;
  const model::Conv& ca = wt.encoder[0];
  if (conv1a_u8()) {
    t.a_out = memory::desc({1, ca.out_channels, h_, w_}, dt::u8, tag::nhwc);
  } else {
    const memory::desc plane({1, 1, h_, w_}, dt::f32, tag::nchw);
    const ConvKind& ka = conv_kind(ca, plane, 0.f, w_, true, {h_, h_, 1, 1}, nullptr, false, "conv1a", nullptr);
    t.a_impl = ka.pd.impl_info_str();
    t.a_alg = ka.alg;
    t.a_out = ka.pd.dst_desc();
  }
  t.a_layout = row_layout_of(t.a_out);
  if (!conv1a_u8() && prepare_wino_f32("conv1b", wt.encoder[1], t.a_layout)) {
    t.b_ours = true;
    t.p1 = memory::desc({1, wt.encoder[1].out_channels, h_ / 2, w_ / 2}, dt::f32,
                        wino_f32_block("conv1b") == 16 ? tag::nChw16c : tag::nChw8c);
    t.p_layout = row_layout_of(t.p1);
    return t;
  }
  const ConvKind& kb =
      conv_kind(wt.encoder[1], t.a_out, conv1a_.scale, w_, true, {h_, h_, 1, 1}, nullptr, false, "conv1b", nullptr);
  t.b_impl = kb.pd.impl_info_str();
  t.b_alg = kb.alg;
  t.b_scratch = kb.pd.scratchpad_desc().get_size();
  t.b_out = kb.pd.dst_desc();
  t.p1 = pool_kind(t.b_out, nullptr, "pool1").pd.dst_desc();
  t.a_layout = row_layout_of(t.a_out);
  t.b_layout = row_layout_of(t.b_out);
  t.p_layout = row_layout_of(t.p1);
  if (!t.a_layout || !t.b_layout || !t.p_layout || t.b_layout.t != t.p_layout.t)
    throw StripeUnsupported("layouts without row pieces");
  return t;
}

// Sets this thread's OpenMP thread count for the life of the object (stripe primitives are made for one thread).
struct ThreadsFor {
  int restore;
  ThreadsFor(int n, int restore_to) : restore(restore_to) { omp_set_num_threads(n); }
  ~ThreadsFor() { omp_set_num_threads(restore); }
};

ConvKind& OneDnnExecutor::stripe_conv1b(const model::Conv& cb, const Block1Template& t, const memory::desc& s1,
                                        int rows) {
  auto kind = [&](int extra) -> ConvKind& {
    const memory::desc s2({1, cb.out_channels, rows + extra, w_}, t.b_out.data_type(), t.b_layout.t);
    return conv_kind(cb, s1, conv1a_.scale, w_, true, {rows + 2, rows + extra, 0, extra}, &s2, false, "conv1b",
                     t.b_impl.c_str(), t.b_alg);
  };
  try {
    return kind(0);
  } catch (const StripeUnsupported&) {
    // Measured bit-identical to the unstriped F(4x4,3x3) layer on every row of every stripe (AMD Zen 4, frames
    // 37x45 to 640x480): each output tile is computed from the same 6x6 input tile; only the unread last row differs.
    if (t.b_impl.rfind("jit_wino_4x3", 0) != 0) throw;
    return kind(1);
  }
}

std::size_t OneDnnExecutor::stripe_lane_bytes(const model::Weights& wt, const Block1Template& t, int rows) {
  const ThreadsFor one(1, threads_);
  const model::Conv& ca = wt.encoder[0];
  const model::Conv& cb = wt.encoder[1];
  // Every stripe height of the frame (the last one may differ): a lane's blocks hold the largest of each.
  std::size_t s1_bytes = 0, s2_bytes = 0, in_bytes = 0, scratch = 0, temp = 0;
  for (const Stripe& st : stripes_of(h_ / 2 * 2, rows, threads_)) {
    const int r = st.y1 - st.y0;
    const memory::desc s1({1, ca.out_channels, r + 2, w_}, t.a_out.data_type(), t.a_layout.t);
    s1_bytes = std::max(s1_bytes, s1.get_size());
    if (!t.a_impl.empty()) {
      const memory::desc in({1, 1, r + 4, w_}, dt::f32, tag::nchw);
      in_bytes = std::max(in_bytes, in.get_size());
      const ConvKind& ka =
          conv_kind(ca, in, 0.f, w_, true, {r + 4, r + 2, 0, 0}, &s1, false, "conv1a", t.a_impl.c_str(), t.a_alg);
      scratch = std::max(scratch, ka.pd.scratchpad_desc().get_size());
    }
    if (t.b_ours) continue;  // our kernel writes pool1 straight from s1 (its scratch is the plan's)
    const ConvKind& kb = stripe_conv1b(cb, t, s1, r);
    s2_bytes = std::max(s2_bytes, kb.dst_given.get_size());
    scratch = std::max(scratch, kb.pd.scratchpad_desc().get_size());
    if (kb.pd.src_desc() != s1) temp = std::max(temp, kb.pd.src_desc().get_size());
  }
  return in_bytes + s1_bytes + s2_bytes + temp + scratch;
}

std::vector<int> OneDnnExecutor::stripe_rows_to_try(const model::Weights& wt, const Block1Template& t) {
  // What the stripes replace: the unstriped block's two full-resolution activations and conv1b's scratch.
  const std::size_t unstriped = t.a_out.get_size() + t.b_out.get_size() + t.b_scratch;
  const std::size_t budget = std::min(stripe_budget_bytes(t.p1.get_size()), unstriped);
  std::vector<int> fitting;
  std::vector<std::pair<std::size_t, int>> others;  // (bytes, rows)
  for (const int rows : kStripeRowCandidates) {
    if (rows >= h_ / 2 * 2) continue;
    try {
      const auto lanes = static_cast<std::size_t>(
          std::min<int>(threads_, static_cast<int>(stripes_of(h_ / 2 * 2, rows, threads_).size())));
      const std::size_t bytes = lanes * stripe_lane_bytes(wt, t, rows);
      if (bytes <= budget)
        fitting.push_back(rows);
      else if (bytes < unstriped)
        others.emplace_back(bytes, rows);
    } catch (const StripeUnsupported&) {
    }
  }
  std::sort(others.begin(), others.end());
  for (const auto& [bytes, rows] : others) fitting.push_back(rows);
  return fitting;
}

memory OneDnnExecutor::add_block1_striped(const model::Weights& wt, const Block1Template& t, int stripe_rows) {
  const model::Conv& ca = wt.encoder[0];
  const model::Conv& cb = wt.encoder[1];
  const std::string& a_impl = t.a_impl;
  const std::string& b_impl = t.b_impl;
  const memory::desc& a_out = t.a_out;
  const memory::desc& b_out = t.b_out;
  const memory::desc& p1_md = t.p1;
  const RowLayout& a_layout = t.a_layout;
  const RowLayout& b_layout = t.b_layout;
  const RowLayout& p_layout = t.p_layout;
  // Our Winograd kernel writes pool1 as u8 NHWC (what oneDNN's int8 pooling of its int8 conv1b writes too).
  const memory p1 =
      new_activation(wino("conv1b") ? memory::desc({1, cb.out_channels, h_ / 2, w_ / 2}, dt::u8, tag::nhwc) : p1_md);
  if (act_max_) scale_[p1.get()] = out_scale("conv1b");

  // conv1b rows [0, 2 * (h / 2)): pool1 floors an odd height, so the last row of an odd frame is never read.
  stripes_ = stripes_of(h_ / 2 * 2, stripe_rows, threads_);
  // The stripes run side by side, one lane (thread) each, every primitive of a stripe on its lane's thread alone:
  // a stripe is too small to split its primitives over threads (each split is a fork and a barrier, measured up to
  // 2x the CPU time of the unstriped block on a busy 2-core machine), and lanes need no barrier until the block ends.
  // The stripe primitives are made for one thread (their blocking, scratch) under the implementation the unstriped
  // layer has at threads_ (looked up by name: oneDNN's kernels compute each value the same way at any thread count,
  // tests/backend/test_onednn.cpp ThreadCountsGiveBitIdenticalOutputs).
  const int lanes = std::min<int>(threads_, static_cast<int>(stripes_.size()));
  const ThreadsFor one(1, threads_);
  struct LaneReset {
    Lane*& lane;
    ~LaneReset() { lane = nullptr; }
  } lane_reset{lane_};
  std::vector<memory> keep{p1};
  lanes_.resize(static_cast<std::size_t>(lanes));
  for (int l = 0; l < lanes; ++l) {
    Lane& lane = lanes_[static_cast<std::size_t>(l)];
    lane.stream = dnnl::stream(eng_);
    lane.index = l;
    lane.s1 = mplan_.add(0);
    lane.s2 = mplan_.add(0);
    lane.input = mplan_.add(0);
    lane.temp = mplan_.add(0);
    lane.scratch = mplan_.add(0);
    lane_ = &lane;
    for (const Stripe& s : stripes_) {
      const int rows = s.y1 - s.y0;
      const StripeShape shape{rows, s.y0 == 0, s.y1 + 2 > h_};
      if (std::any_of(lane.programs.begin(), lane.programs.end(),
                      [&](const StripeProgram& p) { return p.shape == shape; }))
        continue;
      StripeProgram prog;
      prog.shape = shape;
      // conv1a: frame rows [y0 - 1, y1 + 1) from input rows [y0 - 2, y1 + 2) clipped to the frame.
      const memory::desc s1_md({1, ca.out_channels, rows + 2, w_}, a_out.data_type(), a_layout.t);
      mplan_.grow(lane.s1, s1_md.get_size());
      const memory s1 = block_memory(s1_md, lane.s1);
      prog.first_row = std::make_shared<int>(0);
      if (conv1a_u8()) {
        add_conv1a_u8(prog.steps, prog.first_row, rows + 2, s1, l);
      } else {
        // conv1a reads its input rows from a lane buffer holding zeros where they are outside the frame, "valid" in
        // height: one primitive for every stripe of a height (and no padding of two rows, which oneDNN 2.6's direct
        // kernel for one input channel crashes on in some shapes); a padded tap of the unstriped layer is a +0 * w
        // product here (stripes.hpp).
        const memory::desc in_md({1, 1, rows + 4, w_}, dt::f32, tag::nchw);
        mplan_.grow(lane.input, in_md.get_size());
        const memory in = block_memory(in_md, lane.input);
        add_input_rows(prog.steps, in, prog.first_row);
        add_conv(prog.steps, ca, in, w_, true, {rows + 4, rows + 2, 0, 0}, &s1, false, "conv1a", a_impl.c_str(),
                 t.a_alg);
        // Rows outside the frame hold conv1a of padding; conv1b reads zeros there (the unstriped layer's padding).
        if (shape.top) add_zero_rows(prog.steps, s1, a_layout, 0, 1);
        if (s.y1 + 1 > h_) add_zero_rows(prog.steps, s1, a_layout, h_ - s.y0 + 1, rows + 2);
      }
      if (wino("conv1b") || t.b_ours) {  // conv1b + pool1 in one step, reading the lane's conv1a rows
        if (t.b_ours)
          add_wino_f32_stripe(prog.steps, prog.first_row, rows, s1, p1, l);
        else
          add_wino_conv1b(prog.steps, prog.first_row, rows, s1, p1, l);
        for (const Step& st : prog.steps) keep.insert(keep.end(), st.keep.begin(), st.keep.end());
        lane.programs.push_back(std::move(prog));
        continue;
      }
      // conv1b: valid in height, frame rows [y0, y1) (and a row nothing reads, see stripe_conv1b).
      const ConvKind& kb = stripe_conv1b(cb, t, s1_md, rows);
      const memory::desc s2_md = kb.dst_given;
      const ConvRows b_rows = kb.rows;
      mplan_.grow(lane.s2, s2_md.get_size());
      const memory s2 = block_memory(s2_md, lane.s2);
      add_conv(prog.steps, cb, s1, w_, true, b_rows, &s2, false, "conv1b", b_impl.c_str(), t.b_alg);
      // pool1: each channel piece of the stripe (its first `rows` rows) into its rows of pool1's output (aimed per
      // stripe).
      const memory::desc src_md({1, b_layout.block, rows, w_}, b_out.data_type(), b_layout.t);
      const memory::desc dst_md({1, b_layout.block, rows / 2, w_ / 2}, b_out.data_type(), b_layout.t);
      for (int j = 0; j < cb.out_channels / b_layout.block; ++j) {
        const memory src = block_memory(src_md, lane.s2, j * piece_bytes(b_layout, b_out.data_type(), b_rows.oh, w_));
        const memory dst(dst_md, eng_, DNNL_MEMORY_NONE);
        if (act_max_) {
          scale_[src.get()] = scale_of(s2);
          scale_[dst.get()] = scale_of(s2);
        }
        add_pool(prog.steps, src, "pool1", &dst);
        prog.pool_dst.push_back(dst);
        prog.pool_offset.push_back(j * piece_bytes(p_layout, p1_md.data_type(), h_ / 2, w_ / 2));
      }
      prog.pool_row_bytes = piece_bytes(p_layout, p1_md.data_type(), 1, w_ / 2);
      for (const Step& st : prog.steps) keep.insert(keep.end(), st.keep.begin(), st.keep.end());
      lane.programs.push_back(std::move(prog));
    }
  }
  Step block;
  block.keep = std::move(keep);
  block.fn = [this, p1] { run_stripes(static_cast<std::byte*>(p1.get_data_handle())); };
  trunk_.push_back(std::move(block));
  int lo = stripes_.front().y1 - stripes_.front().y0, hi = lo;
  for (const Stripe& s : stripes_) {
    lo = std::min(lo, s.y1 - s.y0);
    hi = std::max(hi, s.y1 - s.y0);
  }
  describe("block1", "stripes(" + std::to_string(stripes_.size()) + "x" + std::to_string(lo) +
                         (hi > lo ? "-" + std::to_string(hi) : std::string()) + " rows, " + std::to_string(lanes) +
                         " lanes)");
  return p1;
}

void OneDnnExecutor::run_stripes(std::byte* p1) {
  std::exception_ptr error;
  std::mutex error_mu;
  const int n = static_cast<int>(stripes_.size());
#pragma omp parallel num_threads(static_cast <int>(lanes_.size()))
  {
    // Everything a lane runs runs on its thread alone (the stripe primitives were made for one thread; our conv1a_u8
    // and oneDNN read this thread's ICV).
    omp_set_num_threads(1);
    Lane& lane = lanes_[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < n; ++i) {
      try {
        const Stripe& s = stripes_[static_cast<std::size_t>(i)];
        const StripeShape shape{s.y1 - s.y0, s.y0 == 0, s.y1 + 2 > h_};
        StripeProgram& prog = *std::find_if(lane.programs.begin(), lane.programs.end(),
                                            [&](const StripeProgram& p) { return p.shape == shape; });
        // Aim the program at this stripe: its frame rows (conv1a's input), its rows of pool1.
        *prog.first_row = s.y0 - 1;
        for (std::size_t j = 0; j < prog.pool_dst.size(); ++j)
          dnnl_memory_set_data_handle(
              prog.pool_dst[j].get(),
              p1 + prog.pool_offset[j] + static_cast<std::size_t>(s.y0 / 2) * prog.pool_row_bytes);
        execute(prog.steps, lane.stream);
      } catch (...) {  // an exception must not leave an OpenMP region
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  omp_set_num_threads(threads_);
  if (error) std::rethrow_exception(error);
}

ConvKind& OneDnnExecutor::conv_kind(const model::Conv& c, const memory::desc& src_md, float s_in, int ww, bool relu,
                                    const ConvRows& rows, const memory::desc* dst_given, bool output, const char* label,
                                    const char* impl, dnnl::algorithm impl_alg) {
  const memory::desc no_dst;
  for (const auto& k : conv_kinds_)
    if (k->label == label && k->src == src_md && k->rows.ih == rows.ih && k->rows.oh == rows.oh &&
        k->rows.top == rows.top && k->rows.bottom == rows.bottom && k->dst_given == (dst_given ? *dst_given : no_dst))
      return *k;
  auto kind = std::make_unique<ConvKind>();
  ConvKind& k = *kind;
  k.label = label;
  k.src = src_md;
  k.rows = rows;
  if (dst_given) k.dst_given = *dst_given;
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
  const dt out_dt = output ? dt::f32 : dst_type(label, type);
  k.type = type;
  const memory::desc src_any({1, c.in_channels, rows.ih, ww}, ldt, tag::any);
  // Activations in oneDNN's blocked layout for this ISA: the Winograd and the classic direct JIT kernels read and
  // write it, so consecutive layers never need a reorder (format_tag::any would let oneDNN 2.6 pick channels-last
  // for its brgemm kernels, which measured slower here and forces reorders around every Winograd layer).
  // bf16 and int8 layers let oneDNN pick (it picks its channels-last brgconv kernels, which also cover AMX on CPUs
  // that have it; for bf16 here the blocked jit_bf16 kernels cost the same CPU time, 620-630 ms per forward).
  const tag act = c.out_channels % block_ == 0 && type == LayerType::F32 ? block_tag_ : tag::any;
  const memory::desc w_any({c.out_channels, c.in_channels, c.kernel, c.kernel}, int8 ? dt::s8 : ldt, tag::any);
  const memory::desc b_md({c.out_channels}, dt::f32, tag::x);
  memory::desc dst_md = dst_given ? *dst_given : memory::desc({1, c.out_channels, rows.oh, ww}, out_dt, act);

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
  if (int8) {
    k.s_in = s_in;
    if (!(s_in > 0)) throw Error(ErrorKind::Internal, std::string("int8: no input scale for ") + label);
    if (out_dt == dt::u8) k.s_out = out_scale(label);
    std::vector<float> oscale;
    k.ws = s8_weights_of(label, c).scales;
    for (int o = 0; o < c.out_channels; ++o) oscale.push_back(k.s_out / (s_in * k.ws[static_cast<std::size_t>(o)]));
    attr.set_output_scales(1 << 1, oscale);
  }
  // oneDNN's algorithm: what the kernel table chose (winograd / auto only where SUPERPOINT_RT_CONV_ALGO asks), else
  // direct, also where the table chose one of our kernels and the layer's neighbours did not let it run. oneDNN 2.6
  // has Winograd kernels for f32 only (a bf16 or int8 layer asked for it records "winograd->direct" below).
  const Kernel kernel = choice(label, c).kernel;
  const ConvAlgo algo = kernel == Kernel::OnednnWinograd ? ConvAlgo::Winograd
                        : kernel == Kernel::OnednnAuto   ? ConvAlgo::Auto
                                                         : ConvAlgo::Direct;
  auto make_pd = [&](dnnl::algorithm alg, const memory::desc& s) {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, s, w_any, b_md, dst_md, {1, 1},
                                        {rows.top, pad}, {rows.bottom, pad}),
        attr, eng_);
  };
  const dnnl::algorithm want = impl                         ? impl_alg
                               : algo == ConvAlgo::Winograd ? dnnl::algorithm::convolution_winograd
                               : algo == ConvAlgo::Auto     ? dnnl::algorithm::convolution_auto
                                                            : dnnl::algorithm::convolution_direct;
  k.algo = to_string(algo);
  k.alg = want;
  // Which f32 Winograd kernel oneDNN 2.6 picks depends on the thread count at creation: F(2x2, 3x3)
  // (jit_fp32_wino_2x3) only while the layer's input fits a cache budget that grows with the threads, else F(4x4, 3x3)
  // (jit_wino_4x3); the two round differently. Each kernel on its own gives the same bits at every thread count
  // (measured on AMD Zen 4 for every SuperPoint layer shape at frames from 52x76 to 1600x1200, 1 to 32 threads,
  // tests/backend: Precision.*AcrossRunsPlansAndThreadCounts). So the kernel is the one oneDNN picks at ONE thread,
  // whatever the thread count: it is created (and run, Step::threads) at the largest thread count <= the plan's at
  // which oneDNN still picks it. F(4x4, 3x3) gives way to F(2x2, 3x3) only for small layers (e.g. conv1b at
  // 104x152 from 3 threads on Zen 4), which then run on fewer threads; at 640x480 every layer keeps every thread.
  // A stripe (made for one thread, on its lane) is the one-thread choice for its own shape, which must be the
  // unstriped layer's (checked below): the stripes then compute what the unstriped layer computes.
  // A stripe uses the unstriped layer's algorithm and nothing else: oneDNN 2.6 lists its Winograd implementations
  // for a direct convolution too, and creating one from such a descriptor crashes (found with a 16-row stripe).
  const int caller_threads = omp_get_max_threads();
  auto make_any_algo = [&](const memory::desc& s) {
    k.threads = 0;
    try {
      if (want == dnnl::algorithm::convolution_winograd && !impl) {
        omp_set_num_threads(1);
        const std::string chosen = make_pd(want, s).impl_info_str();  // throws: no Winograd kernel
        for (int t = caller_threads; t >= 1; --t) {
          omp_set_num_threads(t);
          auto p = make_pd(want, s);
          if (chosen != p.impl_info_str()) continue;
          omp_set_num_threads(caller_threads);
          if (t != caller_threads) k.threads = t;
          return p;
        }
      }
      omp_set_num_threads(caller_threads);
      return make_pd(want, s);
    } catch (const dnnl::error&) {
      omp_set_num_threads(caller_threads);
      if (want == dnnl::algorithm::convolution_direct || impl) throw;
      k.algo = std::string(to_string(algo)) + "->direct";  // no Winograd kernel for this shape / ISA
      k.alg = dnnl::algorithm::convolution_direct;
      return make_pd(dnnl::algorithm::convolution_direct, s);
    }
  };
  auto is_ref = [](const dnnl::convolution_forward::primitive_desc& p) {
    return std::string(p.impl_info_str()).rfind("ref", 0) == 0;
  };
  try {
    // Prefer reading the producer's layout as it is (no reorder); let oneDNN pick when that has no fast kernel.
    try {
      k.pd = make_any_algo(src_md);
    } catch (const dnnl::error&) {
    }
    if (!k.pd || is_ref(k.pd)) k.pd = make_any_algo(src_any);
    // Channels-last output with an odd channel count (65) has no JIT kernel on AVX2 / SSE4.1: let the convolution
    // write its own layout and reorder into the output buffer instead of running oneDNN's slow reference kernel.
    // The same when the blocked activation layout has no JIT kernel (conv1a on SSE4.1): any layout oneDNN likes.
    if (is_ref(k.pd) && !impl) {
      dst_md = memory::desc({1, c.out_channels, rows.oh, ww}, out_dt, tag::any);
      k.pd = make_any_algo(src_any);
      k.reorder_out = output;
    }
  } catch (const dnnl::error& e) {
    if (!impl) throw;
    throw StripeUnsupported(std::string(label) + ": " + e.what());
  }
  if (impl) {  // a stripe: the unstriped layer's implementation, writing the layout asked for
    // oneDNN's own first choice for the stripe's shape, never one reached with next_impl(): oneDNN 2.6 can list an
    // implementation there that crashes when its primitive is made (F(4x4,3x3) Winograd for a 16-row stripe, after
    // F(2x2,3x3)); the plan then tries another stripe height.
    if (std::string(k.pd.impl_info_str()) != impl)
      throw StripeUnsupported(std::string(label) + " picks " + k.pd.impl_info_str() + ", not " + impl +
                              ", for a stripe");
    if (dst_given && k.pd.dst_desc() != *dst_given)
      throw StripeUnsupported(std::string(label) + " writes another layout");
  }

  conv_kinds_.push_back(std::move(kind));
  return k;
}

void OneDnnExecutor::realise(ConvKind& k, const model::Conv& c) {
  if (k.prim) return;
  {
    // The JIT kernel is generated for the thread count its pd was made for.
    const ThreadsFor at(k.threads ? k.threads : omp_get_max_threads(), omp_get_max_threads());
    k.prim = dnnl::convolution_forward(k.pd);
  }
  if (k.pd.src_desc() != k.src) {
    dnnl::primitive_attr rattr;
    const bool quantise = k.type == LayerType::Int8 && k.src.data_type() != dt::u8;
    if (quantise) rattr.set_output_scales(0, {k.s_in});  // f32 / bf16 -> u8
    k.src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng_, k.src, eng_, k.pd.src_desc(), rattr));
  }
  // Weights: OIHW user memory -> the primitive's preferred layout, once per layout among the backend's plans.
  k.weights = weight_cache_->get(k.label, k.pd.weights_desc(), k.s_in, [&] {
    const bool int8 = !k.ws.empty();
    // int8: the codes as f32 values code / ws[o], which the reorder's scales ws[o] map back to exactly those codes
    // (code / ws * ws is within 2 ulp of the code, far from a rounding boundary).
    std::vector<float> codes;
    if (int8) {
      const detail::S8Weights q = s8_weights_of(k.label.c_str(), c);
      const std::size_t per_out = q.codes.size() / static_cast<std::size_t>(c.out_channels);
      codes.resize(q.codes.size());
      for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = q.codes[i] / q.scales[i / per_out];
    }
    memory w_user(memory::desc({c.out_channels, c.in_channels, c.kernel, c.kernel}, dt::f32, tag::oihw), eng_,
                  int8 ? codes.data() : const_cast<float*>(c.weight.data()));
    WeightCache::Entry e{memory(k.pd.weights_desc(), eng_), memory(k.pd.bias_desc(), eng_)};
    dnnl::primitive_attr wattr;
    if (int8) wattr.set_output_scales(1 << 0, k.ws);  // f32 -> s8 per output channel
    dnnl::reorder(w_user, e.w, wattr).execute(stream_, w_user, e.w);
    if (k.pd.bias_desc().data_type() != dt::f32) throw Error(ErrorKind::Internal, "oneDNN bias is not f32");
    for (std::size_t o = 0; o < c.bias.size(); ++o)
      static_cast<float*>(e.b.get_data_handle())[o] = int8 ? c.bias[o] * k.s_in * k.ws[o] : c.bias[o];
    stream_.wait();
    return e;
  });
}

memory OneDnnExecutor::add_conv(std::vector<Step>& seq, const model::Conv& c, const memory& src, int ww, bool relu,
                                const ConvRows& rows, const memory* dst, bool output, const char* label,
                                const char* impl, dnnl::algorithm impl_alg) {
  const memory::desc dst_desc = dst ? dst->get_desc() : memory::desc();
  ConvKind& k = conv_kind(c, src.get_desc(), scale_of(src), ww, relu, rows, dst ? &dst_desc : nullptr, output, label,
                          impl, impl_alg);
  realise(k, c);
  memory in = src;
  if (k.src_reorder) {
    // The layout the convolution wants for its input: reorder once per run (the producer's output may still be
    // needed: both heads read conv4b's).
    in = temp_memory(k.pd.src_desc(), false);
    seq.push_back({k.src_reorder, {{DNNL_ARG_FROM, src.get()}, {DNNL_ARG_TO, in.get()}}, {src, in}, nullptr, {}});
    describe(std::string(label) + "_in", "reorder");
  }
  const memory out = dst && !k.reorder_out ? *dst : new_activation(k.pd.dst_desc());
  Step s{k.prim,
         {{DNNL_ARG_SRC, in.get()},
          {DNNL_ARG_WEIGHTS, k.weights->w.get()},
          {DNNL_ARG_BIAS, k.weights->b.get()},
          {DNNL_ARG_DST, out.get()}},
         {in, k.weights->w, k.weights->b, out},
         nullptr,
         {}};
  if (const std::size_t sb = k.pd.scratchpad_desc().get_size(); sb > 0) {
    const memory scratch = temp_memory(memory::desc({static_cast<memory::dim>(sb)}, dt::u8, tag::x), true);
    s.args.push_back({DNNL_ARG_SCRATCHPAD, scratch.get()});
    s.keep.push_back(scratch);
  }
  s.threads = k.threads;
  if (record_ && !output) {
    s.label = label;
    s.out = out;
  }
  seq.push_back(std::move(s));
  // The scale a u8 reader of this activation quantises it with (its own input reorder when this layer writes f32 or
  // bf16).
  if (act_max_ && !output) scale_[out.get()] = out_scale(label);
  describe(label, std::string(to_string(k.type)) + ":" + k.algo + "(" + k.pd.impl_info_str() +
                      (k.threads ? "@" + std::to_string(k.threads) + "t" : "") + ")");
  if (k.reorder_out) {
    seq.push_back(
        {dnnl::reorder(out, *dst), {{DNNL_ARG_FROM, out.get()}, {DNNL_ARG_TO, dst->get()}}, {out, *dst}, nullptr, {}});
    describe(std::string(label) + "_out", "reorder");
    return *dst;
  }
  return out;
}

void OneDnnExecutor::init_conv1a_u8(const model::Conv& c) {
  conv1a_weight_ = c.weight;
  conv1a_bias_ = c.bias;
  conv1a_ = {conv1a_weight_.data(), conv1a_bias_.data(), c.out_channels, out_scale("conv1a")};
  if (std::vector<float> s = output_scales("conv1a"); s.size() > 1) {  // conv1b is our kernel: a scale per channel
    conv1a_channel_scale_ = std::move(s);
    conv1a_.channel_scale = conv1a_channel_scale_.data();
  }
  const std::string kernel = choice("conv1a", c).variant;
  conv1a_row_ = kernel == "avx512" ? detail::conv1a_u8_row_avx512
                : kernel == "avx2" ? detail::conv1a_u8_row_avx2
                                   : detail::conv1a_u8_row_reference;
  conv1a_scratch_ =
      AlignedBuffer(sizeof(float) * detail::conv1a_u8_scratch_floats(w_) * static_cast<std::size_t>(threads_));
  description_ +=
      std::string("conv1a:f32:conv1a_u8(ours:") + kernel + ")" + (conv1a_.channel_scale ? "+u8_per_channel" : "") + " ";
  described_["conv1a"] = true;
}

void OneDnnExecutor::add_conv1a_u8(std::vector<Step>& seq, std::shared_ptr<const int> y0p, int rows, const memory& dst,
                                   int lane) {
  // Channels-last u8: what oneDNN's int8 brgconv kernels read (conv1b takes it without a reorder).
  scale_[dst.get()] = conv1a_.scale;
  if (conv1a_.channel_scale) channel_scale_[dst.get()] = conv1a_channel_scale_;
  Step s;
  s.keep = {dst};
  s.fn = [this, dst, y0p, rows, lane] {
    const int y0 = *y0p, y1 = y0 + rows;
    auto* out = static_cast<std::uint8_t*>(dst.get_data_handle());
    const std::size_t row_bytes = static_cast<std::size_t>(w_) * static_cast<std::size_t>(conv1a_.channels);
    // Rows outside the frame (a stripe's halo) are zero: what conv1b's padding reads there.
    const int r0 = std::max(0, y0), r1 = std::min(h_, y1);
    if (y0 < r0) std::memset(out, 0, static_cast<std::size_t>(r0 - y0) * row_bytes);
    if (r1 < y1)
      std::memset(out + static_cast<std::size_t>(r1 - y0) * row_bytes, 0,
                  static_cast<std::size_t>(y1 - r1) * row_bytes);
    const std::size_t per_thread = detail::conv1a_u8_scratch_floats(w_);
    if (lane >= 0) {  // a stripe, on its lane's thread
      detail::conv1a_u8_rows(conv1a_, conv1a_row_, bound_input_, h_, w_, r0, r1, out, y0,
                             conv1a_scratch_.p + static_cast<std::size_t>(lane) * per_thread);
      return;
    }
    // Rows split evenly over the threads; every row depends on the input only (same bytes for any split).
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      detail::conv1a_u8_rows(conv1a_, conv1a_row_, bound_input_, h_, w_, r0 + (r1 - r0) * t / n,
                             r0 + (r1 - r0) * (t + 1) / n, out, y0,
                             conv1a_scratch_.p + static_cast<std::size_t>(t) * per_thread);
    }
  };
  seq.push_back(std::move(s));
}

void OneDnnExecutor::plan_wino(const model::Weights& wt) {
  // winograd_expected: AVX-512 VNNI (vpdpwssd) without AMX (oneDNN's AMX int8 kernels multiply several times faster
  // than vpdpwssd's 32 per instruction; not measured: no AMX machine so far), and not kept on oneDNN's kernels by
  // SUPERPOINT_RT_CONV_ALGO=<layer>=direct (comparisons). On AVX2 oneDNN's int8 direct kernels stay (our kernel has
  // no AVX2 path).
  if (!act_max_) return;
  const std::pair<const char*, const model::Conv*> layers[] = {
      {"conv1b", &wt.encoder[1]}, {"conv2a", &wt.encoder[2]}, {"conv2b", &wt.encoder[3]},
      {"conv3a", &wt.encoder[4]}, {"conv3b", &wt.encoder[5]}, {"conv4a", &wt.encoder[6]},
      {"conv4b", &wt.encoder[7]}, {"score_a", &wt.score_a},   {"descriptor_a", &wt.descriptor_a}};
  for (const auto& [label, c] : layers)
    if (winograd_expected(label, *c, algo_override_) && c->kernel == 3 && c->in_channels % 32 == 0 &&
        c->out_channels % 64 == 0 && type_of(label) == LayerType::Int8 && dst_type(label, LayerType::Int8) == dt::u8)
      wino_planned_.insert(label);
  if (!wino_planned_.count("conv1b")) wino_planned_.clear();
}

std::vector<float> OneDnnExecutor::output_scales(const std::string& label) const {
  const auto readers = consumers().find(label);
  bool per_channel = act_max_ && act_max_->channel.count(label) > 0 && readers != consumers().end();
  if (per_channel)
    for (const std::string& r : readers->second) per_channel = per_channel && wino_planned_.count(r) > 0;
  if (!per_channel) return {out_scale(label.c_str())};
  // A channel that never exceeded 0 in calibration (ReLU's zeros) gets scale 1: its u8 values stay 0.
  std::vector<float> s;
  for (const float m : act_max_->channel.at(label)) s.push_back(m > 0 ? 255.f / m : 1.f);
  return s;
}

void OneDnnExecutor::prepare_wino(const std::string& label, const model::Conv& c, const std::vector<float>& in_scales) {
  if (!wino_planned_.count(label)) return;
  const std::vector<float> out = output_scales(label);
  wino_[label] = detail::wino_u8_prepare(c.weight.data(), c.bias.data(), c.in_channels, c.out_channels, in_scales, out);
  wino_out_scales_[label] = out;
  wino_kernel_ = detail::wino_u8_rows_avx512vnni;
  const std::size_t bytes =
      detail::wino_u8_scratch_bytes(c.in_channels, c.out_channels) * static_cast<std::size_t>(threads_);
  if (wino_scratch_.bytes < bytes) wino_scratch_ = AlignedBuffer(bytes);
  describe(label, std::string("int8:wino_u8(ours:avx512_vnni)") + (out.size() > 1 ? "+u8_per_channel" : ""));
  if (pooled_after(label)) describe(label == "conv1b" ? "pool1" : label == "conv2b" ? "pool2" : "pool3", "in_" + label);
}

void OneDnnExecutor::record_channel_percentiles(const char* label, const memory& out) {
  const std::optional<detail::ActivationView> v = view_of(out);
  if (!v) return;  // another layout: the layer keeps one scale
  // The maximum, not the layer's percentile: clipping the top 0.01% of every channel saturated 64 times as many values
  // as the layer's percentile does and cost 0.5 point of keypoint F1 (bench/quality.py, docs/BENCHMARKS.md).
  const std::vector<float> p = detail::channel_percentiles(*v, 100);
  std::vector<float>& m = record_->channel[label];
  m.resize(p.size(), 0.f);
  for (std::size_t c = 0; c < p.size(); ++c) m[c] = std::max(m[c], p[c]);
}

memory OneDnnExecutor::add_wino_layer(std::vector<Step>& seq, const model::Conv& c, const memory& x, int hh, int ww,
                                      const std::string& label) {
  if (!wino("conv1b") || x.get_desc() != memory::desc({1, c.in_channels, hh, ww}, dt::u8, tag::nhwc)) return {};
  prepare_wino(label, c, input_scales(x));
  if (!wino(label)) return {};
  const bool pool = pooled_after(label);
  const memory out =
      new_activation(memory::desc({1, c.out_channels, pool ? hh / 2 : hh, pool ? ww / 2 : ww}, dt::u8, tag::nhwc));
  add_wino(seq, label, nullptr, pool ? hh / 2 * 2 : hh, hh, ww, x, out, -1);
  return out;
}

void OneDnnExecutor::add_wino(std::vector<Step>& seq, const std::string& label, std::shared_ptr<const int> first_row,
                              int rows, int hh, int ww, const memory& in, const memory& out, int lane) {
  const bool pool = pooled_after(label);
  const std::vector<float>& written = wino_out_scales_.at(label);
  if (written.size() > 1)
    channel_scale_[out.get()] = written;  // only planned layers read it
  else
    scale_[out.get()] = written[0];
  Step s;
  s.keep = {in, out};
  s.fn = [this, k = wino_.at(label).view(), pool, in, out, first_row, rows, hh, ww, lane] {
    const std::size_t per_thread = detail::wino_u8_scratch_bytes(k.in_channels, k.out_channels);
    // Bytes of one output row: pooled rows are half as many pixels, and a call's output starts at its first row.
    const std::size_t out_row = static_cast<std::size_t>(pool ? ww / 2 : ww) * static_cast<std::size_t>(k.out_channels);
    auto out_at = [&](int y0) { return static_cast<std::size_t>(pool ? y0 / 2 : y0) * out_row; };
    const auto* src = static_cast<const std::uint8_t*>(in.get_data_handle());
    auto* dst = static_cast<std::uint8_t*>(out.get_data_handle());
    auto* scratch = reinterpret_cast<std::byte*>(wino_scratch_.p);
    if (lane >= 0) {  // a stripe, on its lane's thread: its buffer holds rows y0 - 1 .. y0 + rows
      const int y0 = *first_row + 1;
      wino_kernel_(k, {src, y0 - 1, rows + 2, ww, y0, y0 + rows, dst + out_at(y0), pool},
                   scratch + static_cast<std::size_t>(lane) * per_thread);
      return;
    }
    // The whole activation: its tiles shared evenly over the threads (each tile reads the input only: the same
    // bytes for any split).
    const int tiles = (rows + 3) / 4 * ((ww + 3) / 4);
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      const int first = tiles * t / n, count = tiles * (t + 1) / n - first;
      if (count > 0)
        wino_kernel_(k, {src, 0, hh, ww, 0, rows, dst, pool, first, count},
                     scratch + static_cast<std::size_t>(t) * per_thread);
    }
  };
  seq.push_back(std::move(s));
}

KernelChoice OneDnnExecutor::choice(const std::string& label, const model::Conv& c) const {
  const bool int8_reader = label == "conv1a" && conv1a_u8();
  const KernelLayer l{c.in_channels, c.out_channels, c.kernel, c.in_channels == 1 ? LayerType::F32 : type_of(label),
                      int8_reader};
  return choose_kernel(l, cpu_, int8_reader ? nullptr : layer_override(algo_override_, label).c_str());
}

bool OneDnnExecutor::prepare_wino_f32(const std::string& label, const model::Conv& c, const RowLayout& in) {
  if (wino_f32(label)) return true;
  const KernelChoice ch = choice(label, c);
  if (ch.kernel != Kernel::WinoF32 || !in) return false;
  // The AVX-512 kernel reads and writes 16 channels per vector: an input blocked by 8 (oneDNN's layout when its JIT is
  // capped below avx512_core) takes the AVX2 kernel (the same bits).
  std::string variant = ch.variant;
  if (variant == "avx512" && in.block % 16 != 0) variant = cpu_.avx2_fma ? "avx2" : "";
  if (variant.empty() || in.block % 8 != 0) return false;
  const int ob = variant == "avx512" ? detail::kWinoF32OcBlockAvx512 : detail::kWinoF32OcBlockAvx2;
  if (c.out_channels % ob != 0 || c.in_channels % (variant == "avx512" ? 16 : 8) != 0) return false;
  wino_f32_[label] = weight_cache_->wino_f32(label, ob, [&] {
    return detail::wino_f32_prepare(c.weight.data(), c.bias.data(), c.in_channels, c.out_channels, ob);
  });
  wino_f32_kernel_[label] = variant == "avx512" ? detail::wino_f32_rows_avx512 : detail::wino_f32_rows_avx2;
  wino_f32_variant_[label] = variant;
  const std::size_t bytes =
      detail::wino_f32_scratch_bytes(c.in_channels, c.out_channels) * static_cast<std::size_t>(threads_);
  if (wino_f32_scratch_.bytes < bytes) wino_f32_scratch_ = AlignedBuffer(bytes);
  describe(label, "f32:wino_f32(ours:" + variant + ")");
  if (pooled_after(label) && !record_)
    describe(label == "conv1b" ? "pool1" : label == "conv2b" ? "pool2" : "pool3", "in_" + label);
  return true;
}

memory OneDnnExecutor::add_wino_f32_layer(std::vector<Step>& seq, const model::Conv& c, const memory& x, int hh, int ww,
                                          const std::string& label) {
  const memory::desc xd = x.get_desc();
  const RowLayout li = row_layout_of(xd);
  if (xd.data_type() != dt::f32 || xd.dims() != memory::dims{1, c.in_channels, hh, ww} ||
      !prepare_wino_f32(label, c, li))
    return {};
  const bool pool = pooled_after(label) && !record_;
  const memory out = new_activation(memory::desc({1, c.out_channels, pool ? hh / 2 : hh, pool ? ww / 2 : ww}, dt::f32,
                                                 wino_f32_block(label) == 16 ? tag::nChw16c : tag::nChw8c));
  const RowLayout lo = row_layout_of(out.get_desc());
  if (act_max_) scale_[out.get()] = out_scale(label.c_str());  // a u8 reader quantises it in its input reorder
  Step s;
  s.keep = {x, out};
  if (record_) {  // the calibration pass records the layer's (unpooled) output
    s.label = static_label(label);
    s.out = out;
  }
  s.fn = [this, k = wino_f32_.at(label)->view(), fn = wino_f32_kernel_.at(label), x, out, li, lo, pool, hh, ww] {
    const detail::F32Act in = act_of(x, li), o = act_of(out, lo);
    const int rows = pool ? hh / 2 * 2 : hh;
    const int tiles = (rows + 3) / 4 * ((ww + 3) / 4);
    const std::size_t per_thread = detail::wino_f32_scratch_bytes(k.in_channels, k.out_channels);
    auto* scratch = reinterpret_cast<std::byte*>(wino_f32_scratch_.p);
    // The tiles shared evenly over the threads (each tile reads the input only: the same bytes for any split).
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      const int first = tiles * t / n, count = tiles * (t + 1) / n - first;
      if (count > 0)
        fn(k, {in, 0, hh, ww, 0, rows, o, pool, first, count}, scratch + static_cast<std::size_t>(t) * per_thread);
    }
  };
  seq.push_back(std::move(s));
  if (!pooled_after(label) || pool) return out;
  return add_pool(seq, out, label == "conv1b" ? "pool1" : label == "conv2b" ? "pool2" : "pool3");
}

void OneDnnExecutor::add_wino_f32_stripe(std::vector<Step>& seq, std::shared_ptr<const int> first_row, int rows,
                                         const memory& s1, const memory& p1, int lane) {
  const RowLayout li = row_layout_of(s1.get_desc()), lo = row_layout_of(p1.get_desc());
  Step s;
  s.keep = {s1, p1};
  s.fn = [this, k = wino_f32_.at("conv1b")->view(), fn = wino_f32_kernel_.at("conv1b"), s1, p1, li, lo, first_row, rows,
          lane] {
    const int y0 = *first_row + 1;
    detail::F32Act o = act_of(p1, lo);
    o.data += static_cast<std::size_t>(y0 / 2) * o.row_stride;
    const std::size_t per_thread = detail::wino_f32_scratch_bytes(k.in_channels, k.out_channels);
    fn(k, {act_of(s1, li), y0 - 1, rows + 2, w_, y0, y0 + rows, o, true, 0, -1},
       reinterpret_cast<std::byte*>(wino_f32_scratch_.p) + static_cast<std::size_t>(lane) * per_thread);
  };
  seq.push_back(std::move(s));
}

void OneDnnExecutor::add_input_rows(std::vector<Step>& seq, const memory& m, std::shared_ptr<const int> first_row) {
  Step s;
  s.keep = {m};
  s.fn = [this, m, first_row] {
    auto* out = static_cast<float*>(m.get_data_handle());
    const auto rows = static_cast<int>(m.get_desc().dims()[2]);
    const std::size_t row = static_cast<std::size_t>(w_) * sizeof(float);
    for (int i = 0; i < rows; ++i) {
      const int y = *first_row - 1 + i;
      float* o = out + static_cast<std::size_t>(i) * static_cast<std::size_t>(w_);
      if (y < 0 || y >= h_)
        std::memset(o, 0, row);
      else
        std::memcpy(o, bound_input_ + static_cast<std::size_t>(y) * static_cast<std::size_t>(w_), row);
    }
  };
  seq.push_back(std::move(s));
}

void OneDnnExecutor::add_zero_rows(std::vector<Step>& seq, const memory& m, const RowLayout& l, int r0, int r1) {
  if (r0 >= r1) return;
  Step s;
  s.keep = {m};
  s.fn = [m, l, r0, r1] {
    const memory::desc d = m.get_desc();
    const auto dims = d.dims();
    auto* base = static_cast<std::uint8_t*>(m.get_data_handle());
    const std::size_t piece = piece_bytes(l, d.data_type(), dims[2], dims[3]);
    for (std::int64_t j = 0; j < dims[1] / l.block; ++j)
      std::memset(base + static_cast<std::size_t>(j) * piece + piece_bytes(l, d.data_type(), r0, dims[3]), 0,
                  piece_bytes(l, d.data_type(), r1 - r0, dims[3]));
  };
  seq.push_back(std::move(s));
}

PoolKind& OneDnnExecutor::pool_kind(const memory::desc& src, const memory::desc* dst, const char* label) {
  const memory::desc no_dst;
  for (const auto& k : pool_kinds_)
    if (k->src == src && k->dst_given == (dst ? *dst : no_dst)) return *k;
  auto k = std::make_unique<PoolKind>();
  k->src = src;
  if (dst) k->dst_given = *dst;
  const auto dims = src.dims();
  const memory::desc dst_any({dims[0], dims[1], dims[2] / 2, dims[3] / 2}, src.data_type(), tag::any);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    k->pd = dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src,
                                    dst ? *dst : dst_any, {2, 2}, {2, 2}, {0, 0}, {0, 0}),
        attr, eng_);
  } catch (const dnnl::error& e) {
    if (!dst) throw;
    throw StripeUnsupported(std::string(label) + ": " + e.what());
  }
  pool_kinds_.push_back(std::move(k));
  return *pool_kinds_.back();
}

memory OneDnnExecutor::add_pool(std::vector<Step>& seq, const memory& src, const char* label, const memory* dst) {
  const memory::desc dst_desc = dst ? dst->get_desc() : memory::desc();
  PoolKind& k = pool_kind(src.get_desc(), dst ? &dst_desc : nullptr, label);
  if (!k.prim) k.prim = dnnl::pooling_forward(k.pd);
  const memory out = dst ? *dst : new_activation(k.pd.dst_desc());
  if (scale_.count(src.get())) scale_[out.get()] = scale_of(src);  // max pooling keeps the quantisation
  Step s{k.prim, {{DNNL_ARG_SRC, src.get()}, {DNNL_ARG_DST, out.get()}}, {src, out}, nullptr, {}};
  if (const std::size_t sb = k.pd.scratchpad_desc().get_size(); sb > 0) {
    const memory scratch = temp_memory(memory::desc({static_cast<memory::dim>(sb)}, dt::u8, tag::x), true);
    s.args.push_back({DNNL_ARG_SCRATCHPAD, scratch.get()});
    s.keep.push_back(scratch);
  }
  seq.push_back(std::move(s));
  describe(label, std::string("max2x2(") + k.pd.impl_info_str() + ")");
  return out;
}

void OneDnnExecutor::bind(std::byte* base, const float* input) {
  const bool rebase = base != bound_, reinput = input != bound_input_;
  if (!rebase && !reinput) return;
  for (const Binding& b : bindings_) {
    if (b.block < 0 ? !reinput : !rebase) continue;
    // The input is only ever read (it is the src of conv1a); oneDNN's handles are not const.
    void* p = b.block < 0 ? const_cast<std::byte*>(reinterpret_cast<const std::byte*>(input)) + b.offset
                          : base + mplan_.offset(b.block) + b.offset;
    if (dnnl_memory_set_data_handle(b.m.get(), p) != dnnl_success)
      throw Error(ErrorKind::Internal, "oneDNN refused a buffer address");
  }
  bound_ = base;
  bound_input_ = input;
}

void OneDnnExecutor::execute(std::vector<Step>& seq, dnnl::stream& stream) {
  for (auto& s : seq) {
    if (s.fn) {
      s.fn();
    } else {
      const int caller_threads = s.threads ? omp_get_max_threads() : 0;
      if (s.threads) omp_set_num_threads(s.threads);
      const dnnl_status_t st =
          dnnl_primitive_execute(s.prim.get(), stream.get(), static_cast<int>(s.args.size()), s.args.data());
      if (s.threads) omp_set_num_threads(caller_threads);
      if (st != dnnl_success) {
        throw Error(ErrorKind::Internal, "oneDNN primitive execution failed (status " + std::to_string(st) + ")");
      }
    }
    if (record_ && s.label) {  // calibration pass (f32): raise the layer's entry to this plane's percentile
      stream.wait();
      const float* v = static_cast<const float*>(s.out.get_data_handle());
      const std::size_t n = s.out.get_desc().get_size() / sizeof(float);  // no padding: channels are multiples of 8
      float& r = record_->layer[s.label];
      r = std::max(r, detail::percentile(v, n, clip_));
      if (record_channels_.count(s.label)) record_channel_percentiles(s.label, s.out);
      if (tap_) tap_(s.label, s.out);
    }
  }
}

void OneDnnExecutor::run(const float* input, bool descriptors) {
  omp_set_num_threads(threads_);
  const Workspace::Lease lease = workspace_->acquire(workspace_bytes_);  // other plans of this backend wait
  bind(lease.data(), input);
  execute(trunk_, stream_);
  if (descriptors) execute(desc_head_, stream_);
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

// The f32 activation `m` (1 x C x H x W) as a strided view, read in place: planar, channels-last or blocked by
// channels (nChw8c / nChw16c); nullopt for any other layout (padded channels, several inner blocks).
std::optional<detail::ActivationView> view_of(const memory& m) {
  const dnnl_memory_desc_t& d = m.get_desc().data;
  if (d.ndims != 4 || d.data_type != dnnl_f32 || d.format_kind != dnnl_blocked || d.padded_dims[1] != d.dims[1])
    return std::nullopt;
  const auto& b = d.format_desc.blocking;
  int block = 1;
  if (b.inner_nblks == 1 && b.inner_idxs[0] == 1)
    block = static_cast<int>(b.inner_blks[0]);
  else if (b.inner_nblks != 0)
    return std::nullopt;
  detail::ActivationView v;
  v.data = static_cast<const float*>(m.get_data_handle()) + d.offset0;
  v.channels = static_cast<int>(d.dims[1]);
  v.height = static_cast<int>(d.dims[2]);
  v.width = static_cast<int>(d.dims[3]);
  v.block = block;
  v.channel_block_stride = static_cast<std::size_t>(b.strides[1]);
  v.row_stride = static_cast<std::size_t>(b.strides[2]);
  v.column_stride = static_cast<std::size_t>(b.strides[3]);
  return v;
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
  // Rounding the early full-resolution layers moves keypoints the most (bench/quality.py, top-500 keypoint F1 at
  // 2 px against fp32, mean / worst image, 44 pairs on AMD Zen 4; docs/BENCHMARKS.md "Mixed plans"):
  //   bf16 all-bf16 0.9920 / 0.9719; conv1b, conv2a, conv2b in f32 0.9962 / 0.9893 (issue 21 asks 0.995 / 0.97);
  //   only the 1x1 layers in bf16 0.9991 / 0.9877 (880 pairs); only descriptor_b (the plan without AMX, below)
  //   1.0000 / 1.0000 (880 pairs: the keypoints are fp32's).
  //   int8 (asked: 0.97 / 0.90) all-int8 with every weight at its nearest code 0.9525 / 0.8679; with GPTQ's codes
  //   (gptq.hpp) and six calibration planes 0.9745 / 0.9037 with AVX-512 VNNI, 0.9738 / 0.9091 capped to AVX2.
  //   conv1b and conv2a in f32 (0.9837 / 0.9632 with GPTQ) cost 1.4x the all-int8 forward: int8 is all-int8 on
  //   every CPU. With AVX-512 VNNI (no AMX) every 3x3 layer after conv1a runs on our 16-bit Winograd kernel
  //   (wino_u8.hpp: exact integer transforms, 10-13-bit transformed weights instead of GPTQ's 8-bit codes, a u8
  //   scale per channel between those layers; plan_wino), 0.71x the forward of oneDNN's direct kernels, F1 0.9731 /
  //   0.9158 (docs/BENCHMARKS.md).
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
