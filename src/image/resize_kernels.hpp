// Internal: the ISA-specific resize kernels behind image::resize_plane (resize.cpp dispatches at run time).
// Each is bit-identical to resize_plane_reference; the tests call them directly so every path is exercised on one
// machine. Calling one on a CPU without its instruction set is undefined (SIGILL): check util::cpu_features().
#pragma once

#include <cstddef>
#include <cstdint>

#include "image/resize.hpp"

namespace superpoint_rt::image::detail {

/// Needs AVX2 + FMA (util::CpuFeatures::avx2_fma()).
void resize_plane_avx2(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                       std::uint8_t* dst, ResizeScratch& scratch);
/// Needs AVX-512 F+BW+VL+DQ (util::CpuFeatures::avx512()).
void resize_plane_avx512(const ResizePlan& plan, const std::uint8_t* src, std::ptrdiff_t row_stride, int pixel_step,
                         std::uint8_t* dst, ResizeScratch& scratch);

/// The row-callback forms (resize_plane_rows); same requirements as above.
bool resize_plane_rows_avx2(const ResizePlan& plan, ResizeRowFn fn, void* ctx, int pixel_step, std::uint8_t* dst,
                            ResizeScratch& scratch);
bool resize_plane_rows_avx512(const ResizePlan& plan, ResizeRowFn fn, void* ctx, int pixel_step, std::uint8_t* dst,
                              ResizeScratch& scratch);

}  // namespace superpoint_rt::image::detail
