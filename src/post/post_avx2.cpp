// AVX2 + FMA post-processing kernels; compiled with those flags only and chosen at run time (kernels.hpp). No
// std:: templates or inline library functions here (see kernels.hpp for why): builtins and intrinsics only.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "post/kernels.hpp"

namespace superpoint_rt::post::detail {
namespace {

// exp_nonpositive_reference (kernels.hpp) on 8 lanes, operation for operation (same bits).
inline __m256 exp_nonpositive(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365402f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, z, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(under, y);
}

#include "post/transpose_avx.inl"

// 8 cells of one row at a time, one lane per cell: the same operations and order as the reference.
void scores_avx2(const float* logits, int hc, int wc, float* heat) {
  const std::ptrdiff_t w = static_cast<std::ptrdiff_t>(wc) * 8;
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(65));
  alignas(32) float p[64][8];
  __m256 x[65];
  for (int i = 0; i < hc; ++i) {
    for (int j0 = 0; j0 < wc; j0 += 8) {
      const int cells = wc - j0 < 8 ? wc - j0 : 8;
      const __m256 valid =
          _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(cells), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
      const float* base = logits + (static_cast<std::ptrdiff_t>(i) * wc + j0) * 65;
      __m256 m = _mm256_set1_ps(-__builtin_inff());
      for (int c = 0; c < 65; ++c) {
        x[c] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base + c, idx, valid, 4);
        m = _mm256_max_ps(x[c], m);
      }
      __m256 sum = _mm256_setzero_ps();
      for (int c = 0; c < 65; ++c) {
        x[c] = exp_nonpositive(_mm256_sub_ps(x[c], m));
        sum = _mm256_add_ps(sum, x[c]);
      }
      // PyTorch's _vec_softmax divides by the sum.
      for (int c = 0; c < 64; ++c) _mm256_store_ps(p[c], _mm256_div_ps(x[c], sum));
      for (int r = 0; r < 8; ++r) {
        float* row = heat + (8 * static_cast<std::ptrdiff_t>(i) + r) * w + 8 * static_cast<std::ptrdiff_t>(j0);
        if (cells == 8) {
          transpose8x8_avx(&p[8 * r][0], 8, row, 8);
        } else {
          for (int l = 0; l < cells; ++l)
            for (int q = 0; q < 8; ++q) row[8 * l + q] = p[8 * r + q][l];
        }
      }
    }
  }
}

struct RowOps {
  static void max_rows(float* o, const float* a, const float* b, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_max_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) o[i] = a[i] > b[i] ? a[i] : b[i];  // maxps semantics
  }
  static void horizontal(const float* in, int h, int w, int r, float* out, float* strip);

  // Element-wise steps of simple_nms on bit masks (8 lanes = one byte of a mask word); tails use scalar forms.
  static __m256 lanes_of_byte(unsigned byte) {
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i v = _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(byte)), sel);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(v, sel));
  }
  static bool bit(const std::uint64_t* bits, int i) { return ((bits[i / 64] >> (i % 64)) & 1u) != 0; }
  static void mask_row(const float* s, const std::uint64_t* bits, int n, float* out) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      const auto byte = static_cast<unsigned>((bits[i / 64] >> (i % 64)) & 0xFFu);
      _mm256_storeu_ps(out + i, _mm256_andnot_ps(lanes_of_byte(byte), _mm256_loadu_ps(s + i)));
    }
    for (; i < n; ++i) out[i] = bit(bits, i) ? 0.0f : s[i];
  }
  static void max_eq_bits(const float* a, const float* b, const float* s, int n, std::uint64_t* bits) {
    for (int t = 0; t < (n + 63) / 64; ++t) bits[t] = 0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 q = _mm256_max_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
      const auto m = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(s + i), q, _CMP_EQ_OQ)));
      bits[i / 64] |= static_cast<std::uint64_t>(m) << (i % 64);
    }
    for (; i < n; ++i) {
      const float q = a[i] > b[i] ? a[i] : b[i];
      bits[i / 64] |= static_cast<std::uint64_t>(s[i] == q) << (i % 64);
    }
  }
  static constexpr int kLanes = 8;
  static bool any_greater(const float* row, int n, float v) {
    const __m256 vv = _mm256_set1_ps(v);
    int i = 0;
    for (; i + 8 <= n; i += 8)
      if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + i), vv, _CMP_GT_OQ)) != 0) return true;
    for (; i < n; ++i)
      if (row[i] > v) return true;
    return false;
  }
  static void gt_bits(const float* s, float t, int n, std::uint64_t* bits) {
    for (int q = 0; q < (n + 63) / 64; ++q) bits[q] = 0;
    const __m256 tv = _mm256_set1_ps(t);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      const auto m = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(s + i), tv, _CMP_GT_OQ)));
      bits[i / 64] |= static_cast<std::uint64_t>(m) << (i % 64);
    }
    for (; i < n; ++i) bits[i / 64] |= static_cast<std::uint64_t>(s[i] > t) << (i % 64);
  }
  static void select_row(float* out, const float* s, const std::uint64_t* bits, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      const auto byte = static_cast<unsigned>((bits[i / 64] >> (i % 64)) & 0xFFu);
      _mm256_storeu_ps(out + i, _mm256_and_ps(lanes_of_byte(byte), _mm256_loadu_ps(s + i)));
    }
    for (; i < n; ++i) out[i] = bit(bits, i) ? s[i] : 0.0f;
  }
};

