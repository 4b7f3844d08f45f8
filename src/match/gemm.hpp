// Internal: the similarity GEMM of the matcher on oneDNN (the compute library of the convolutions), and its plain
// reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "superpoint_rt/match.hpp"

namespace superpoint_rt::matching::detail {

/// c[r][j] = sum_k a[row0 + r][k] * b[j][k] for r in [0, m), j in [0, b.n), float32 (oneDNN's fp32 GEMM, whose
/// summation order is its own), into `c` with row stride ldc >= b.n. Either operand may be point-major or dim-major;
/// a.dim == b.dim >= 1, m >= 1, b.n >= 1. Runs on the calling thread only (callers run it inside their OpenMP
/// region: oneDNN then stays on one thread). Throws Error(Internal) when oneDNN reports a failure.
void similarity_block(const DescriptorsView& a, std::size_t row0, std::size_t m, const DescriptorsView& b, float* c,
                      std::size_t ldc);

/// Whether oneDNN runs similarity_block_bf16 here (it needs AVX-512; ONEDNN_MAX_CPU_ISA can take it away).
bool bf16_similarity_available();

/// c[r][j] = sum_k a[r][k] b[j][k], r in [0, m), j in [0, n), for bfloat16 rows (bits; m x dim and n x dim,
/// point-major) with float32 accumulation: oneDNN's matmul (its summation order, and its flushing of subnormals, are
/// its own), into `c` with row stride ldc >= n. One primitive with run-time shapes serves every size. Runs on the
/// calling thread only, like similarity_block. Throws Error(Internal) when oneDNN reports a failure or has no such
/// matmul here.
void similarity_block_bf16(const std::uint16_t* a, std::size_t m, const std::uint16_t* b, std::size_t n, int dim,
                           float* c, std::size_t ldc);

/// The whole n0 x n1 matrix in one oneDNN call on `threads` OpenMP threads (row stride b.n): the GEMM alone, the floor
/// that `superpoint-rt bench --matching` measures the matcher against.
void similarity_matrix(const DescriptorsView& a, const DescriptorsView& b, float* c, int threads);

/// The plain reference: the same product with each dot product summed in increasing k in float32, no FMA. Exact,
/// and so equal to similarity_block, whenever every partial sum is representable (small dyadic values: the tests).
void similarity_block_reference(const DescriptorsView& a, std::size_t row0, std::size_t m, const DescriptorsView& b,
                                float* c, std::size_t ldc);

/// n x dim random unit descriptors (Gaussian, normalised) with every value rounded to float16, as hloc's feature
/// files hold them: the benchmarks' input (bench/bench_match.cpp, superpoint-rt bench --matching).
std::vector<float> random_unit_descriptors(std::size_t n, int dim, unsigned seed);

/// The descriptor value (point i, component k) of a view.
inline float descriptor_at(const DescriptorsView& v, std::size_t i, std::size_t k) noexcept {
  return v.dim_major ? v.data[k * v.n + i] : v.data[i * static_cast<std::size_t>(v.dim) + k];
}

}  // namespace superpoint_rt::matching::detail
