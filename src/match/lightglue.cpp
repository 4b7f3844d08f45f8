// LightGlue's forward pass (superpoint_rt/lightglue.hpp): cvg's lightglue/lightglue.py LightGlue._forward as it runs
// on a CPU, step by step in float32. Names in the comments are cvg's.
//
// Matrix products run on oneDNN's sgemm: the linear layers on the whole team, the attention tiles and the
// assignment blocks one per thread inside our own OpenMP regions. Everything between them is element-wise and runs
// here (lg_kernels.hpp for softmax, LayerNorm + GELU).
//
// Attention (cvg's Attention / CrossBlock) in tiles: for each head and block of kQueryBlock queries, the keys in
// tiles of kKeyTile with an online softmax (running max and sum per query, the accumulated values rescaled when the
// max grows), so a call holds kQueryBlock x kKeyTile logits per thread, never the N x N matrix. The cross block's
// bidirectional attention (softmax of sim over rows for image 0, over columns for image 1) computes each tile of sim
// once for both directions, the columns' softmax online over image 0's row blocks (cross_attention), with cvg's
// scaling of both qk by head_dim^-1/4 before the product.
//
// The assignment (MatchAssignment + sigmoid_log_double_softmax + filter_matches) in two passes over blocks of rows
// of sim, recomputed rather than stored: the first finds every row's and column's log-sum-exp, the second the
// row and column maxima of the scores and their indices (the first index of a tie, as torch.max). Memory: a block of
// rows per thread and a few values per point.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <sstream>

#include "match/lg_kernels.hpp"
#include "match/lg_profile.hpp"
#include "match/lightglue_model.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/lightglue.hpp"
#include "util/compute_thread.hpp"

