// The vector kernels of wino_f32.hpp, written once for any vector width: included by wino_f32_avx2.cpp and
// wino_f32_avx512.cpp only, INSIDE an anonymous namespace, after each defines `struct Vec` (its register type T,
// kLanes floats per register, and the operations below on it). Nothing here may be included elsewhere: every function
// must stay local to its instruction set's translation unit (post/kernels.hpp says why).
//
// Per block of wino_f32_block_tiles tiles:
//   1. the input transform of each tile, kLanes channels per register, into v[tile][36][in] (a tile's 36 positions
//      contiguous: its 36 stores then fill neighbouring cache lines; spread over the block they ran 2.5x slower);
//   2. for each position and each panel of 2 x kLanes output channels, the products of groups of 6 tiles in 12
//      accumulators (the input broadcast, the panel's weights reused by every group of the block), into
//      m[tile][out / (2 kLanes)][36][2 kLanes] (what the output transform reads is contiguous);
//   3. the output transform of each tile, kLanes output channels per register, with the bias, ReLU and pooling.
// Each value is computed in the order of the reference (wino_f32.cpp): the same bits.

template <class V>
struct WinoF32Body {
  using T = typename V::T;
  static constexpr int kL = V::kLanes;
  static constexpr int kOb = 2 * kL;  // output channels per weight panel

  // B^T x (wino_f32_input_1d); each product by a power of two fused with its addition (exact product).
  static inline void input_1d(const T x[6], T o[6]) {
    const T four = V::set1(4.f), two = V::set1(2.f);
    const T x4m2 = V::sub(x[4], x[2]), x3m1 = V::sub(x[3], x[1]);
    o[0] = V::fmadd(V::sub(x[0], x[2]), four, x4m2);
    o[1] = V::fnmadd(V::add(x[1], x[2]), four, V::add(x[3], x[4]));
    o[2] = V::fmadd(V::sub(x[1], x[2]), four, V::sub(x[4], x[3]));
    o[3] = V::fmadd(x3m1, two, x4m2);
    o[4] = V::fnmadd(x3m1, two, x4m2);
    o[5] = V::fmadd(V::sub(x[1], x[3]), four, V::sub(x[5], x[3]));
  }

  // A^T m (wino_output_1d), in the reference's order.
  static inline void output_1d(const T m[6], T y[4]) {
    const T a = V::add(m[1], m[2]), b = V::sub(m[1], m[2]);
    const T c = V::add(m[3], m[4]), d = V::sub(m[3], m[4]);
    y[0] = V::add(V::add(m[0], a), c);
    y[1] = V::fmadd(d, V::set1(2.f), b);
    y[2] = V::fmadd(c, V::set1(4.f), a);
    y[3] = V::add(V::fmadd(d, V::set1(8.f), b), m[5]);
  }

  // The row pass of V = B^T d B from the column pass t: position p to v + p * vstride.
  static inline void input_rows(const T t[6][6], float* v, long vstride) {
    for (int i = 0; i < 6; ++i) {
      T o[6];
      input_1d(t[i], o);
      for (int j = 0; j < 6; ++j) V::store(v + static_cast<long>(i * 6 + j) * vstride, o[j]);
    }
  }

  // V of a patch inside the frame and the rows held, kL channels: row i at p + i * row_stride, column j at
  // + j * block.
  static inline void input_tile_inside(const float* p, long row_stride, long block, float* v, long vstride) {
    T t[6][6];  // t[i][j]: B^T d down column j
    for (int j = 0; j < 6; ++j) {
      T d[6];
      for (int i = 0; i < 6; ++i) d[i] = V::loadu(p + i * row_stride + j * block);
      T o[6];
      input_1d(d, o);
      for (int i = 0; i < 6; ++i) t[i][j] = o[i];
    }
    input_rows(t, v, vstride);
  }

