// Separable HF simple_nms (docs/ALGORITHM.md §3.5), shared by the ISA translation units.
//
// Include this file inside an anonymous namespace, after defining `struct RowOps` with
//   static void max_rows(float* o, const float* a, const float* b, int n);  // o[i] = max(a[i], b[i]); o may be a
//   static void horizontal(const float* in, int h, int w, int r, float* out, float* strip);
//       // running max along each row (may be defined after this file; may use horizontal_running_max_rows);
//       // strip: kNmsStripFloats(w, r) floats
//   static void mask_row(const float* s, const std::uint64_t* bits, int n, float* out);  // out = bit ? 0 : s
//   static void max_eq_bits(const float* a, const float* b, const float* s, int n, std::uint64_t* bits);
//       // bit i of bits = (s[i] == max(a[i], b[i])); writes ceil(n / 64) words, bits >= n cleared
//   static void select_row(float* out, const float* s, const std::uint64_t* bits, int n);  // out = bit ? s : 0
//   static void gt_bits(const float* s, float t, int n, std::uint64_t* bits);
//       // bit i of bits = (s[i] > t); writes ceil(n / 64) words, bits >= n cleared
//   static bool any_greater(const float* row, int n, float v);  // some row[i] > v, i < n
//   static constexpr int kLanes;  // floats any_greater compares per instruction (cost model of the sparse round)
// Everything here then has internal linkage, so each ISA level keeps its own copy (see kernels.hpp). It uses no
// std:: templates for the same reason.
//
// HF simple_nms in terms of masks (S = scores, P = max_pool2d with window 2r+1 and -inf padding):
//   M = (S == P(S));  twice: { D = P(M) > 0;  SS = D ? 0 : S;  M |= (SS == P(SS)) & !D; }  out = M ? S : 0.
// Where D is clear SS = S, so (SS == P(SS)) & !D = (S == P(SS)) & !D: SS is never stored, only fed to the pool.
// The masks are bit maps (one uint64 word per 64 columns, bit x % 64 of word x / 64): the two dilations P(M) > 0
// are then OR-smears on a few thousand words, and only three float max pools remain (P(S), P(SS) twice).
//
// A float max pool is a horizontal running max followed by a vertical one (max is exact and commutes, so the
// order does not change a bit; NaN inputs are not supported: the scores are probabilities). Each 1-D running max
// is van Herk / Gil-Werman: the padded line is cut into blocks of k = 2r+1; the window [p, p+k-1] is max(suffix
// max of p's block from p, prefix max of the next block up to p+k-1). That is three max operations per element
// whatever r is. The horizontal pass (ISA-specific) transposes strips of rows into a small buffer and runs the
// recurrence there, several rows per vector. The vertical pass works on column chunks of kNmsChunk floats, so
// its block buffer stays in L1, and its last max is fused with the comparison against S that yields mask bits.
//
// Threshold-aware rounds (simple_nms_above). Let A = (S > t). Only pixels of A can become keypoints, and their
// fate does not depend on the other pixels' masks: a pixel q outside A that is a maximum of its window has no pixel
// of A within r (it would be larger), and one that turns into a new maximum in a later round has only pixels of A
// within r that are already suppressed (their SS is 0 <= S[q]). So after the first (dense) round only the
// candidates C = A & !M & !D can change, and they only shrink from round to round (M and D only grow). When C is
// empty the rounds stop; when it is small, P(SS) is evaluated at the candidates only: the horizontal pass on the
// rows within r of a candidate row, then a vertical max over 2r+1 rows per candidate. When C is large the dense
// pool runs (per-candidate work is bounded by the dense cost, so the time stays independent of r). With t = -inf,
// A is every pixel and the result is simple_nms exactly; otherwise it is exact on A, and pixels outside A get
// either their score or 0 (both <= t), so the keypoints selected with `> t` are the same.

constexpr int kNmsChunk = 128;     // columns per vertical-pass chunk (a multiple of 64: whole mask words)
constexpr int kNmsStripRows = 16;  // rows masked at a time before the horizontal pass

inline int nms_words(int w) {
  return (w + 63) / 64;
}

