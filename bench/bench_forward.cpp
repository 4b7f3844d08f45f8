// bench_forward: median wall time of Executor::run(true) (and run(false)) on the 640x480 network frame at 1 and 2
// threads, oneDNN backend, float32.
//
//   bench_forward [WEIGHTS_DIR] [--runs N] [--threads a,b,...]
// WEIGHTS_DIR defaults to $SUPERPOINT_RT_SHARED/weights/superpoint (else ../shared/weights/superpoint).
// SUPERPOINT_RT_CONV_ALGO=direct|winograd|auto overrides the per-layer algorithm rule.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  namespace sp = superpoint_rt;
  std::string dir;
  int runs = 15;
  std::vector<int> threads{1, 2};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--threads" && i + 1 < argc) {
      threads.clear();
      std::string s = argv[++i];
      for (std::size_t p = 0; p <= s.size();) {
        const std::size_t q = std::min(s.find(',', p), s.size());
        threads.push_back(std::atoi(s.substr(p, q - p).c_str()));
        p = q + 1;
      }
    } else {
      dir = a;
    }
  }
  if (dir.empty()) {
    const char* sh = std::getenv("SUPERPOINT_RT_SHARED");
    dir = std::string(sh && *sh ? sh : "../shared") + "/weights/superpoint";
  }
  try {
    const auto weights = sp::model::load_weights_dir(dir);
    for (int t : threads) {
      auto be = sp::backend::create_backend("cpu", weights, {t, "fp32"});
      auto ex = be->plan({480, 640});
      std::mt19937 rng(1);
      std::uniform_int_distribution<int> px(0, 255);
      for (int i = 0; i < 480 * 640; ++i) ex->input()[i] = static_cast<float>(px(rng)) / 255.0f;
      ex->run(true);  // warm-up (first-touch of arenas, caches)
      ex->run(false);
      std::vector<double> full, kp_only, cpu;
      for (int r = 0; r < runs; ++r) {
        const std::clock_t c0 = std::clock();
        auto t0 = std::chrono::steady_clock::now();
        ex->run(true);
        auto t1 = std::chrono::steady_clock::now();
        cpu.push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
        ex->run(false);
        auto t2 = std::chrono::steady_clock::now();
        full.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        kp_only.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      // CPU time (all threads of the process) tells a busy shared machine's noise apart from the code's cost.
      std::printf("threads=%d run(true) median %.1f ms (min %.1f, cpu %.1f ms)  run(false) median %.1f ms  [%d runs]\n",
                  be->threads(), median(full), *std::min_element(full.begin(), full.end()), median(cpu),
                  median(kp_only), runs);
      if (t == threads.front()) std::printf("plan: %s\n", ex->plan_description().c_str());
    }
  } catch (const sp::Error& e) {
    std::fprintf(stderr, "bench_forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
