// AVX-512 (F+BW+VL+DQ) post-processing kernels; compiled with those flags only and chosen at run time
// (kernels.hpp). No std:: templates or inline library functions here (see kernels.hpp for why): builtins and
// intrinsics only.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "post/kernels.hpp"

// GCC 12's avx512fintrin.h builds _mm512_undefined_* as `__m512 __Y = __Y;`, which -Wmaybe-uninitialized flags
// wherever such an intrinsic is inlined (a known header false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace superpoint_rt::post::detail {
namespace {

// exp_nonpositive_reference (kernels.hpp) on 16 lanes, operation for operation (same bits).
inline __m512 exp_nonpositive(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3365402f);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_max_ps(x, lo);
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, z, r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  // 2^fx for fx in [-126, 0] through the exponent field.
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), y);
}

#include "post/transpose_avx.inl"

inline __mmask16 tail_mask(int n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

// 16 cells of one row at a time, one lane per cell (as PyTorch's _vec_softmax vectorises over positions): the max,
// the sum of exp(x - max) in channel order 0..64 and the division are then exactly the reference's operations. Channels
// are gathered with stride 65; the 8 channels of each heat row go back through 8x8 transposes.
void scores_avx512(const float* logits, int hc, int wc, float* heat) {
  const std::ptrdiff_t w = static_cast<std::ptrdiff_t>(wc) * 8;
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(65));
  alignas(64) float p[64][16];
  __m512 x[65];
  for (int i = 0; i < hc; ++i) {
    for (int j0 = 0; j0 < wc; j0 += 16) {
      const int cells = wc - j0 < 16 ? wc - j0 : 16;
      const __mmask16 valid = cells == 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(cells);
      const float* base = logits + (static_cast<std::ptrdiff_t>(i) * wc + j0) * 65;
      __m512 m = _mm512_set1_ps(-__builtin_inff());
      for (int c = 0; c < 65; ++c) {
        x[c] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, idx, base + c, 4);
        m = _mm512_max_ps(x[c], m);
      }
      __m512 sum = _mm512_setzero_ps();
      for (int c = 0; c < 65; ++c) {
        x[c] = exp_nonpositive(_mm512_sub_ps(x[c], m));
        sum = _mm512_add_ps(sum, x[c]);
      }
      // PyTorch's _vec_softmax divides by the sum (matches ~90% of golden bits, x * (1/sum) ~74%).
      for (int c = 0; c < 64; ++c) _mm512_store_ps(p[c], _mm512_div_ps(x[c], sum));
      for (int r = 0; r < 8; ++r) {
        float* row = heat + (8 * static_cast<std::ptrdiff_t>(i) + r) * w + 8 * static_cast<std::ptrdiff_t>(j0);
        for (int half = 0; half < 2; ++half) {
          if (8 * half + 8 <= cells) {
            transpose8x8_avx(&p[8 * r][8 * half], 16, row + 64 * half, 8);
          } else {
            for (int l = 8 * half; l < cells; ++l)
              for (int q = 0; q < 8; ++q) row[8 * l + q] = p[8 * r + q][l];
          }
        }
      }
    }
  }
}

