// Layers on our int8 16-bit Winograd kernel (wino_u8.hpp) in a plan, and the u8 scales between them (one per channel
// where every reader is the kernel). See executor.hpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/onednn/executor.hpp"

namespace superpoint_rt::backend::onednn {

// Whether the int8 layer `label` (convolution `c`) is expected on our u8 Winograd kernel (wino_u8.hpp;
// OneDnnExecutor::plan_wino has the full rule, which also needs the layer's neighbours in u8): where the kernel table
// chooses it, unless `algo` (SUPERPOINT_RT_CONV_ALGO) keeps conv1b, whose u8 channels-last output the others read, on
// oneDNN's kernels. Calibration skips GPTQ for those (the kernel takes the f32 weights).
bool winograd_expected(const std::string& label, const model::Conv& c, const char* algo) {
  if (layer_override(algo, "conv1b") == "direct") return false;
  const KernelLayer l{c.in_channels, c.out_channels, c.kernel, LayerType::Int8, false};
  return choose_kernel(l, kernel_cpu(), layer_override(algo, label).c_str()).kernel == Kernel::WinoU8;
}

void OneDnnExecutor::plan_wino(const model::Weights& wt) {
  // winograd_expected: where the kernel table chooses the kernel (AVX-512 VNNI, AVX-VNNI or AVX2, without AMX: oneDNN's
  // AMX int8 kernels multiply several times faster; not measured, no AMX machine so far), and not kept on oneDNN's
  // kernels by SUPERPOINT_RT_CONV_ALGO=<layer>=direct (comparisons).
  if (!act_max_) return;
  const std::pair<const char*, const model::Conv*> layers[] = {
      {"conv1b", &wt.encoder[1]}, {"conv2a", &wt.encoder[2]}, {"conv2b", &wt.encoder[3]},
      {"conv3a", &wt.encoder[4]}, {"conv3b", &wt.encoder[5]}, {"conv4a", &wt.encoder[6]},
      {"conv4b", &wt.encoder[7]}, {"score_a", &wt.score_a},   {"descriptor_a", &wt.descriptor_a}};
  for (const auto& [label, c] : layers)
    if (winograd_expected(label, *c, algo_override_) && type_of(label) == LayerType::Int8 &&
        dst_type(label, LayerType::Int8) == dt::u8)
      wino_planned_.insert(label);
  // The kernel reads u8 channels-last from its producer: conv1a writes it for conv1b (add_conv1a_u8); where conv1b is
  // f32 (the int8 plan's, on our fp32 Winograd), one reorder quantises conv1b's output for conv2a (add_wino_layer).
  const bool from_conv1b = wino_planned_.count("conv1b") > 0;
  const bool from_conv2a = type_of("conv1b") == LayerType::F32 && wino_planned_.count("conv2a") > 0;
  if (!from_conv1b && !from_conv2a) wino_planned_.clear();
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
  const std::string variant = choice(label, c).variant;
  wino_kernel_ = variant == "avx512_vnni" ? detail::wino_u8_rows_avx512vnni
                 : variant == "avx_vnni"  ? detail::wino_u8_rows_avxvnni
                                          : detail::wino_u8_rows_avx2;
  const std::size_t bytes =
      detail::wino_u8_scratch_bytes(c.in_channels, c.out_channels) * static_cast<std::size_t>(threads_);
  if (wino_scratch_.bytes < bytes) wino_scratch_ = AlignedBuffer(bytes);
  describe(label, "int8:wino_u8(ours:" + variant + ")" + (out.size() > 1 ? "+u8_per_channel" : ""));
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
  const memory::desc u8_in({1, c.in_channels, hh, ww}, dt::u8, tag::nhwc);
  if (!wino_planned_.count(label)) return {};
  memory in = x;
  if (label == "conv2a" && x.get_desc().data_type() == dt::f32) {
    // conv1b in f32 (+ pool1): its output to the kernel's u8 channels-last, at conv1b's per-channel scales
    // (output_scales: conv2a, its reader, is planned here), rounded to nearest as oneDNN's reorders round.
    const std::vector<float> s = output_scales("conv1b");
    in = new_activation(u8_in);
    dnnl::primitive_attr a;
    a.set_output_scales(s.size() > 1 ? 1 << 1 : 0, s);
    seq.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(x, in, a)),
                   {{DNNL_ARG_FROM, x.get()}, {DNNL_ARG_TO, in.get()}},
                   {x, in},
                   nullptr,
                   {}});
    if (s.size() > 1)
      channel_scale_[in.get()] = s;
    else
      scale_[in.get()] = s[0];
    describe(label + "_in", s.size() > 1 ? "quantise(u8_per_channel)" : "quantise(u8)");
  }
  if (in.get_desc() != u8_in) return {};
  prepare_wino(label, c, input_scales(in));
  if (!wino(label)) return {};
  const bool pool = pooled_after(label);
  const memory out =
      new_activation(memory::desc({1, c.out_channels, pool ? hh / 2 : hh, pool ? ww / 2 : ww}, dt::u8, tag::nhwc));
  add_wino(seq, label, nullptr, pool ? hh / 2 * 2 : hh, hh, ww, in, out, -1);
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

}  // namespace superpoint_rt::backend::onednn
