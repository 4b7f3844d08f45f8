// The matcher (matcher.hpp) and the public in-memory match() (superpoint_rt/match.hpp).
#include "match/matcher.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include "match/gemm.hpp"
#include "util/compute_thread.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt {
namespace matching::detail {

void Top2::resize(std::size_t n) {
  best.resize(n);
  second.resize(n);
  index.resize(n);
}

void AlignedFloats::Free::operator()(float* p) const noexcept {
  std::free(p);
}

float* AlignedFloats::reserve(std::size_t n) {
  if (n > n_) {
    const std::size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    p_.reset(p);
    n_ = n;
  }
  return p_.get();
}

std::size_t Matcher::memory_bound(std::size_t n0, std::size_t n1, int dim, int threads) {
  const auto d = static_cast<std::size_t>(std::max(dim, 1));
  const auto t = static_cast<std::size_t>(std::max(threads, 1));
  const std::size_t ld = (n1 + 15) / 16 * 16 + 16;
  const std::size_t block = std::max(kBlockBytes, sizeof(float) * ld * 16);
  // The screen's cap on kept candidates (run()), reached one block late at worst, in vectors grown by doubling.
  const std::size_t kept = 2 * (64 * (n0 + n1) + (std::size_t{1} << 16) + block / sizeof(float)) * sizeof(Candidate);
  const std::size_t top2 = 3 * sizeof(float) * (2 * n0 + 4 * n1);  // rows_, cols_, floor_, col_second + a thread's
  const std::size_t bf16 = sizeof(std::uint16_t) * (n0 + n1) * d;
  const std::size_t matches = (sizeof(std::int32_t) + sizeof(float)) * n0 * 2;  // matches0 + scores0, and find_nn's
  return t * (block + kept + sizeof(float) * (n1 + 16 + d) + top2) + bf16 + top2 + matches + (std::size_t{1} << 20);
}

std::size_t block_rows(std::size_t n1) noexcept {
  const std::size_t rows = kBlockBytes / (sizeof(float) * std::max<std::size_t>(n1, 1));
  return std::max<std::size_t>(16, rows / 4 * 4);
}

namespace {

// The block's row stride: a multiple of 16 floats (whole cache lines), off multiples of 4 KiB (rows that map to the
// same cache sets slow the column-wise scan).
std::size_t row_stride(std::size_t n1) {
  std::size_t ld = (n1 + 15) / 16 * 16;
  if (ld % 1024 == 0) ld += 16;
  return ld;
}

// Rows scanned at a time before their candidates are collected (256 KiB at 4096 columns: they stay in L2).
constexpr std::size_t kGroupRows = 16;

// Rows whose screened column top-2 give every column's floor before the blocks run (1.6 % of 4096 rows).
constexpr std::size_t kFloorRows = 64;

// Blocks per thread the rows are cut into, at least (dynamic scheduling evens out the threads' shares).
constexpr std::size_t kBlocksPerThread = 4;

int default_threads() {
  return std::max(1, omp_get_num_procs());
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The view's rows as point-major float32: the data itself, or a transposed copy of a dim-major view.
const float* point_major(const DescriptorsView& v, std::vector<float>& copy) {
  if (!v.dim_major) return v.data;
  const auto dim = static_cast<std::size_t>(v.dim);
  copy.resize(v.n * dim);
  for (std::size_t i = 0; i < v.n; ++i)
    for (std::size_t k = 0; k < dim; ++k) copy[i * dim + k] = descriptor_at(v, i, k);
  return copy.data();
}

// Every entry of rows [0, m) of a against b, exactly.
void exact_block(const ScanKernels& k, const float* a, std::size_t m, const float* b, std::size_t n, std::size_t dim,
                 float* c, std::size_t ld) {
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t j = 0; j < n; ++j) c[r * ld + j] = k.dot(a + r * dim, b + j * dim, static_cast<int>(dim));
}

// Raises m to the largest finite of m and v, or to +inf when v is not finite (NaN included).
inline void raise_to(double& m, float v) {
  if (!std::isfinite(v))
    m = std::numeric_limits<double>::infinity();
  else if (v > m)
    m = v;
}

// E, the bound on |screened - exact| for one similarity, from the largest row norms |a|, |b| and the largest norms
// of their bfloat16 residuals ra, rb (0 for the float32 screen). With a~ = bf16(a) = a - da:
//   |a.b - a~.b~| <= |da| |b| + |a~| |db|                      (Cauchy-Schwarz), and |a~| <= |a| + |da|;
//   the screen's float32 sums and the exact dot's each err by at most gamma_K sum |a_k b_k| <= gamma_K |a| |b|, with
//   K <= dim + 4 terms on any summation tree (products of bfloat16 are exact in float32);
//   oneDNN's bfloat16 kernels flush subnormal inputs and results: at most 2^-126 per term and per sum.
// Rounding of the norms (relative 2^-16 at most) is covered by the factor 1 + 2^-10, and the float32 rounding of the
// thresholds (screened second best - 2E) by 8 ulps of the largest possible similarity.
double screen_bound(double norm_a, double norm_b, double resid_a, double resid_b, std::size_t dim) {
  const double na = norm_a + resid_a, nb = norm_b + resid_b;
  const double gamma = (2.0 * static_cast<double>(dim) + 24.0) * 0x1p-24;
  const double flush = static_cast<double>(dim) * 0x1p-124 * (1.0 + na + nb);
  return (resid_a * nb + na * resid_b + gamma * na * nb + flush) * (1.0 + 0x1p-10) + 8.0 * 0x1p-24 * na * nb;
}

}  // namespace

const char* to_string(Screen s) noexcept {
  switch (s) {
    case Screen::Auto: return "auto";
    case Screen::Fp32: return "fp32";
    case Screen::Bf16: return "bf16";
    case Screen::Exact: return "exact";
  }
  return "?";
}

Screen auto_screen() {
  // SUPERPOINT_RT_MATCH_SCREEN=fp32|bf16|exact chooses another (benchmarks; the results are the same bits).
  if (const char* e = std::getenv("SUPERPOINT_RT_MATCH_SCREEN")) {
    for (const Screen s : {Screen::Fp32, Screen::Bf16, Screen::Exact})
      if (std::strcmp(e, to_string(s)) == 0) return s;
  }
  const auto& f = util::cpu_features();
  return f.avx512_bf16 && util::best_isa() == util::Isa::Avx512 && bf16_similarity_available() ? Screen::Bf16
                                                                                               : Screen::Fp32;
}

Matcher::Matcher(int threads) : threads_(threads > 0 ? threads : default_threads()) {}

void Matcher::top2(const DescriptorsView& a, const DescriptorsView& b, Top2& rows, Top2& cols, const ScanKernels& k,
                   Screen screen) {
  const DescriptorsView* v[2] = {&a, &b};
  for (int s = 0; s < 2; ++s) {
    n_[s] = v[s]->n;
    rows_of_[s] = point_major(*v[s], copy_[s]);
  }
  if (screen == Screen::Auto) screen = auto_screen();
  if (screen == Screen::Bf16 && !bf16_similarity_available()) screen = Screen::Fp32;
  const auto dim = static_cast<std::size_t>(a.dim);
  stats_ = {};
  stats_.screen = screen;
  // The passes' OpenMP regions open on the process's compute thread (util/compute_thread.hpp), where the engines'
  // forwards run: a second team would make libgomp stop spinning at the forwards' barriers.
  const auto passes = [&] {
    if (!run(k, screen, dim, rows, cols)) {
      if (past_deadline()) throw DeadlinePassed("matching gave up: its deadline passed");
      stats_.fell_back = true;
      stats_.screen = Screen::Exact;
      if (!run(k, Screen::Exact, dim, rows, cols)) throw DeadlinePassed("matching gave up: its deadline passed");
    }
  };
  if (threads_ > 1)
    util::on_compute(passes);
  else
    passes();
}

bool Matcher::run(const ScanKernels& k, Screen screen, std::size_t dim, Top2& rows, Top2& cols) {
  const std::size_t n0 = n_[0], n1 = n_[1];
  const float* const A = rows_of_[0];
  const float* const B = rows_of_[1];
  const bool bf16 = screen == Screen::Bf16, exact = screen == Screen::Exact;
  if (bf16)
    for (int s = 0; s < 2; ++s) bf16_[s].resize(n_[s] * dim);
  // At least kBlocksPerThread blocks per thread where the rows allow (whole groups of rows): with two or three blocks
  // for two threads, one thread would wait for the other at the end of every pair.
  const std::size_t per_thread = (n0 + static_cast<std::size_t>(threads_) * kBlocksPerThread - 1) /
                                 (static_cast<std::size_t>(threads_) * kBlocksPerThread);
  const std::size_t mb =
      std::min({block_rows(n1), n0, std::max(kGroupRows, (per_thread + kGroupRows - 1) / kGroupRows * kGroupRows)});
  const std::size_t blocks = (n0 + mb - 1) / mb;
  const std::size_t ld = row_stride(n1);
  const int team = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads_), blocks));
  if (work_.size() < static_cast<std::size_t>(team)) work_.resize(static_cast<std::size_t>(team));
  rows.resize(n0);
  // Far more candidates than a real pair has (a few per row and column) means massive ties: compute exactly instead.
  const std::size_t cap = 64 * (n0 + n1) + (std::size_t{1} << 16);
  float margin = 0;  // 2E, rounded up to float32
  std::atomic<bool> give_up{false};
  std::atomic<bool> late{false};  // the deadline passed (set_deadline): give up at the next block
  std::atomic<std::size_t> computed{0};
  std::size_t computed_cols = 0;
  // Rows [r0, r0 + m) x columns [j0, j0 + n) of the matrix into c (row stride ld): screened, or exact.
  auto screen_block = [&](std::size_t r0, std::size_t m, std::size_t j0, std::size_t n, float* c) {
    if (exact)
      exact_block(k, A + r0 * dim, m, B + j0 * dim, n, dim, c, ld);
    else if (bf16)
      similarity_block_bf16(bf16_[0].data() + r0 * dim, m, bf16_[1].data() + j0 * dim, n, static_cast<int>(dim), c, ld);
    else
      similarity_block({A, n0, static_cast<int>(dim), false}, r0, m, {B + j0 * dim, n, static_cast<int>(dim), false}, c,
                       ld);
  };
  // Exceptions must not leave the OpenMP region, and every thread must reach the worksharing loops' barriers: a
  // failure is recorded and the remaining work is skipped.
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto record = [&] {
#pragma omp critical(superpoint_rt_match_error)
    if (!error) error = std::current_exception();
    failed = true;
  };
