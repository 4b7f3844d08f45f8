// Stripe geometry of the full-resolution block: see stripes.hpp.
#include "backend/onednn/stripes.hpp"

#include <algorithm>

namespace superpoint_rt::backend::onednn {

std::vector<Stripe> stripes_of(int height, int rows, int lanes) {
  std::vector<Stripe> out;
  for (int y = 0; y < height; y += rows) out.push_back({y, std::min(height, y + rows)});
  // A remainder of less than half a stripe joins the stripe before it: a stripe of a row pair is a shape oneDNN's
  // Winograd kernels may not take (F(4x4,3x3) refuses one), and it would cost a fork of its own.
  if (out.size() > 1 && 2 * (out.back().y1 - out.back().y0) < rows) {
    out[out.size() - 2].y1 = out.back().y1;
    out.pop_back();
  }
  const int count = static_cast<int>(out.size());
  if (lanes <= 1 || count <= 1) return out;
  const int n = (count + lanes - 1) / lanes * lanes;
  const int units = height / kStripeAlign;
  const int q = units / n, r = units % n;
  // Each stripe at least half the rows asked for (the shapes the candidates were judged by stay near).
  if (2 * q * kStripeAlign < rows) return out;
  out.clear();
  int y = 0;
  for (int i = 0; i < n; ++i) {
    const int y1 = i + 1 == n ? height : y + (q + (i < r ? 1 : 0)) * kStripeAlign;
    out.push_back({y, y1});
    y = y1;
  }
  return out;
}

std::size_t stripe_budget_bytes(std::size_t pool1_bytes) {
  // Measured on the 2-core development VM (Zen 4, fp32, 2 threads, median CPU ms of the forward over interleaved
  // runs, striped vs unstriped): 640x480 S=32 368 vs 367, S=64 348 vs 367; 1024x768 S=24 744 vs 734, S=32 729,
  // S=64 724; 1600x1200 S=16 1641 vs 1724, S=32 1717, S=64 1640: no slower, and the workspace 2.2-2.3x smaller
  // (162 -> 73 MB, 403 -> 176 MB, 974 -> 418 MB). What varies with the rows is oneDNN's one-thread Winograd scratch
  // (whole-stripe transforms for some shapes: S=48 at 640 wide needs 36 MB per lane, S=64 29 MB), hence a budget
  // and candidates rather than a formula.
  return std::max<std::size_t>(2 * pool1_bytes, std::size_t{32} << 20);
}

}  // namespace superpoint_rt::backend::onednn