namespace superpoint_rt {

using lightglue::detail::best_lg_kernels;
using lightglue::detail::LgKernels;
using lightglue::detail::Linear;
using lightglue::detail::Stage;
using lightglue::detail::StageTimer;
using lightglue::detail::Weights;

struct LightGlue::Prepared {
  std::size_t n = 0;
  std::vector<float> desc;      // n x dim: input_proj(descriptors)
  std::vector<float> cos, sin;  // n x head_dim / 2: the positional encoding (cvg's encoding[0], [1] before their
                                // repeat_interleave(2))
  const Impl* owner = nullptr;
};

struct LightGlue::Impl {
  Weights w;
};

namespace {

constexpr int kQueryBlock = 64;   // queries per attention task
constexpr int kKeyTile = 2048;    // keys per online-softmax step (64 x 2048 logits: 512 KiB, in L2)
constexpr int kAssignBlock = 32;  // rows of sim per assignment task
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// What one match() call holds, in floats (int32 and float are both 4 bytes), buffer by buffer as the code below
// allocates them: LightGlue::memory_bound() adds these up, so a buffer changed there must be changed here
// (tests/lightglue/test_lightglue_api.cpp measures the peak against it).
// An image's Prepared: desc (n x d), cos and sin (n x hd / 2 each).
std::size_t prepared_floats(std::size_t n, std::size_t d, std::size_t half) {
  return n * (d + 2 * half);
}
// The layers' State on rows = n0 + n1: x (d), qkv (3d), ctx (d), cat (2d), hid (2d), cos and sin (hd / 2 each), ind.
std::size_t state_floats(std::size_t rows, std::size_t d, std::size_t half) {
  return rows * (9 * d + 2 * half + 1);
}
// Per layer: point_heads' y (2 per row), z, tok, and the pruning mask (a byte per row, counted as a float).
std::size_t heads_floats(std::size_t rows) {
  return rows * 5;
}
// attention(): each thread's logits tile (kQueryBlock x kKeyTile), accumulator (kQueryBlock x hd) and running max,
// sum and rescale factor.
std::size_t attention_thread_floats(std::size_t hd) {
  return static_cast<std::size_t>(kQueryBlock) * (kKeyTile + hd + 3);
}
// assign(): mdesc (rows x d), the heads (up to 4 per row: y, z, tok), log-sigmoids, row max / log-sum-exp / best /
// argmax (n0 each), column max / log-sum-exp (n1 each); per thread a block of kAssignBlock rows of sim, exp row, and
// the column running max, sum, best and argmax (n1 each).
std::size_t assign_floats(std::size_t n0, std::size_t n1, std::size_t d) {
  return (n0 + n1) * (d + 5) + 4 * n0 + 2 * n1;
}
std::size_t assign_thread_floats(std::size_t n1) {
  return (static_cast<std::size_t>(kAssignBlock) + 5) * n1;
}
// The result (matches0/1, scores0/1, prune0/1) and filter_matches' scores and mask of image 0's points.
std::size_t result_floats(std::size_t n0, std::size_t n1) {
  return 3 * (n0 + n1) + 2 * n0;
}
// oneDNN's sgemm packs blocks of its operands per thread (its gemm driver's buffers: a few MiB for float32 at the
// blocking of AVX-512 and AVX2) besides its fixed scratch; with the vectors' allocator slack, the allowance here.
constexpr std::size_t kGemmBytesPerThread = std::size_t{8} << 20;
constexpr std::size_t kFixedBytes = std::size_t{1} << 20;  // the jobs' tables, the team's bookkeeping

[[noreturn]] void invalid(const std::string& m) {
  throw Error(ErrorKind::InvalidArgument, m);
}

int default_threads() {
  return std::max(1, omp_get_num_procs());
}

// Runs f with `threads` OpenMP threads. More than one: on the process's compute thread (util/compute_thread.hpp),
// where the engines' forwards run (a second team would make libgomp stop spinning at their barriers), as the
// nearest-neighbour Matcher does. One: on the calling thread, which then opens no team (its regions run serially),
// so that calls of several threads (the HTTP server's workers) run at once; its OpenMP thread count is restored.
template <class F>
void on_team(int threads, F&& f) {
  if (threads > 1) {
    util::on_compute([&] {
      omp_set_num_threads(threads);
      f();
    });
    return;
  }
  struct Restore {
    int previous = omp_get_max_threads();
    ~Restore() { omp_set_num_threads(previous); }
  } restore;
  omp_set_num_threads(1);
  f();
}

void sgemm(char ta, char tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
           const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t st =
      dnnl_sgemm(ta, tb, static_cast<dnnl_dim_t>(m), static_cast<dnnl_dim_t>(n), static_cast<dnnl_dim_t>(k), alpha, a,
                 static_cast<dnnl_dim_t>(lda), b, static_cast<dnnl_dim_t>(ldb), beta, c, static_cast<dnnl_dim_t>(ldc));
  if (st != dnnl_success)
    throw Error(ErrorKind::Internal, "LightGlue: oneDNN sgemm failed (status " + std::to_string(static_cast<int>(st)) +
                                         ") on " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                                         std::to_string(k));
}

// y (n x L.out, row stride ldy) = x (n x L.in, row stride ldx) W^T + b, as nn.Linear, then then(i, y row i) on
// every row in the same pass as the bias: the element-wise step that follows a layer (rotary, LayerNorm + GELU, a
// residual) while the row is in cache, one parallel loop instead of two. On the calling team.
template <class Then>
void linear(const float* x, std::size_t n, std::size_t ldx, const Linear& L, float* y, std::size_t ldy, Then&& then) {
  const int team = omp_get_max_threads();
  {
    const StageTimer timer(Stage::LinearProduct, team);
    sgemm('N', 'T', n, static_cast<std::size_t>(L.out), static_cast<std::size_t>(L.in), 1.0f, x, ldx, L.w.data(),
          static_cast<std::size_t>(L.in), 0.0f, y, ldy);
  }
  const auto out = static_cast<std::size_t>(L.out);
  const bool parallel = n * out > 65536;
  const StageTimer timer(Stage::LinearPass, parallel ? team : 1);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::size_t i = 0; i < n; ++i) {
    float* row = y + i * ldy;
    for (std::size_t j = 0; j < out; ++j) row[j] += L.b[j];
    then(i, row);
  }
}
void linear(const float* x, std::size_t n, std::size_t ldx, const Linear& L, float* y, std::size_t ldy) {
  linear(x, n, ldx, L, y, ldy, [](std::size_t, float*) {});
}

// Exceptions must not leave an OpenMP region: the first is kept and rethrown after it.
struct ErrorSlot {
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  void record() {
#pragma omp critical(superpoint_rt_lightglue_error)
    if (!error) error = std::current_exception();
    failed = true;
  }
  void rethrow() {
    if (error) std::rethrow_exception(error);
  }
};

// out[i][h * hd + k] (row stride ldo) = softmax_j(scale * q_i . k_j) v_j for each head h: cvg's Attention (torch's
// scaled_dot_product_attention) in tiles with an online softmax (file comment).
// Keys per online-softmax step: kKeyTile, or SUPERPOINT_RT_LIGHTGLUE_KEY_TILE (a multiple of 16; for tests, which run
// several tiles on pairs small enough for the reference).
std::size_t key_tile() {
  if (const char* e = std::getenv("SUPERPOINT_RT_LIGHTGLUE_KEY_TILE")) {
    const long v = std::strtol(e, nullptr, 10);
    if (v >= 16 && v <= kKeyTile && v % 16 == 0) return static_cast<std::size_t>(v);
  }
  return kKeyTile;
}

// One attention of a layer: queries q (nq rows of stride ldq) against keys k and values v (nk rows), heads x hd
// columns each, into out (row stride ldo).
struct AttentionJob {
  const float* q;
  std::size_t ldq, nq;
  const float* k;
  std::size_t ldk;
  const float* v;
  std::size_t ldv, nk;
  float scale;
  float* out;
  std::size_t ldo;
};

// One thread's online softmax over the key tiles of a block of up to kQueryBlock queries (cvg's Attention, row by
// row): the logits tile, the accumulated values, the running max and sum per query and their rescale factors
// (attention_thread_floats). Per block: start(), then for each key tile its logits written into s and add_tile(),
// then write().
struct RowAttention {
  std::size_t hd = 0;
  std::unique_ptr<float[]> s;  // the logits tile: written by each product before it is read, so not cleared
  std::vector<float> acc, m, l, alpha;
  // Allocates (may throw: inside the region's try).
  void init(std::size_t head_dim) {
    hd = head_dim;
    s = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(kQueryBlock) * kKeyTile);
    acc.resize(static_cast<std::size_t>(kQueryBlock) * head_dim);
    m.resize(kQueryBlock);
    l.resize(kQueryBlock);
    alpha.resize(kQueryBlock);
  }
  void start() {
    std::fill(acc.begin(), acc.end(), 0.0f);
    std::fill(m.begin(), m.end(), kNegInf);
    std::fill(l.begin(), l.end(), 0.0f);
  }
  // The tile in s (rows x cols logits, row stride kKeyTile): the softmax step in place, the values accumulated so far
  // rescaled (but for the block's first tile), then acc += exp(logits) v (v: cols rows of stride ldv).
  void add_tile(const LgKernels& kern, std::size_t rows, std::size_t cols, bool first, const float* v,
                std::size_t ldv) {
    {
      const StageTimer timer(Stage::SoftmaxRows);
      kern.softmax_tile(s.get(), static_cast<int>(rows), static_cast<int>(cols), kKeyTile, m.data(), l.data(),
                        alpha.data());
      if (!first)
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t d = 0; d < hd; ++d) acc[r * hd + d] *= alpha[r];
    }
    const StageTimer timer(Stage::AttentionValues);
    sgemm('N', 'N', rows, hd, cols, 1.0f, s.get(), kKeyTile, v, ldv, 1.0f, acc.data(), hd);
  }
  // out[r][0, hd) (row stride ldo) = acc / sum for the block's rows.
  void write(float* out, std::size_t ldo, std::size_t rows) const {
    for (std::size_t r = 0; r < rows; ++r) {
      float* o = out + r * ldo;
      for (std::size_t d = 0; d < hd; ++d) o[d] = acc[r * hd + d] / l[r];
    }
  }
};

// The jobs' heads x blocks of kQueryBlock queries, all in one OpenMP region.
void attention(const LgKernels& kern, const std::vector<AttentionJob>& jobs, int heads, int hd, int threads) {
  const auto H = static_cast<std::size_t>(heads);
  std::vector<std::size_t> first{0};  // the first task of each job
  for (const auto& j : jobs) first.push_back(first.back() + H * ((j.nq + kQueryBlock - 1) / kQueryBlock));
  const std::size_t tasks = first.back();
  if (tasks == 0) return;
  const std::size_t hdu = static_cast<std::size_t>(hd);
  ErrorSlot err;
  const std::size_t tile = key_tile();
  const int team = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), tasks));
