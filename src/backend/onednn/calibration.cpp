#include "backend/onednn/calibration.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

namespace superpoint_rt::backend::detail {

float percentile(const float* v, std::size_t n, double q) {
  if (n == 0) return 0;
  if (q >= 100) return *std::max_element(v, v + n);
  const double pos = q / 100.0 * static_cast<double>(n - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t top = n - lo;  // the values ranked lo and above
  if (top <= n / 64) {
    // A high percentile (the calibration's 99.99th: 0.01 % of the values): keep the `top` largest in a min-heap in
    // one pass instead of copying and partitioning every value; its two smallest are ranks lo and lo + 1.
    std::vector<float> heap(v, v + top);
    std::make_heap(heap.begin(), heap.end(), std::greater<>());
    for (std::size_t i = top; i < n; ++i)
      if (v[i] > heap.front()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        heap.back() = v[i];
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const float a = heap.back();
    if (top < 2) return a;
    heap.pop_back();
    const float b = heap.front();
    return static_cast<float>(a + (b - a) * (pos - static_cast<double>(lo)));
  }
  std::vector<float> c(v, v + n);
  std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(lo), c.end());
  const float a = c[lo];
  if (lo + 1 >= n) return a;
  const float b = *std::min_element(c.begin() + static_cast<std::ptrdiff_t>(lo) + 1, c.end());
  return static_cast<float>(a + (b - a) * (pos - static_cast<double>(lo)));
}

std::vector<float> channel_percentiles(const ActivationView& v, double q) {
  const auto channels = static_cast<std::size_t>(v.channels);
  const std::size_t n = static_cast<std::size_t>(v.height) * static_cast<std::size_t>(v.width);
  std::vector<float> out(channels, 0.f);
  if (n == 0) return out;
  auto at = [&](std::size_t c, std::size_t y, std::size_t x) {
    return v.data[(c / static_cast<std::size_t>(v.block)) * v.channel_block_stride + y * v.row_stride +
                  x * v.column_stride + c % static_cast<std::size_t>(v.block)];
  };
  if (q >= 100) {  // the maximum (what the plan records per channel): one pass in memory order, no heaps
    const auto block = static_cast<std::size_t>(v.block);
    std::fill(out.begin(), out.end(), -std::numeric_limits<float>::infinity());
    for (std::size_t c0 = 0; c0 < channels; c0 += block) {
      const std::size_t nb = std::min(block, channels - c0);
      const float* plane = v.data + (c0 / block) * v.channel_block_stride;
      float* m = out.data() + c0;
      for (std::size_t y = 0; y < static_cast<std::size_t>(v.height); ++y)
        for (std::size_t x = 0; x < static_cast<std::size_t>(v.width); ++x) {
          const float* px = plane + y * v.row_stride + x * v.column_stride;
          for (std::size_t j = 0; j < nb; ++j) m[j] = std::max(m[j], px[j]);
        }
    }
    return out;
  }
  const double pos = q / 100.0 * static_cast<double>(n - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t top = n - lo;  // the values ranked lo and above
  if (top > n / 64) {              // a low percentile (experiments): each channel's values, percentile()
    std::vector<float> values(n);
    for (std::size_t c = 0; c < channels; ++c) {
      std::size_t i = 0;
      for (std::size_t y = 0; y < static_cast<std::size_t>(v.height); ++y)
        for (std::size_t x = 0; x < static_cast<std::size_t>(v.width); ++x) values[i++] = at(c, y, x);
      out[c] = percentile(values.data(), n, q);
    }
    return out;
  }
  // percentile()'s heap per channel, fed in each channel's row-major order (the set of the `top` largest does not
  // depend on the order anyway); channel blocks outermost, so that the reads follow the memory.
  std::vector<std::vector<float>> heaps(channels);
  const auto block = static_cast<std::size_t>(v.block);
  for (std::size_t c0 = 0; c0 < channels; c0 += block)
    for (std::size_t y = 0; y < static_cast<std::size_t>(v.height); ++y)
      for (std::size_t x = 0; x < static_cast<std::size_t>(v.width); ++x)
        for (std::size_t c = c0; c < std::min(channels, c0 + block); ++c) {
          const float value = at(c, y, x);
          std::vector<float>& h = heaps[c];
          if (h.size() < top) {
            h.push_back(value);
            if (h.size() == top) std::make_heap(h.begin(), h.end(), std::greater<>());
          } else if (value > h.front()) {
            std::pop_heap(h.begin(), h.end(), std::greater<>());
            h.back() = value;
            std::push_heap(h.begin(), h.end(), std::greater<>());
          }
        }
  for (std::size_t c = 0; c < channels; ++c) {
    std::vector<float>& h = heaps[c];
    std::pop_heap(h.begin(), h.end(), std::greater<>());
    const float a = h.back();
    if (top < 2) {
      out[c] = a;
      continue;
    }
    h.pop_back();
    const float b = h.front();
    out[c] = static_cast<float>(a + (b - a) * (pos - static_cast<double>(lo)));
  }
  return out;
}

int hessian_stride(int h, int w, int planes, std::size_t k) {
  for (int s : {4, 2}) {
    const std::size_t n = static_cast<std::size_t>(planes) * static_cast<std::size_t>((h + s - 1) / s) *
                          static_cast<std::size_t>((w + s - 1) / s);
    if (n >= 10 * k) return s;
  }
  return 1;
}

}  // namespace superpoint_rt::backend::detail
