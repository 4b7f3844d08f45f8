// The oneDNN backend's plan: the layer chain, the kernel of each layer, the stripes of block 1, the workspace, run().
// See executor.hpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/onednn/executor.hpp"

#include <exception>
#include <stdexcept>

namespace superpoint_rt::backend::onednn {

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
          const auto described = described_;
          try {
            x = add_block1_striped(wt, t, rows);
            break;
          } catch (const StripeUnsupported& e) {
            trunk_.clear();
            lanes_.clear();
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
    plan_bytes_ = conv1a_scratch_.bytes + wino_scratch_.bytes;
    // In the network's order (a layer's input reorder before it, its output reorder after it), whatever order the
    // plan described them in (conv1b is prepared before conv1a where our kernel takes the stripes).
    static const std::vector<std::string> order = {
        "conv1a", "conv1b", "pool1",  "block1", "conv2a",  "conv2b",  "pool2",        "conv3a",
        "conv3b", "pool3",  "conv4a", "conv4b", "score_a", "score_b", "descriptor_a", "descriptor_b"};
    auto rank = [&](const std::string& label) {
      const std::size_t cut = label.rfind('_');
      const std::string base = cut != std::string::npos && (label.substr(cut) == "_in" || label.substr(cut) == "_out")
                                   ? label.substr(0, cut)
                                   : label;
      const auto at = std::find(order.begin(), order.end(), base);
      const int r = 3 * static_cast<int>(at - order.begin());
      return base == label ? r : label.substr(cut) == "_in" ? r - 1 : r + 1;
    };
    std::stable_sort(described_.begin(), described_.end(),
                     [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
    for (const auto& [label, what] : described_) description_ += (description_.empty() ? "" : " ") + label + ":" + what;
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
  for (const auto& [l, w] : described_)
    if (l == label) return;
  described_.emplace_back(label, what);
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
    if (t.b_ours) {  // our kernel writes pool1 straight from s1, its scratch in the lane's scratch block
      scratch = std::max(scratch, detail::wino_f32_scratch_bytes(cb.in_channels, cb.out_channels));
      continue;
    }
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
          add_wino_f32_stripe(prog.steps, prog.first_row, rows, s1, p1);
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

KernelChoice OneDnnExecutor::choice(const std::string& label, const model::Conv& c) const {
  const bool int8_reader = label == "conv1a" && conv1a_u8();
  const KernelLayer l{c.in_channels, c.out_channels, c.kernel, c.in_channels == 1 ? LayerType::F32 : type_of(label),
                      int8_reader};
  return choose_kernel(l, cpu_, int8_reader ? nullptr : layer_override(algo_override_, label).c_str());
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

}  // namespace superpoint_rt::backend::onednn
