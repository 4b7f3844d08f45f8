// conv1a on our kernel that writes conv1b's u8 channels-last input (conv1a_u8.hpp) in an int8 plan. See
// executor.hpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/onednn/executor.hpp"

namespace superpoint_rt::backend::onednn {

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
  describe("conv1a", "f32:conv1a_u8(ours:" + kernel + ")" + (conv1a_.channel_scale ? "+u8_per_channel" : ""));
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

}  // namespace superpoint_rt::backend::onednn
