// sprt_bench: times superpoint-rt for bench/run_bench.py (the ONNX Runtime comparison, docs/BENCHMARKS.md).
//
//   sprt_bench --weights DIR --mode forward|request [--threads T] [--image FILE] [--pixels NPZ]
//              [--iters N] [--warmup N] [--stdin]
//
// forward: the network alone, through the internal backend interface (src/backend/backend.hpp):
//          create_backend("cpu", load_weights_dir(DIR), {T}) -> plan({H, W}) -> run(true) (both heads), the input
//          plane filled once before timing. The plane is `pixel_values` of --pixels (an npz such as the golden dense
//          file, so that both peers see a real image) or, without it, a fixed 480x640 pattern.
// request: the full request through the public API: SuperPoint::run(ImageInput::bytes(...)) on the bytes of
//          --image, read into memory once (decode + preprocess + network + postprocess; no file I/O timed), with
//          the default Params. Per-stage times come from Features::timing_ms.
//
// Output: one JSON line per measurement on stdout, all times in milliseconds of wall clock (steady_clock):
//   {"mode", "threads", "iters", "ms": [per iteration], "cpu_ms": process CPU time of all iterations, ...}
//   request adds "decode", "preprocess", "forward", "postprocess" (per iteration) and "keypoints".
// With --stdin the program sets up once, then reads one iteration count per line from stdin and answers each with
// one JSON line (so the driver can interleave rounds with ONNX Runtime without re-loading); it ends at EOF.
//
// Exit status: 0 ok, 1 a superpoint_rt::Error or other failure (message on stderr), 2 bad arguments.
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/image.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/npz.hpp"

namespace {

namespace sp = superpoint_rt;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string weights;
  std::string mode;
  std::string image;
  std::string pixels;
  int threads = 1;
  int iters = 20;
  int warmup = 3;
  bool from_stdin = false;
};

[[noreturn]] void usage(const std::string& why, int status = 2) {
  std::cerr << "sprt_bench: " << why << "\n"
            << "usage: sprt_bench --weights DIR --mode forward|request [--threads T] [--image FILE] [--pixels NPZ]\n"
               "                  [--iters N] [--warmup N] [--stdin]\n";
  std::exit(status);
}

int parse_int(const std::string& flag, const std::string& v, int lo, int hi) {
  std::size_t used = 0;
  long n = 0;
  try {
    n = std::stol(v, &used);
  } catch (const std::exception&) {
    usage(flag + " expects an integer, got '" + v + "'");
  }
  if (used != v.size() || n < lo || n > hi) {
    usage(flag + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  }
  return static_cast<int>(n);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--weights") {
      a.weights = value();
    } else if (flag == "--mode") {
      a.mode = value();
    } else if (flag == "--image") {
      a.image = value();
    } else if (flag == "--pixels") {
      a.pixels = value();
    } else if (flag == "--threads") {
      a.threads = parse_int(flag, value(), 0, 1024);
    } else if (flag == "--iters") {
      a.iters = parse_int(flag, value(), 1, 1000000);
    } else if (flag == "--warmup") {
      a.warmup = parse_int(flag, value(), 0, 1000000);
    } else if (flag == "--stdin") {
      a.from_stdin = true;
    } else if (flag == "-h" || flag == "--help") {
      usage("times superpoint-rt (see docs/BENCHMARKS.md)", 0);
    } else {
      usage("unknown argument '" + flag + "'");
    }
  }
  if (a.weights.empty()) usage("--weights is required");
  if (a.mode != "forward" && a.mode != "request") usage("--mode must be forward or request, got '" + a.mode + "'");
  if (a.mode == "request" && a.image.empty()) usage("--mode request needs --image");
  return a;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CPU time of the whole process (every thread), to show how many cores a run really used.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// One kind of measurement, set up once and timed any number of times.
class Bench {
 public:
  virtual ~Bench() = default;
  virtual nlohmann::json measure(int iters) = 0;
};