// Vertical running max of the column chunk [c0, c0 + n) of `in` (h rows of stride w), fused with the comparison:
// bits row y (words c0 / 64 ..) = (s[y][c] == max(in[y - r .. y + r][c] clipped to [0, h))).
// blk: k * n floats (suffix maxima of one block), grow: n floats (running prefix max), ninf: n floats of -inf.
void vertical_max_eq(const float* in, const float* s, int h, int w, int c0, int n, int r, std::uint64_t* bits, int nw,
                     float* blk, float* grow, const float* ninf) {
  const int k = 2 * r + 1;
  const int len = h + 2 * r;  // padded length; padded row p is input row p - r
  const auto row = [&](int p) -> const float* {
    const int y = p - r;
    return (y >= 0 && y < h) ? in + static_cast<std::ptrdiff_t>(y) * w + c0 : ninf;
  };
  const std::size_t row_bytes = static_cast<std::size_t>(n) * sizeof(float);
  int blk_start = -1;  // padded index of the block whose suffix maxima blk holds
  for (int p = 0; p < len; ++p) {
    const int block = p - p % k;
    // Prefix max of p's block.
    if (p == block) {
      __builtin_memcpy(grow, row(p), row_bytes);
    } else if (row(p) != ninf) {
      RowOps::max_rows(grow, grow, row(p), n);
    }
    // The window that ends at p starts at y = p - k + 1 (padded index = output row).
    const int y = p - k + 1;
    if (y < 0) continue;
    const int yb = y - y % k;
    if (yb != blk_start) {
      // Suffix maxima of y's block, computed the first time one of its rows is needed.
      const int end = (yb + k < len ? yb + k : len) - 1;
      float* sf = blk + static_cast<std::ptrdiff_t>(end - yb) * n;
      __builtin_memcpy(sf, row(end), row_bytes);
      for (int q = end - 1; q >= yb; --q) {
        float* d = blk + static_cast<std::ptrdiff_t>(q - yb) * n;
        RowOps::max_rows(d, d + n, row(q), n);
      }
      blk_start = yb;
    }
    RowOps::max_eq_bits(blk + static_cast<std::ptrdiff_t>(y - yb) * n, grow,
                        s + static_cast<std::ptrdiff_t>(y) * w + c0, n,
                        bits + static_cast<std::ptrdiff_t>(y) * nw + c0 / 64);
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

// ---- Bit-map dilation: D = (max_pool(M) > 0), i.e. OR over the (2r+1)^2 window clipped to the map ----------------

// Multi-word shifts of one row of nw words, in place. shr: bit x takes bit x + s (reads higher words, so ascending
// order reads only unmodified words); shl: bit x takes bit x - s (descending order). Result ORed into the row.
void or_shr(std::uint64_t* v, int nw, int s) {
  const int q = s / 64, b = s % 64;
  for (int t = 0; t + q < nw; ++t) {
    std::uint64_t x = v[t + q] >> b;
    if (b != 0 && t + q + 1 < nw) x |= v[t + q + 1] << (64 - b);
    v[t] |= x;
  }
}
void or_shl(std::uint64_t* v, int nw, int s) {
  const int q = s / 64, b = s % 64;
  for (int t = nw - 1; t >= q; --t) {
    std::uint64_t x = v[t - q] << b;
    if (b != 0 && t - q - 1 >= 0) x |= v[t - q - 1] >> (64 - b);
    v[t] |= x;
  }
}

// d = dilation of m (h rows of nw words, bits >= w clear) by r in both directions. Each direction is an OR over
// r+1 shifts built by doubling (ceil(log2(r+1)) word passes; bits and rows beyond the map are zero, which is the
// clipping). The cost is a few thousand word operations at 480x640, negligible beside the float pools.
void dilate_bits(const std::uint64_t* m, int h, int w, int r, std::uint64_t* d) {
  const int nw = nms_words(w);
  const std::ptrdiff_t total = static_cast<std::ptrdiff_t>(h) * nw;
  for (std::ptrdiff_t i = 0; i < total; ++i) d[i] = m[i];
  // Vertical: d[y] = OR m[y .. y + r], then d[y] = OR d[y - r .. y].
  for (int span = 1; span < r + 1;) {
    const int s = span < r + 1 - span ? span : r + 1 - span;
    for (int y = 0; y + s < h; ++y)
      for (int t = 0; t < nw; ++t)
        d[static_cast<std::ptrdiff_t>(y) * nw + t] |= d[static_cast<std::ptrdiff_t>(y + s) * nw + t];
    span += s;
  }
  for (int span = 1; span < r + 1;) {
    const int s = span < r + 1 - span ? span : r + 1 - span;
    for (int y = h - 1; y - s >= 0; --y)
      for (int t = 0; t < nw; ++t)
        d[static_cast<std::ptrdiff_t>(y) * nw + t] |= d[static_cast<std::ptrdiff_t>(y - s) * nw + t];
    span += s;
  }
  // Horizontal, row by row: OR of bits x .. x + r, then of x - r .. x; bits shifted past w are cleared after.
  const std::uint64_t last = (w % 64) == 0 ? ~std::uint64_t{0} : (std::uint64_t{1} << (w % 64)) - 1;
  for (int y = 0; y < h; ++y) {
    std::uint64_t* v = d + static_cast<std::ptrdiff_t>(y) * nw;
    for (int span = 1; span < r + 1;) {
      const int s = span < r + 1 - span ? span : r + 1 - span;
      or_shr(v, nw, s);
      span += s;
    }
    for (int span = 1; span < r + 1;) {
      const int s = span < r + 1 - span ? span : r + 1 - span;
      or_shl(v, nw, s);
      span += s;
    }
    v[nw - 1] &= last;
  }
}

struct NmsBuffers {
  std::uint64_t *m, *d, *e, *a;  // h * nw words each: max mask, dilated mask, new maxima, above threshold
  unsigned char* need;           // h bytes: rows the sparse round's horizontal pass covers
  float* hp;                     // h * w: horizontal pass result
  float* tmp;                    // kNmsStripRows * w: masked scores (SS) of one strip
  float *blk, *grow, *ninf;      // k * kNmsChunk, kNmsChunk, kNmsChunk
  float* strip;                  // horizontal pass buffers
};

// e = (S == max_pool(X)) as bits, where X = S, or SS = (D ? 0 : S) when d is given.
void pool_eq(const float* s, const std::uint64_t* d, int h, int w, int r, std::uint64_t* e, const NmsBuffers& b) {
  const int nw = nms_words(w);
  if (d == nullptr) {
    RowOps::horizontal(s, h, w, r, b.hp, b.strip);
  } else {
    for (int y0 = 0; y0 < h; y0 += kNmsStripRows) {
      const int rows = h - y0 < kNmsStripRows ? h - y0 : kNmsStripRows;
      for (int i = 0; i < rows; ++i)
        RowOps::mask_row(s + static_cast<std::ptrdiff_t>(y0 + i) * w, d + static_cast<std::ptrdiff_t>(y0 + i) * nw, w,
                         b.tmp + static_cast<std::ptrdiff_t>(i) * w);
      RowOps::horizontal(b.tmp, rows, w, r, b.hp + static_cast<std::ptrdiff_t>(y0) * w, b.strip);
    }
  }
  for (int c0 = 0; c0 < w; c0 += kNmsChunk) {
    const int n = w - c0 < kNmsChunk ? w - c0 : kNmsChunk;
    vertical_max_eq(b.hp, s, h, w, c0, n, r, e, nw, b.blk, b.grow, b.ninf);
  }
}

// The first round at the pixels of A only (sparse A, threshold mode): p is a maximum of S over its window iff no
// pixel there is greater (NaN is not supported). Maxima outside A are left out of m: they have no pixel of A within
// r (see the top of this file), so they would not suppress any.
void sparse_first_round(const float* s, int h, int w, int r, const NmsBuffers& b) {
  const int nw = nms_words(w);
  for (int y = 0; y < h; ++y) {
    const int y0 = y - r < 0 ? 0 : y - r, y1 = y + r + 1 < h ? y + r + 1 : h;
    for (int t = 0; t < nw; ++t) {
      const std::ptrdiff_t i = static_cast<std::ptrdiff_t>(y) * nw + t;
      std::uint64_t c = b.a[i];
      std::uint64_t maxima = 0;
      while (c != 0) {
        const int x = 64 * t + __builtin_ctzll(c);
        c &= c - 1;
        const int x0 = x - r < 0 ? 0 : x - r, x1 = x + r + 1 < w ? x + r + 1 : w;
        const float v = s[static_cast<std::ptrdiff_t>(y) * w + x];
        bool greater = false;
        for (int yy = y0; yy < y1 && !greater; ++yy)
          greater = RowOps::any_greater(s + static_cast<std::ptrdiff_t>(yy) * w + x0, x1 - x0, v);
        if (!greater) maxima |= std::uint64_t{1} << (x % 64);
      }
      b.m[i] = maxima;
    }
  }
}

// One suppression round at a few candidates: each bit of C = a & !m & !d whose score is the maximum of
// SS = (d ? 0 : s) over its window, scanned directly ((2r+1)^2 reads per candidate), is set in m.
void candidate_round(const float* s, int h, int w, int r, const NmsBuffers& b) {
  const int nw = nms_words(w);
  for (int y = 0; y < h; ++y) {
    const int y0 = y - r < 0 ? 0 : y - r, y1 = y + r + 1 < h ? y + r + 1 : h;
    for (int t = 0; t < nw; ++t) {
      const std::ptrdiff_t i = static_cast<std::ptrdiff_t>(y) * nw + t;
      std::uint64_t c = b.a[i] & ~b.m[i] & ~b.d[i];
      while (c != 0) {
        const int x = 64 * t + __builtin_ctzll(c);
        c &= c - 1;
        const int x0 = x - r < 0 ? 0 : x - r, x1 = x + r + 1 < w ? x + r + 1 : w;
        const float v = s[static_cast<std::ptrdiff_t>(y) * w + x];
        bool is_max = true;
        for (int yy = y0; yy < y1 && is_max; ++yy) {
          const float* srow = s + static_cast<std::ptrdiff_t>(yy) * w;
          const std::uint64_t* drow = b.d + static_cast<std::ptrdiff_t>(yy) * nw;
          for (int xx = x0; xx < x1; ++xx) {
            const float q = ((drow[xx / 64] >> (xx % 64)) & 1u) != 0 ? 0.0f : srow[xx];  // SS
            if (q > v) {
              is_max = false;
              break;
            }
          }
        }
        if (is_max) b.m[i] |= std::uint64_t{1} << (x % 64);
      }
    }
  }
}

// One suppression round at the candidates only: bits of C = a & !m & !d that are maxima of SS = (d ? 0 : s) over
// their window are set in m. The horizontal pass runs on the rows within r of a candidate row.
void sparse_round(const float* s, int h, int w, int r, const NmsBuffers& b) {
  const int nw = nms_words(w);
  const auto cand = [&](std::ptrdiff_t i) { return b.a[i] & ~b.m[i] & ~b.d[i]; };
  // Rows whose horizontal pass a candidate reads: [y - r, y + r] around each candidate row.
  for (int y = 0; y < h; ++y) b.need[y] = 0;
  for (int y = 0; y < h; ++y) {
    bool any = false;
    for (int t = 0; t < nw && !any; ++t) any = cand(static_cast<std::ptrdiff_t>(y) * nw + t) != 0;
    if (!any) continue;
    const int lo = y - r < 0 ? 0 : y - r, hi = y + r + 1 < h ? y + r + 1 : h;
    for (int yy = lo; yy < hi; ++yy) b.need[yy] = 1;
  }
  // Horizontal running max of SS on runs of needed rows, kNmsStripRows at a time (as pool_eq).
  for (int y = 0; y < h;) {
    if (!b.need[y]) {
      ++y;
      continue;
    }
    int end = y;
    while (end < h && b.need[end] && end - y < kNmsStripRows) ++end;
    for (int i = y; i < end; ++i)
      RowOps::mask_row(s + static_cast<std::ptrdiff_t>(i) * w, b.d + static_cast<std::ptrdiff_t>(i) * nw, w,
                       b.tmp + static_cast<std::ptrdiff_t>(i - y) * w);
    RowOps::horizontal(b.tmp, end - y, w, r, b.hp + static_cast<std::ptrdiff_t>(y) * w, b.strip);
    y = end;
  }
  // Vertical max at each candidate. A candidate is not in d, so its SS is its score.
  for (int y = 0; y < h; ++y) {
    const int lo = y - r < 0 ? 0 : y - r, hi = y + r + 1 < h ? y + r + 1 : h;
    for (int t = 0; t < nw; ++t) {
      const std::ptrdiff_t i = static_cast<std::ptrdiff_t>(y) * nw + t;
      std::uint64_t c = cand(i);
      while (c != 0) {
        const int x = 64 * t + __builtin_ctzll(c);
        c &= c - 1;
        float v = -__builtin_inff();
        for (int yy = lo; yy < hi; ++yy) {
          const float q = b.hp[static_cast<std::ptrdiff_t>(yy) * w + x];
          v = q > v ? q : v;
        }
        if (s[static_cast<std::ptrdiff_t>(y) * w + x] == v) b.m[i] |= std::uint64_t{1} << (x % 64);
      }
    }
  }
}

// Floats of work space for simple_nms_separable (mirrored by detail::nms_work_floats in post.cpp).
constexpr std::size_t nms_strip_floats(int w, int r) {
  return 32 * (static_cast<std::size_t>(w) + 2 * static_cast<std::size_t>(r));
}

// simple_nms (t = -inf) or simple_nms_above (the keypoints S > t exactly; see the top of this file).
void simple_nms_separable(const float* s, int h, int w, int r, float t, float* out, float* work) {
  const int nw = nms_words(w);
  const std::ptrdiff_t words = static_cast<std::ptrdiff_t>(h) * nw;
  const std::ptrdiff_t hw = static_cast<std::ptrdiff_t>(h) * w;
  NmsBuffers b{};
  b.m = reinterpret_cast<std::uint64_t*>(work);  // work comes from operator new: 16-byte aligned
  b.d = b.m + words;
  b.e = b.d + words;
  b.a = b.e + words;
  b.hp = work + 8 * words;
  b.tmp = b.hp + hw;
  b.blk = b.tmp + static_cast<std::ptrdiff_t>(kNmsStripRows) * w;
  b.grow = b.blk + static_cast<std::ptrdiff_t>(2 * r + 1) * kNmsChunk;
  b.ninf = b.grow + kNmsChunk;
  b.strip = b.ninf + kNmsChunk;
  b.need = reinterpret_cast<unsigned char*>(b.strip + nms_strip_floats(w, r));
  for (int i = 0; i < kNmsChunk; ++i) b.ninf[i] = -__builtin_inff();
  const bool all = !(t > -__builtin_inff());
  for (int y = 0; y < h; ++y) {
    std::uint64_t* a = b.a + static_cast<std::ptrdiff_t>(y) * nw;
    if (all) {
      for (int q = 0; q < nw; ++q) a[q] = ~std::uint64_t{0};
    } else {
      RowOps::gt_bits(s + static_cast<std::ptrdiff_t>(y) * w, t, w, a);
    }
  }
  const std::uint64_t last = (w % 64) == 0 ? ~std::uint64_t{0} : (std::uint64_t{1} << (w % 64)) - 1;
  for (int y = 0; y < h; ++y) b.a[static_cast<std::ptrdiff_t>(y) * nw + nw - 1] &= last;

  // max_mask = scores == max_pool(scores): at the pixels of A only when they are few enough that scanning their
  // windows ((2r+1) rows of ceil((2r+1) / kLanes) vector compares each) costs less than the dense pool (~1 vector
  // operation per pixel); the dense pool otherwise, and always for the full map (t = -inf).
  std::ptrdiff_t above = 0;
  if (!all)
    for (std::ptrdiff_t i = 0; i < words; ++i) above += __builtin_popcountll(b.a[i]);
  const std::ptrdiff_t k = 2 * r + 1;
  if (!all && above * k * ((k + RowOps::kLanes - 1) / RowOps::kLanes) <= hw) {
    sparse_first_round(s, h, w, r, b);
  } else {
    pool_eq(s, nullptr, h, w, r, b.m, b);
  }
  for (int iter = 0; iter < 2; ++iter) {
    // supp_mask = max_pool(max_mask.float()) > 0; supp_scores = where(supp_mask, 0, scores)
    dilate_bits(b.m, h, w, r, b.d);
    std::ptrdiff_t count = 0;
    for (std::ptrdiff_t i = 0; i < words; ++i) count += __builtin_popcountll(b.a[i] & ~b.m[i] & ~b.d[i]);
    if (count == 0) break;  // the candidates only shrink: no later round changes a pixel of A
    // new_max_mask = supp_scores == max_pool(supp_scores); max_mask |= new_max_mask & ~supp_mask
    if (count * k * k <= hw) {
      candidate_round(s, h, w, r, b);
    } else if (count * k <= hw) {
      sparse_round(s, h, w, r, b);
    } else {
      pool_eq(s, b.d, h, w, r, b.e, b);
      for (std::ptrdiff_t i = 0; i < words; ++i) b.m[i] |= b.e[i] & ~b.d[i];
    }
  }
  // where(max_mask, scores, zeros); row by row, so out may alias s. Without `out` the caller reads the bits m and a
  // from `work` instead (nms_select_keypoints, post.cpp: work starts with m; a follows at 3 * words).
  if (out == nullptr) return;
  for (int y = 0; y < h; ++y)
    RowOps::select_row(out + static_cast<std::ptrdiff_t>(y) * w, s + static_cast<std::ptrdiff_t>(y) * w,
                       b.m + static_cast<std::ptrdiff_t>(y) * nw, w);
}