  // The same at an edge: rows[i] is the patch row i at column 0 of those channels (nullptr: a zero row), columns
  // x0 .. x0 + 5 at `block` floats apart, zeros outside [0, w).
  static inline void input_tile_edge(const float* const rows[6], int x0, int w, long block, float* v, long vstride) {
    T t[6][6];
    for (int j = 0; j < 6; ++j) {
      const int x = x0 + j;
      const bool col = x >= 0 && x < w;
      T d[6];
      for (int i = 0; i < 6; ++i) d[i] = rows[i] && col ? V::loadu(rows[i] + x * block) : V::zero();
      T o[6];
      input_1d(d, o);
      for (int i = 0; i < 6; ++i) t[i][j] = o[i];
    }
    input_rows(t, v, vstride);
  }

  // m[t * ms + 0 .. 2 kL - 1] = sum over i < k of v[t * vs + i] * u[2 kL i + 0 .. 2 kL - 1] for the 6 tiles t, one
  // fused multiply-add per term in the order of i, from +0.
  static inline void gemm_6(const float* v, long vs, const float* u, int k, float* m, long ms) {
    T c00 = V::zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    T c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float* v3 = v + 3 * vs;
    for (int i = 0; i < k; ++i) {
      const T u0 = V::load(u), u1 = V::load(u + kL);
      T b = V::bcast(v + i);
      c00 = V::fmadd(b, u0, c00);
      c01 = V::fmadd(b, u1, c01);
      b = V::bcast(v + vs + i);
      c10 = V::fmadd(b, u0, c10);
      c11 = V::fmadd(b, u1, c11);
      b = V::bcast(v + 2 * vs + i);
      c20 = V::fmadd(b, u0, c20);
      c21 = V::fmadd(b, u1, c21);
      b = V::bcast(v3 + i);
      c30 = V::fmadd(b, u0, c30);
      c31 = V::fmadd(b, u1, c31);
      b = V::bcast(v3 + vs + i);
      c40 = V::fmadd(b, u0, c40);
      c41 = V::fmadd(b, u1, c41);
      b = V::bcast(v3 + 2 * vs + i);
      c50 = V::fmadd(b, u0, c50);
      c51 = V::fmadd(b, u1, c51);
      u += kOb;
    }
    V::store(m, c00);
    V::store(m + kL, c01);
    V::store(m + ms, c10);
    V::store(m + ms + kL, c11);
    V::store(m + 2 * ms, c20);
    V::store(m + 2 * ms + kL, c21);
    V::store(m + 3 * ms, c30);
    V::store(m + 3 * ms + kL, c31);
    V::store(m + 4 * ms, c40);
    V::store(m + 4 * ms + kL, c41);
    V::store(m + 5 * ms, c50);
    V::store(m + 5 * ms + kL, c51);
  }

  // Y = A^T M A of one tile, kL output channels: position p at m + p * kOb.
  static inline void output_tile(const float* m, T y[4][4]) {
    T cols[4][6];
    for (int j = 0; j < 6; ++j) {
      T col[6];
      for (int i = 0; i < 6; ++i) col[i] = V::load(m + (i * 6 + j) * kOb);
      T o[4];
      output_1d(col, o);
      for (int i = 0; i < 4; ++i) cols[i][j] = o[i];
    }
    for (int i = 0; i < 4; ++i) output_1d(cols[i], y[i]);
  }