#pragma omp parallel num_threads(team)
  {
    omp_set_num_threads(1);  // oneDNN's sgemm inside: one thread each
    RowAttention ra;
    try {
      ra.init(hdu);
    } catch (...) {
      err.record();
    }
#pragma omp for schedule(dynamic, 1)
    for (std::size_t t = 0; t < tasks; ++t) {
      if (err.failed) continue;
      try {
        const auto ji = static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1);
        const AttentionJob& J = jobs[ji];
        const std::size_t local = t - first[ji], h = local % H, qb = local / H;
        const std::size_t r0 = qb * kQueryBlock, rows = std::min<std::size_t>(kQueryBlock, J.nq - r0);
        const float* qh = J.q + r0 * J.ldq + h * hdu;
        ra.start();
        for (std::size_t j0 = 0; j0 < J.nk; j0 += tile) {
          const std::size_t cols = std::min<std::size_t>(tile, J.nk - j0);
          {
            const StageTimer timer(Stage::AttentionLogits);
            sgemm('N', 'T', rows, cols, hdu, J.scale, qh, J.ldq, J.k + j0 * J.ldk + h * hdu, J.ldk, 0.0f, ra.s.get(),
                  kKeyTile);
          }
          ra.add_tile(kern, rows, cols, j0 == 0, J.v + j0 * J.ldv + h * hdu, J.ldv);
        }
        ra.write(J.out + r0 * J.ldo + h * hdu, J.ldo, rows);
      } catch (...) {
        err.record();
      }
    }
  }
  err.rethrow();
}

// The cross block's bidirectional attention with sim = qk0 . qk1^T computed once per tile, as cvg's CrossBlock
// computes it once for both softmaxes (the two-attention form computed it twice: a quarter of the block's attention
// products more). Image 0's rows take the row softmax (online over key tiles, as attention()); image 1's points take
// the column softmax, online over image 0's row blocks (softmax_cols), their accumulated values rescaled when a
// column's max grows. Tasks: each head x kCrossParts ranges of image 0's row blocks; a range holds its own column
// maxima, sums and values (n1 x (hd + 2) per head), which are merged after the region in part order. The split does
// not depend on the thread count, so neither do the bits.
constexpr std::size_t kCrossParts = 2;
// Per thread: attention_thread_floats() and the column step's exp tile (kQueryBlock x kKeyTile) and rescale factors.
std::size_t cross_thread_floats(std::size_t hd) {
  return attention_thread_floats(hd) + (static_cast<std::size_t>(kQueryBlock) + 1) * kKeyTile;
}
// The parts' column maxima, sums and values.
std::size_t cross_floats(std::size_t n1, std::size_t heads, std::size_t hd) {
  return kCrossParts * heads * n1 * (hd + 2);
}

// qk (image 0's n0 rows, then image 1's n1, row stride ld: heads x hd columns each, already scaled) and v (the same
// rows and strides) into out (row stride ldo): image 0's rows attend to image 1's and back.
void cross_attention(const LgKernels& kern, const float* qk, const float* v, std::size_t ld, std::size_t n0,
                     std::size_t n1, float* out, std::size_t ldo, int heads, int hd, int threads) {
  const auto H = static_cast<std::size_t>(heads), hdu = static_cast<std::size_t>(hd);
  const std::size_t blocks = (n0 + kQueryBlock - 1) / kQueryBlock, tasks = H * kCrossParts;
  const std::size_t tile = key_tile();
  const float* qk1 = qk + n0 * ld;
  const float* v1 = v + n0 * ld;
  std::vector<float> pm(kCrossParts * H * n1, kNegInf), pl(kCrossParts * H * n1, 0.0f),
      pacc(kCrossParts * H * n1 * hdu, 0.0f);
  ErrorSlot err;
  const int team = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), tasks));
#pragma omp parallel num_threads(team)
  {
    omp_set_num_threads(1);       // oneDNN's sgemm inside: one thread each
    RowAttention ra;              // image 0's rows
    std::unique_ptr<float[]> p1;  // image 1's exp tile: written before it is read, so not cleared
    std::vector<float> beta;
    try {
      ra.init(hdu);
      p1 = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(kQueryBlock) * kKeyTile);
      beta.resize(kKeyTile);
    } catch (...) {
      err.record();
    }
#pragma omp for schedule(dynamic, 1)
    for (std::size_t t = 0; t < tasks; ++t) {
      if (err.failed) continue;
      try {
        const std::size_t h = t % H, part = t / H;
        float* cm = pm.data() + (part * H + h) * n1;
        float* cl = pl.data() + (part * H + h) * n1;
        float* cacc = pacc.data() + (part * H + h) * n1 * hdu;
        for (std::size_t b = part * blocks / kCrossParts; b < (part + 1) * blocks / kCrossParts; ++b) {
          const std::size_t r0 = b * kQueryBlock, rows = std::min<std::size_t>(kQueryBlock, n0 - r0);
          const float* q0 = qk + r0 * ld + h * hdu;
          ra.start();
          for (std::size_t j0 = 0; j0 < n1; j0 += tile) {
            const std::size_t cols = std::min<std::size_t>(tile, n1 - j0);
            {
              const StageTimer timer(Stage::CrossLogits);
              sgemm('N', 'T', rows, cols, hdu, 1.0f, q0, ld, qk1 + j0 * ld + h * hdu, ld, 0.0f, ra.s.get(), kKeyTile);
            }
            // Image 1's points (before the row step overwrites the logits): the column step, then their values
            // rescaled and this block's added.
            {
              const StageTimer timer(Stage::SoftmaxColumns);
              kern.softmax_cols(ra.s.get(), static_cast<int>(rows), static_cast<int>(cols), kKeyTile, cm + j0, cl + j0,
                                beta.data(), p1.get(), kKeyTile);
              for (std::size_t c = 0; c < cols; ++c)
                for (std::size_t d = 0; d < hdu; ++d) cacc[(j0 + c) * hdu + d] *= beta[c];
            }
            {
              const StageTimer timer(Stage::CrossColumnValues);
              sgemm('T', 'N', cols, hdu, rows, 1.0f, p1.get(), kKeyTile, v + r0 * ld + h * hdu, ld, 1.0f,
                    cacc + j0 * hdu, hdu);
            }
            // Image 0's rows: the row step, as attention().
            ra.add_tile(kern, rows, cols, j0 == 0, v1 + j0 * ld + h * hdu, ld);
          }
          ra.write(out + r0 * ldo + h * hdu, ldo, rows);
        }
      } catch (...) {
        err.record();
      }
    }
    // Image 1's points: the parts merged in part order, by each part's max against the largest.
    const StageTimer merge_timer(Stage::CrossMerge);