struct RowOps {
  static void max_rows(float* o, const float* a, const float* b, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, _mm512_max_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    if (i < n) {
      const __mmask16 m = tail_mask(n - i);
      _mm512_mask_storeu_ps(o + i, m, _mm512_max_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
  }

  static void horizontal(const float* in, int h, int w, int r, float* out, float* strip);

  // Element-wise steps of simple_nms on bit masks: 16 lanes = 16 bits of a mask word, the tail is masked.
  static __mmask16 lanes(const std::uint64_t* bits, int i) {
    return static_cast<__mmask16>((bits[i / 64] >> (i % 64)) & 0xFFFFu);
  }
  static __mmask16 valid(int n, int i) { return n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(n - i); }
  static void mask_row(const float* s, const std::uint64_t* bits, int n, float* out) {
    int i = 0;
    for (; i + 16 <= n; i += 16)  // full vectors: plain stores (masked stores are slower)
      _mm512_storeu_ps(out + i, _mm512_maskz_loadu_ps(static_cast<__mmask16>(~lanes(bits, i)), s + i));
    if (i < n) {
      const __mmask16 k = valid(n, i);
      _mm512_mask_storeu_ps(out + i, k, _mm512_maskz_loadu_ps(static_cast<__mmask16>(k & ~lanes(bits, i)), s + i));
    }
  }
  static void max_eq_bits(const float* a, const float* b, const float* s, int n, std::uint64_t* bits) {
    for (int t = 0; t < (n + 63) / 64; ++t) {
      std::uint64_t word = 0;
      for (int i = 64 * t; i < n && i < 64 * t + 64; i += 16) {
        const __mmask16 k = valid(n, i);
        const __m512 q = _mm512_max_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i));
        const __mmask16 eq = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, s + i), q, _CMP_EQ_OQ);
        word |= static_cast<std::uint64_t>(eq) << (i % 64);
      }
      bits[t] = word;
    }
  }
  static constexpr int kLanes = 16;
  static bool any_greater(const float* row, int n, float v) {
    const __m512 vv = _mm512_set1_ps(v);
    for (int i = 0; i < n; i += 16) {
      const __mmask16 k = valid(n, i);
      if (_mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, row + i), vv, _CMP_GT_OQ) != 0) return true;
    }
    return false;
  }
  static void gt_bits(const float* s, float t, int n, std::uint64_t* bits) {
    const __m512 tv = _mm512_set1_ps(t);
    for (int q = 0; q < (n + 63) / 64; ++q) {
      std::uint64_t word = 0;
      for (int i = 64 * q; i < n && i < 64 * q + 64; i += 16) {
        const __mmask16 k = valid(n, i);
        const __mmask16 gt = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, s + i), tv, _CMP_GT_OQ);
        word |= static_cast<std::uint64_t>(gt) << (i % 64);
      }
      bits[q] = word;
    }
  }
  static void select_row(float* out, const float* s, const std::uint64_t* bits, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_maskz_loadu_ps(lanes(bits, i), s + i));
    if (i < n) {
      const __mmask16 k = valid(n, i);
      _mm512_mask_storeu_ps(out + i, k, _mm512_maskz_loadu_ps(static_cast<__mmask16>(k & lanes(bits, i)), s + i));
    }
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
  int y = 0;
  // 16-row strips: one zmm per column, lanes 0-7 from rows y..y+7 and 8-15 from rows y+8..y+15 (two 8x8
  // transposes into a 16-float stride). Uses the whole strip buffer (2 * 16 * len floats).
  if (h >= 16) {
    float* x16 = strip;
    float* sfx16 = strip + 16 * len;
    const __m512 ninf16 = _mm512_set1_ps(-__builtin_inff());
    for (int p = 0; p < r; ++p) {
      _mm512_storeu_ps(x16 + 16 * p, ninf16);
      _mm512_storeu_ps(x16 + 16 * (r + w + p), ninf16);
    }
    for (; y + 16 <= h; y += 16) {
      const float* src = in + static_cast<std::ptrdiff_t>(y) * w;
      float* dst = out + static_cast<std::ptrdiff_t>(y) * w;
      int j = 0;
      for (; j + 8 <= w; j += 8) {
        transpose8x8_avx(src + j, w, x16 + 16 * (r + j), 16);
        transpose8x8_avx(src + 8 * static_cast<std::ptrdiff_t>(w) + j, w, x16 + 16 * (r + j) + 8, 16);
      }
      for (; j < w; ++j)
        for (int s = 0; s < 16; ++s) x16[16 * (r + j) + s] = src[static_cast<std::ptrdiff_t>(s) * w + j];
      for (int b0 = 0; b0 < len; b0 += k) {
        const int e = (b0 + k < len ? b0 + k : len) - 1;
        __m512 acc = _mm512_loadu_ps(x16 + 16 * e);
        _mm512_storeu_ps(sfx16 + 16 * e, acc);
        for (int p = e - 1; p >= b0; --p) {
          acc = _mm512_max_ps(_mm512_loadu_ps(x16 + 16 * p), acc);
          _mm512_storeu_ps(sfx16 + 16 * p, acc);
        }
      }
      // Prefix max per block; the output column o = p - k + 1 is max(suffix at o, prefix at p).
      for (int b0 = 0; b0 < len; b0 += k) {
        const int e = b0 + k < len ? b0 + k : len;
        __m512 g = _mm512_loadu_ps(x16 + 16 * b0);
        for (int p = b0; p < e; ++p) {
          if (p > b0) g = _mm512_max_ps(_mm512_loadu_ps(x16 + 16 * p), g);
          const int o = p - k + 1;
          if (o >= 0) _mm512_storeu_ps(sfx16 + 16 * o, _mm512_max_ps(_mm512_loadu_ps(sfx16 + 16 * o), g));
        }
      }
      j = 0;
      for (; j + 8 <= w; j += 8) {
        transpose8x8_avx(sfx16 + 16 * j, 16, dst + j, w);
        transpose8x8_avx(sfx16 + 16 * j + 8, 16, dst + 8 * static_cast<std::ptrdiff_t>(w) + j, w);
      }
      for (; j < w; ++j)
        for (int s = 0; s < 16; ++s) dst[static_cast<std::ptrdiff_t>(s) * w + j] = sfx16[16 * j + s];
    }
  }
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  for (int p = 0; p < r; ++p) {
    _mm256_storeu_ps(x + 8 * p, ninf);
    _mm256_storeu_ps(x + 8 * (r + w + p), ninf);
  }
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

