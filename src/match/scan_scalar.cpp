// The reference scan (kernels.hpp): one similarity at a time, in increasing column order within a row and increasing
// row order, exactly the rule of the header. Also the dispatch and the small helpers every table shares.
#include <bit>
#include <cmath>
#include <limits>

#include "match/kernels.hpp"

namespace superpoint_rt::matching::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void scan_scalar(const float* c, std::size_t ldc, int m, int n, std::int32_t row0, Top2Arrays rows, Top2Arrays cols) {
  for (int r = 0; r < m; ++r) {
    const float* row = c + static_cast<std::size_t>(r) * ldc;
    float b1 = kNegInf, b2 = kNegInf;
    std::int32_t i1 = 0;
    const std::int32_t ri = row0 + r;
    for (int j = 0; j < n; ++j) {
      const float s = row[j];
      push_top2(b1, b2, i1, s, j);
      push_top2(cols.best[j], cols.second[j], cols.index[j], s, ri);
    }
    rows.best[r] = b1;
    rows.second[r] = b2;
    rows.index[r] = i1;
  }
}

// std::fma is the exactly rounded fused multiply-add, as VFMADD is.
float dot_scalar(const float* a, const float* b, int dim) {
  float lane[64] = {};
  for (int k = 0; k < dim; ++k) lane[k % 64] = std::fma(a[k], b[k], lane[k % 64]);
  for (int w = 32; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

int collect_scalar(const float* row, int n, float row_min, const float* col_second, const float* col_floor,
                   float margin, std::int32_t* out) {
  int count = 0;
  for (int j = 0; j < n; ++j) {
    const float col_min = (col_second[j] > col_floor[j] ? col_second[j] : col_floor[j]) - margin;
    const float t = col_min < row_min ? col_min : row_min;
    if (row[j] >= t) out[count++] = j;
  }
  return count;
}

}  // namespace

void to_bf16_reference(const float* x, int dim, std::uint16_t* out, float* resid) {
  for (int k = 0; k < dim; ++k) {
    const auto u = std::bit_cast<std::uint32_t>(x[k]);
    const std::uint32_t r = (u & 0x7FFFFFFFu) > 0x7F800000u ? (u | 0x00400000u) >> 16  // NaN: quiet, kept
                                                            : (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    out[k] = static_cast<std::uint16_t>(r);
    resid[k] = x[k] - std::bit_cast<float>(r << 16);
  }
}

const ScanKernels kScalarScan{util::Isa::Scalar, scan_scalar, dot_scalar, collect_scalar, to_bf16_reference};

const ScanKernels& best_scan() {
  static const ScanKernels* const k = [] {
    switch (util::best_isa()) {
      case util::Isa::Avx512: return &kAvx512Scan;
      case util::Isa::Avx2: return &kAvx2Scan;
      case util::Isa::Scalar: break;
    }
    return &kScalarScan;
  }();
  return *k;
}

std::vector<const ScanKernels*> available_scans() {
  std::vector<const ScanKernels*> v{&kScalarScan};
  const util::Isa best = util::best_isa();
  if (best == util::Isa::Avx2 || best == util::Isa::Avx512) v.push_back(&kAvx2Scan);
  if (best == util::Isa::Avx512) v.push_back(&kAvx512Scan);
  return v;
}

void reset_top2(Top2Arrays t, std::size_t n) noexcept {
  for (std::size_t j = 0; j < n; ++j) {
    t.best[j] = kNegInf;
    t.second[j] = kNegInf;
    t.index[j] = 0;
  }
}

void merge_top2(Top2Arrays into, Top2Arrays other, std::size_t n) noexcept {
  for (std::size_t j = 0; j < n; ++j) {
    const float a1 = into.best[j], a2 = into.second[j], b1 = other.best[j], b2 = other.second[j];
    const bool take = b1 > a1 || (b1 == a1 && other.index[j] < into.index[j]);
    // The second of {a1, a2, b1, b2} with a1 >= a2, b1 >= b2: the larger of the losing best and the two seconds.
    const float lose = take ? a1 : b1;
    const float sec = a2 > b2 ? a2 : b2;
    into.second[j] = lose > sec ? lose : sec;
    if (take) {
      into.best[j] = b1;
      into.index[j] = other.index[j];
    }
  }
}

}  // namespace superpoint_rt::matching::detail