#pragma omp for schedule(static)
    for (std::size_t j = 0; j < n1; ++j) {
      for (std::size_t h = 0; h < H; ++h) {
        float mx = kNegInf;
        for (std::size_t part = 0; part < kCrossParts; ++part) mx = std::max(mx, pm[(part * H + h) * n1 + j]);
        float f[kCrossParts], diff[kCrossParts];
        for (std::size_t part = 0; part < kCrossParts; ++part) {
          const float pmj = pm[(part * H + h) * n1 + j];
          diff[part] = pmj == kNegInf ? kNegInf : pmj - mx;  // exp gives 0 for -inf
        }
        kern.exp_nonpositive(diff, static_cast<int>(kCrossParts), f);
        float sum = 0.0f;
        for (std::size_t part = 0; part < kCrossParts; ++part) sum = sum + pl[(part * H + h) * n1 + j] * f[part];
        float* o = out + (n0 + j) * ldo + h * hdu;
        std::fill(o, o + hdu, 0.0f);
        for (std::size_t part = 0; part < kCrossParts; ++part) {
          const float* a = pacc.data() + ((part * H + h) * n1 + j) * hdu;
          const float fp = f[part];
          for (std::size_t d = 0; d < hdu; ++d) o[d] = o[d] + a[d] * fp;
        }
        for (std::size_t d = 0; d < hdu; ++d) o[d] = o[d] / sum;
      }
    }
  }
  err.rethrow();
}

// cvg's apply_cached_rotary_emb: t * cos + rotate_half(t) * sin, with rotate_half(t)[2i] = -t[2i+1],
// [2i+1] = t[2i]; the same encoding for every head. On the queries and keys of one row (heads x hd queries, then as
// many keys), with that point's cos and sin (hd / 2 each).
void rotary_row(float* row, int heads, int hd, const float* c, const float* s) {
  const std::size_t half = static_cast<std::size_t>(hd / 2);
  for (int h = 0; h < 2 * heads; ++h) {
    float* t = row + static_cast<std::size_t>(h * hd);
    for (std::size_t p = 0; p < half; ++p) {
      const float a = t[2 * p], b = t[2 * p + 1];
      t[2 * p] = a * c[p] + -b * s[p];
      t[2 * p + 1] = b * c[p] + a * s[p];
    }
  }
}

// The two images' state through the layers, their rows stacked (image 0's, then image 1's) so that every per-point
// step (the linear layers, LayerNorm + GELU, the residuals) runs once for both, as one larger matrix product.
struct State {
  std::size_t n[2] = {0, 0};
  std::vector<float> x;         // rows x d
  std::vector<float> cos, sin;  // rows x hd / 2
  std::vector<std::int32_t> ind[2];
  std::vector<float> qkv, ctx, cat, hid;  // work: rows x 3d, rows x d, rows x 2d, rows x 2d
  std::size_t rows() const { return n[0] + n[1]; }
  std::size_t off(int s) const { return s ? n[0] : 0; }
};

// x = x + ffn([x, message]) on every row: `cat` holds x in its first d columns and the message in the next d.
void ffn_residual(const LgKernels& kern, const lightglue::detail::Ffn& f, State& st, std::size_t d) {
  const std::size_t n = st.rows(), d2 = 2 * d;
  linear(st.cat.data(), n, d2, f.fc1, st.hid.data(), d2, [&](std::size_t, float* row) {
    kern.layernorm_gelu(row, static_cast<int>(d2), f.ln_g.data(), f.ln_b.data(), row);
  });
  linear(st.hid.data(), n, d2, f.fc2, st.ctx.data(), d, [&](std::size_t i, const float* row) {
    float* x = st.x.data() + i * d;
    for (std::size_t k = 0; k < d; ++k) x[k] = x[k] + row[k];
  });
}

// cat = [x, out_proj(ctx)], then the residual feed-forward.
void message_and_ffn(const LgKernels& kern, const Linear& out, const lightglue::detail::Ffn& f, State& st,
                     std::size_t d) {
  const std::size_t n = st.rows();
  linear(st.ctx.data(), n, d, out, st.cat.data() + d, 2 * d,
         [&](std::size_t i, float*) { std::copy_n(st.x.data() + i * d, d, st.cat.data() + i * 2 * d); });
  ffn_residual(kern, f, st, d);
}

// cvg's SelfBlock on both images (one set of weights; each image attends to itself).
void self_block(const LgKernels& kern, const lightglue::detail::Layer& L, State& st, int heads, int hd, int threads) {
  const std::size_t d = static_cast<std::size_t>(heads * hd), ld = 3 * d;
  const std::size_t half = static_cast<std::size_t>(hd / 2);
  linear(st.x.data(), st.rows(), d, L.self_qkv, st.qkv.data(), ld, [&](std::size_t i, float* row) {
    rotary_row(row, heads, hd, st.cos.data() + i * half, st.sin.data() + i * half);
  });
  std::vector<AttentionJob> jobs;
  for (int s = 0; s < 2; ++s) {
    const float* q = st.qkv.data() + st.off(s) * ld;
    jobs.push_back({q, ld, st.n[s], q + d, ld, q + 2 * d, ld, st.n[s], 1.0f / std::sqrt(static_cast<float>(hd)),
                    st.ctx.data() + st.off(s) * d, d});
  }
  attention(kern, jobs, heads, hd, threads);
  message_and_ffn(kern, L.self_out, L.self_ffn, st, d);
}

