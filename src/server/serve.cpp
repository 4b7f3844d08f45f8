// superpoint-rt serve: the HTTP server's command line, start-up and graceful shutdown (docs/SERVING.md).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "server/server.hpp"

namespace superpoint_rt::cli {

namespace {

// The usage text; its limits section is describe_limits() of the defaults, as GET /v1/info and docs/SERVING.md show.
std::string usage() {
  std::string u =
      "usage: superpoint-rt serve [--host 127.0.0.1] [--port 8000] [--weights DIR|REPO] [--revision R]\n"
      "         [--cache-dir DIR] [--local-files-only] [--threads N] [--warmup default|minimal|all|none]\n"
      "         [--precision fp32|bf16|int8] [--calibration IMAGE|FOLDER]... [--matcher-weights W]\n"
      "         [limits below]\n"
      "Serves POST /v1/keypoints, POST /v1/keypoints/batch, POST /v1/match, GET /healthz, /readyz, /v1/info,\n"
      "/metrics, /openapi.json (the API's OpenAPI 3 document).\n"
      "  --port 0               any free port; the bound address is printed on stdout\n"
      "  --threads N            compute threads of the network (0 = all cores)\n"
      "  --precision P          fp32 (default, bit-exact), bf16 or int8 (docs/BENCHMARKS.md: speed and fidelity)\n"
      "  --calibration X        int8 only: calibration images (a file or a folder; repeatable); default built-in\n"
      "  --matcher-weights W    LightGlue's weights for POST /v1/match?matcher=lightglue (superpoint+lightglue:\n"
      "                         cvg's .pth, a .safetensors, a folder or a Hugging Face repo, as `match`'s flag)\n"
      "Limits (default; GET /v1/info \"limits\" shows the values in use):\n";
  for (const server::LimitDoc& l : server::describe_limits(server::ServerConfig{})) {
    std::string head = l.flag.empty() ? "  (fixed) " + l.key : "  " + l.flag + " " + l.flag_value;
    if (head.size() < 25) head.resize(25, ' ');
    u += head + " " + l.meaning + (l.flag.empty() ? " (" + l.flag_value + ")" : "") + "\n";
  }
  u += "SIGINT / SIGTERM: requests already received finish, new ones get 503, then the server exits 0 (after\n"
       "--timeout-s + 30 s at most: requests still running then are cut and the exit status is 1).\n";
  return u;
}

double positive_number(ArgReader& args, const std::string& flag) {
  const std::string v = args.value(flag);
  double x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size())
    throw UsageError(flag + ": '" + v + "' is not a number");
  if (!(x > 0) || x > 1e7) throw UsageError(flag + ": " + v + " is out of range (allowed: > 0)");
  return x;
}

WarmupSpec warmup_of(const std::string& v) {
  if (v == "default") return WarmupSpec::defaults();
  if (v == "minimal") return WarmupSpec::minimal();
  if (v == "all") return WarmupSpec::all();
  if (v == "none") return WarmupSpec::none();
  throw UsageError("--warmup: '" + v + "' is not default, minimal, all or none");
}

}  // namespace

int serve_main(int argc, char** argv) {
  Options options = default_cli_options();
  options.warmup = WarmupSpec::defaults();  // a server answers many requests: prepare the common variants
  server::ServerConfig cfg;
  std::string matcher_weights;                      // LightGlue's, for /v1/match?matcher=lightglue
  options.max_frame_pixels = cfg.max_frame_pixels;  // the server's default (--max-frame-pixels sets both)
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << usage();
      return 0;
    }
    if (parse_model_flag(args, a, options)) continue;
    if (a == "--host")
      cfg.host = args.value(a);
    else if (a == "--port")
      cfg.port = args.int_value(a, 0, 65535, "0..65535, 0 = any free port");
    else if (a == "--workers")
      cfg.workers = args.int_value(a, 1, 1024, "1..1024");
    else if (a == "--queue")
      cfg.queue = args.int_value(a, 0, 100000, "0..100000");
    else if (a == "--max-batch-parts")
      cfg.max_batch_parts = args.int_value(a, 1, 100000, "1..100000");
    else if (a == "--connections")
      cfg.connections = args.int_value(a, 1, 1000000, "1..1000000");
    else if (a == "--timeout-s")
      cfg.timeout_s = positive_number(args, a);
    else if (a == "--memory-budget-mb")
      cfg.memory_budget_mb = args.int_value(a, 0, 1 << 30, "0..1073741824, 0 = half this machine's memory");
    else if (a == "--max-body-mb")
      cfg.max_body_bytes = static_cast<std::int64_t>(positive_number(args, a) * 1024 * 1024);
    else if (a == "--warmup")
      options.warmup = warmup_of(args.value(a));
    else if (a == "--matcher-weights")
      matcher_weights = args.value(a);
    else
      throw UsageError("serve: unknown option " + a + "\n" + usage());
  }
  cfg.max_pixels = options.max_pixels;
  options.memory_budget_mb = cfg.memory_budget_mb;
  cfg.max_frame_pixels = options.max_frame_pixels;

  // SIGINT / SIGTERM are taken by sigwait() below: block them before any thread exists so that every thread
  // inherits the mask. A client that closes its socket must not kill the process (SIGPIPE).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  bound_heap_growth();

  server::HttpServer http(cfg);
  const int port = http.bind();
  // Tests and scripts read this line to find the port (--port 0).
  std::cout << "superpoint-rt serve: listening on http://" << cfg.host << ":" << port << std::endl;
  http.start();

  std::atomic<bool> load_failed{false};
  std::thread loader([&] {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      if (!matcher_weights.empty()) {
        // As `match --matcher-weights` loads them (a Hugging Face repo through the model's cache settings).
        LightGlueLoad load;
        load.cache_dir = options.cache_dir;
        load.local_files_only = options.local_files_only;
        try {
          http.set_lightglue(std::make_shared<const LightGlue>(matcher_weights, load));
        } catch (const Error& e) {
          throw Error(e.kind(), std::string("--matcher-weights: ") + e.what());
        }
      }
      SuperPoint model = SuperPoint::from_pretrained(options);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const ModelInfo& info = model.info();
      http.set_model(std::move(model));
      std::cerr << "superpoint-rt serve: ready (" << info.weights_dir << ", " << info.backend << " " << info.precision
                << ", " << info.threads << " threads, " << cfg.workers << " workers; loaded in " << s << " s)"
                << std::endl;
    } catch (const std::exception& e) {
      std::cerr << "superpoint-rt serve: error: cannot load the model: " << e.what() << std::endl;
      load_failed.store(true);
      kill(getpid(), SIGTERM);  // wakes the sigwait below
    }
  });

  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (!load_failed.load())
    std::cerr << "superpoint-rt serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
              << ": finishing requests in flight, refusing new ones" << std::endl;
  http.begin_drain();
  // Requests in flight may wait up to --timeout-s for a worker and then run (a batch's later images and /v1/match's
  // second image do not start after it, and matching gives up then); allow that plus a margin. Past it the process
  // ends without them: a SIGTERM is answered in bounded time whatever is running (issue 32).
  const auto grace = std::chrono::milliseconds(static_cast<long long>(cfg.timeout_s * 1000) + 30000);
  if (!http.wait_idle(grace)) {
    std::cerr << "superpoint-rt serve: requests still running after the grace period (--timeout-s + 30 s): exiting "
                 "without them"
              << std::endl;
    std::_Exit(1);
  }
  http.stop();
  loader.join();
  std::cerr << "superpoint-rt serve: stopped" << std::endl;
  return load_failed.load() ? 1 : 0;
}

}  // namespace superpoint_rt::cli
