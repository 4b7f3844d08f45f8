#include "backend/onednn/calibration.hpp"

#include <algorithm>
#include <functional>
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

int hessian_stride(int h, int w, int planes, std::size_t k) {
  for (int s : {4, 2}) {
    const std::size_t n = static_cast<std::size_t>(planes) * static_cast<std::size_t>((h + s - 1) / s) *
                          static_cast<std::size_t>((w + s - 1) / s);
    if (n >= 10 * k) return s;
  }
  return 1;
}

}  // namespace superpoint_rt::backend::detail