// cvg's CrossBlock: image 0 attends to image 1 and back, with one projection (to_qk) for queries and keys.
void cross_block(const LgKernels& kern, const lightglue::detail::Layer& L, State& st, int heads, int hd, int threads) {
  const std::size_t d = static_cast<std::size_t>(heads * hd), ld = 2 * d, n = st.rows();
  // cvg: qk0, qk1 = qk0 * scale**0.5, qk1 * scale**0.5 with scale = head_dim**-0.5 (a Python float, applied in
  // float32); then sim = qk0 . qk1 with no further scaling.
  const float qk_scale = static_cast<float>(std::pow(std::pow(static_cast<double>(hd), -0.5), 0.5));
  linear(st.x.data(), n, d, L.cross_qkv, st.qkv.data(), ld, [&](std::size_t, float* row) {
    for (std::size_t k = 0; k < d; ++k) row[k] *= qk_scale;
  });
  cross_attention(kern, st.qkv.data(), st.qkv.data() + d, ld, st.n[0], st.n[1], st.ctx.data(), d, heads, hd, threads);
  message_and_ffn(kern, L.cross_out, L.cross_ffn, st, d);
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// torch's log_sigmoid: min(x, 0) - log1p(exp(-|x|)).
float log_sigmoid(float x) {
  return std::min(x, 0.0f) - std::log1p(std::exp(-std::fabs(x)));
}

// The per-point heads of layer i on every row: matchability logits (and token confidences where the layer has them).
void point_heads(const Linear& heads, const State& st, std::size_t d, std::vector<float>& z, std::vector<float>& tok) {
  const std::size_t n = st.rows();
  std::vector<float> y(n * static_cast<std::size_t>(heads.out));
  linear(st.x.data(), n, d, heads, y.data(), static_cast<std::size_t>(heads.out));
  z.resize(n);
  tok.assign(heads.out > 1 ? n : 0, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    z[i] = y[i * static_cast<std::size_t>(heads.out)];
    if (heads.out > 1) tok[i] = sigmoid(y[i * 2 + 1]);
  }
}

// cvg's confidence_threshold(i), stored as a float32 buffer: clip(0.8 + 0.1 exp(-4 i / n_layers), 0, 1).
float confidence_threshold(int i, int n_layers) {
  const double t = 0.8 + 0.1 * std::exp(-4.0 * i / n_layers);
  return static_cast<float>(std::clamp(t, 0.0, 1.0));
}

// Keeps the rows with keep[i] (cvg's index_select of desc, encoding and ind, on each image).
void compact(State& st, const std::vector<char>& keep, std::size_t d, std::size_t half,
             std::vector<std::int32_t>* prune[2]) {
  std::size_t o = 0, i = 0, kept[2] = {0, 0};
  for (int s = 0; s < 2; ++s)
    for (std::size_t k = 0; k < st.n[s]; ++k, ++i) {
      if (!keep[i]) continue;
      if (o != i) {
        std::copy_n(st.x.data() + i * d, d, st.x.data() + o * d);
        std::copy_n(st.cos.data() + i * half, half, st.cos.data() + o * half);
        std::copy_n(st.sin.data() + i * half, half, st.sin.data() + o * half);
      }
      const std::int32_t orig = st.ind[s][k];
      st.ind[s][kept[s]++] = orig;
      ++(*prune[s])[static_cast<std::size_t>(orig)];
      ++o;
    }
  for (int s = 0; s < 2; ++s) {
    st.n[s] = kept[s];
    st.ind[s].resize(kept[s]);
  }
}

struct Assignment {
  std::vector<std::int32_t> m0, m1;
  std::vector<float> max0;  // the row maxima of the scores
};

// MatchAssignment + sigmoid_log_double_softmax + the maxima of filter_matches, in two passes (file comment).
Assignment assign(const LgKernels& kern, const lightglue::detail::Layer& L, const State& st, std::size_t d,
                  int threads) {
  const std::size_t n0 = st.n[0], n1 = st.n[1];
  // mdesc = final_proj(desc) / d**0.25 (a Python float, applied in float32).
  const float div = static_cast<float>(std::pow(static_cast<double>(d), 0.25));
  std::vector<float> md(st.rows() * d);
  linear(st.x.data(), st.rows(), d, L.final_proj, md.data(), d);
  for (auto& v : md) v /= div;
  const float* md0 = md.data();
  const float* md1 = md.data() + n0 * d;
  // certainties = logsigmoid(z0) + logsigmoid(z1)^T
  std::vector<float> z, unused;
  point_heads(L.heads, st, d, z, unused);
  std::vector<float> ls0(n0), ls1(n1);
  for (std::size_t i = 0; i < n0; ++i) ls0[i] = log_sigmoid(z[i]);
  for (std::size_t j = 0; j < n1; ++j) ls1[j] = log_sigmoid(z[n0 + j]);

  const std::size_t blocks = (n0 + kAssignBlock - 1) / kAssignBlock;
  const int team = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(threads, blocks)));
  const StageTimer timer(Stage::Assignment, team);
  std::vector<float> rmax(n0), rlog(n0);  // log_softmax over a row: (sim - rmax) - rlog
  std::vector<std::vector<float>> cm(static_cast<std::size_t>(team)), cs(static_cast<std::size_t>(team));
  std::vector<float> cmax(n1), clog(n1);
  Assignment out;
  out.m0.resize(n0);
  out.max0.resize(n0);
  std::vector<std::vector<float>> cbest(static_cast<std::size_t>(team));
  std::vector<std::vector<std::int32_t>> cidx(static_cast<std::size_t>(team));
  ErrorSlot err;
#pragma omp parallel num_threads(team)
  {
    omp_set_num_threads(1);
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    std::vector<float> s, e;
    try {
      s.resize(static_cast<std::size_t>(kAssignBlock) * n1);
      e.resize(n1);
      cm[t].assign(n1, kNegInf);
      cs[t].assign(n1, 0.0f);
      cbest[t].assign(n1, kNegInf);
      cidx[t].assign(n1, 0);
    } catch (...) {
      err.record();
    }
    // Pass 1: rows exactly (a block holds whole rows); columns online, per thread.
#pragma omp for schedule(static)
    for (std::size_t blk = 0; blk < blocks; ++blk) {
      if (err.failed) continue;
      try {
        const std::size_t r0 = blk * kAssignBlock, rows = std::min<std::size_t>(kAssignBlock, n0 - r0);
        sgemm('N', 'T', rows, n1, d, 1.0f, md0 + r0 * d, d, md1, d, 0.0f, s.data(), n1);
        for (std::size_t r = 0; r < rows; ++r) {
          const float* row = s.data() + r * n1;
          float m = kNegInf;
          for (std::size_t j = 0; j < n1; ++j) m = std::max(m, row[j]);
          for (std::size_t j = 0; j < n1; ++j) e[j] = row[j] - m;
          kern.exp_nonpositive(e.data(), static_cast<int>(n1), e.data());
          float sum = 0.0f;
          for (std::size_t j = 0; j < n1; ++j) sum += e[j];
          rmax[r0 + r] = m;
          rlog[r0 + r] = std::log(sum);
        }
        // Columns: the block's maxima, the running sums rescaled to them, then the block's terms added.
        float* m = cm[t].data();
        float* sum = cs[t].data();
        for (std::size_t j = 0; j < n1; ++j) {
          float bm = m[j];
          for (std::size_t r = 0; r < rows; ++r) bm = std::max(bm, s[r * n1 + j]);
          e[j] = m[j] - bm;  // -inf on the first block: exp gives 0
          m[j] = bm;
        }
        kern.exp_nonpositive(e.data(), static_cast<int>(n1), e.data());
        for (std::size_t j = 0; j < n1; ++j) sum[j] *= e[j];
        for (std::size_t r = 0; r < rows; ++r) {
          const float* row = s.data() + r * n1;
          for (std::size_t j = 0; j < n1; ++j) e[j] = row[j] - m[j];
          kern.exp_nonpositive(e.data(), static_cast<int>(n1), e.data());
          for (std::size_t j = 0; j < n1; ++j) sum[j] += e[j];
        }
      } catch (...) {
        err.record();
      }
    }
#pragma omp single
    {
      for (std::size_t j = 0; j < n1; ++j) {
        float m = kNegInf;
        for (std::size_t u = 0; u < static_cast<std::size_t>(team); ++u) m = std::max(m, cm[u][j]);
        float sum = 0.0f;
        for (std::size_t u = 0; u < static_cast<std::size_t>(team); ++u)
          if (cm[u][j] != kNegInf) sum += cs[u][j] * std::exp(cm[u][j] - m);
        cmax[j] = m;
        clog[j] = std::log(sum);
      }
    }
    // Pass 2: scores = (scores0 + scores1) + certainties; row maxima whole, column maxima per thread.
#pragma omp for schedule(static)
    for (std::size_t blk = 0; blk < blocks; ++blk) {
      if (err.failed) continue;
      try {
        const std::size_t r0 = blk * kAssignBlock, rows = std::min<std::size_t>(kAssignBlock, n0 - r0);
        sgemm('N', 'T', rows, n1, d, 1.0f, md0 + r0 * d, d, md1, d, 0.0f, s.data(), n1);
        float* cb = cbest[t].data();
        std::int32_t* ci = cidx[t].data();
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t i = r0 + r;
          const float* row = s.data() + r * n1;
          float best = kNegInf;
          std::int32_t bj = 0;
          for (std::size_t j = 0; j < n1; ++j) {
            const float s0 = (row[j] - rmax[i]) - rlog[i], s1 = (row[j] - cmax[j]) - clog[j];
            const float v = (s0 + s1) + (ls0[i] + ls1[j]);
            if (v > best) {
              best = v;
              bj = static_cast<std::int32_t>(j);
            }
            if (v > cb[j]) {
              cb[j] = v;
              ci[j] = static_cast<std::int32_t>(i);
            }
          }
          out.m0[i] = bj;
          out.max0[i] = best;
        }
      } catch (...) {
        err.record();
      }
    }
  }
  err.rethrow();
  // Columns: the thread with the largest maximum, a tie to the lower row (thread t holds lower rows than t + 1).
  out.m1.resize(n1);
  for (std::size_t j = 0; j < n1; ++j) {
    float best = kNegInf;
    std::int32_t bi = 0;
    for (std::size_t u = 0; u < static_cast<std::size_t>(team); ++u)
      if (cbest[u][j] > best) {
        best = cbest[u][j];
        bi = cidx[u][j];
      }
    out.m1[j] = bi;
  }
  return out;
}

