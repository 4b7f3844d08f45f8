// Pillow-exact 8-bit BILINEAR resize of one plane (Pillow src/libImaging/Resample.c, docs/ALGORITHM.md §1).
//
// Horizontal pass first, then vertical; 22-bit fixed-point coefficients computed in double exactly as Pillow's
// precompute_coeffs + normalize_coeffs_8bpc; int32 accumulation in tap order; the intermediate rounded and clipped
// to uint8. When only the height changes the horizontal pass is skipped, when only the width changes the vertical
// pass is skipped, at identity size the plane is copied (as Pillow).
//
// A plane is read from interleaved pixels: sample (x, y) is src[y * row_stride + x * pixel_step]. This resizes one
// channel of an RGB/RGBA image without de-interleaving it first.
//
// Thread-safety: ResizePlan is immutable after construction and may be shared; resize_plane needs a per-thread
// ResizeScratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace superpoint_rt::image {

/// Coefficients of one axis (Pillow precompute_coeffs + normalize_coeffs_8bpc), box (0, 0, in_size) as Pillow's
/// default. bounds[2*o] is the first input index of output o (absolute, never shifted by ybox_first) and
/// bounds[2*o+1] the number of taps; k[o*ksize + t] weighs input bounds[2*o] + t.
/// Throws Error(InvalidArgument) when a size is < 1 and Error(TooLarge) when the table would not fit (Pillow's
/// MemoryError check: out_size * ksize * sizeof(double) > INT_MAX).
struct AxisCoeffs {
  int in_size = 0, out_size = 0;
  int ksize = 0;                // taps per output (row length of `k`)
  std::vector<int> bounds;      // 2 per output: xmin, count
  std::vector<std::int32_t> k;  // out_size * ksize fixed-point weights (22 bits), zero padded
};
AxisCoeffs make_axis_coeffs(int in_size, int out_size);

/// Both axes for one (in_w, in_h) -> (out_w, out_h) resize. Build once per source size and reuse.
struct ResizePlan {
  int in_w = 0, in_h = 0, out_w = 0, out_h = 0;
  bool need_h = false, need_v = false;
  AxisCoeffs horiz, vert;
  int ybox_first = 0, ybox_last = 0;  // input rows the horizontal pass must produce

  // Tables of the SIMD kernels (resize_avx2.cpp / resize_avx512.cpp), derived from horiz / vert by the
  // constructor. Every 22-bit weight k is split as k = (k >> 11) * 2048 + (k & 2047), both halves fit int16, so
  // the int16 x int16 pair multiply-add (vpmaddwd) reproduces Pillow's int32 sums exactly.
  int h_taps = 0;                        // horizontal taps per output, rounded up to a multiple of 8
  int h_groups = 0;                      // ceil(out_w / 16): outputs are processed 16 at a time
  std::vector<std::int32_t> h_xmin;      // h_groups * 16 window starts (padding outputs: 0, zero weights)
  std::vector<std::int16_t> h_hi, h_lo;  // [group][chunk of 8 taps][i 0..3][lane 0..3][8]: output 4*lane+i
  int v_pairs = 0;                       // ceil(vert.ksize / 2): vertical taps are taken two rows at a time
  std::vector<std::int32_t> v_hi, v_lo;  // out_h * v_pairs packed int16 pairs (row 2p low, row 2p+1 high)

  std::size_t bytes = 0;  // resize_plan_bytes of these sizes (what a cache of plans accounts)

  ResizePlan() = default;
  /// Throws Error(InvalidArgument) when a size is < 1 (Pillow: "height and width must be > 0"), Error(TooLarge) as
  /// make_axis_coeffs, and Error(TooLarge) naming the sizes and kMaxResizePlanBytes when resize_plan_bytes is over
  /// it (checked before anything is allocated).
  ResizePlan(int in_w, int in_h, int out_w, int out_h);
};