class ForwardBench final : public Bench {
 public:
  explicit ForwardBench(const Args& a) : threads_(a.threads) {
    int h = 480, w = 640;
    std::vector<float> plane;
    if (!a.pixels.empty()) {
      const auto arrays = sp::util::load_npz(a.pixels);
      const auto it = arrays.find("pixel_values");
      if (it == arrays.end() || it->second.shape.size() != 2) {
        throw sp::Error(sp::ErrorKind::InvalidArgument,
                        a.pixels + ": expected a 2-D array 'pixel_values' (the H x W network input)");
      }
      h = static_cast<int>(it->second.shape[0]);
      w = static_cast<int>(it->second.shape[1]);
      plane = it->second.as_float();
    } else {
      // A fixed, image-like ramp in [0, 1] (no denormals, no constant regions); run_bench.py always passes
      // --pixels so that ONNX Runtime and we see the same plane.
      plane.resize(static_cast<std::size_t>(h) * static_cast<std::size_t>(w));
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          plane[static_cast<std::size_t>(y) * static_cast<std::size_t>(w) + static_cast<std::size_t>(x)] =
              static_cast<float>((x * 7 + y * 13) % 256) / 255.0f;
        }
      }
    }
    backend_ = sp::backend::create_backend("cpu", sp::model::load_weights_dir(a.weights),
                                           sp::backend::BackendOptions{a.threads, "fp32"});
    exec_ = backend_->plan(sp::backend::PlanOptions{h, w});
    float* in = exec_->input();
    for (std::size_t i = 0; i < plane.size(); ++i) in[i] = plane[i];
    height_ = h;
    width_ = w;
    for (int i = 0; i < a.warmup; ++i) exec_->run(true);
  }

  nlohmann::json measure(int iters) override {
    std::vector<double> ms;
    ms.reserve(static_cast<std::size_t>(iters));
    const double cpu0 = process_cpu_ms();
    for (int i = 0; i < iters; ++i) {
      const auto t0 = Clock::now();
      exec_->run(true);
      ms.push_back(ms_since(t0));
    }
    const double cpu = process_cpu_ms() - cpu0;
    return {{"mode", "forward"}, {"threads", threads_}, {"backend_threads", backend_->threads()},
            {"height", height_}, {"width", width_},     {"iters", iters},
            {"ms", ms},          {"cpu_ms", cpu},       {"plan", exec_->plan_description()}};
  }

 private:
  int threads_;
  int height_ = 0, width_ = 0;
  std::unique_ptr<sp::backend::Backend> backend_;
  std::unique_ptr<sp::backend::Executor> exec_;
};

class RequestBench final : public Bench {
 public:
  explicit RequestBench(const Args& a) : threads_(a.threads), name_(a.image), bytes_(sp::read_file(a.image)) {
    const sp::ImageInfo info = sp::probe_image(bytes_, name_);
    sp::Options o;
    o.model = a.weights;
    o.local_files_only = true;
    o.threads = a.threads;
    // Prepare exactly the variant that is timed (this image's size, the default radius, JPEG/PNG decoders); the
    // warm-up iterations below cover whatever else a first call pays for.
    o.warmup = sp::WarmupSpec::none();
    o.warmup.sizes = {{info.width, info.height}};
    o.warmup.nms_radii = {sp::Params{}.nms_radius};
    o.warmup.decoders = {"jpeg", "png"};
    model_ = sp::SuperPoint::from_pretrained(o);
    for (int i = 0; i < a.warmup; ++i) (void)run_once();
  }

  nlohmann::json measure(int iters) override {
    std::vector<double> ms, decode, preprocess, forward, postprocess;
    std::size_t keypoints = 0;
    const double cpu0 = process_cpu_ms();
    for (int i = 0; i < iters; ++i) {
      const auto t0 = Clock::now();
      const sp::Features f = run_once();
      ms.push_back(ms_since(t0));
      decode.push_back(f.timing_ms.decode);
      preprocess.push_back(f.timing_ms.preprocess);
      forward.push_back(f.timing_ms.forward);
      postprocess.push_back(f.timing_ms.postprocess);
      keypoints = f.size();
    }
    const double cpu = process_cpu_ms() - cpu0;
    return {{"mode", "request"},
            {"threads", threads_},
            {"model_threads", model_.info().threads},
            {"image", name_},
            {"iters", iters},
            {"ms", ms},
            {"cpu_ms", cpu},
            {"decode", decode},
            {"preprocess", preprocess},
            {"forward", forward},
            {"postprocess", postprocess},
            {"keypoints", keypoints},
            {"plan", model_.info().plan}};
  }

 private:
  sp::Features run_once() const { return model_.run(sp::ImageInput::bytes(bytes_, name_)); }

  int threads_;
  std::string name_;
  std::vector<std::uint8_t> bytes_;
  sp::SuperPoint model_;
};

int run(const Args& a) {
  std::unique_ptr<Bench> bench;
  if (a.mode == "forward") {
    bench = std::make_unique<ForwardBench>(a);
  } else {
    bench = std::make_unique<RequestBench>(a);
  }
  if (!a.from_stdin) {
    std::cout << bench->measure(a.iters).dump() << std::endl;
    return 0;
  }
  // Tell the driver that setup (load, plan, warm-up) is done, then serve one measurement per input line.
  std::cout << nlohmann::json{{"ready", true}, {"mode", a.mode}, {"threads", a.threads}}.dump() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    int iters = 0;
    try {
      iters = std::stoi(line);
    } catch (const std::exception&) {
      iters = 0;
    }
    if (iters < 1) {
      std::cerr << "sprt_bench: expected an iteration count >= 1 on stdin, got '" << line << "'\n";
      return 2;
    }
    std::cout << bench->measure(iters).dump() << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
    return run(args);
  } catch (const sp::Error& e) {
    std::cerr << "sprt_bench: " << sp::to_string(e.kind()) << ": " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "sprt_bench: " << e.what() << "\n";
  }
  return 1;
}