void check_features(const LightGlueFeatures& f, int input_dim, const char* which) {
  const std::string w(which);
  if (f.n > 0 && (!f.keypoints || !f.descriptors)) invalid(w + ": null keypoints or descriptors with n > 0");
  if (f.n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    invalid(w + ": " + std::to_string(f.n) + " keypoints (at most 2^31 - 1)");
  if (f.dim != input_dim)
    invalid(w + ": descriptors of dim " + std::to_string(f.dim) + "; these LightGlue weights take " +
            std::to_string(input_dim));
  if (!std::isfinite(f.width) || !std::isfinite(f.height) || f.width < 0 || f.height < 0 ||
      ((f.width > 0) != (f.height > 0)))
    invalid(w + ": image size " + std::to_string(f.width) + " x " + std::to_string(f.height) +
            " (both > 0, or both 0 for the keypoints' extent)");
  for (std::size_t i = 0; i < 2 * f.n; ++i)
    if (!std::isfinite(f.keypoints[i])) invalid(w + ": keypoint " + std::to_string(i / 2) + " is not finite");
}

}  // namespace

namespace {

// cvg's LightGlue.default_conf names; -1 is cvg's "off" for the two confidences (any value <= 0 turns them off in
// its code: `> 0` tests), so the range starts there.
const std::array<ParamSpec, 3> kLightGlueSpecs{{
    {"depth_confidence",
     ParamType::Float,
     -1,
     1,
     {},
     "-1..1, <= 0 = off",
     "early exit: stop after a layer when more than this share of the points is confident (cvg's depth_confidence)",
     false},
    {"width_confidence",
     ParamType::Float,
     -1,
     1,
     {},
     "-1..1, <= 0 = off",
     "point pruning: drop confident points whose matchability is at most 1 - this (cvg's width_confidence)",
     false},
    {"filter_threshold",
     ParamType::Float,
     0,
     1,
     {},
     "0..1",
     "a match's score must exceed this (cvg's filter_threshold)",
     false},
}};

const ParamSpec& lightglue_spec(std::string_view name) {
  for (const auto& s : kLightGlueSpecs)
    if (s.name == name) return s;
  invalid("unknown LightGlue parameter '" + std::string(name) +
          "' (allowed: depth_confidence, width_confidence, filter_threshold)");
}

// The field of `o` (const or not) that a table entry names.
template <class Options>
auto& lightglue_field(Options& o, std::string_view name) {
  const std::string_view n = lightglue_spec(name).name;
  return n == "depth_confidence"   ? o.depth_confidence
         : n == "width_confidence" ? o.width_confidence
                                   : o.filter_threshold;
}

std::string number_text(double x) {
  std::ostringstream t;
  t << x;
  return t.str();
}

void check_lightglue_param(const ParamSpec& spec, double v) {
  if (!(v >= spec.min && v <= spec.max))
    invalid(std::string(spec.name) + ": " + number_text(v) +
            " is out of range (allowed: " + std::string(spec.range_text) + ")");
}

}  // namespace

std::span<const ParamSpec> lightglue_param_specs() noexcept {
  return kLightGlueSpecs;
}

void set_lightglue_param_text(LightGlueOptions& o, std::string_view name, std::string_view value) {
  const ParamSpec& spec = lightglue_spec(name);
  // Decimal only, as the matcher's other fields (std::from_chars: no locale, no hex floats, no leading space).
  const std::string text(value);
  double x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    invalid(std::string(spec.name) + ": '" + text + "' is not a number (allowed: " + std::string(spec.range_text) +
            ")");
  check_lightglue_param(spec, x);
  lightglue_field(o, spec.name) = x;
}

double lightglue_param_value(const LightGlueOptions& o, std::string_view name) {
  return lightglue_field(o, name);
}

void LightGlueOptions::validate() const {
  for (const auto& spec : kLightGlueSpecs) check_lightglue_param(spec, lightglue_param_value(*this, spec.name));
  if (threads < 0) invalid("threads: " + std::to_string(threads) + " is out of range (allowed: >= 0, 0 = all cores)");
}

