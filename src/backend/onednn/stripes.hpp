// The full-resolution block (conv1a relu conv1b relu pool1) in horizontal stripes: its two 64-channel activations
// at frame resolution are most of the network's memory (2 x 256 bytes per frame pixel in fp32), and pool1's output,
// the first activation the rest of the network reads whole, is a quarter of one. A stripe computes conv1b's output
// rows [y0, y1) and pools them into their place in pool1's output:
//   conv1a: output rows [y0 - 1, y1 + 1) (the halo conv1b reads) from input rows [y0 - 2, y1 + 2) clipped to the
//           frame (zero padding beyond, as the unstriped layer); the rows outside the frame are then set to zero,
//           which is what the unstriped conv1b's zero padding reads there;
//   conv1b: "valid" in height (no top / bottom padding) over those y1 - y0 + 2 rows: y1 - y0 rows whose first is
//           frame row y0;
//   pool1:  rows [y0, y1) -> pool rows [y0 / 2, y1 / 2).
// Bit-identical to the unstriped block (tests/backend/test_stripes.cpp checks every path this machine has: fp32
// direct and Winograd, AVX2 and SSE4.1 JIT kernels, bf16, int8) because every output value is computed by the same
// implementation from the same inputs in the same order:
//   * every stripe primitive is the implementation the unstriped layer uses: oneDNN's choice at one thread (the
//     plan's rule for the unstriped layer too, onednn_backend.cpp make_any_algo), compared by name; the plan refuses
//     a stripe height for which oneDNN has no such implementation. A narrow stripe whose choice would be F(2x2,3x3)
//     Winograd under an F(4x4,3x3) layer computes one more conv1b row that nothing reads, with bottom padding 1:
//     F(2x2,3x3) takes only equal top and bottom padding, so oneDNN then picks F(4x4,3x3);
//   * stripe boundaries are multiples of kStripeAlign rows, so Winograd's output tiles (F(4x4,3x3): 4 rows,
//     F(2x2,3x3): 2 rows) start on the same frame rows as in the unstriped layer, and pool1's 2x2 windows too;
//   * the direct kernels skip padded taps where the stripe reads explicit zeros: each skipped tap is an added
//     +0 * w product, which leaves a float sum unchanged (the accumulators never hold -0), and int8 sums are exact;
//   * max pooling does no arithmetic.
// Internal to the oneDNN backend.
#pragma once

#include <cstddef>
#include <vector>

namespace superpoint_rt::backend::onednn {

/// Stripe boundaries are multiples of this many frame rows (Winograd F(4x4,3x3) output tiles; also F(2x2,3x3)'s and
/// pool1's 2).
constexpr int kStripeAlign = 4;

struct Stripe {
  int y0 = 0, y1 = 0;  // conv1b output rows [y0, y1) of the frame
};

/// The stripes of a frame `height` rows tall with `rows` rows each (rows > 0, a multiple of kStripeAlign); the last
/// stripe takes what remains, between half a stripe and one and a half. One stripe when rows >= height.
/// With `lanes` > 1 (the threads that run them side by side), the count is rounded up to a multiple of the lanes and
/// the frame's aligned rows shared as evenly as kStripeAlign allows (the larger stripes first, the last one also
/// taking the rows below the last aligned row): 480 rows in stripes of 32 on 2 lanes are 8 x 32 + 8 x 28 rows
/// instead of 15 x 32, in stripes of 64 8 x 60 instead of 7 x 64 + 32, where one lane would run longer than the
/// other at the end.
std::vector<Stripe> stripes_of(int height, int rows, int lanes = 1);

/// PlanOptions::stripe_rows = -1 (the rule): the plan tries these rows per stripe, largest first, and takes the
/// first whose lanes (one per thread, each with its two stripe buffers and its primitives' scratch) need at most
/// stripe_budget_bytes(); if none does, the one that needs least. Frames of at most the smallest candidate's rows
/// are not striped.
constexpr int kStripeRowCandidates[] = {64, 48, 32, 24, 16};
/// Twice pool1's output (which the stripes write and the rest of the network reads whole), at least 32 MiB: the
/// block then needs at most three times pool1's output, less than the network's later peak (conv3b's Winograd
/// transforms, about 150-170 bytes per frame pixel in fp32 at 2 threads).
std::size_t stripe_budget_bytes(std::size_t pool1_bytes);

}  // namespace superpoint_rt::backend::onednn
