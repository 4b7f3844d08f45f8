// Separable HF simple_nms (docs/ALGORITHM.md §3.5), shared by the ISA translation units.
//
// Include this file inside an anonymous namespace, after defining `struct RowOps` with
//   static void max_rows(float* o, const float* a, const float* b, int n);  // o[i] = max(a[i], b[i]); o may be a
//   static void horizontal(const float* in, int h, int w, int r, float* out, float* strip);
//       // running max along each row (may be defined after this file; may use horizontal_running_max_rows);
//       // strip: 16 * (w + 2r) floats
//   static void eq_mask(float* m, const float* s, const float* q, std::ptrdiff_t n);  // m = s == q ? 1 : 0
//   static void suppress(float* ss, const float* d, const float* s, std::ptrdiff_t n);  // ss = d > 0 ? 0 : s
//   static void update(float* m, const float* ss, const float* q, const float* d, std::ptrdiff_t n);
//                                              // m = (m != 0 || (ss == q && !(d > 0))) ? 1 : 0
//   static void select(float* out, const float* m, const float* s, std::ptrdiff_t n);  // out = m != 0 ? s : 0
// Everything here then has internal linkage, so each ISA level keeps its own copy (see kernels.hpp). It uses no
// std:: templates for the same reason.
//
// max_pool2d(kernel 2r+1, stride 1, padding r; padding acts as -inf) of an h x w map is a vertical running max
// followed by a horizontal one; max is exact, so the order does not change a bit (NaN inputs are not supported:
// the scores are probabilities). Each 1-D running max is van Herk / Gil-Werman: the padded line is cut into
// blocks of k = 2r+1; the window [p, p+k-1] is max(suffix max of p's block from p, prefix max of the next block up
// to p+k-1). That is three max operations per element whatever r is. The vertical pass works on whole rows, so it
// vectorises across columns; the SIMD horizontal pass transposes strips of 8 rows into a small buffer (8x8
// register transposes) and runs the same recurrence there, 8 rows per vector.

// Vertical running max over rows: out[y] = max(in[y - r .. y + r] clipped to [0, h)), rows of w floats.
// blk: k * w floats (suffix maxima of one block), grow: w floats (running prefix max), ninf: w floats of -inf.
void vertical_running_max(const float* in, int h, int w, int r, float* out, float* blk, float* grow,
                          const float* ninf) {
  const int k = 2 * r + 1;
  const int len = h + 2 * r;  // padded length; padded row p is input row p - r
  const auto row = [&](int p) -> const float* {
    const int y = p - r;
    return (y >= 0 && y < h) ? in + static_cast<std::ptrdiff_t>(y) * w : ninf;
  };
  const std::size_t row_bytes = static_cast<std::size_t>(w) * sizeof(float);
  int blk_start = -1;  // padded index of the block whose suffix maxima blk holds
  for (int p = 0; p < len; ++p) {
    const int block = p - p % k;
    // Prefix max of p's block.
    if (p == block) {
      __builtin_memcpy(grow, row(p), row_bytes);
    } else if (row(p) != ninf) {
      RowOps::max_rows(grow, grow, row(p), w);
    }
    // The window that ends at p starts at y = p - k + 1 (padded index = output row).
    const int y = p - k + 1;
    if (y < 0) continue;
    const int yb = y - y % k;
    if (yb != blk_start) {
      // Suffix maxima of y's block, computed the first time one of its rows is needed.
      const int end = (yb + k < len ? yb + k : len) - 1;
      float* s = blk + static_cast<std::ptrdiff_t>(end - yb) * w;
      __builtin_memcpy(s, row(end), row_bytes);
      for (int q = end - 1; q >= yb; --q) {
        float* d = blk + static_cast<std::ptrdiff_t>(q - yb) * w;
        RowOps::max_rows(d, d + w, row(q), w);
      }
      blk_start = yb;
    }
    RowOps::max_rows(out + static_cast<std::ptrdiff_t>(y) * w, blk + static_cast<std::ptrdiff_t>(y - yb) * w, grow, w);
  }
}

// Scalar van Herk along rows [y0, y1): out row = running max of the in row. x, sfx: w + 2r floats each.
void horizontal_running_max_rows(const float* in, int y0, int y1, int w, int r, float* out, float* x, float* sfx) {
  const int k = 2 * r + 1;
  const int len = w + 2 * r;
  for (int i = 0; i < r; ++i) x[i] = x[r + w + i] = -__builtin_inff();
  for (int y = y0; y < y1; ++y) {
    const float* src = in + static_cast<std::ptrdiff_t>(y) * w;
    float* dst = out + static_cast<std::ptrdiff_t>(y) * w;
    for (int i = 0; i < w; ++i) x[r + i] = src[i];
    for (int b0 = 0; b0 < len; b0 += k) {
      const int e = (b0 + k < len ? b0 + k : len) - 1;
      sfx[e] = x[e];
      for (int p = e - 1; p >= b0; --p) sfx[p] = x[p] > sfx[p + 1] ? x[p] : sfx[p + 1];
    }
    float g = 0.0f;
    for (int p = 0; p < len; ++p) {
      g = (p % k == 0 || x[p] > g) ? x[p] : g;
      const int o = p - k + 1;
      if (o >= 0) dst[o] = sfx[o] > g ? sfx[o] : g;
    }
  }
}

struct NmsBuffers {
  float *m, *d, *ss, *q;     // h*w each: max mask (0/1), dilated mask, suppressed scores, their max pool
  float* t1;                 // h*w: vertical pass result
  float *blk, *grow, *ninf;  // k*n, n, n with n = max(h, w)
  float* strip;              // 16 * (n + 2r): horizontal pass
};

// out = max_pool2d(in), h x w: vertical then horizontal running max.
void max_pool(const float* in, int h, int w, int r, float* out, const NmsBuffers& b) {
  vertical_running_max(in, h, w, r, b.t1, b.blk, b.grow, b.ninf);
  RowOps::horizontal(b.t1, h, w, r, out, b.strip);
}

void simple_nms_separable(const float* s, int h, int w, int r, float* out, float* work) {
  const std::ptrdiff_t hw = static_cast<std::ptrdiff_t>(h) * w;
  const int n = h > w ? h : w;
  NmsBuffers b{};
  b.m = work;
  b.d = b.m + hw;
  b.ss = b.d + hw;
  b.q = b.ss + hw;
  b.t1 = b.q + hw;
  b.blk = b.t1 + hw;
  b.grow = b.blk + static_cast<std::ptrdiff_t>(2 * r + 1) * n;
  b.ninf = b.grow + n;
  b.strip = b.ninf + n;
  for (int i = 0; i < n; ++i) b.ninf[i] = -__builtin_inff();

  // max_mask = scores == max_pool(scores)
  max_pool(s, h, w, r, b.q, b);
  RowOps::eq_mask(b.m, s, b.q, hw);
  for (int iter = 0; iter < 2; ++iter) {
    // supp_mask = max_pool(max_mask.float()) > 0; supp_scores = where(supp_mask, 0, scores)
    max_pool(b.m, h, w, r, b.d, b);
    RowOps::suppress(b.ss, b.d, s, hw);
    // new_max_mask = supp_scores == max_pool(supp_scores); max_mask |= new_max_mask & ~supp_mask
    max_pool(b.ss, h, w, r, b.q, b);
    RowOps::update(b.m, b.ss, b.q, b.d, hw);
  }
  // where(max_mask, scores, zeros)
  RowOps::select(out, b.m, s, hw);
}