  static void run(const WinoF32View& k, const WinoF32Rows& r, void* scratch) {
    const int ic = k.in_channels, oc = k.out_channels;
    const int nb = wino_f32_block_tiles(ic, oc);
    auto* v = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) & ~std::uintptr_t{63});
    float* m = v + 36L * nb * ic;
    const long vstride = 36L * ic, mstride = 36L * oc;
    const WinoF32Tiles range = wino_f32_tiles(r);
    const long ib = r.in.block, ob = r.out.block;
    const long in_bs = static_cast<long>(r.in.block_stride), in_rs = static_cast<long>(r.in.row_stride);
    const long out_bs = static_cast<long>(r.out.block_stride), out_rs = static_cast<long>(r.out.row_stride);
    const T zero = V::zero();
    const int pw = r.w / 2;
    for (int b0 = range.first; b0 < range.last; b0 += nb) {
      const int nt = range.last - b0 < nb ? range.last - b0 : nb;
      const int groups = (nt + 5) / 6;
      // 1. Input transform.
      for (int t = 0; t < nt; ++t) {
        const int id = b0 + t, ty = r.y0 + 4 * (id / range.across), tx = 4 * (id % range.across);
        const int row0 = ty - 1 - r.in_row0;
        float* vt = v + t * vstride;
        if (row0 >= 0 && row0 + 6 <= r.in_rows && tx >= 1 && tx + 5 <= r.w) {
          const float* p = r.in.data + row0 * in_rs + (tx - 1) * ib;
          for (int c0 = 0; c0 < ic; c0 += kL) input_tile_inside(p + c0 / ib * in_bs + c0 % ib, in_rs, ib, vt + c0, ic);
          continue;
        }
        for (int c0 = 0; c0 < ic; c0 += kL) {
          const float* rows[6];
          for (int i = 0; i < 6; ++i)
            rows[i] = row0 + i >= 0 && row0 + i < r.in_rows ? r.in.data + c0 / ib * in_bs + (row0 + i) * in_rs + c0 % ib
                                                            : nullptr;
          input_tile_edge(rows, tx - 1, r.w, ib, vt + c0, ic);
        }
      }
      // The last group's tiles past the block's end: zeros (their products are not read).
      if (nt < groups * 6)
        std::memset(v + nt * vstride, 0, sizeof(float) * static_cast<std::size_t>((groups * 6 - nt) * vstride));
      // 2. Products.
      for (int p = 0; p < 36; ++p)
        for (int o0 = 0; o0 < oc; o0 += kOb) {
          const float* u = k.u + (static_cast<long>(p) * (oc / kOb) + o0 / kOb) * ic * kOb;
          float* mp = m + static_cast<long>(o0) * 36 + p * kOb;
          for (int g = 0; g < groups; ++g)
            gemm_6(v + 6L * g * vstride + p * ic, vstride, u, ic, mp + 6L * g * mstride, mstride);
        }
      // 3. Output transform, bias, ReLU, pooling.
      for (int t = 0; t < nt; ++t) {
        const int id = b0 + t, ty = r.y0 + 4 * (id / range.across), tx = 4 * (id % range.across);
        const float* mt = m + t * mstride;
        // Rows and columns of the tile (pooled: of its 2x2 pooled outputs) inside what the call writes.
        const int ny = r.pool ? (ty + 2 < r.y1 ? 2 : 1) : (r.y1 - ty < 4 ? r.y1 - ty : 4);
        const int nx = r.pool ? (tx / 2 + 1 < pw ? 2 : pw - tx / 2) : (r.w - tx < 4 ? r.w - tx : 4);
        for (int o0 = 0; o0 < oc; o0 += kL) {
          T y[4][4];
          output_tile(mt + (o0 / kOb) * 36 * kOb + o0 % kOb, y);
          const T bias = V::loadu(k.bias + o0);
          float* out = r.out.data + o0 / ob * out_bs + o0 % ob;
          if (!r.pool) {
            float* row = out + (ty - r.y0) * out_rs + tx * ob;
            for (int a = 0; a < ny; ++a, row += out_rs)
              for (int c = 0; c < nx; ++c) V::storeu(row + c * ob, V::max(V::add(y[a][c], bias), zero));
            continue;
          }
          float* row = out + (ty - r.y0) / 2 * out_rs + tx / 2 * ob;
          for (int a = 0; a < ny; ++a, row += out_rs)
            for (int c = 0; c < nx; ++c) {
              const T top = V::max(V::max(y[2 * a][2 * c], y[2 * a][2 * c + 1]),
                                   V::max(y[2 * a + 1][2 * c], y[2 * a + 1][2 * c + 1]));
              V::storeu(row + c * ob, V::max(V::add(top, bias), zero));
            }
        }
      }
    }
  }
};
