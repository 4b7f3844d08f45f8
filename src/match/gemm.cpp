// The similarity GEMM (gemm.hpp) on oneDNN's dnnl_sgemm: row-major, either operand transposed in place, so that
// hloc's (D, N) descriptors and Features' (N, D) rows are both read where they lie, with no copy and no setup per
// shape (a oneDNN matmul primitive would be created and its weights reordered for every image size).
#include "match/gemm.hpp"

#include <dnnl.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <optional>
#include <random>
#include <string>

#include "util/compute_thread.hpp"
#include "util/half.hpp"

namespace superpoint_rt::matching::detail {

void similarity_block(const DescriptorsView& a, std::size_t row0, std::size_t m, const DescriptorsView& b, float* c,
                      std::size_t ldc) {
  const auto dim = static_cast<dnnl_dim_t>(a.dim);
  // op(A) is m x dim: rows row0.. of a point-major A (lda = dim), or columns row0.. of a dim-major one ('T').
  const char transa = a.dim_major ? 'T' : 'N';
  const float* pa = a.dim_major ? a.data + row0 : a.data + row0 * static_cast<std::size_t>(a.dim);
  const auto lda = a.dim_major ? static_cast<dnnl_dim_t>(a.n) : dim;
  // op(B) is dim x n: a dim-major B as it is, a point-major one transposed ('T').
  const char transb = b.dim_major ? 'N' : 'T';
  const auto ldb = b.dim_major ? static_cast<dnnl_dim_t>(b.n) : dim;
  const dnnl_status_t st = dnnl_sgemm(transa, transb, static_cast<dnnl_dim_t>(m), static_cast<dnnl_dim_t>(b.n), dim,
                                      1.0f, pa, lda, b.data, ldb, 0.0f, c, static_cast<dnnl_dim_t>(ldc));
  if (st != dnnl_success)
    throw Error(ErrorKind::Internal, "oneDNN sgemm failed (status " + std::to_string(static_cast<int>(st)) + ") on " +
                                         std::to_string(m) + " x " + std::to_string(b.n) + " x " +
                                         std::to_string(a.dim));
}

namespace {

// The bfloat16 matmul with every dimension and stride given at run time (oneDNN picks its JIT GEMM, gemm:jit, whose
// creation is paid once), shared by every thread: oneDNN primitives may execute concurrently. Absent where oneDNN has
// no such kernel (before AVX-512, or with ONEDNN_MAX_CPU_ISA below it).
struct Bf16Matmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::optional<dnnl::matmul> matmul;
  Bf16Matmul() {
    using dt = dnnl::memory::data_type;
    constexpr auto rt = DNNL_RUNTIME_DIM_VAL;
    const dnnl::memory::desc src({rt, rt}, dt::bf16, dnnl::memory::dims{rt, 1});
    const dnnl::memory::desc weights({rt, rt}, dt::bf16, dnnl::memory::dims{1, rt});
    const dnnl::memory::desc dst({rt, rt}, dt::f32, dnnl::memory::dims{rt, 1});
    try {
      matmul.emplace(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), engine));
    } catch (const dnnl::error&) {
    }
  }
};

const Bf16Matmul& bf16_matmul() {
  static const Bf16Matmul m;
  return m;
}

}  // namespace

bool bf16_similarity_available() {
  return bf16_matmul().matmul.has_value();
}

void similarity_block_bf16(const std::uint16_t* a, std::size_t m, const std::uint16_t* b, std::size_t n, int dim,
                           float* c, std::size_t ldc) {
  using dt = dnnl::memory::data_type;
  const auto M = static_cast<dnnl::memory::dim>(m), N = static_cast<dnnl::memory::dim>(n),
             K = static_cast<dnnl::memory::dim>(dim), LD = static_cast<dnnl::memory::dim>(ldc);
  const Bf16Matmul& mm = bf16_matmul();
  if (!mm.matmul)
    throw Error(ErrorKind::Internal, "oneDNN has no bf16 matmul on this CPU (check bf16_similarity_available())");
  try {
    // oneDNN takes non-const handles; it only reads the operands.
    const dnnl::memory src({{M, K}, dt::bf16, dnnl::memory::dims{K, 1}}, mm.engine, const_cast<std::uint16_t*>(a));
    const dnnl::memory weights({{K, N}, dt::bf16, dnnl::memory::dims{1, K}}, mm.engine, const_cast<std::uint16_t*>(b));
    const dnnl::memory dst({{M, N}, dt::f32, dnnl::memory::dims{LD, 1}}, mm.engine, c);
    dnnl::stream stream(mm.engine);
    mm.matmul->execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::Internal, std::string("oneDNN bf16 matmul failed (") + e.what() + ") on " +
                                         std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(dim));
  }
}

void similarity_matrix(const DescriptorsView& a, const DescriptorsView& b, float* c, int threads) {
  // oneDNN's sgemm runs on the calling thread's OpenMP team: the compute thread's (util/compute_thread.hpp).
  util::on_compute([&] {
    omp_set_num_threads(threads);
    similarity_block(a, 0, a.n, b, c, b.n);
  });
}

std::vector<float> random_unit_descriptors(std::size_t n, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  const auto d = static_cast<std::size_t>(dim);
  std::vector<float> v(n * d);
  for (std::size_t i = 0; i < n; ++i) {
    float* row = v.data() + i * d;
    double s = 0;
    for (std::size_t k = 0; k < d; ++k) {
      row[k] = g(rng);
      s += static_cast<double>(row[k]) * row[k];
    }
    for (std::size_t k = 0; k < d; ++k)
      row[k] = util::half_to_float(util::float_to_half(static_cast<float>(row[k] / std::sqrt(s))));
  }
  return v;
}

void similarity_block_reference(const DescriptorsView& a, std::size_t row0, std::size_t m, const DescriptorsView& b,
                                float* c, std::size_t ldc) {
  const auto dim = static_cast<std::size_t>(a.dim);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t j = 0; j < b.n; ++j) {
      float s = 0.0f;
      for (std::size_t k = 0; k < dim; ++k) s += descriptor_at(a, row0 + r, k) * descriptor_at(b, j, k);
      c[r * ldc + j] = s;
    }
}

}  // namespace superpoint_rt::matching::detail