/// Row stride of the vertical pass's intermediate: out_w rounded up to 64 (the kernels load whole vectors).
std::ptrdiff_t resize_tmp_stride(const ResizePlan& plan) noexcept;
/// Rows of the intermediate window (see resize_simd_impl.hpp): every ybox row when they fit kResizeWindowBytes,
/// else enough for two output rows' taps.
int resize_window_rows(const ResizePlan& plan) noexcept;

/// The most memory one plan may take: its tables plus the scratch one resize with it needs (resize_plan_bytes).
/// Tables are O(in_w + in_h) (each axis about 16 bytes per input pixel), so only extreme aspect ratios reach it
/// (e.g. 20,000,000 x 1 -> 640 x 480 would need about 320 MB); such sizes are refused with TooLarge.
inline constexpr std::size_t kMaxResizePlanBytes = std::size_t{24} << 20;

/// Rows of the vertical pass's intermediate below which it holds every ybox row (no window moves).
inline constexpr std::size_t kResizeWindowBytes = std::size_t{4} << 20;

/// Bytes a ResizePlan of these sizes holds plus the ResizeScratch one resize needs (SIMD kernels), computed from
/// the sizes alone (before anything is allocated); sizes must be >= 1.
std::size_t resize_plan_bytes(int in_w, int in_h, int out_w, int out_h);

struct ResizeScratch {
  std::vector<std::uint8_t> tmp;    // the horizontal pass output, reused between calls
  std::vector<std::int16_t> row16;  // one de-interleaved source row (fast path), reused between calls
};

/// Plain scalar reference, literally Pillow's loops. dst is out_w x out_h, row stride out_w.
void resize_plane_reference(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                            std::uint8_t* dst, ResizeScratch& scratch);

/// Fast path (AVX-512 / AVX2 chosen at run time from the CPU's features, scalar otherwise); bit-identical to the
/// reference for every input.
void resize_plane(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                  std::uint8_t* dst, ResizeScratch& scratch);

/// Source of input rows for resize_plane_rows: returns a pointer to input row y (sample x at row[x * pixel_step]),
/// valid until the next call, or null to abort the resize (e.g. a decode error). Called once per needed row, in
/// increasing y; rows outside ybox_first..ybox_last-1 are never requested (the caller skips / drains them).
using ResizeRowFn = const std::uint8_t* (*)(void* ctx, int y);

/// resize_plane with the input rows pulled one at a time from `fn` instead of read from a plane in memory: the
/// fused JPEG decode + resize (decode_internal.hpp) feeds freshly decoded rows straight into the horizontal pass, so
/// the full-size image is never stored. Same bits as resize_plane (it is the same code; resize_plane is this with
/// rows src + y * row_stride). Returns false when fn returned null (dst is then incomplete). SIMD kernels only:
/// call it only when resize_rows_available(); otherwise throws Error(InvalidArgument).
bool resize_plane_rows(const ResizePlan& plan, ResizeRowFn fn, void* ctx, int pixel_step, std::uint8_t* dst,
                       ResizeScratch& scratch);

/// Output rows [out_first, out_last) of `plan` as a plan of their own, so that one resize can be split between threads
/// (decode_jpeg_resized_plane's two-thread path): resize_plane_rows with the slice requests only the input rows those
/// output rows read (its ybox_first..ybox_last-1) and writes exactly those rows, row out_first at dst row 0. They are
/// bit-identical to the same rows of the whole resize: in Pillow's two passes (Resample.c) an output row depends only
/// on the horizontal pass of its own input rows and on its own vertical weights. Needs plan.need_v and
/// 0 <= out_first < out_last <= plan.out_h; throws Error(InvalidArgument) otherwise.
ResizePlan slice_resize_plan(const ResizePlan& plan, int out_first, int out_last);

/// Whether resize_plane_rows can run on this CPU (an AVX2 or AVX-512 kernel is in use; not with
/// SUPERPOINT_RT_ISA=scalar).
bool resize_rows_available() noexcept;

/// Name of the kernel resize_plane uses on this CPU ("avx512", "avx2" or "scalar").
const char* resize_kernel_name() noexcept;

}  // namespace superpoint_rt::image