std::size_t LightGlue::memory_bound(std::size_t n0, std::size_t n1, int threads) const noexcept {
  const Weights& w = impl_->w;
  const auto d = static_cast<std::size_t>(w.dim), hd = static_cast<std::size_t>(w.head_dim), half = hd / 2;
  const auto team = static_cast<std::size_t>(threads > 0 ? threads : default_threads());
  const std::size_t rows = n0 + n1;
  // The layers and the assignment do not overlap (the heads' buffers of the last layer are gone by then), but a
  // bound may add them: the sum is what is counted.
  const std::size_t floats = prepared_floats(n0, d, half) + prepared_floats(n1, d, half) + state_floats(rows, d, half) +
                             heads_floats(rows) + team * cross_thread_floats(hd) +
                             cross_floats(n1, static_cast<std::size_t>(w.num_heads), hd) + assign_floats(n0, n1, d) +
                             team * assign_thread_floats(n1) + result_floats(n0, n1);
  return sizeof(float) * floats + team * kGemmBytesPerThread + kFixedBytes;
}

std::vector<std::array<std::int32_t, 2>> LightGlueMatches::pairs() const {
  std::vector<std::array<std::int32_t, 2>> p;
  for (std::size_t i = 0; i < matches0.size(); ++i)
    if (matches0[i] >= 0) p.push_back({static_cast<std::int32_t>(i), matches0[i]});
  return p;
}

std::size_t LightGlueMatches::count() const {
  return static_cast<std::size_t>(std::count_if(matches0.begin(), matches0.end(), [](auto m) { return m >= 0; }));
}

LightGlue::LightGlue(const std::string& weights, const LightGlueLoad& load)
    : impl_(std::make_unique<Impl>(
          Impl{lightglue::detail::load_weights(weights, load.revision, load.cache_dir, load.local_files_only)})) {}
LightGlue::~LightGlue() = default;
LightGlue::LightGlue(LightGlue&&) noexcept = default;
LightGlue& LightGlue::operator=(LightGlue&&) noexcept = default;

int LightGlue::input_dim() const noexcept {
  return impl_->w.input_dim;
}
int LightGlue::descriptor_dim() const noexcept {
  return impl_->w.dim;
}
int LightGlue::num_layers() const noexcept {
  return static_cast<int>(impl_->w.layers.size());
}
int LightGlue::num_heads() const noexcept {
  return impl_->w.num_heads;
}
const std::string& LightGlue::source() const noexcept {
  return impl_->w.source;
}
const std::string& LightGlue::layout() const noexcept {
  return impl_->w.layout;
}

std::shared_ptr<const LightGlue::Prepared> LightGlue::prepare(const LightGlueFeatures& f, int threads) const {
  const Weights& w = impl_->w;
  check_features(f, w.input_dim, "image");
  if (threads < 0) invalid("threads: " + std::to_string(threads) + " is out of range (allowed: >= 0)");
  auto p = std::make_shared<Prepared>();
  p->owner = impl_.get();
  p->n = f.n;
  const std::size_t n = f.n, d = static_cast<std::size_t>(w.dim), half = static_cast<std::size_t>(w.head_dim / 2);
  // normalize_keypoints: shift = size / 2, scale = max(size) / 2, (kpts - shift) / scale; without a size, cvg takes
  // 1 + max - min of the keypoints.
  float size[2] = {f.width, f.height};
  if (!(f.width > 0)) {
    for (int c = 0; c < 2; ++c) {
      float lo = std::numeric_limits<float>::infinity(), hi = -lo;
      for (std::size_t i = 0; i < n; ++i) {
        lo = std::min(lo, f.keypoints[2 * i + static_cast<std::size_t>(c)]);
        hi = std::max(hi, f.keypoints[2 * i + static_cast<std::size_t>(c)]);
      }
      size[c] = n ? (1.0f + hi) - lo : 1.0f;  // cvg: 1 + max - min, left to right
    }
  }
  const float shift[2] = {size[0] / 2, size[1] / 2}, scale = std::max(size[0], size[1]) / 2;
  p->cos.resize(n * half);
  p->sin.resize(n * half);
  for (std::size_t i = 0; i < n; ++i) {
    const float kx = (f.keypoints[2 * i] - shift[0]) / scale, ky = (f.keypoints[2 * i + 1] - shift[1]) / scale;
    for (std::size_t j = 0; j < half; ++j) {
      // LearnableFourierPositionalEncoding: projected = Wr(x) (no bias), then cos and sin.
      const float proj = kx * w.wr[2 * j] + ky * w.wr[2 * j + 1];
      p->cos[i * half + j] = std::cos(proj);
      p->sin[i * half + j] = std::sin(proj);
    }
  }
  p->desc.resize(n * d);
  if (w.input_proj) {
    on_team(threads > 0 ? threads : default_threads(),
            [&] { linear(f.descriptors, n, static_cast<std::size_t>(f.dim), *w.input_proj, p->desc.data(), d); });
  } else {
    std::copy_n(f.descriptors, n * d, p->desc.data());
  }
  return p;
}

LightGlueMatches LightGlue::match(const LightGlueFeatures& a, const LightGlueFeatures& b,
                                  const LightGlueOptions& o) const {
  o.validate();
  check_features(a, input_dim(), "image0");
  check_features(b, input_dim(), "image1");
  const auto pa = prepare(a, o.threads), pb = prepare(b, o.threads);
  return match(*pa, *pb, o);
}