#pragma omp parallel num_threads(team)
  {
    // oneDNN's GEMM inside: one thread each (a nested region would oversubscribe the cores).
    omp_set_num_threads(1);
    Workspace& w = work_[static_cast<std::size_t>(omp_get_thread_num())];
    float* c = nullptr;
    try {
      c = w.c.reserve(mb * ld);
      w.cols.resize(n1);
      reset_top2(w.cols.arrays(), n1);
      w.kept.clear();
      w.hits.resize(n1 + 16);
      w.resid.resize(dim);
    } catch (...) {
      record();
    }
    if (!exact) {
      // The bound's inputs (and the bfloat16 operands): every row's norm, and its bfloat16 residual's.
      for (int s = 0; s < 2; ++s) {
        w.norm2[s] = w.resid2[s] = 0;
#pragma omp for schedule(static)
        for (std::size_t i = 0; i < n_[s]; ++i) {
          if (failed) continue;
          const float* x = rows_of_[s] + i * dim;
          raise_to(w.norm2[s], k.dot(x, x, static_cast<int>(dim)));
          if (bf16) {
            k.to_bf16(x, static_cast<int>(dim), bf16_[s].data() + i * dim, w.resid.data());
            raise_to(w.resid2[s], k.dot(w.resid.data(), w.resid.data(), static_cast<int>(dim)));
          }
        }
      }
#pragma omp single
      {
        double norm2[2] = {0, 0}, resid2[2] = {0, 0};
        for (int t = 0; t < team; ++t)
          for (int s = 0; s < 2; ++s) {
            norm2[s] = std::max(norm2[s], work_[static_cast<std::size_t>(t)].norm2[s]);
            resid2[s] = std::max(resid2[s], work_[static_cast<std::size_t>(t)].resid2[s]);
          }
        const double e =
            screen_bound(std::sqrt(norm2[0]), std::sqrt(norm2[1]), std::sqrt(resid2[0]), std::sqrt(resid2[1]), dim);
        stats_.bound = e;
        // Similarities near float32's range (or a NaN anywhere) leave no useful bound.
        if (!(e < 1e30) || !(std::sqrt(norm2[0]) * std::sqrt(norm2[1]) < 1e30)) {
          give_up = true;
        } else {
          margin = static_cast<float>(2 * e);
          if (static_cast<double>(margin) < 2 * e) margin = std::nextafter(margin, std::numeric_limits<float>::max());
          floor_.resize(n1);
          reset_top2(floor_.arrays(), n1);
        }
      }
      // The columns' floor: their screened second best over the first kFloorRows rows alone, a lower bound of the
      // final one from the start (each thread's running state starts from nothing and would let every early row in).
      // The threads take a share of the columns each. (c is this thread's block buffer, allocated unless `failed`.)
      const std::size_t fm = std::min(kFloorRows, mb);
#pragma omp for schedule(static)
      for (int part = 0; part < team; ++part) {
        const std::size_t j0 = n1 * static_cast<std::size_t>(part) / static_cast<std::size_t>(team);
        const std::size_t j1 = n1 * static_cast<std::size_t>(part + 1) / static_cast<std::size_t>(team);
        if (failed || give_up || j1 == j0) continue;
        try {
          screen_block(0, fm, j0, j1 - j0, c);
          w.floor_rows.resize(fm);
          k.scan(c, ld, static_cast<int>(fm), static_cast<int>(j1 - j0), 0, w.floor_rows.arrays(),
                 {floor_.best.data() + j0, floor_.second.data() + j0, floor_.index.data() + j0});
        } catch (...) {
          record();
        }
      }
    }
    // monotonic: each thread must take its blocks in increasing order, since its running column state keeps the
    // first row of a tie and merge_top2 then takes the lower row of two threads' ties. OpenMP 5 lets a plain
    // schedule(dynamic) hand a thread its blocks in any order, and LLVM's libomp does (it steals from the far end of
    // another thread's range): the clang build gave a column's tie to row 226 instead of 157 after one thread took
    // blocks 4, 5, 6 and then 3. GCC's libgomp happened to keep the order.
#pragma omp for schedule(monotonic : dynamic, 1)
    for (std::size_t blk = 0; blk < blocks; ++blk) {
      if (failed || give_up || late) continue;
      if (past_deadline()) {
        late = true;
        continue;
      }
      try {
        const std::size_t r0 = blk * mb, m = std::min(mb, n0 - r0);
        screen_block(r0, m, 0, n1, c);
        const Top2Arrays out{rows.best.data() + r0, rows.second.data() + r0, rows.index.data() + r0};
        if (exact) {
          k.scan(c, ld, static_cast<int>(m), static_cast<int>(n1), static_cast<std::int32_t>(r0), out, w.cols.arrays());
          continue;
        }
        // kGroupRows rows at a time: scan them, then collect their candidates while they are in cache. A row's
        // threshold is its screened second best - 2E; a column's is its running screened second best - 2E, a lower
        // bound of the final one (rows seen later only raise it).
        std::size_t done = 0;
        for (std::size_t g = 0; g < m; g += kGroupRows) {
          const std::size_t gm = std::min(kGroupRows, m - g);
          const Top2Arrays group{out.best + g, out.second + g, out.index + g};
          k.scan(c + g * ld, ld, static_cast<int>(gm), static_cast<int>(n1), static_cast<std::int32_t>(r0 + g), group,
                 w.cols.arrays());
          for (std::size_t r = g; r < g + gm; ++r) {
            const float* crow = c + r * ld;
            const auto i = static_cast<std::int32_t>(r0 + r);
            const float* x = A + (r0 + r) * dim;
            const float row_min = out.second[r] - margin;
            const int hits = k.collect(crow, static_cast<int>(n1), row_min, w.cols.second.data(), floor_.second.data(),
                                       margin, w.hits.data());
            float b1 = kNegInf, b2 = kNegInf;
            std::int32_t i1 = 0;
            for (int h = 0; h < hits; ++h) {
              const std::int32_t j = w.hits[static_cast<std::size_t>(h)];
              const auto ju = static_cast<std::size_t>(j);
              const float screened = crow[j];
              // Row candidates are computed now; column candidates wait for the final threshold, which most fail.
              Candidate cand{i, j, screened, 0.0f, false};
              if (screened >= row_min) {
                cand.exact = k.dot(x, B + ju * dim, static_cast<int>(dim));
                cand.computed = true;
                push_top2(b1, b2, i1, cand.exact, j);
                ++done;
              }
              if (screened >= std::max(w.cols.second[ju], floor_.second[ju]) - margin) w.kept.push_back(cand);
            }
            out.best[r] = b1;
            out.second[r] = b2;
            out.index[r] = i1;
          }
        }
        computed += done;
        if (w.kept.size() > cap) give_up = true;
      } catch (...) {
        record();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  if (late) return false;  // top2 throws DeadlinePassed
  if (give_up) return false;
  auto merge_columns = [&] {
    cols.resize(n1);
    const Top2& first = work_[0].cols;
    std::copy_n(first.best.begin(), n1, cols.best.begin());
    std::copy_n(first.second.begin(), n1, cols.second.begin());
    std::copy_n(first.index.begin(), n1, cols.index.begin());
    for (int t = 1; t < team; ++t) merge_top2(cols.arrays(), work_[static_cast<std::size_t>(t)].cols.arrays(), n1);
  };
  merge_columns();
  if (exact) {
    stats_.exact = n0 * n1;
    return true;
  }
  // The columns' final thresholds, then each thread's exact column top-2 over its kept candidates that pass them (in
  // increasing row order within a thread, as the scan's), merged as the screened states were. cols holds the merged
  // screened top-2 until then; each thread's own is rebuilt from its candidates.
  const std::vector<float> col_second = cols.second;
#pragma omp parallel num_threads(team) reduction(+ : computed_cols)
  {
    Workspace& w = work_[static_cast<std::size_t>(omp_get_thread_num())];
    reset_top2(w.cols.arrays(), n1);
    for (Candidate& cand : w.kept) {
      const auto j = static_cast<std::size_t>(cand.j);
      if (!(cand.screened >= col_second[j] - margin)) continue;
      if (!cand.computed) {
        cand.exact = k.dot(A + static_cast<std::size_t>(cand.i) * dim, B + j * dim, static_cast<int>(dim));
        ++computed_cols;
      }
      push_top2(w.cols.best[j], w.cols.second[j], w.cols.index[j], cand.exact, cand.i);
    }
  }
  merge_columns();
  computed += computed_cols;
  stats_.exact = computed;
  return true;
}

namespace {

// hloc find_nn for one side: matches (or -1) and scores (or 0).
void find_nn(const Top2& t, bool use_ratio, float ratio2, bool use_distance, float distance2,
             std::vector<std::int32_t>& m, std::vector<float>& s) {
  const std::size_t n = t.best.size();
  m.resize(n);
  s.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float d1 = 2.0f * (1.0f - t.best[i]);
    bool ok = true;
    if (use_ratio) ok = d1 <= ratio2 * (2.0f * (1.0f - t.second[i]));
    if (use_distance) ok = ok && d1 <= distance2;
    m[i] = ok ? t.index[i] : -1;
    s[i] = ok ? (t.best[i] + 1.0f) / 2.0f : 0.0f;
  }
}

}  // namespace

Matches decide(const Top2& rows, const Top2& cols, const MatchOptions& o, bool use_ratio) {
  // hloc: `if ratio_thresh:` / `if distance_thresh:` (0 and None are off); the Python float's square is rounded to
  // float32 when torch combines it with a float32 tensor (multiplication and comparison alike).
  use_ratio = use_ratio && o.ratio_threshold != 0;
  const bool use_distance = o.distance_threshold != 0;
  const auto ratio2 = static_cast<float>(o.ratio_threshold * o.ratio_threshold);
  const auto distance2 = static_cast<float>(o.distance_threshold * o.distance_threshold);
  Matches out;
  find_nn(rows, use_ratio, ratio2, use_distance, distance2, out.matches0, out.scores0);
  if (o.mutual_check) {
    std::vector<std::int32_t> m1;
    std::vector<float> s1;
    find_nn(cols, use_ratio, ratio2, use_distance, distance2, m1, s1);
    // hloc mutual_check: keep i -> j when matches1[j] == i; matching_scores0 stay as they are.
    for (std::size_t i = 0; i < out.matches0.size(); ++i) {
      const std::int32_t j = out.matches0[i];
      if (j > -1 && m1[static_cast<std::size_t>(j)] != static_cast<std::int32_t>(i)) out.matches0[i] = -1;
    }
  }
  return out;
}

void check_views(const DescriptorsView& a, const DescriptorsView& b) {
  for (const auto* v : {&a, &b}) {
    const char* which = v == &a ? "descriptors0" : "descriptors1";
    if (v->dim < 1 || v->dim > kMaxDescriptorDim)
      throw Error(ErrorKind::InvalidArgument, std::string("match: ") + which + " has dim " + std::to_string(v->dim) +
                                                  " (allowed: 1.." + std::to_string(kMaxDescriptorDim) + ")");
    if (v->n > 0 && v->data == nullptr)
      throw Error(ErrorKind::InvalidArgument,
                  std::string("match: ") + which + " has " + std::to_string(v->n) + " descriptors but no data");
    if (v->n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      throw Error(ErrorKind::InvalidArgument,
                  std::string("match: ") + which + " has " + std::to_string(v->n) + " descriptors (at most 2^31 - 1)");
  }
  if (a.dim != b.dim)
    throw Error(ErrorKind::InvalidArgument, "match: the descriptors have different dims (" + std::to_string(a.dim) +
                                                " and " + std::to_string(b.dim) + ")");
}

namespace {

// hloc returns matches0 = -1 and scores 0 when either side has no descriptor (there with D entries, a shape
// artefact; here with n0, one per keypoint).
Matches no_matches(std::size_t n0) {
  Matches m;
  m.matches0.assign(n0, -1);
  m.scores0.assign(n0, 0.0f);
  return m;
}

}  // namespace

Matches Matcher::match(const DescriptorsView& a, const DescriptorsView& b, const MatchOptions& o) {
  if (a.n == 0 || b.n == 0) return no_matches(a.n);
  top2(a, b, rows_, cols_);
  return decide(rows_, cols_, o, a.n > 1 && b.n > 1);
}

Matches match_reference(const DescriptorsView& a, const DescriptorsView& b, const MatchOptions& o) {
  if (a.n == 0 || b.n == 0) return no_matches(a.n);
  std::vector<float> ca, cb;
  const float* pa = point_major(a, ca);
  const float* pb = point_major(b, cb);
  std::vector<float> c(a.n * b.n);
  exact_block(kScalarScan, pa, a.n, pb, b.n, static_cast<std::size_t>(a.dim), c.data(), b.n);
  Top2 rows, cols;
  rows.resize(a.n);
  cols.resize(b.n);
  reset_top2(cols.arrays(), b.n);
  kScalarScan.scan(c.data(), b.n, static_cast<int>(a.n), static_cast<int>(b.n), 0, rows.arrays(), cols.arrays());
  return decide(rows, cols, o, a.n > 1 && b.n > 1);
}

}  // namespace matching::detail

std::vector<std::array<std::int32_t, 2>> Matches::pairs() const {
  std::vector<std::array<std::int32_t, 2>> out;
  out.reserve(count());
  for (std::size_t i = 0; i < matches0.size(); ++i)
    if (matches0[i] >= 0) out.push_back({static_cast<std::int32_t>(i), matches0[i]});
  return out;
}

std::vector<float> Matches::pair_scores() const {
  std::vector<float> out;
  out.reserve(count());
  for (std::size_t i = 0; i < matches0.size(); ++i)
    if (matches0[i] >= 0) out.push_back(scores0[i]);
  return out;
}

std::size_t Matches::count() const {
  return static_cast<std::size_t>(
      std::count_if(matches0.begin(), matches0.end(), [](std::int32_t m) { return m >= 0; }));
}

Matches match(const DescriptorsView& a, const DescriptorsView& b, const MatchOptions& options) {
  options.validate();
  matching::detail::check_views(a, b);
  matching::detail::Matcher m(options.threads);
  return m.match(a, b, options);
}

Matches match(const Features& a, const Features& b, const MatchOptions& options) {
  if (!a.has_descriptors || !b.has_descriptors)
    throw Error(ErrorKind::InvalidArgument, std::string("match: image ") + (a.has_descriptors ? "1" : "0") +
                                                " has no descriptors (extract with return_descriptors = true)");
  for (const Features* f : {&a, &b})
    if (f->descriptor_dim < 1 || f->descriptors.size() != f->size() * static_cast<std::size_t>(f->descriptor_dim))
      throw Error(ErrorKind::InvalidArgument, std::string("match: image ") + (f == &a ? "0" : "1") + " has " +
                                                  std::to_string(f->descriptors.size()) + " descriptor values for " +
                                                  std::to_string(f->size()) + " keypoints of dim " +
                                                  std::to_string(f->descriptor_dim));
  return match(DescriptorsView::of(a), DescriptorsView::of(b), options);
}

}  // namespace superpoint_rt
