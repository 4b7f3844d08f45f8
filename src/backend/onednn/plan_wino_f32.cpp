// Layers on our fp32 Winograd kernel (wino_f32.hpp) in a plan: the whole activation split over the threads by tiles,
// or conv1b + pool1 of a stripe on its lane. See executor.hpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/onednn/executor.hpp"

namespace superpoint_rt::backend::onednn {

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
  // The heads' 3x3 layers write channels-last: their readers, the 1x1 layers, write the executor's channels-last
  // outputs, and oneDNN's 1x1 kernels want matching layouts (a blocked input took a reorder to nhwc first on
  // AVX-512: two of 0.8 ms per forward). Everything else: the blocked layout of oneDNN's kernels around it.
  const bool head = label == "score_a" || label == "descriptor_a";
  const memory out = new_activation(memory::desc({1, c.out_channels, pool ? hh / 2 : hh, pool ? ww / 2 : ww}, dt::f32,
                                                 head                          ? tag::nhwc
                                                 : wino_f32_block(label) == 16 ? tag::nChw16c
                                                                               : tag::nChw8c));
  const RowLayout lo = row_layout_of(out.get_desc());
  if (act_max_) scale_[out.get()] = out_scale(label.c_str());  // a u8 reader quantises it in its input reorder
  // Each thread's transformed input and products: a block of the workspace, live during this step only.
  const std::size_t per_thread = detail::wino_f32_scratch_bytes(c.in_channels, c.out_channels);
  const memory scratch = temp_memory(
      memory::desc({static_cast<memory::dim>(per_thread * static_cast<std::size_t>(threads_))}, dt::u8, tag::x), true);
  Step s;
  s.keep = {x, out, scratch};
  if (record_) {  // the calibration pass records the layer's (unpooled) output
    s.label = static_label(label);
    s.out = out;
  }
  s.fn = [this, k = wino_f32_.at(label)->view(), fn = wino_f32_kernel_.at(label), x, out, scratch, per_thread, li, lo,
          pool, hh, ww] {
    const detail::F32Act in = act_of(x, li), o = act_of(out, lo);
    const int rows = pool ? hh / 2 * 2 : hh;
    const int tiles = (rows + 3) / 4 * ((ww + 3) / 4);
    auto* base = static_cast<std::byte*>(scratch.get_data_handle());
    // The tiles shared evenly over the threads (each tile reads the input only: the same bytes for any split).
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      const int first = tiles * t / n, count = tiles * (t + 1) / n - first;
      if (count > 0)
        fn(k, {in, 0, hh, ww, 0, rows, o, pool, first, count}, base + static_cast<std::size_t>(t) * per_thread);
    }
  };
  seq.push_back(std::move(s));
  if (!pooled_after(label) || pool) return out;
  return add_pool(seq, out, label == "conv1b" ? "pool1" : label == "conv2b" ? "pool2" : "pool3");
}

void OneDnnExecutor::add_wino_f32_stripe(std::vector<Step>& seq, std::shared_ptr<const int> first_row, int rows,
                                         const memory& s1, const memory& p1) {
  const RowLayout li = row_layout_of(s1.get_desc()), lo = row_layout_of(p1.get_desc());
  const detail::WinoF32View k = wino_f32_.at("conv1b")->view();
  // The lane's scratch block (conv1a's oneDNN scratchpad before it in the same lane: they run one after the other).
  const memory scratch = temp_memory(
      memory::desc({static_cast<memory::dim>(detail::wino_f32_scratch_bytes(k.in_channels, k.out_channels))}, dt::u8,
                   tag::x),
      true);
  Step s;
  s.keep = {s1, p1, scratch};
  s.fn = [this, k, fn = wino_f32_kernel_.at("conv1b"), s1, p1, scratch, li, lo, first_row, rows] {
    const int y0 = *first_row + 1;
    detail::F32Act o = act_of(p1, lo);
    o.data += static_cast<std::size_t>(y0 / 2) * o.row_stride;
    fn(k, {act_of(s1, li), y0 - 1, rows + 2, w_, y0, y0 + rows, o, true, 0, -1}, scratch.get_data_handle());
  };
  seq.push_back(std::move(s));
}

}  // namespace superpoint_rt::backend::onednn
