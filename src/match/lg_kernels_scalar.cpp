// The plain reference of LightGlue's element-wise kernels (lg_kernels.hpp), and the table lookup. Every operation is
// written as the vector tables run it: std::fma where they fuse, 16 lanes for sums.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "match/lg_kernels.hpp"

namespace superpoint_rt::lightglue::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// exp(x) for x <= 0 (lg_kernels.hpp): x = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes' polynomial, times 2^n.
float exp_np(float x) {
  using namespace poly;
  if (!(x >= kExpMin)) return x != x ? x : 0.0f;  // NaN stays NaN; below the range, 0
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kExpC[0];
  for (int i = 1; i < 6; ++i) p = std::fma(p, r, kExpC[i]);
  const float z = r * r;
  float y = std::fma(p, z, r);
  y = y + 1.0f;
  std::uint32_t bits;
  std::memcpy(&bits, &y, 4);
  bits += static_cast<std::uint32_t>(static_cast<std::int32_t>(n)) << 23;
  std::memcpy(&y, &bits, 4);
  return y;
}

// The 16 lanes added pairwise: l + l+8, then l + l+4, l + l+2, l + l+1.
float reduce16(float* lane) {
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] = lane[l] + lane[l + w];
  return lane[0];
}

void softmax_tile(float* s, int rows, int cols, int lds, float* row_max, float* row_sum, float* alpha) {
  for (int r = 0; r < rows; ++r) {
    float* x = s + static_cast<std::ptrdiff_t>(r) * lds;
    float m = row_max[r];
    for (int j = 0; j < cols; ++j) m = x[j] > m ? x[j] : m;
    const float a = row_max[r] == kNegInf ? 0.0f : exp_np(row_max[r] - m);
    float lane[16] = {};
    for (int j = 0; j < cols; ++j) {
      x[j] = exp_np(x[j] - m);
      lane[j % 16] += x[j];
    }
    row_sum[r] = std::fma(row_sum[r], a, reduce16(lane));
    row_max[r] = m;
    alpha[r] = a;
  }
}

void softmax_cols(const float* s, int rows, int cols, int lds, float* col_max, float* col_sum, float* beta, float* p,
                  int ldp) {
  for (int c = 0; c < cols; ++c) {
    float m = col_max[c];
    for (int r = 0; r < rows; ++r) {
      const float v = s[static_cast<std::ptrdiff_t>(r) * lds + c];
      m = v > m ? v : m;
    }
    const float b = col_max[c] == kNegInf ? 0.0f : exp_np(col_max[c] - m);
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r) {
      const float e = exp_np(s[static_cast<std::ptrdiff_t>(r) * lds + c] - m);
      p[static_cast<std::ptrdiff_t>(r) * ldp + c] = e;
      sum = sum + e;
    }
    col_sum[c] = std::fma(col_sum[c], b, sum);
    col_max[c] = m;
    beta[c] = b;
  }
}

void layernorm_gelu(const float* x, int n, const float* g, const float* b, float* out) {
  using namespace poly;
  float lane[16] = {};
  for (int k = 0; k < n; ++k) lane[k % 16] += x[k];
  const float mean = reduce16(lane) / static_cast<float>(n);
  float vl[16] = {};
  for (int k = 0; k < n; ++k) {
    const float d = x[k] - mean;
    vl[k % 16] = std::fma(d, d, vl[k % 16]);
  }
  const float rstd = 1.0f / std::sqrt(reduce16(vl) / static_cast<float>(n) + kLayerNormEps);
  for (int k = 0; k < n; ++k) {
    const float y = (x[k] - mean) * rstd * g[k] + b[k];
    const float u = std::fabs(y) * kSqrtHalf;
    const float t = 1.0f / std::fma(kErfP, u, 1.0f);
    float q = kErfA[4];
    for (int i = 3; i >= 0; --i) q = std::fma(q, t, kErfA[i]);
    q = q * t;
    const float e = exp_np(-(u * u));
    float erf_abs = std::fma(-q, e, 1.0f);
    const float erf = std::signbit(y) ? -erf_abs : erf_abs;
    out[k] = 0.5f * y * (1.0f + erf);
  }
}

void exp_nonpositive(const float* x, int n, float* out) {
  for (int k = 0; k < n; ++k) out[k] = exp_np(x[k]);
}

}  // namespace

const LgKernels kScalarLgKernels{util::Isa::Scalar, softmax_tile, softmax_cols, layernorm_gelu, exp_nonpositive};

const LgKernels& best_lg_kernels() {
  static const LgKernels* const k = [] {
    switch (util::best_isa()) {
      case util::Isa::Avx512: return &kAvx512LgKernels;
      case util::Isa::Avx2: return &kAvx2LgKernels;
      case util::Isa::Scalar: break;
    }
    return &kScalarLgKernels;
  }();
  return *k;
}

std::vector<const LgKernels*> available_lg_kernels() {
  std::vector<const LgKernels*> v{&kScalarLgKernels};
  const util::Isa best = util::best_isa();
  if (best == util::Isa::Avx2 || best == util::Isa::Avx512) v.push_back(&kAvx2LgKernels);
  if (best == util::Isa::Avx512) v.push_back(&kAvx512LgKernels);
  return v;
}

}  // namespace superpoint_rt::lightglue::detail