#include "post/nms_separable.inl"

// Horizontal running max, 8 rows at a time: each 8-row strip is transposed (8x8 register blocks) into x, one
// vector per column, padded with r columns of -inf on each side; van Herk runs over those vectors; the result is
// transposed back. Rows left over (h % 8) take the scalar path.
void RowOps::horizontal(const float* in, int h, int w, int r, float* out, float* strip) {
  const int k = 2 * r + 1;
  const int len = w + 2 * r;
  float* x = strip;              // len vectors of 8
  float* sfx = strip + 8 * len;  // len vectors of 8; the result overwrites it
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  for (int p = 0; p < r; ++p) {
    _mm256_storeu_ps(x + 8 * p, ninf);
    _mm256_storeu_ps(x + 8 * (r + w + p), ninf);
  }
  int y = 0;
  for (; y + 8 <= h; y += 8) {
    const float* src = in + static_cast<std::ptrdiff_t>(y) * w;
    float* dst = out + static_cast<std::ptrdiff_t>(y) * w;
    int j = 0;
    for (; j + 8 <= w; j += 8) transpose8x8_avx(src + j, w, x + 8 * (r + j), 8);
    for (; j < w; ++j)
      for (int s = 0; s < 8; ++s) x[8 * (r + j) + s] = src[static_cast<std::ptrdiff_t>(s) * w + j];
    for (int b0 = 0; b0 < len; b0 += k) {
      const int e = (b0 + k < len ? b0 + k : len) - 1;
      __m256 acc = _mm256_loadu_ps(x + 8 * e);
      _mm256_storeu_ps(sfx + 8 * e, acc);
      for (int p = e - 1; p >= b0; --p) {
        acc = _mm256_max_ps(_mm256_loadu_ps(x + 8 * p), acc);
        _mm256_storeu_ps(sfx + 8 * p, acc);
      }
    }
    __m256 g = ninf;
    for (int p = 0, in_block = 0; p < len; ++p) {
      const __m256 v = _mm256_loadu_ps(x + 8 * p);
      g = in_block == 0 ? v : _mm256_max_ps(v, g);
      if (++in_block == k) in_block = 0;
      const int o = p - k + 1;
      if (o >= 0) _mm256_storeu_ps(sfx + 8 * o, _mm256_max_ps(_mm256_loadu_ps(sfx + 8 * o), g));
    }
    j = 0;
    for (; j + 8 <= w; j += 8) transpose8x8_avx(sfx + 8 * j, 8, dst + j, w);
    for (; j < w; ++j)
      for (int s = 0; s < 8; ++s) dst[static_cast<std::ptrdiff_t>(s) * w + j] = sfx[8 * j + s];
  }
  if (y < h) horizontal_running_max_rows(in, y, h, w, r, out, x, sfx);
}

