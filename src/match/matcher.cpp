// The matcher (matcher.hpp) and the public in-memory match() (superpoint_rt/match.hpp).
#include "match/matcher.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>

#include "match/gemm.hpp"

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

int default_threads() {
  return std::max(1, omp_get_num_procs());
}

}  // namespace

Matcher::Matcher(int threads) : threads_(threads > 0 ? threads : default_threads()) {}

void Matcher::top2(const DescriptorsView& a, const DescriptorsView& b, Top2& rows, Top2& cols,
                   const ScanKernels& scan) {
  const std::size_t n0 = a.n, n1 = b.n;
  const std::size_t mb = std::min(block_rows(n1), n0);
  const std::size_t blocks = (n0 + mb - 1) / mb;
  const std::size_t ld = row_stride(n1);
  const int team = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads_), blocks));
  if (work_.size() < static_cast<std::size_t>(team)) work_.resize(static_cast<std::size_t>(team));
  rows.resize(n0);
  // Exceptions must not leave the OpenMP region, and every thread must reach the worksharing loop's barrier: a
  // failure is recorded and the remaining blocks are skipped.
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
    } catch (...) {
      record();
    }
#pragma omp for schedule(dynamic, 1)
    for (std::size_t blk = 0; blk < blocks; ++blk) {
      if (failed) continue;
      try {
        const std::size_t r0 = blk * mb, m = std::min(mb, n0 - r0);
        similarity_block(a, r0, m, b, c, ld);
        const Top2Arrays out{rows.best.data() + r0, rows.second.data() + r0, rows.index.data() + r0};
        scan.scan(c, ld, static_cast<int>(m), static_cast<int>(n1), static_cast<std::int32_t>(r0), out,
                  w.cols.arrays());
      } catch (...) {
        record();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  cols.resize(n1);
  std::copy(work_[0].cols.best.begin(), work_[0].cols.best.begin() + static_cast<std::ptrdiff_t>(n1),
            cols.best.begin());
  std::copy(work_[0].cols.second.begin(), work_[0].cols.second.begin() + static_cast<std::ptrdiff_t>(n1),
            cols.second.begin());
  std::copy(work_[0].cols.index.begin(), work_[0].cols.index.begin() + static_cast<std::ptrdiff_t>(n1),
            cols.index.begin());
  for (int t = 1; t < team; ++t) merge_top2(cols.arrays(), work_[static_cast<std::size_t>(t)].cols.arrays(), n1);
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
  std::vector<float> c(a.n * b.n);
  similarity_block_reference(a, 0, a.n, b, c.data(), b.n);
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