void nms_avx512(const float* heat, int h, int w, int radius, float threshold, float* out, float* work) {
  simple_nms_separable(heat, h, w, radius, threshold, out, work);
}

int collect_avx512(const float* row, int x0, int x1, float threshold, int* xs) {
  const __m512 t = _mm512_set1_ps(threshold);
  int n = 0;
  for (int x = x0; x < x1; x += 16) {
    const __mmask16 valid = x1 - x >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(x1 - x);
    // Strict '>', ordered: NaN is never selected (as the scalar comparison).
    std::uint32_t m = _mm512_mask_cmp_ps_mask(valid, _mm512_maskz_loadu_ps(valid, row + x), t, _CMP_GT_OQ);
    while (m != 0) {
      xs[n++] = x + __builtin_ctz(m);
      m &= m - 1;
    }
  }
  return n;
}

void normalize_avx512(float* v, int n, int dim) {
  for (int k = 0; k < n; ++k) {
    float* p = v + static_cast<std::ptrdiff_t>(k) * dim;
    __m512 acc = _mm512_setzero_ps();
    int c = 0;
    for (; c + 16 <= dim; c += 16) {
      const __m512 a = _mm512_loadu_ps(p + c);
      acc = _mm512_add_ps(acc, _mm512_mul_ps(a, a));
    }
    alignas(64) float s[16];
    _mm512_store_ps(s, acc);
    for (int l = 0; c < dim; ++c, ++l) s[l] += p[c] * p[c];
    for (int half = 8; half >= 1; half /= 2)
      for (int l = 0; l < half; ++l) s[l] += s[l + half];
    // F.normalize: x / max(||x||, 1e-12), a true division.
    float norm = __builtin_sqrtf(s[0]);
    if (!(norm > 1e-12f)) norm = 1e-12f;
    const __m512 d = _mm512_set1_ps(norm);
    c = 0;
    for (; c + 16 <= dim; c += 16) _mm512_storeu_ps(p + c, _mm512_div_ps(_mm512_loadu_ps(p + c), d));
    if (c < dim) {
      const __mmask16 m = tail_mask(dim - c);
      _mm512_mask_storeu_ps(p + c, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, p + c), d));
    }
  }
}

inline __m512 corner_load(const float* corner, int c, __mmask16 m) {
  return corner != nullptr ? _mm512_maskz_loadu_ps(m, corner + c) : _mm512_setzero_ps();
}

void sample_one_avx512(const float* const corner[4], const float weight[4], int dim, float* out) {
  const __m512 w0 = _mm512_set1_ps(weight[0]), w1 = _mm512_set1_ps(weight[1]);
  const __m512 w2 = _mm512_set1_ps(weight[2]), w3 = _mm512_set1_ps(weight[3]);
  for (int c = 0; c < dim; c += 16) {
    const __mmask16 m = dim - c >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(dim - c);
    // PyTorch CPU grid_sample, as GCC contracts it (docs/ALGORITHM.md §4): nw plain multiply, then fma ne, sw, se.
    __m512 acc = _mm512_mul_ps(corner_load(corner[0], c, m), w0);
    acc = _mm512_fmadd_ps(corner_load(corner[1], c, m), w1, acc);
    acc = _mm512_fmadd_ps(corner_load(corner[2], c, m), w2, acc);
    acc = _mm512_fmadd_ps(corner_load(corner[3], c, m), w3, acc);
    _mm512_mask_storeu_ps(out + c, m, acc);
  }
}

}  // namespace

// Constant-initialised data (no code runs on a CPU without AVX-512 before the dispatcher checks it).
extern const Kernels kAvx512Kernels;
const Kernels kAvx512Kernels = {util::Isa::Avx512, scores_avx512,    nms_avx512,
                                collect_avx512,    normalize_avx512, sample_one_avx512};

}  // namespace superpoint_rt::post::detail