void nms_avx2(const float* heat, int h, int w, int radius, float threshold, float* out, float* work) {
  simple_nms_separable(heat, h, w, radius, threshold, out, work);
}

int collect_avx2(const float* row, int x0, int x1, float threshold, int* xs) {
  const __m256 t = _mm256_set1_ps(threshold);
  int n = 0;
  int x = x0;
  for (; x + 8 <= x1; x += 8) {
    // Strict '>', ordered: NaN is never selected (as the scalar comparison).
    std::uint32_t m =
        static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + x), t, _CMP_GT_OQ)));
    while (m != 0) {
      xs[n++] = x + __builtin_ctz(m);
      m &= m - 1;
    }
  }
  for (; x < x1; ++x)
    if (row[x] > threshold) xs[n++] = x;
  return n;
}

void normalize_avx2(float* v, int n, int dim) {
  for (int k = 0; k < n; ++k) {
    float* p = v + static_cast<std::ptrdiff_t>(k) * dim;
    // Two accumulators = the 16 canonical partial sums (kernels.hpp).
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= dim; c += 16) {
      const __m256 a = _mm256_loadu_ps(p + c), b = _mm256_loadu_ps(p + c + 8);
      lo = _mm256_add_ps(lo, _mm256_mul_ps(a, a));
      hi = _mm256_add_ps(hi, _mm256_mul_ps(b, b));
    }
    alignas(32) float s[16];
    _mm256_store_ps(s, lo);
    _mm256_store_ps(s + 8, hi);
    for (int l = 0; c < dim; ++c, ++l) s[l] += p[c] * p[c];
    for (int half = 8; half >= 1; half /= 2)
      for (int l = 0; l < half; ++l) s[l] += s[l + half];
    float norm = __builtin_sqrtf(s[0]);
    if (!(norm > 1e-12f)) norm = 1e-12f;
    const __m256 d = _mm256_set1_ps(norm);
    c = 0;
    for (; c + 8 <= dim; c += 8) _mm256_storeu_ps(p + c, _mm256_div_ps(_mm256_loadu_ps(p + c), d));
    for (; c < dim; ++c) p[c] = p[c] / norm;
  }
}

void sample_one_avx2(const float* const corner[4], const float weight[4], int dim, float* out) {
  const __m256 w0 = _mm256_set1_ps(weight[0]), w1 = _mm256_set1_ps(weight[1]);
  const __m256 w2 = _mm256_set1_ps(weight[2]), w3 = _mm256_set1_ps(weight[3]);
  const auto load = [](const float* p, int c) { return p != nullptr ? _mm256_loadu_ps(p + c) : _mm256_setzero_ps(); };
  const auto at = [](const float* p, int c) { return p != nullptr ? p[c] : 0.0f; };
  int c = 0;
  for (; c + 8 <= dim; c += 8) {
    // PyTorch CPU grid_sample, as GCC contracts it (docs/ALGORITHM.md §4): nw plain multiply, then fma ne, sw, se.
    __m256 acc = _mm256_mul_ps(load(corner[0], c), w0);
    acc = _mm256_fmadd_ps(load(corner[1], c), w1, acc);
    acc = _mm256_fmadd_ps(load(corner[2], c), w2, acc);
    acc = _mm256_fmadd_ps(load(corner[3], c), w3, acc);
    _mm256_storeu_ps(out + c, acc);
  }
  for (; c < dim; ++c) {
    float acc = at(corner[0], c) * weight[0];
    acc = __builtin_fmaf(at(corner[1], c), weight[1], acc);
    acc = __builtin_fmaf(at(corner[2], c), weight[2], acc);
    acc = __builtin_fmaf(at(corner[3], c), weight[3], acc);
    out[c] = acc;
  }
}

}  // namespace

// Constant-initialised data (no code runs on a CPU without AVX2 before the dispatcher checks it).
extern const Kernels kAvx2Kernels;
const Kernels kAvx2Kernels = {util::Isa::Avx2, scores_avx2, nms_avx2, collect_avx2, normalize_avx2, sample_one_avx2};

}  // namespace superpoint_rt::post::detail
