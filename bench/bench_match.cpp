// bench_match: the parts of the matcher (src/match/) against the GEMM alone, on one pair of random unit descriptors
// rounded to float16 (as hloc's feature files hold them), interleaved round by round; medians in ms. A finer view
// than the matching table of `superpoint-rt bench --matching`: the block GEMMs alone and each scan table alone.
//   gemm        one oneDNN sgemm of the whole n0 x n1 similarity matrix (the floor the issue measures against)
//   blocks      the matcher's row-block GEMMs alone (no scan); blocks:bf16 the same in bfloat16 (the bf16 screen's)
//   scan:<isa>  the fused top-2 scan of each kernel table over a precomputed matrix (one thread)
//   match       superpoint_rt::match (screen on this CPU + scan + exact candidates + hloc's decisions), NN-mutual
//   top2:<s>    the matcher's top-2 with the fp32 and the bf16 screen (matcher.hpp), and what each computed exactly
//   bench_match [N0 [N1 [THREADS [ROUNDS [ONLY]]]]]     default 4096 4096 2 7; ONLY: rows whose name contains it
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "match/gemm.hpp"
#include "match/kernels.hpp"
#include "match/matcher.hpp"

namespace {

namespace md = superpoint_rt::matching::detail;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n0 = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4096;
  const std::size_t n1 = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 4096;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 7;
  const char* only = argc > 5 ? argv[5] : nullptr;  // run only the rows whose name contains this (for a profiler)
  const int dim = 256;
  const auto a = md::random_unit_descriptors(n0, dim, 1), b = md::random_unit_descriptors(n1, dim, 2);
  const superpoint_rt::DescriptorsView va{a.data(), n0, dim, false}, vb{b.data(), n1, dim, false};
  std::vector<float> c(n0 * n1);
  // The bfloat16 roundings of both sides, for the bf16 blocks row.
  std::vector<std::uint16_t> a16(n0 * dim), b16(n1 * dim);
  std::vector<float> resid(dim);
  for (std::size_t i = 0; i < n0; ++i)
    md::kScalarScan.to_bf16(a.data() + i * dim, dim, a16.data() + i * dim, resid.data());
  for (std::size_t i = 0; i < n1; ++i)
    md::kScalarScan.to_bf16(b.data() + i * dim, dim, b16.data() + i * dim, resid.data());
  md::Matcher matcher(threads);
  md::Top2 rows, cols;
  rows.resize(n0);
  cols.resize(n1);
  std::map<std::string, std::vector<double>> ms;
  std::map<md::Screen, md::ScreenStats> stats;
  auto time = [&](const std::string& name, auto&& f) {
    if (only && name.find(only) == std::string::npos) return;
    const auto t0 = Clock::now();
    f();
    ms[name].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  };
  superpoint_rt::MatchOptions opt;
  opt.threads = threads;
  for (int r = 0; r < rounds + 1; ++r) {
    time("gemm", [&] { md::similarity_matrix(va, vb, c.data(), threads); });
    // The matcher's row blocks (without its scan), one GEMM call per block, the blocks dealt to the threads.
    auto blocks_of = [&](auto&& block) {
      const std::size_t mb = std::min(md::block_rows(n1), n0);
      const std::size_t blocks = (n0 + mb - 1) / mb;
      std::vector<std::vector<float>> buf(static_cast<std::size_t>(threads), std::vector<float>(mb * n1));
#pragma omp parallel num_threads(threads)
      {
        omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
        for (std::size_t k = 0; k < blocks; ++k)
          block(k * mb, std::min(mb, n0 - k * mb), buf[static_cast<std::size_t>(omp_get_thread_num())].data());
      }
    };
    time("blocks", [&] {
      blocks_of([&](std::size_t r0, std::size_t m, float* out) { md::similarity_block(va, r0, m, vb, out, n1); });
    });
    if (md::bf16_similarity_available())
      time("blocks:bf16", [&] {
        blocks_of([&](std::size_t r0, std::size_t m, float* out) {
          md::similarity_block_bf16(a16.data() + r0 * dim, m, b16.data(), n1, dim, out, n1);
        });
      });
    for (const auto* k : md::available_scans())
      time(std::string("scan:") + superpoint_rt::util::to_string(k->isa), [&] {
        md::reset_top2(cols.arrays(), n1);
        k->scan(c.data(), n1, static_cast<int>(n0), static_cast<int>(n1), 0, rows.arrays(), cols.arrays());
      });
    time("match", [&] { (void)matcher.match(va, vb, opt); });
    for (const auto screen : {md::Screen::Fp32, md::Screen::Bf16}) {
      time(std::string("top2:") + md::to_string(screen),
           [&] { matcher.top2(va, vb, rows, cols, md::best_scan(), screen); });
      stats[screen] = matcher.last_stats();
    }
  }
  std::printf("pair %zu x %zu, dim %d, %d threads, %d rounds (first dropped), median ms:\n", n0, n1, dim, threads,
              rounds);
  const double gemm = ms.count("gemm") ? median({ms["gemm"].begin() + 1, ms["gemm"].end()}) : 1.0;
  for (auto& [name, v] : ms) {
    const double m = median({v.begin() + 1, v.end()});
    std::printf("  %-12s %9.2f   x gemm %.3f\n", name.c_str(), m, m / gemm);
  }
  for (const auto& [screen, st] : stats)
    std::printf("  screen %-5s (ran %s) bound E %.3g, exact similarities %zu (%.3f per row + column)%s\n",
                md::to_string(screen), md::to_string(st.screen), st.bound, st.exact,
                static_cast<double>(st.exact) / static_cast<double>(n0 + n1),
                st.fell_back ? ", fell back to exact" : "");
  return 0;
}