LightGlueMatches LightGlue::match(const Prepared& pa, const Prepared& pb, const LightGlueOptions& o) const {
  o.validate();
  if (pa.owner != impl_.get() || pb.owner != impl_.get())
    invalid("LightGlue::match: the features were prepared by another LightGlue");
  const Weights& w = impl_->w;
  const LgKernels& kern = best_lg_kernels();
  const int threads = o.threads > 0 ? o.threads : default_threads();
  const std::size_t d = static_cast<std::size_t>(w.dim), half = static_cast<std::size_t>(w.head_dim / 2);
  const int n_layers = static_cast<int>(w.layers.size());
  const std::size_t m = pa.n, n = pb.n;
  const bool early_stop = o.depth_confidence > 0, pruning = o.width_confidence > 0;
  LightGlueMatches r;

  on_team(threads, [&] {
    State st;
    const Prepared* prep[2] = {&pa, &pb};
    const std::size_t rows = pa.n + pb.n;
    st.x.reserve(rows * d);  // exactly: state_floats() counts no growth slack
    st.cos.reserve(rows * half);
    st.sin.reserve(rows * half);
    for (int s = 0; s < 2; ++s) {
      st.n[s] = prep[s]->n;
      st.x.insert(st.x.end(), prep[s]->desc.begin(), prep[s]->desc.end());
      st.cos.insert(st.cos.end(), prep[s]->cos.begin(), prep[s]->cos.end());
      st.sin.insert(st.sin.end(), prep[s]->sin.begin(), prep[s]->sin.end());
      st.ind[s].resize(st.n[s]);
      for (std::size_t k = 0; k < st.n[s]; ++k) st.ind[s][k] = static_cast<std::int32_t>(k);
    }
    st.qkv.resize(st.rows() * 3 * d);
    st.ctx.resize(st.rows() * d);
    st.cat.resize(st.rows() * 2 * d);
    st.hid.resize(st.rows() * 2 * d);
    r.prune0.assign(m, 1);
    r.prune1.assign(n, 1);
    std::vector<std::int32_t>* prune[2] = {&r.prune0, &r.prune1};
    // LightGlueOptions::cancel, between layers and before the assignment (on this thread: the caller's hook).
    const auto check_cancel = [&](int done, const char* before) {
      if (o.cancel && o.cancel())
        throw LightGlueCancelled("LightGlue was cancelled before " + std::string(before) + " (" + std::to_string(done) +
                                     " of " + std::to_string(n_layers) + " layers done)",
                                 done);
    };
    int i = 0;
    for (; i < n_layers; ++i) {
      if (st.n[0] == 0 || st.n[1] == 0) break;
      check_cancel(i, ("layer " + std::to_string(i + 1)).c_str());
      const auto& L = w.layers[static_cast<std::size_t>(i)];
      self_block(kern, L, st, w.num_heads, w.head_dim, threads);
      cross_block(kern, L, st, w.num_heads, w.head_dim, threads);
      if (i == n_layers - 1) continue;  // no early stopping or adaptive width at the last layer
      const float thr = confidence_threshold(i, n_layers);
      std::vector<float> z, tok;
      if (early_stop || pruning) point_heads(L.heads, st, d, z, tok);
      const StageTimer timer(Stage::PointHeads);  // what follows the heads' product: one thread
      if (early_stop) {
        // check_if_stop: 1 - (count of confidences < threshold) / (m + n) > depth_confidence, in float32; pruned
        // points count as confident.
        float below = 0.0f;
        for (const float c : tok) below += c < thr ? 1.0f : 0.0f;
        const float ratio = 1.0f - below / static_cast<float>(m + n);
        if (ratio > static_cast<float>(o.depth_confidence)) break;
      }
      if (pruning) {
        // get_pruning_mask: matchability > 1 - width_confidence, or (with early stopping) confidence <= threshold.
        const float min_match = static_cast<float>(1.0 - o.width_confidence);
        std::vector<char> keep(st.rows());
        for (std::size_t k = 0; k < st.rows(); ++k)
          keep[k] = sigmoid(z[k]) > min_match || (early_stop && tok[k] <= thr);
        compact(st, keep, d, half, prune);
      }
    }
    r.stop = i + 1;
    if (i == n_layers) r.stop = n_layers;
    r.matches0.assign(m, -1);
    r.matches1.assign(n, -1);
    r.scores0.assign(m, 0.0f);
    r.scores1.assign(n, 0.0f);
    if (!pruning) {
      r.prune0.assign(m, n_layers);
      r.prune1.assign(n, n_layers);
    }
    if (st.n[0] == 0 || st.n[1] == 0) return;
    const int at = std::min(i, n_layers - 1);
    check_cancel(std::min(i + 1, n_layers), "the assignment");
    const Assignment as = assign(kern, w.layers[static_cast<std::size_t>(at)], st, d, threads);
    // filter_matches: mutual best, score exp(max0) above the threshold; scores0 keep every mutual's score.
    const float th = static_cast<float>(o.filter_threshold);
    const std::size_t n0 = st.n[0], n1 = st.n[1];
    std::vector<float> ms0(n0, 0.0f);
    std::vector<char> valid0(n0, 0);
    for (std::size_t k = 0; k < n0; ++k) {
      const auto j = static_cast<std::size_t>(as.m0[k]);
      const bool mutual = static_cast<std::size_t>(as.m1[j]) == k;
      ms0[k] = mutual ? std::exp(as.max0[k]) : 0.0f;
      valid0[k] = mutual && ms0[k] > th;
      const auto orig = static_cast<std::size_t>(st.ind[0][k]);
      r.matches0[orig] = valid0[k] ? st.ind[1][j] : -1;
      r.scores0[orig] = ms0[k];
    }
    for (std::size_t j = 0; j < n1; ++j) {
      const auto k = static_cast<std::size_t>(as.m1[j]);
      const bool mutual = static_cast<std::size_t>(as.m0[k]) == j;
      const auto orig = static_cast<std::size_t>(st.ind[1][j]);
      r.matches1[orig] = mutual && valid0[k] ? st.ind[0][k] : -1;
      r.scores1[orig] = mutual ? ms0[k] : 0.0f;
    }
  });
  return r;
}

const LightGlueConf* find_lightglue_conf(const std::string& name) noexcept {
  // hloc/match_features.py confs; input_dim from cvg's LightGlue.features.
  static const LightGlueConf kConfs[] = {
      {"superpoint+lightglue", "superpoint", "matches-superpoint-lightglue", 256},
      {"disk+lightglue", "disk", "matches-disk-lightglue", 128},
      {"aliked+lightglue", "aliked", "matches-aliked-lightglue", 128},
  };
  for (const auto& c : kConfs)
    if (name == c.name) return &c;
  return nullptr;
}

std::string default_lightglue_weights(const LightGlueConf& conf) {
  namespace fs = std::filesystem;
  // torch.hub.get_dir(): $TORCH_HOME/hub, else $XDG_CACHE_HOME/torch/hub, else ~/.cache/torch/hub; cvg's
  // load_state_dict_from_url names the file f"{weights}_{version.replace('.', '-')}.pth" under checkpoints/.
  std::string torch_home;
  if (const char* t = std::getenv("TORCH_HOME"); t && *t)
    torch_home = t;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    torch_home = std::string(x) + "/torch";
  else if (const char* h = std::getenv("HOME"); h && *h)
    torch_home = std::string(h) + "/.cache/torch";
  const std::string file = std::string(conf.features) + "_lightglue_v0-1_arxiv.pth";
  const std::string path = torch_home.empty() ? "" : torch_home + "/hub/checkpoints/" + file;
  std::error_code ec;
  if (!path.empty() && fs::is_regular_file(path, ec)) return path;
  if (std::string(conf.features) == "superpoint") return "ETH-CVG/lightglue_superpoint";
  throw Error(ErrorKind::NotFound,
              std::string("no LightGlue weights for ") + conf.name + ": " +
                  (path.empty() ? "torch's hub cache has no folder (no HOME)" : path + " does not exist") +
                  " (name them with --matcher-weights: a cvg .pth file)");
}

}  // namespace superpoint_rt
