// Float32 resizes of one plane that reproduce the request paths of hloc and LightGlue (SPEC.md §2b):
//
// - cv2_resize_area / cv2_resize_linear: OpenCV 4.6 cv::resize(src, dst, Size(dw, dh), 0, 0, INTER_AREA /
//   INTER_LINEAR) on a CV_32FC1 Mat, bit for bit (modules/imgproc/src/resize.cpp as built by Debian 12's
//   python3-opencv: SSE2 baseline, so no FMA and 4-lane vectors; no IPP). Same tables, the same float/double
//   arithmetic in the same order, the same special cases (identity copy, INTER_LINEAR at exactly 2x2 runs the area
//   code, INTER_AREA when enlarging any axis runs the linear code with the area coefficients).
// - kornia_resize_antialias: kornia.geometry.transform.resize(x, (dh, dw), "bilinear", align_corners=None,
//   antialias=True): kornia's separable gaussian_blur2d (reflect border) when shrinking, then torch
//   F.interpolate(mode="bilinear", align_corners=False) with torch >= 2.0's float weights. Within float tolerance
//   (2.4e-7 measured against kornia 0.9.0 on torch 2.15; torch's accumulation order is not reproduced bit for bit).
//   Torch 1.13 places the bilinear source position in double, which differs from torch 2.x by up to 3e-5.
//
// Planes are row-major float32; strides are in floats (>= the width). Sources of any size >= 1 x 1, destinations
// 1..kMaxResizeFloatSide per side; other sizes throw Error(InvalidArgument) naming them (a caller's error: the engine
// checks the network frame first). The tables are O(source width + height) (INTER_AREA: about 40 bytes per source
// column and 24 per source row), O(destination) for INTER_LINEAR and kornia. The only memory used is the caller-owned
// FloatResizeScratch, whose buffers grow to the largest size seen and are reused (one scratch per thread).
// src and dst must not overlap.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace superpoint_rt::image {

/// Largest destination width or height the float resizes accept (network frames are at most 8192).
inline constexpr int kMaxResizeFloatSide = 16384;

/// One weight of OpenCV's INTER_AREA tables (cv::DecimateAlpha): destination index di, source index si.
struct AreaTap {
  int si = 0, di = 0;
  float alpha = 0.f;
};

/// Working memory of the float resizes, reused between calls (not thread-safe: one per thread).
struct FloatResizeScratch {
  std::vector<int> ofs, xofs, yofs, tabofs;
  std::vector<std::ptrdiff_t> area_ofs;
  std::vector<float> alpha, beta, buf, sum, rows, plane, kernel_x, kernel_y;
  std::vector<AreaTap> xtab, ytab;
};

/// cv::resize(INTER_AREA) of a CV_32FC1 plane: the integer-factor resizeAreaFast_ path, the general resizeArea_
/// path when shrinking both axes, the linear path with area coefficients when enlarging an axis. Same bits as
/// OpenCV 4.6. This is the fast kernel (each source row resampled once, vectorisable loops); bit-identical to
/// cv2_resize_area_reference for finite inputs.
void cv2_resize_area(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                     int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& scratch);

/// The literal scalar transcription of OpenCV's loops (ResizeArea_Invoker etc.), kept to test cv2_resize_area.
void cv2_resize_area_reference(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                               int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& scratch);

/// cv::resize(INTER_LINEAR) of a CV_32FC1 plane (float coefficients, HResizeLinear + VResizeLinear; 2x2 shrink runs
/// the area code as OpenCV does). Same bits as OpenCV 4.6.
void cv2_resize_linear(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                       int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& scratch);

/// kornia.geometry.transform.resize(x, (dst_h, dst_w), interpolation="bilinear", align_corners=None,
/// antialias=True) of one float plane. Reflect padding needs a side of at least 2 where a blur runs along it; a
/// 1-pixel side is treated as constant (where torch's reflect pad would raise). The blur is computed only at the
/// columns and rows the bilinear step reads; its cost grows with the kernel size, about 2 x the shrink factor.
void kornia_resize_antialias(const float* src, int src_w, int src_h, std::ptrdiff_t src_stride, float* dst, int dst_w,
                             int dst_h, std::ptrdiff_t dst_stride, FloatResizeScratch& scratch);

/// kornia _side_to_image_size(side, w / h, "long") with Python's int() truncation: returns (out_w, out_h), where the
/// short side may be 0 for an extreme aspect ratio (the caller refuses such a frame: kornia's resize would fail).
/// Any image size >= 1 x 1; throws Error(InvalidArgument) for a smaller one or a side outside 1..kMaxResizeFloatSide.
std::pair<int, int> kornia_long_side_size(int w, int h, int side);

/// hloc resize_image's size: tuple(int(round(x * scale)) for x in (w, h)), scale = resize_max / max(w, h) in double,
/// Python's round (half to even): returns (out_w, out_h), possibly 0 on the short side (cv2.resize would fail).
/// Throws Error(InvalidArgument) as kornia_long_side_size.
std::pair<int, int> hloc_resize_size(int w, int h, int resize_max);

}  // namespace superpoint_rt::image
