// bench_forward: median wall time of Executor::run(true) (and run(false)) on the 640x480 network frame (or --frame)
// at 1 and 2 threads, oneDNN backend, per precision (fp32 by default), and each plan's memory: the backend's shared
// workspace after the runs (activations, scratch, outputs; backend/workspace.hpp) and its weights.
//
//   bench_forward [WEIGHTS_DIR] [--runs N] [--threads a,b,...] [--precision fp32,bf16,...] [--frame WxH]
//                 [--stripe-rows N]   (PlanOptions::stripe_rows: -1 the rule, 0 unstriped)
// With several precisions the runs are INTERLEAVED (fp32, bf16, fp32, bf16, ...) at each thread count, so that the
// noise of a shared machine hits every mode alike; the ratio line compares medians measured side by side.
// WEIGHTS_DIR defaults to $SUPERPOINT_RT_SHARED/weights/superpoint (else ../shared/weights/superpoint).
// SUPERPOINT_RT_CONV_ALGO=direct|winograd|auto|ours overrides the kernel table (kernel_table.hpp). A precision may
// carry a layer plan, PRECISION@LAYER=TYPE+LAYER=TYPE (SUPERPOINT_RT_LAYER_PRECISION with '+' for ',', set while that
// backend is created), e.g. --precision int8,int8@conv1b=bf16+conv2a=bf16: plans measured side by side.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t p = 0; p <= s.size();) {
    const std::size_t q = std::min(s.find(',', p), s.size());
    out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

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
  std::vector<std::string> precisions{"fp32"};
  int fw = 640, fh = 480, stripe_rows = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--threads" && i + 1 < argc) {
      threads.clear();
      for (const auto& t : split(argv[++i])) threads.push_back(std::atoi(t.c_str()));
    } else if (a == "--precision" && i + 1 < argc) {
      precisions = split(argv[++i]);
    } else if (a == "--frame" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%dx%d", &fw, &fh) != 2 || fw < 8 || fh < 8) {
        std::fprintf(stderr, "bench_forward: --frame WxH, each side >= 8\n");
        return 2;
      }
    } else if (a == "--stripe-rows" && i + 1 < argc) {
      stripe_rows = std::atoi(argv[++i]);
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
      struct Mode {
        std::string precision;
        std::unique_ptr<sp::backend::Backend> be;
        std::unique_ptr<sp::backend::Executor> ex;
        std::vector<float> plane;
        std::vector<double> full, kp_only, cpu;
      };
      std::vector<Mode> modes;
      for (const auto& p : precisions) {
        Mode m;
        m.precision = p;
        const std::size_t at = p.find('@');
        std::string plan = at == std::string::npos ? "" : p.substr(at + 1);
        std::replace(plan.begin(), plan.end(), '+', ',');
        if (!plan.empty()) ::setenv("SUPERPOINT_RT_LAYER_PRECISION", plan.c_str(), 1);
        m.be = sp::backend::create_backend("cpu", weights, {t, p.substr(0, at)});
        ::unsetenv("SUPERPOINT_RT_LAYER_PRECISION");
        m.ex = m.be->plan({fh, fw, stripe_rows});
        std::mt19937 rng(1);
        std::uniform_int_distribution<int> px(0, 255);
        m.plane.resize(static_cast<std::size_t>(fh) * static_cast<std::size_t>(fw));
        for (float& v : m.plane) v = static_cast<float>(px(rng)) / 255.0f;
        m.ex->run(m.plane.data(), true);  // warm-up (first-touch of the workspace, caches)
        m.ex->run(m.plane.data(), false);
        modes.push_back(std::move(m));
      }
      for (int r = 0; r < runs; ++r) {
        for (auto& m : modes) {
          const std::clock_t c0 = std::clock();
          auto t0 = std::chrono::steady_clock::now();
          m.ex->run(m.plane.data(), true);
          auto t1 = std::chrono::steady_clock::now();
          m.cpu.push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
          m.ex->run(m.plane.data(), false);
          auto t2 = std::chrono::steady_clock::now();
          m.full.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          m.kp_only.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        }
      }
      for (auto& m : modes) {
        // CPU time (all threads of the process) tells a busy shared machine's noise apart from the code's cost.
        std::printf(
            "precision=%s threads=%d run(true) median %.1f ms (min %.1f, cpu %.1f ms)  run(false) median %.1f ms  "
            "[%d runs]\n",
            m.precision.c_str(), m.be->threads(), median(m.full), *std::min_element(m.full.begin(), m.full.end()),
            median(m.cpu), median(m.kp_only), runs);
        std::printf("memory %dx%d threads=%d: workspace %.1f MB (%.0f B per frame pixel), weights %.1f MB\n", fw, fh,
                    m.be->threads(), static_cast<double>(m.be->workspace_bytes()) / 1e6,
                    static_cast<double>(m.be->workspace_bytes()) / (static_cast<double>(fw) * fh),
                    static_cast<double>(m.be->weights_bytes()) / 1e6);
        if (t == threads.front()) std::printf("plan: %s\n", m.ex->plan_description().c_str());
      }
      for (std::size_t k = 1; k < modes.size(); ++k) {
        std::printf("ratio %s/%s threads=%d run(true) %.3f  run(false) %.3f\n", modes[k].precision.c_str(),
                    modes[0].precision.c_str(), t, median(modes[k].full) / median(modes[0].full),
                    median(modes[k].kp_only) / median(modes[0].kp_only));
      }
    }
  } catch (const sp::Error& e) {
    std::fprintf(stderr, "bench_forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
