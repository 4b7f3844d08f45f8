// The oneDNN backend's plan (OneDnnExecutor, the Executor of backend.hpp) and what its rooms share. Internal to the
// backend; the files are split by what they do:
//   executor.cpp          the plan itself: the layer chain, the choice of kernel per layer (kernel_table.hpp), the
//                         stripes of block 1, the workspace blocks, run()
//   plan_onednn.cpp       layers on oneDNN's primitives (convolutions, pooling, their weights and reorders)
//   plan_wino_f32.cpp     layers on our fp32 Winograd kernel (wino_f32.hpp)
//   plan_wino_u8.cpp      layers on our int8 Winograd kernel (wino_u8.hpp) and their u8 scales
//   plan_conv1a_u8.cpp    conv1a on our u8-writing kernel (conv1a_u8.hpp)
//   onednn_backend.cpp    the Backend: precision, layer plans, int8 calibration
// Thread-safety and lifetimes: onednn_backend.hpp.
#pragma once

#include <omp.h>

#include <cstddef>
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
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/onednn/calibration.hpp"
#include "backend/onednn/conv1a_u8.hpp"
#include "backend/onednn/gptq.hpp"
#include "backend/onednn/kernel_table.hpp"
#include "backend/onednn/onednn_backend.hpp"
#include "backend/onednn/stripes.hpp"
#include "backend/onednn/wino_f32.hpp"
#include "backend/onednn/wino_u8.hpp"
#include "backend/workspace.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::backend::onednn {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

[[noreturn]] inline void internal(const std::string& where, const dnnl::error& e) {
  throw Error(ErrorKind::Internal, "oneDNN failure in " + where + ": " + e.what());
}

// The convolutions by label in the network's order (HF's): the trunk's eight (model::Weights::encoder), then the
// heads' four.
constexpr const char* kLayerLabels[12] = {"conv1a", "conv1b", "conv2a",  "conv2b",  "conv3a",       "conv3b",
                                          "conv4a", "conv4b", "score_a", "score_b", "descriptor_a", "descriptor_b"};
constexpr std::size_t kTrunkLayers = 8;

// MaxPool2d(2, 2) follows these (it floors odd sizes, as PyTorch's).
bool pooled_after(const std::string& label);

// The layers that read each layer's output (max pooling in between keeps the type).
const std::map<std::string, std::vector<std::string>>& consumers();

dt read_type(LayerType t);

// SUPERPOINT_RT_CONV_ALGO is either one algorithm for every layer ("winograd") or a per-layer list
// ("conv1b=winograd,score_a=direct"; "*=direct" sets unlisted layers, otherwise they follow the rule). Returns the
// value for `label` ("" = rule).
std::string layer_override(const char* env, const std::string& label);

// Whether the int8 layer `label` (convolution `c`) is expected on our u8 Winograd kernel (wino_u8.hpp;
// OneDnnExecutor::plan_wino has the full rule, which also needs the layer's neighbours in u8): where the kernel table
// chooses it, unless `algo` (SUPERPOINT_RT_CONV_ALGO) keeps conv1b, whose u8 channels-last output the others read, on
// oneDNN's kernels. Calibration skips GPTQ for those (the kernel takes the f32 weights).
bool winograd_expected(const std::string& label, const model::Conv& c, const char* algo);

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

RowLayout row_layout_of(const memory::desc& d);

// Bytes of `rows` rows of one piece (rows x width x block values) of a tensor `width` wide.
std::size_t piece_bytes(const RowLayout& l, dt type, std::int64_t rows, std::int64_t width);

// The f32 activation `m` (1 x C x H x W in row layout `l`) as our kernels address it (wino_f32.hpp), at its data
// handle now.
detail::F32Act act_of(const memory& m, const RowLayout& l);

// The label's own static string (kLayerLabels, the pools), which a Step may keep.
const char* static_label(const std::string& label);

// Weights in a primitive's layout, shared by every plan of a backend that wants the same layout for a layer: frame
// sizes mostly change activations, not weight layouts, so a folder of photos of 10 sizes keeps one copy of the
// weights (about 20 MB in fp32, most of it our Winograd kernels' transformed weights) instead of ten. Thread-safe; an
// entry lives while a plan uses it.
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

// Sets this thread's OpenMP thread count for the life of the object (stripe primitives are made for one thread).
struct ThreadsFor {
  int restore;
  ThreadsFor(int n, int restore_to) : restore(restore_to) { omp_set_num_threads(n); }
  ~ThreadsFor() { omp_set_num_threads(restore); }
};

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
  // shapes the kernel takes, in an int8 plan, with conv1b among them, or conv1b f32 and conv2a among them (the
  // kernel reads u8 channels-last: conv1a writes it for conv1b, a quantising reorder of conv1b's f32 output for
  // conv2a).
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
  // A 3x3 layer after conv1b (+ its pool where pooled_after) by the kernel where planned, its input `x` (hh x ww)
  // u8 channels-last, or conv2a's f32 input (conv1b's, pooled) quantised to that at conv1b's output scales by a
  // reorder added here; else an empty memory (the caller adds oneDNN's).
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
  // *first_row) into its rows of `p1`, on the lane's thread (its scratch in the lane's block).
  void add_wino_f32_stripe(std::vector<Step>& seq, std::shared_ptr<const int> first_row, int rows, const memory& s1,
                           const memory& p1);

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
  std::vector<std::pair<std::string, std::string>> described_;  // (label, what) as describe() got them
  std::string description_;                                     // described_ in the network's order
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
  // Our fp32 Winograd layers by label: packed weights (shared by the backend's plans), vector kernel, its name (their
  // scratch is workspace).
  std::map<std::string, std::shared_ptr<const detail::WinoF32>> wino_f32_;
  std::map<std::string, detail::WinoF32Kernel> wino_f32_kernel_;
  std::map<std::string, std::string> wino_f32_variant_;
  AlignedBuffer conv1a_scratch_;  // conv1a_u8_scratch_floats(w) per thread
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

}  // namespace superpoint_rt::backend::onednn
