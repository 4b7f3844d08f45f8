// superpoint-rt bench: superpoint-rt (every precision) against ONNX Runtime, OpenVINO (every precision), ncnn, MNN and
// PyTorch on this CPU, measured in one run and printed as one table (docs/BENCHMARKS.md; `bash bench/run.sh` installs
// the peers and runs it).
//
// One process per row and thread count, so that each row's peak RSS is its own and nothing is shared:
//   ours forward   `superpoint-rt bench --worker forward --frame WxH`: the backend alone (src/backend/backend.hpp:
//                  create_backend -> plan(HxW) -> run(true), both heads) on a fixed plane of that network frame;
//                  one process per frame of --frames (640x480 always, the main table's)
//   ours request   `superpoint-rt bench --worker request`: SuperPoint::run on the 640x480 plane as 8-bit pixels,
//                  on the bytes of a JPEG and a PNG (decode + preprocess + network + postprocess, no file I/O), and
//                  on the JPEG with preset hloc:superpoint_aachen (network frame: long side 1024)
//   peers          bench/peer_worker.py (ONNX Runtime and OpenVINO on bench/export_onnx.py's graph exported at the
//                  frame, OpenVINO at each of --precisions: bf16 by its inference-precision hint, int8 quantised by
//                  NNCF on our built-in calibration planes; ncnn and MNN on that graph converted by pnnx and by MNN's
//                  converter; PyTorch on the reference module of ../shared/tools/reference.py) on the same float
//                  planes, forward only, one process per frame
//   reference      bench/reference_f64.py: the network in float64 on the 640x480 plane, once, beside the setup; each
//                  640x480 forward process writes one forward's raw outputs when it is ready, and every row reports
//                  its max abs error against it (score map and L2-normalised descriptor map)
// Every worker speaks the same line protocol: it prints {"ready": true} once set up (load, plan, warm-up), then
// answers each "KIND ITERS" line with one JSON line {"ms": [...], "cpu_ms": x, "peak_rss_mb": x, ...}.
// The driver interleaves the rows round by round (alternating the order), so that a noisy shared machine slows
// every row alike; medians and ratios are comparable, absolute times are not.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "batch/batch.hpp"
#include "cli/args.hpp"
#include "cli/bench_util.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "image/resize.hpp"
#include "model/hub.hpp"
#include "model/weights.hpp"
#include "server/codec.hpp"
#include "server/server.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kNetW = 640, kNetH = 480;
constexpr const char* kHlocPreset = "hloc:superpoint_aachen";

/// A network frame of --frames; the 640x480 one is the main table's "forward" column.
struct Frame {
  int w = kNetW, h = kNetH;
  std::string name() const { return std::to_string(w) + "x" + std::to_string(h); }
  bool base() const { return w == kNetW && h == kNetH; }
  /// The series' key (and the JSON key of the row): "forward" for 640x480, "forward_WxH" for the others.
  std::string kind() const { return base() ? "forward" : "forward_" + name(); }
  double pixels() const { return static_cast<double>(w) * h; }
};

Frame parse_frame(const std::string& text, const std::string& flag) {
  Frame f;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%dx%d%c", &f.w, &f.h, &extra) != 2 || text != f.name())
    throw UsageError(flag + ": '" + text + "' is not WIDTHxHEIGHT, e.g. 1024x768");
  if (f.w < Params::kMinNetworkSide || f.h < Params::kMinNetworkSide || f.w > Params::kMaxNetworkSide ||
      f.h > Params::kMaxNetworkSide || static_cast<std::int64_t>(f.w) * f.h > Params::kMaxNetworkPixels)
    throw UsageError(flag + ": " + text + " is outside the network frames the engine runs (each side " +
                     std::to_string(Params::kMinNetworkSide) + ".." + std::to_string(Params::kMaxNetworkSide) +
                     ", at most " + std::to_string(Params::kMaxNetworkPixels) + " pixels)");
  return f;
}

constexpr const char* kUsage =
    "usage: superpoint-rt bench [--threads 1,2] [--precisions fp32,bf16,int8] [--rounds 5] [--iters 4]\n"
    "         [--warmup 3] [--pause-ms 200] [--frames 640x480,1024x768,1600x1200] [--jpeg FILE] [--png FILE]\n"
    "         [--images DIR] [--throughput-copies 8] [--no-throughput] [--peer-python PYTHON]\n"
    "         [--peers ort,ov,ncnn,mnn,torch]\n"
    "         [--json FILE] [--peer-script FILE] [--weights DIR|REPO] [--revision R] [--cache-dir DIR]\n"
    "         [--local-files-only]\n"
    "Prints one table: rows ours fp32/bf16/int8, ONNX Runtime fp32, OpenVINO fp32/bf16/int8, ncnn fp32, MNN fp32 and\n"
    "PyTorch fp32 (when the peer Python has them), for each thread count; columns the network forward on a 480x640\n"
    "plane and the full request on that plane, a JPEG and a PNG (p50 and p90 ms), the ratio to ONNX Runtime's\n"
    "forward and to OpenVINO's at the same precision, each process's peak RSS, and the forward's max abs error\n"
    "against the network in float64 (bench/reference_f64.py) on the score map and the normalised descriptor map.\n"
    "Then the network frames: each row's forward at each of --frames, the ratio to ONNX Runtime's at the same\n"
    "frame, and the cost per pixel against 640x480, (p50 / p50 at 640x480) / (pixels / 640x480 pixels); and the\n"
    "request with preset hloc:superpoint_aachen on the JPEG. Then each frame's memory: the forward process's peak\n"
    "RSS and bytes per frame pixel (ours and ONNX Runtime's), and for our rows the time to plan a new frame size.\n"
    "Then the throughput of the list API, a batch extraction and the HTTP server on copies of the JPEG, and of a\n"
    "batch extraction of a folder, against the network-only rate and against the ceiling the host work leaves on\n"
    "these cores (forward CPU / (forward + host CPU) per image).\n"
    "Above them: the CPU's units and the fastest precision.\n"
    "  --frames F,...     network frames WxH of the forward rows (640x480 is always measured)\n"
    "  --jpeg / --png     request images (default: berlin01_1600x900 in images/ of $SUPERPOINT_RT_SHARED, else of\n"
    "                     ../shared beside the current directory, i.e. when run from the source tree)\n"
    "                     the 480x640 plane (and each frame's) is the JPEG's red channel resized as a request does\n"
    "  --images DIR       the folder of the throughput table's batch extraction (default: the JPEG's folder)\n"
    "  --throughput-copies N  copies of the JPEG per throughput iteration (list, batch, server)\n"
    "  --no-throughput    skip the throughput table (one process less per row, and faster)\n"
    "  --peers P,...      which peers (default ort,ov,ncnn,mnn,torch; ov runs at each of --precisions)\n"
    "  --peer-python P    a Python with onnxruntime, openvino + nncf (and ncnn + pnnx, MNN, torch) for the peers\n"
    "                     and numpy for the float64 reference (default\n"
    "                     $SUPERPOINT_RT_BENCH_PYTHON,\n"
    "                     else bench/.venv/bin/python of the current directory; bash bench/setup-peers.sh makes it);\n"
    "                     without one the table has our rows only\n"
    "  --peer-script F    the peers' worker (default bench/peer_worker.py of the current directory)\n"
    "  --json FILE        also write every iteration's time and the table as JSON\n";

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<std::uint8_t> read_bytes(const std::string& path, std::size_t expect, const std::string& what) {
  std::vector<std::uint8_t> b = read_file(path);
  if (b.size() != expect)
    throw Error(ErrorKind::InvalidArgument,
                what + " " + path + " has " + std::to_string(b.size()) + " bytes, expected " + std::to_string(expect));
  return b;
}

// ------------------------------------------------------------------------------------------------ worker side

struct WorkerArgs {
  std::string weights_dir, precision = "fp32";
  std::string plane_u8;  // frame.w x frame.h bytes (the request worker: 640x480)
  std::string outputs;   // the forward worker: where to write one forward's raw outputs after warm-up (may be empty)
  Frame frame;           // the forward worker's network frame
  std::string jpeg, png;
  std::string images;  // the throughput worker's folder for "batch_images" (may be empty)
  int copies = 8;      // the throughput worker's copies of the JPEG per iteration
  int threads = 1;
  int warmup = 3;
};

class Measurement {
 public:
  virtual ~Measurement() = default;
  virtual json measure(const std::string& kind, int iters) = 0;
  /// More fields of the worker's "ready" line.
  virtual json ready_info() const { return json::object(); }
};

class ForwardWorker final : public Measurement {
 public:
  explicit ForwardWorker(const WorkerArgs& a) {
    const auto plane = read_bytes(a.plane_u8, std::size_t(a.frame.w) * std::size_t(a.frame.h), "plane");
    const model::Weights weights = model::load_weights_dir(a.weights_dir);
    backend_ = backend::create_backend("cpu", weights, {a.threads, a.precision});
    base_rss_mb_ = peak_rss_mb();  // the process with its weights, before anything of the frame's size
    frame_ = a.frame;
    exec_ = backend_->plan({a.frame.h, a.frame.w});
    input_.resize(plane.size());
    for (std::size_t i = 0; i < plane.size(); ++i) input_[i] = static_cast<float>(plane[i]) / 255.0f;  // v / 255.0f
    for (int i = 0; i < a.warmup; ++i) exec_->run(input_.data(), true);
    if (!a.outputs.empty()) write_outputs(a.outputs, weights.score_b.out_channels, weights.descriptor_b.out_channels);
  }
  json ready_info() const override { return {{"base_rss_mb", base_rss_mb_}}; }
  json measure(const std::string& kind, int iters) override {
    if (kind == "plan") return plan_new_frames(iters);
    if (kind != "forward") throw Error(ErrorKind::InvalidArgument, "forward worker: unknown kind '" + kind + "'");
    std::vector<double> ms, cpu;
    const double cpu0 = process_cpu_ms();
    for (int i = 0; i < iters; ++i) {
      const double c0 = process_cpu_ms();
      const auto t0 = Clock::now();
      exec_->run(input_.data(), true);
      ms.push_back(ms_since(t0));
      cpu.push_back(process_cpu_ms() - c0);
    }
    return {{"ms", ms}, {"cpu_ms", process_cpu_ms() - cpu0}, {"cpu_each", cpu}, {"plan", exec_->plan_description()}};
  }

 private:
  // Switching to a frame size not seen before: plan() (oneDNN's primitives, made and JIT-compiled for the size; the
  // weights layouts are shared with the plans that exist), then its first run (the workspace already fits: the
  // frames are a little smaller than this worker's), against a steady forward. The sizes are this frame's width
  // minus 8, 16, ... pixels, new on every call, so nothing comes from a cache of this process.
  json plan_new_frames(int iters) {
    std::vector<double> plan_ms, first_ms;
    for (int i = 0; i < iters; ++i) {
      const int w = std::max(16, frame_.w - 8 * ++plans_made_);
      auto t0 = Clock::now();
      auto ex = backend_->plan({frame_.h, w});
      plan_ms.push_back(ms_since(t0));
      std::vector<float> in(std::size_t(w) * std::size_t(frame_.h));
      for (int y = 0; y < frame_.h; ++y)
        std::copy_n(input_.data() + std::size_t(y) * std::size_t(frame_.w), w, in.data() + std::size_t(y) * w);
      t0 = Clock::now();
      ex->run(in.data(), true);
      first_ms.push_back(ms_since(t0));
    }
    return {{"ms", plan_ms}, {"first_run_ms", first_ms}};
  }

  // One more forward's raw outputs (the driver's error against the float64 reference), in the peers' layout
  // (bench/peer_worker.py --outputs): float32, the logits channel-major (kp x Hc x Wc), then the descriptors
  // (desc x Hc x Wc); the executor's are cell-major (backend.hpp).
  void write_outputs(const std::string& path, int kp, int desc) {
    exec_->run(input_.data(), true);
    const std::size_t cells = std::size_t(exec_->height() / 8) * std::size_t(exec_->width() / 8);
    std::vector<float> out;
    out.reserve(cells * std::size_t(kp + desc));
    for (const auto& [map, channels] :
         {std::pair<const float*, int>{exec_->logits(), kp}, {exec_->descriptors(), desc}})
      for (int c = 0; c < channels; ++c)
        for (std::size_t i = 0; i < cells; ++i) out.push_back(map[i * std::size_t(channels) + std::size_t(c)]);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
    if (!f.flush()) throw Error(ErrorKind::Io, "bench --worker forward: cannot write " + path);
  }

  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<backend::Executor> exec_;
  std::vector<float> input_;
  Frame frame_;
  double base_rss_mb_ = 0;
  int plans_made_ = 0;
};

// The model options of the request and throughput workers: the resolved local weights, the row's threads and
// precision (warm-up is each worker's own).
Options worker_options(const WorkerArgs& a) {
  Options o;
  o.model = a.weights_dir;
  o.local_files_only = true;
  o.threads = a.threads;
  o.precision = a.precision;
  return o;
}

class RequestWorker final : public Measurement {
 public:
  explicit RequestWorker(const WorkerArgs& a)
      : plane_(read_bytes(a.plane_u8, std::size_t{kNetW} * kNetH, "plane")),
        jpeg_(read_file(a.jpeg)),
        png_(read_file(a.png)),
        jpeg_name_(a.jpeg),
        png_name_(a.png) {
    Options o = worker_options(a);
    // Prepare exactly the variants that are timed; the warm-up iterations below cover anything else.
    o.warmup = WarmupSpec::none();
    for (const auto* bytes : {&jpeg_, &png_}) {
      const ImageInfo info = probe_image(*bytes);
      o.warmup.sizes.emplace_back(info.width, info.height);
    }
    o.warmup.sizes.emplace_back(kNetW, kNetH);
    o.warmup.nms_radii = {resolve(Params{}).nms_radius};
    o.warmup.decoders = {"jpeg", "png"};
    model_ = SuperPoint::from_pretrained(o);
    hloc_.preset = kHlocPreset;
    for (const char* kind : {"plane", "jpeg", "png", "hloc_jpeg"})
      for (int i = 0; i < a.warmup; ++i) (void)run_once(kind);
  }

  json measure(const std::string& kind, int iters) override {
    std::vector<double> ms, cpu, nonnet, forward;
    std::size_t keypoints = 0;
    std::array<int, 2> network_size{0, 0};
    const double cpu0 = process_cpu_ms();
    for (int i = 0; i < iters; ++i) {
      const double c0 = process_cpu_ms();
      const auto t0 = Clock::now();
      const Features f = run_once(kind);
      ms.push_back(ms_since(t0));
      cpu.push_back(process_cpu_ms() - c0);
      const Timing& t = f.timing_ms;
      nonnet.push_back(t.decode + t.preprocess + t.postprocess);
      forward.push_back(t.forward);
      keypoints = f.size();
      network_size = f.network_size;
    }
    return {{"ms", ms},
            {"cpu_ms", process_cpu_ms() - cpu0},
            {"cpu_each", cpu},
            {"nonnet_ms", nonnet},
            {"forward", forward},
            {"keypoints", keypoints},
            {"network_size", network_size},
            {"plan", model_.info().plan}};
  }

 private:
  Features run_once(const std::string& kind) const {
    if (kind == "plane") return model_.run(ImageInput::pixels({plane_.data(), kNetW, kNetH}));
    if (kind == "jpeg") return model_.run(ImageInput::bytes(jpeg_, jpeg_name_));
    if (kind == "png") return model_.run(ImageInput::bytes(png_, png_name_));
    if (kind == "hloc_jpeg") return model_.run(ImageInput::bytes(jpeg_, jpeg_name_), hloc_);
    throw Error(ErrorKind::InvalidArgument, "request worker: unknown kind '" + kind + "'");
  }

  std::vector<std::uint8_t> plane_, jpeg_, png_;
  std::string jpeg_name_, png_name_;
  Params hloc_;
  SuperPoint model_;
};

// Throughput of the interfaces that overlap decoding with the network (issue 12 §3): each iteration sends
// --throughput-copies (default 8) copies of the JPEG through the list API (SuperPoint::run on a span, its default 4
// workers), a batch extraction to an HDF5 file (batch::run with the CLI's defaults) and the HTTP server (kServerClients
// concurrent clients posting the bytes, ?format=npz), and reports the wall time per image; "batch_images" extracts
// every image of the --images folder (mixed sizes) once per iteration. The driver divides the network-only time per
// image (the forward row's p50) by these: 1.0 = the interface runs at the network's own rate.
constexpr int kServerClients = 4;

class ThroughputWorker final : public Measurement {
 public:
  explicit ThroughputWorker(const WorkerArgs& a)
      : jpeg_(read_file(a.jpeg)),
        tmp_(fs::temp_directory_path() / ("superpoint-rt-bench-tp-" + std::to_string(::getpid()))),
        copies_n_(a.copies) {
    Options o = worker_options(a);
    o.warmup = WarmupSpec::defaults();
    model_ = SuperPoint::from_pretrained(o);
    fs::create_directories(tmp_);
    for (int i = 0; i < copies_n_; ++i) {
      const std::string path = (tmp_ / ("copy" + std::to_string(i) + ".jpg")).string();
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(jpeg_.data()), static_cast<std::streamsize>(jpeg_.size()));
      copies_.push_back({"copy" + std::to_string(i) + ".jpg", path});
    }
    if (!a.images.empty()) {
      batch::ListSpec spec;
      spec.inputs = {a.images};
      folder_ = batch::list_images(spec);
    }
    server::ServerConfig cfg;
    cfg.port = 0;
    server_ = std::make_unique<server::HttpServer>(cfg);
    port_ = server_->bind();
    server_->start();
    server_->set_model(model_);
    for (const char* kind : {"list_jpeg", "batch_jpeg", "server_jpeg"}) (void)measure(kind, 1);
  }
  ~ThroughputWorker() override {
    server_->stop();
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }

  json measure(const std::string& kind, int iters) override {
    std::vector<double> ms, cpu;
    std::size_t images = 0;
    const double cpu0 = process_cpu_ms();
    for (int i = 0; i < iters; ++i) {
      const double c0 = process_cpu_ms();
      const auto t0 = Clock::now();
      const std::size_t n = run_once(kind);
      ms.push_back(ms_since(t0) / static_cast<double>(n));
      cpu.push_back((process_cpu_ms() - c0) / static_cast<double>(n));
      images += n;
    }
    return {{"ms", ms}, {"cpu_ms", process_cpu_ms() - cpu0}, {"cpu_each", cpu}, {"images", images}};
  }

 private:
  std::size_t run_once(const std::string& kind) {
    if (kind == "list_jpeg") {
      const std::vector<ImageInput> in(static_cast<std::size_t>(copies_n_), ImageInput::bytes(jpeg_, "bench.jpg"));
      return model_.run(in).size();
    }
    if (kind == "batch_jpeg" || kind == "batch_images") {
      const auto& images = kind == "batch_jpeg" ? copies_ : folder_;
      if (images.empty()) throw Error(ErrorKind::InvalidArgument, "throughput worker: no --images folder");
      batch::RunConfig cfg;
      cfg.output = (tmp_ / "features.h5").string();
      cfg.overwrite = true;
      const batch::Report r = batch::run(model_, images, Params{}, cfg);
      if (!r.failed.empty())
        throw Error(ErrorKind::Internal, "throughput worker: " + r.failed.front().name + ": " + r.failed.front().error);
      return r.processed;
    }
    if (kind == "server_jpeg") {
      std::vector<std::thread> clients;
      std::vector<std::string> errors(kServerClients);
      for (int c = 0; c < kServerClients; ++c)
        clients.emplace_back([&, c] {
          try {
            server::HttpClient cli("127.0.0.1", port_, std::chrono::seconds(600));
            const std::string_view body(reinterpret_cast<const char*>(jpeg_.data()), jpeg_.size());
            for (int i = c; i < copies_n_; i += kServerClients) {
              const auto [status, answer] = cli.post("/v1/keypoints?format=npz", body, "image/jpeg");
              if (status != 200) errors[static_cast<std::size_t>(c)] = "HTTP " + std::to_string(status) + " " + answer;
            }
          } catch (const Error& e) {
            errors[static_cast<std::size_t>(c)] = std::string("no answer (") + e.what() + ")";
          }
        });
      for (auto& t : clients) t.join();
      for (const auto& e : errors)
        if (!e.empty()) throw Error(ErrorKind::Internal, "throughput worker: server: " + e);
      return static_cast<std::size_t>(copies_n_);
    }
    throw Error(ErrorKind::InvalidArgument, "throughput worker: unknown kind '" + kind + "'");
  }

  std::vector<std::uint8_t> jpeg_;
  fs::path tmp_;
  int copies_n_;
  std::vector<batch::ImageEntry> copies_, folder_;
  SuperPoint model_;
  std::unique_ptr<server::HttpServer> server_;
  int port_ = 0;
};

int worker_main(ArgReader& args, const std::string& mode) {
  WorkerArgs a;
  while (!args.done()) {
    const std::string f = args.next();
    if (f == "--weights-dir")
      a.weights_dir = args.value(f);
    else if (f == "--precision")
      a.precision = args.value(f);
    else if (f == "--plane")
      a.plane_u8 = args.value(f);
    else if (f == "--outputs")
      a.outputs = args.value(f);
    else if (f == "--jpeg")
      a.jpeg = args.value(f);
    else if (f == "--png")
      a.png = args.value(f);
    else if (f == "--images")
      a.images = args.value(f);
    else if (f == "--copies")
      a.copies = args.int_value(f, 1, 1000, "1..1000");
    else if (f == "--frame")
      a.frame = parse_frame(args.value(f), f);
    else if (f == "--threads")
      a.threads = args.int_value(f, 1, 1024, "1..1024");
    else if (f == "--warmup")
      a.warmup = args.int_value(f, 0, 1000, "0..1000");
    else
      throw UsageError("bench --worker: unknown option " + f);
  }
  std::unique_ptr<Measurement> m;
  if (mode == "forward")
    m = std::make_unique<ForwardWorker>(a);
  else if (mode == "request")
    m = std::make_unique<RequestWorker>(a);
  else if (mode == "throughput")
    m = std::make_unique<ThroughputWorker>(a);
  else
    throw UsageError("bench --worker: forward, request or throughput, not " + mode);
  json ready{{"ready", true}, {"peak_rss_mb", peak_rss_mb()}};
  ready.update(m->ready_info());
  std::cout << ready.dump() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string kind;
    int iters = 0;
    if (!(in >> kind >> iters) || iters < 1) throw UsageError("bench --worker: expected 'KIND ITERS', got " + line);
    json r = m->measure(kind, iters);
    r["peak_rss_mb"] = peak_rss_mb();
    std::cout << r.dump() << std::endl;
  }
  return 0;
}

// ------------------------------------------------------------------------------------------------ driver side

/// A worker process with its stdin and stdout on pipes; its stderr is ours (its messages reach the terminal).
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) : cmd_(argv.front()) {
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
      throw Error(ErrorKind::Io, std::string("bench: pipe: ") + std::strerror(errno));
    std::vector<char*> cargv;
    for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
    cargv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw Error(ErrorKind::Io, std::string("bench: fork: ") + std::strerror(errno));
    if (pid_ == 0) {
      ::dup2(to[0], 0);
      ::dup2(from[1], 1);
      ::execv(cargv[0], cargv.data());
      std::fprintf(stderr, "superpoint-rt bench: cannot run %s: %s\n", cargv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    in_ = ::fdopen(to[1], "w");
    out_ = ::fdopen(from[0], "r");
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (in_) std::fclose(in_);
    if (out_) std::fclose(out_);
    if (pid_ > 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  /// The next JSON line, or a json null when the process ended (its message is on stderr).
  json read() {
    std::string line;
    int c;
    while ((c = std::fgetc(out_)) != EOF && c != '\n') line.push_back(static_cast<char>(c));
    if (line.empty()) return nullptr;
    try {
      return json::parse(line);
    } catch (const std::exception&) {
      throw Error(ErrorKind::Internal, "bench: " + cmd_ + " printed '" + line + "' (expected one JSON line)");
    }
  }
  json ask(const std::string& kind, int iters) {
    std::fprintf(in_, "%s %d\n", kind.c_str(), iters);
    std::fflush(in_);
    json r = read();
    if (r.is_null()) throw Error(ErrorKind::Internal, "bench: " + cmd_ + " ended during '" + kind + "'");
    return r;
  }

 private:
  std::string cmd_;
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

struct Series {
  std::vector<double> ms, nonnet_ms, net_ms;  // net_ms: the requests' network part (Timing::forward)
  double cpu_ms = 0;
  double items = 0;  // what cpu_ms covers: iterations, or images for the throughput kinds
  // Each iteration's CPU ms per item (our workers). Its median goes with the wall time's median: an iteration the
  // shared machine slowed (a stolen core, while the other thread spins at a barrier) costs CPU as well as wall time,
  // and the mean CPU over the median wall time read 2.09 cores busy on 2 cores (bf16 forward, one 146 ms outlier
  // among 95-106 ms).
  std::vector<double> cpu_each;
  double cpu_per_item() const {
    if (!cpu_each.empty()) return percentile(cpu_each, 50);
    return items > 0 ? cpu_ms / items : std::nan("");
  }
};

struct Row {
  std::string label;  // "ours fp32", "ONNX Runtime fp32", ...
  bool ours = false;
  int threads = 1;
  std::vector<std::pair<Frame, std::unique_ptr<Child>>> forwards;  // one process per frame, 640x480 first
  std::unique_ptr<Child> request;
  std::unique_ptr<Child> throughput;       // null with --no-throughput
  std::map<std::string, Series> series;    // kind -> times
  std::map<std::string, double> rss;       // kind of the forward ("forward", "forward_WxH") or "request" -> MB
  std::map<std::string, double> base_rss;  // kind of the forward -> MB before anything of the frame's size
  std::array<int, 2> hloc_network{0, 0};   // (h, w) of the hloc request's network frame
  std::string plan;
  std::string outputs;  // the 640x480 forward process's raw outputs (its --outputs file)
  // Max abs error against the float64 reference at 640x480 (error_vs_float64); NaN where not measured.
  double error_scores = std::nan(""), error_descriptors = std::nan("");
  double rss_of(const std::string& kind) const {
    const auto it = rss.find(kind);
    return it == rss.end() ? std::nan("") : it->second;
  }
};

// One interface of the throughput table: x net = the forward's p50 / the interface's p50 per image, and the ceiling
// the host work leaves on these cores, the forward's CPU per image / the interface's CPU per image (forward plus
// decode, post-processing, writing, serving: every thread of the process; each the median of its iterations, as the
// wall times are). x net / ceiling = how busy the interface
// keeps the cores against the forward alone (1.0 = as busy).
struct Throughput {
  double x_net = std::nan(""), ceiling = std::nan("");
};

Throughput throughput_of(const Row& r, const std::string& kind) {
  const Series& f = r.series.at("forward");
  const Series& s = r.series.at(kind);
  return {percentile(f.ms, 50) / percentile(s.ms, 50), f.cpu_per_item() / s.cpu_per_item()};
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The defaults come from the environment and the current directory, never from where the program was built: an
// installed superpoint-rt must not carry (or depend on) the build machine's source path.
constexpr const char* kDefaultPeerScript = "bench/peer_worker.py";
constexpr const char* kDefaultPeerPython = "bench/.venv/bin/python";

// The request's 480x640 plane of the JPEG (and the other frames' planes): its red channel (the default Params' channel)
// resized as the engine does (Pillow BILINEAR), so that the forward rows see a real image and the plane request the
// same pixels.
std::vector<std::uint8_t> plane_of(const std::string& jpeg, const Frame& frame) {
  const Image im = decode_file(jpeg);
  const image::ResizePlan plan(im.width, im.height, frame.w, frame.h);
  image::ResizeScratch scratch;
  std::vector<std::uint8_t> out(std::size_t(frame.w) * std::size_t(frame.h));
  const int ch = im.format == PixelFormat::RGB ? 3 : 1;
  image::resize_plane(plan, im.pixels.data(), im.view().stride(), ch, out.data(), scratch);
  return out;
}

// The built-in int8 calibration planes (backend::default_calibration_planes, 640x480) at a frame, as float32 planes
// one after the other: what the OpenVINO int8 peer's NNCF quantisation calibrates on. Other frames get the same
// images resized (Pillow BILINEAR, as a request resizes).
std::vector<float> calibration_at(const Frame& frame) {
  std::vector<float> out;
  for (const backend::CalibrationPlane& p : backend::default_calibration_planes()) {
    if (p.width == frame.w && p.height == frame.h) {
      out.insert(out.end(), p.pixels.begin(), p.pixels.end());
      continue;
    }
    std::vector<std::uint8_t> u8(p.pixels.size()), r(std::size_t(frame.w) * std::size_t(frame.h));
    for (std::size_t i = 0; i < u8.size(); ++i) u8[i] = static_cast<std::uint8_t>(std::lround(p.pixels[i] * 255.0f));
    const image::ResizePlan plan(p.width, p.height, frame.w, frame.h);
    image::ResizeScratch scratch;
    image::resize_plane(plan, u8.data(), p.width, 1, r.data(), scratch);
    for (const std::uint8_t v : r) out.push_back(static_cast<float>(v) / 255.0f);
  }
  return out;
}

// The error of one row's raw outputs (a forward worker's --outputs file: float32 logits kp x cells, then descriptors
// desc x cells) against bench/reference_f64.py's float64 maps (scores (kp - 1) x cells, then L2-normalised descriptors
// desc x cells): the max abs error of the score map (softmax over the kp channels, dustbin dropped) and of the
// L2-normalised descriptor map. The softmax and the norm of the row's outputs are taken in double, so that the
// figures are the network's own error, not that of a float32 post-processing.
std::pair<double, double> error_vs_float64(const std::vector<double>& ref, const std::string& outputs, std::size_t kp,
                                           std::size_t desc, std::size_t cells) {
  const std::vector<std::uint8_t> bytes = read_bytes(outputs, (kp + desc) * cells * sizeof(float), "outputs");
  std::vector<float> out((kp + desc) * cells);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  const double* ref_scores = ref.data();
  const double* ref_desc = ref.data() + (kp - 1) * cells;
  const float* logits = out.data();
  const float* d = out.data() + kp * cells;
  double e_scores = 0, e_desc = 0;
  for (std::size_t i = 0; i < cells; ++i) {
    double mx = -INFINITY, sum = 0, sq = 0;
    for (std::size_t c = 0; c < kp; ++c) mx = std::max(mx, double(logits[c * cells + i]));
    for (std::size_t c = 0; c < kp; ++c) sum += std::exp(double(logits[c * cells + i]) - mx);
    for (std::size_t c = 0; c + 1 < kp; ++c)
      e_scores =
          std::max(e_scores, std::abs(std::exp(double(logits[c * cells + i]) - mx) / sum - ref_scores[c * cells + i]));
    for (std::size_t c = 0; c < desc; ++c) sq += double(d[c * cells + i]) * double(d[c * cells + i]);
    const double norm = std::max(std::sqrt(sq), 1e-12);  // F.normalize's eps, as reference_f64.py
    for (std::size_t c = 0; c < desc; ++c)
      e_desc = std::max(e_desc, std::abs(double(d[c * cells + i]) / norm - ref_desc[c * cells + i]));
  }
  return {e_scores, e_desc};
}

int driver_main(ArgReader& args) {
  ::signal(SIGPIPE, SIG_IGN);  // a worker that died is reported by its missing answer, not by killing the driver
  Options options = default_cli_options();
  std::vector<int> threads{1, 2};
  std::vector<std::string> precisions{"fp32", "bf16", "int8"}, peers{"ort", "ov", "ncnn", "mnn", "torch"};
  int rounds = 5, iters = 4, warmup = 3, pause_ms = 200;
  std::vector<Frame> frames{Frame{}, Frame{1024, 768}, Frame{1600, 1200}};
  const std::string shared = shared_dir();
  std::string jpeg = shared + "/images/berlin01_1600x900.jpg", png = shared + "/images/berlin01_1600x900.png";
  std::string json_path, peer_python, peer_script = kDefaultPeerScript;
  if (const char* p = std::getenv("SUPERPOINT_RT_BENCH_PYTHON"); p && *p) {
    peer_python = p;
  } else if (::access(kDefaultPeerPython, X_OK) == 0) {
    peer_python = kDefaultPeerPython;
  }
  bool jpeg_given = false, png_given = false, script_given = false, throughput = true;
  std::string images_dir;  // "batch_images": default the JPEG's folder
  int copies = 8;          // copies of the JPEG per throughput iteration
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "--threads") {
      threads.clear();
      for (const auto& t : split_list(args.value(a))) {
        const int n = std::atoi(t.c_str());
        if (n < 1 || n > 1024 || std::to_string(n) != t) throw UsageError("--threads: '" + t + "' is not 1..1024");
        threads.push_back(n);
      }
      if (threads.empty()) throw UsageError("--threads: give at least one thread count, e.g. 1,2");
    } else if (a == "--precisions") {
      precisions = split_list(args.value(a));
      for (const auto& p : precisions)
        if (p != "fp32" && p != "bf16" && p != "int8")
          throw UsageError("--precisions: '" + p + "' is not fp32, bf16 or int8");
      if (precisions.empty()) throw UsageError("--precisions: give at least one, e.g. fp32,int8");
    } else if (a == "--peers") {
      peers = split_list(args.value(a));
      for (const auto& p : peers)
        if (p != "ort" && p != "ov" && p != "ncnn" && p != "mnn" && p != "torch")
          throw UsageError("--peers: '" + p + "' is not ort, ov, ncnn, mnn or torch");
    } else if (a == "--frames") {
      frames = {Frame{}};  // 640x480 is the base of the cost per pixel and the main table's column
      for (const auto& t : split_list(args.value(a))) {
        const Frame f = parse_frame(t, a);
        if (std::none_of(frames.begin(), frames.end(), [&](const Frame& g) { return g.name() == f.name(); }))
          frames.push_back(f);
      }
    } else if (a == "--rounds") {
      rounds = args.int_value(a, 1, 1000, "1..1000");
    } else if (a == "--iters") {
      iters = args.int_value(a, 1, 1000, "1..1000");
    } else if (a == "--warmup") {
      warmup = args.int_value(a, 0, 1000, "0..1000");
    } else if (a == "--pause-ms") {
      pause_ms = args.int_value(a, 0, 60000, "0..60000");
    } else if (a == "--jpeg") {
      jpeg = args.value(a);
      jpeg_given = true;
    } else if (a == "--png") {
      png = args.value(a);
      png_given = true;
    } else if (a == "--images") {
      images_dir = args.value(a);
    } else if (a == "--throughput-copies") {
      copies = args.int_value(a, 1, 1000, "1..1000");
    } else if (a == "--no-throughput") {
      throughput = false;
    } else if (a == "--json") {
      json_path = args.value(a);
    } else if (a == "--peer-python") {
      peer_python = args.value(a);
    } else if (a == "--peer-script") {
      peer_script = args.value(a);
      script_given = true;
    } else if (a == "--weights" || a == "--revision" || a == "--cache-dir" || a == "--local-files-only") {
      parse_model_flag(args, a, options);  // where the model comes from; the rest is per row
    } else {
      throw UsageError("bench: unknown option " + a + " (see superpoint-rt bench --help)");
    }
  }
  for (const auto& [path, flag, given] : {std::tuple{jpeg, "--jpeg", jpeg_given}, std::tuple{png, "--png", png_given}})
    if (!fs::is_regular_file(path))
      throw UsageError(std::string(flag) + ": " + path + " is not a file" +
                       (given ? ""
                              : std::string(" (the default: set ") + kSharedEnv +
                                    " to the test data folder holding images/, run from a directory beside it, "
                                    "or pass " +
                                    flag + ")"));
  if (!peer_python.empty() && !fs::is_regular_file(peer_script))
    throw UsageError("--peer-script: " + peer_script + " is not a file" +
                     (script_given ? "" : " (the default: run from the source tree, or pass --peer-script)"));

  if (images_dir.empty()) images_dir = fs::path(jpeg).parent_path().string();
  std::size_t folder_images = 0;
  if (throughput) {
    batch::ListSpec spec;
    spec.inputs = {images_dir};
    folder_images = batch::list_images(spec).size();
    if (folder_images == 0) throw UsageError("--images: " + images_dir + " holds no images");
  }

  // The workers load a local directory: resolve (and download) the model once here.
  model::HubRequest req;
  req.repo_id = options.model;
  req.revision = options.revision;
  req.cache_dir = options.cache_dir;
  req.local_files_only = options.local_files_only;
  const std::string weights_dir = model::resolve_model(options.model, req).dir;

  // Inputs shared by every worker: the 8-bit plane (and, for the peers, the same plane as v / 255.0f floats).
  const fs::path tmp = fs::temp_directory_path() / ("superpoint-rt-bench-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};
  std::map<std::string, std::pair<std::string, std::string>> planes;  // frame name -> (u8 file, f32 file)
  std::map<std::string, std::string> calibration;                     // frame name -> OpenVINO int8's planes
  const bool ov_int8 =
      std::count(peers.begin(), peers.end(), "ov") && std::count(precisions.begin(), precisions.end(), "int8");
  for (const Frame& fr : frames) {
    const std::vector<std::uint8_t> plane = plane_of(jpeg, fr);
    const std::string u8 = (tmp / ("plane_u8_" + fr.name() + ".raw")).string();
    const std::string f32 = (tmp / ("plane_f32_" + fr.name() + ".raw")).string();
    std::ofstream(u8, std::ios::binary)
        .write(reinterpret_cast<const char*>(plane.data()), static_cast<std::streamsize>(plane.size()));
    std::vector<float> f(plane.size());
    for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(plane[i]) / 255.0f;
    std::ofstream(f32, std::ios::binary)
        .write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(float)));
    planes[fr.name()] = {u8, f32};
    if (ov_int8) {
      const std::vector<float> c = calibration_at(fr);
      calibration[fr.name()] = (tmp / ("calibration_f32_" + fr.name() + ".raw")).string();
      std::ofstream(calibration[fr.name()], std::ios::binary)
          .write(reinterpret_cast<const char*>(c.data()), static_cast<std::streamsize>(c.size() * sizeof(float)));
    }
  }
  const std::string plane_u8 = planes.at(Frame{}.name()).first;
  const ImageInfo jinfo = probe_image(read_file(jpeg), jpeg), pinfo = probe_image(read_file(png), png);
  const std::string jpeg_label = "JPEG " + std::to_string(jinfo.width) + "x" + std::to_string(jinfo.height);
  const std::string png_label = "PNG " + std::to_string(pinfo.width) + "x" + std::to_string(pinfo.height);

  // Start every process (setup happens in parallel with the others' setup, before any timing).
  std::vector<std::string> notes;
  std::vector<Row> rows;
  const std::string exe = self_exe();
  std::cerr << "superpoint-rt bench: setting up " << precisions.size() << " precision(s) x " << threads.size()
            << " thread count(s) x " << frames.size() << " frame(s)" << (peer_python.empty() ? "" : " and the peers")
            << " ...\n";
  // The float64 reference of the 640x480 plane (bench/reference_f64.py beside the peers' script, numpy), computed once
  // beside the workers' setup and before any timing: every row's error_vs_float64.
  std::unique_ptr<Child> reference;
  const std::string reference_file = (tmp / "reference_f64.raw").string();
  if (!peer_python.empty()) {
    const std::string script = (fs::path(peer_script).parent_path() / "reference_f64.py").string();
    if (fs::is_regular_file(script))
      reference = std::make_unique<Child>(std::vector<std::string>{
          peer_python, script, "--weights", weights_dir, "--plane", planes.at(Frame{}.name()).second, "--height",
          std::to_string(kNetH), "--width", std::to_string(kNetW), "--out", reference_file});
    else
      notes.push_back("no " + script + ": no error vs float64");
  }
  const std::map<std::string, std::string> peer_names{
      {"ort", "ONNX Runtime"}, {"ov", "OpenVINO"}, {"ncnn", "ncnn"}, {"mnn", "MNN"}, {"torch", "PyTorch"}};
  for (const int t : threads) {
    if (!peer_python.empty()) {
      for (const auto& peer : peers) {
        // OpenVINO runs at each of our precisions; ONNX Runtime, ncnn, MNN and PyTorch at fp32 only.
        for (const auto& p : peer == "ov" ? precisions : std::vector<std::string>{"fp32"}) {
          Row r;
          r.label = peer_names.at(peer) + " " + p;
          r.threads = t;
          r.outputs = (tmp / ("outputs_" + std::to_string(rows.size()) + ".raw")).string();
          for (const Frame& fr : frames) {
            std::vector<std::string> argv{peer_python, peer_script,
                                          "--peer",    peer,
                                          "--threads", std::to_string(t),
                                          "--weights", weights_dir,
                                          "--plane",   planes.at(fr.name()).second,
                                          "--height",  std::to_string(fr.h),
                                          "--width",   std::to_string(fr.w),
                                          "--warmup",  std::to_string(warmup)};
            if (peer == "ov") argv.insert(argv.end(), {"--precision", p});
            if (peer == "ov" && p == "int8") argv.insert(argv.end(), {"--calibration", calibration.at(fr.name())});
            if (fr.base()) argv.insert(argv.end(), {"--outputs", r.outputs});
            r.forwards.emplace_back(fr, std::make_unique<Child>(argv));
          }
          rows.push_back(std::move(r));
        }
      }
    }
    for (const auto& p : precisions) {
      Row r;
      r.label = "ours " + p;
      r.ours = true;
      r.threads = t;
      r.outputs = (tmp / ("outputs_" + std::to_string(rows.size()) + ".raw")).string();
      const std::vector<std::string> common{"--weights-dir", weights_dir,       "--precision", p,
                                            "--threads",     std::to_string(t), "--warmup",    std::to_string(warmup)};
      for (const Frame& fr : frames) {
        std::vector<std::string> fwd{exe, "bench", "--worker", "forward"};
        fwd.insert(fwd.end(), common.begin(), common.end());
        fwd.insert(fwd.end(), {"--plane", planes.at(fr.name()).first, "--frame", fr.name()});
        if (fr.base()) fwd.insert(fwd.end(), {"--outputs", r.outputs});
        r.forwards.emplace_back(fr, std::make_unique<Child>(fwd));
      }
      std::vector<std::string> rq{exe, "bench", "--worker", "request"};
      rq.insert(rq.end(), common.begin(), common.end());
      rq.insert(rq.end(), {"--plane", plane_u8, "--jpeg", jpeg, "--png", png});
      r.request = std::make_unique<Child>(rq);
      if (throughput) {
        std::vector<std::string> tp{exe, "bench", "--worker", "throughput"};
        tp.insert(tp.end(), common.begin(), common.end());
        tp.insert(tp.end(), {"--jpeg", jpeg, "--images", images_dir, "--copies", std::to_string(copies)});
        r.throughput = std::make_unique<Child>(tp);
      }
      rows.push_back(std::move(r));
    }
  }
  if (peer_python.empty())
    notes.push_back(
        "no peer Python (bash bench/setup-peers.sh, or --peer-python): ONNX Runtime, OpenVINO, ncnn, MNN and PyTorch "
        "not measured, nor the error vs float64");
  // Wait for every process to be ready. A row that cannot run here drops out with a note: a peer that is not
  // installed, or a precision this CPU lacks (bf16 needs avx512_bf16, int8 AVX2 + FMA); fp32 must run.
  for (auto it = rows.begin(); it != rows.end();) {
    bool ok = true;
    std::vector<Child*> children;
    for (const auto& [fr, c] : it->forwards) children.push_back(c.get());
    if (it->request) children.push_back(it->request.get());
    if (it->throughput) children.push_back(it->throughput.get());
    for (Child* c : children) {
      const json r = c->read();
      for (const auto& [fr, fc] : it->forwards)
        if (fc.get() == c && r.is_object() && r.contains("base_rss_mb"))
          it->base_rss[fr.kind()] = r.at("base_rss_mb").get<double>();
      if ((r.is_null() || !r.value("ready", false)) && ok) {  // one note per row (every process says the same)
        ok = false;
        const std::string why = r.is_null() ? "the process ended (message above)" : r.value("why", r.dump());
        if (it->label == "ours fp32") throw Error(ErrorKind::Internal, "bench: ours fp32 could not start: " + why);
        notes.push_back(it->label + " at " + std::to_string(it->threads) + " thread(s) not measured: " + why);
      }
    }
    it = ok ? std::next(it) : rows.erase(it);
  }
  if (reference) {  // every row's error against the float64 reference (the workers wrote their outputs when ready)
    const json r = reference->read();
    reference.reset();
    if (r.is_object() && r.value("ready", false)) {
      const std::size_t cells = r.at("shape")[0].get<std::size_t>() * r.at("shape")[1].get<std::size_t>();
      const std::size_t kp = r.at("channels")[0].get<std::size_t>() + 1;
      const std::size_t desc = r.at("channels")[1].get<std::size_t>();
      const std::vector<std::uint8_t> bytes =
          read_bytes(reference_file, (kp - 1 + desc) * cells * sizeof(double), "float64 reference");
      std::vector<double> ref(bytes.size() / sizeof(double));
      std::memcpy(ref.data(), bytes.data(), bytes.size());
      for (Row& row : rows) {
        try {
          std::tie(row.error_scores, row.error_descriptors) = error_vs_float64(ref, row.outputs, kp, desc, cells);
        } catch (const Error& e) {
          notes.push_back(row.label + " at " + std::to_string(row.threads) +
                          " thread(s): no error vs float64: " + e.what());
        }
      }
    } else {
      notes.push_back("the float64 reference (bench/reference_f64.py) failed (message above): no error vs float64");
    }
  }

  // Interleaved rounds.
  const std::vector<std::string> request_kinds{"plane", "jpeg", "png", "hloc_jpeg"};
  const std::vector<std::string> throughput_kinds{"list_jpeg", "batch_jpeg", "server_jpeg"};
  for (int round = 0; round < rounds; ++round) {
    for (const int t : threads) {
      std::vector<Row*> order;
      for (auto& r : rows)
        if (r.threads == t) order.push_back(&r);
      if (round % 2 == 1) std::reverse(order.begin(), order.end());
      for (Row* r : order) {
        // `ask` is what the worker is asked ("forward" of every forward process), `kind` the series it feeds.
        auto take = [&](Child& c, const std::string& ask, const std::string& kind, const std::string& rss_key,
                        int n = 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));  // lets spinning pool threads sleep
          const json j = c.ask(ask, n > 0 ? n : iters);
          Series& s = r->series[kind];
          for (double v : j.at("ms")) s.ms.push_back(v);
          if (j.contains("nonnet_ms"))
            for (double v : j.at("nonnet_ms")) s.nonnet_ms.push_back(v);
          if (j.contains("forward"))
            for (double v : j.at("forward")) s.net_ms.push_back(v);
          if (j.contains("first_run_ms"))  // a plan's first forward
            for (double v : j.at("first_run_ms")) s.net_ms.push_back(v);
          s.cpu_ms += j.value("cpu_ms", 0.0);
          if (j.contains("cpu_each"))
            for (double v : j.at("cpu_each")) s.cpu_each.push_back(v);
          s.items += j.value("images", static_cast<double>(j.at("ms").size()));
          double& rss = r->rss[rss_key];
          rss = std::max(rss, j.value("peak_rss_mb", 0.0));
          if (kind.rfind("forward_", 0) != 0 && kind != "hloc_jpeg" && j.contains("plan"))
            r->plan = j.at("plan").get<std::string>();
          if (kind == "hloc_jpeg" && j.contains("network_size")) r->hloc_network = j.at("network_size");
        };
        for (auto& [fr, c] : r->forwards) {
          take(*c, "forward", fr.kind(), fr.kind());
          if (r->ours) take(*c, "plan", "plan_" + fr.name(), fr.kind(), 1);  // one new frame size per round
        }
        if (r->request)
          for (const auto& k : request_kinds) take(*r->request, k, k, "request");
        if (r->throughput) {
          for (const auto& k : throughput_kinds) take(*r->throughput, k, k, "throughput");
          take(*r->throughput, "batch_images", "batch_images", "throughput", 1);  // a whole folder per iteration
        }
      }
    }
    std::cerr << "round " << round + 1 << "/" << rounds << " done\n";
  }

  // The table.
  std::ostringstream out;
  out << "superpoint-rt " << version() << " bench, " << cpu_model() << ", " << std::thread::hardware_concurrency()
      << " logical CPUs, " << now_string() << "\n"
      << "CPU units: " << util::cpu_units_string() << "\n"
      << precisions_text() << rounds << " interleaved rounds x " << iters
      << " iterations per cell; ms of wall clock (p50 = median);\n"
      << "x ORT = forward p50 / ONNX Runtime forward p50 at the same thread count; x OV = ours' forward p50 / "
         "OpenVINO's at the same\nprecision and thread count; x fwd = JPEG request p50 / this row's forward p50;\nRSS "
         "= peak resident MB of the forward / request process; plane = the JPEG's 480x640 "
         "network plane;\nerror vs f64 = max abs error of the score map (softmax, dustbin dropped) / of the "
         "L2-normalised descriptor map\nagainst the same network in float64 on the 480x640 plane "
         "(bench/reference_f64.py)\n\n";
  char hdr[512];
  std::snprintf(hdr, sizeof hdr, "%-7s %-18s | %-29s | %-15s | %-22s | %-15s | %-13s | %-17s", "", "",
                "forward 480x640", "plane 480x640", jpeg_label.c_str(), png_label.c_str(), "peak RSS MB",
                "error vs f64");
  out << hdr << "\n";
  std::snprintf(hdr, sizeof hdr, "%-7s %-18s | %7s %7s %6s %6s | %7s %7s | %7s %7s %6s | %7s %7s | %6s %6s | %8s %8s",
                "threads", "row", "p50", "p90", "x ORT", "x OV", "p50", "p90", "p50", "p90", "x fwd", "p50", "p90",
                "fwd", "req", "scores", "desc");
  out << hdr << "\n" << std::string(std::strlen(hdr), '-') << "\n";
  json rows_json = json::array();
  for (const int t : threads) {
    double ort = std::nan("");
    std::map<std::string, double> ov;  // precision -> OpenVINO's forward p50
    for (const auto& r : rows) {
      if (r.threads != t) continue;
      if (r.label.rfind("ONNX", 0) == 0) ort = percentile(r.series.at("forward").ms, 50);
      if (r.label.rfind("OpenVINO ", 0) == 0) ov[r.label.substr(9)] = percentile(r.series.at("forward").ms, 50);
    }
    for (const auto& r : rows) {
      if (r.threads != t) continue;
      auto p = [&](const std::string& kind, double q) {
        const auto it = r.series.find(kind);
        return it == r.series.end() ? std::nan("") : percentile(it->second.ms, q);
      };
      const double fwd = p("forward", 50);
      const auto ov_it = r.ours ? ov.find(r.label.substr(5)) : ov.end();  // "ours P" against "OpenVINO P"
      const double vs_ov = ov_it == ov.end() ? std::nan("") : fwd / ov_it->second;
      char line[512];
      const auto sci = [](double v) {
        char b[32];
        std::snprintf(b, sizeof b, "%8.1e", v);
        return std::isnan(v) ? std::string(8 - 1, ' ') + "-" : std::string(b);
      };
      std::snprintf(line, sizeof line, "%7d %-18s | %s %s %s %s | %s %s | %s %s %s | %s %s | %s %s | %s %s", t,
                    r.label.c_str(), fmt(fwd, 7).c_str(), fmt(p("forward", 90), 7).c_str(),
                    fmt(fwd / ort, 6, 3).c_str(), fmt(vs_ov, 6, 3).c_str(), fmt(p("plane", 50), 7).c_str(),
                    fmt(p("plane", 90), 7).c_str(), fmt(p("jpeg", 50), 7).c_str(), fmt(p("jpeg", 90), 7).c_str(),
                    fmt(p("jpeg", 50) / fwd, 6, 3).c_str(), fmt(p("png", 50), 7).c_str(), fmt(p("png", 90), 7).c_str(),
                    fmt(r.rss_of("forward"), 6, 0).c_str(), fmt(r.rss_of("request"), 6, 0).c_str(),
                    sci(r.error_scores).c_str(), sci(r.error_descriptors).c_str());
      out << line << "\n";
      json rj{{"row", r.label}, {"threads", t}, {"peak_rss_mb_forward", r.rss_of("forward")}, {"plan", r.plan}};
      if (!std::isnan(r.error_scores))  // bench/tables.py's "error vs float64 (scores / descriptors)"
        rj["error_vs_float64"] = {{"scores", r.error_scores}, {"descriptors", r.error_descriptors}};
      if (r.request) rj["peak_rss_mb_request"] = r.rss_of("request");
      for (const auto& [kind, s] : r.series) {
        rj[kind] = {{"ms", s.ms}, {"p50", percentile(s.ms, 50)}, {"p90", percentile(s.ms, 90)}, {"cpu_ms", s.cpu_ms}};
        if (!s.nonnet_ms.empty()) {
          rj[kind]["nonnet_ms"] = s.nonnet_ms;
          rj[kind]["nonnet_p50"] = percentile(s.nonnet_ms, 50);
        }
        if (!s.net_ms.empty()) {
          rj[kind]["forward_ms"] = s.net_ms;
          rj[kind]["forward_p50"] = percentile(s.net_ms, 50);
        }
        if (kind.rfind("forward_", 0) == 0) rj[kind]["peak_rss_mb"] = r.rss_of(kind);
      }
      if (!std::isnan(ort)) rj["forward_vs_ort"] = fwd / ort;
      if (!std::isnan(vs_ov)) rj["forward_vs_openvino"] = vs_ov;
      if (r.throughput)  // the share of the network-only rate each interface reached (the table's "x net")
        for (const char* k : {"list_jpeg", "batch_jpeg", "server_jpeg", "batch_images"}) {
          const Throughput tp = throughput_of(r, k);
          rj[k]["x_net"] = tp.x_net;
          rj[k]["cpu_ms_per_image"] = r.series.at(k).cpu_per_item();
          rj[k]["ceiling"] = tp.ceiling;
          rj[k]["x_net_vs_ceiling"] = tp.x_net / tp.ceiling;
        }
      if (r.series.count("forward")) rj["forward"]["cpu_ms_per_image"] = r.series.at("forward").cpu_per_item();
      rows_json.push_back(rj);
    }
  }
  out << "\nnon-network part of the requests (decode + preprocess + postprocess), p50 ms:\n";
  for (const auto& r : rows) {
    if (!r.request) continue;
    out << "  " << r.threads << " thread(s) " << r.label << ":";
    for (const auto& k : request_kinds) out << " " << k << " " << fmt(percentile(r.series.at(k).nonnet_ms, 50), 0, 2);
    out << "\n";
  }

  if (throughput) {
    out << "\nthroughput: ms per image (p50) of " << copies << " copies of the " << jpeg_label
        << " through the list API (4 workers), a batch extraction to HDF5 and the HTTP server (" << kServerClients
        << " clients, npz), and of a batch extraction of the " << folder_images << " images of " << images_dir
        << "\n(mixed sizes); x net = the forward p50 / that p50: the share of the network-only rate reached;\n"
        << "ceil = the forward's CPU ms per image / the interface's CPU ms per image (forward + host work, all "
           "threads; medians of the iterations):\n"
        << "the x net the interface would reach keeping the cores as busy as the forward alone does; x/ceil = x net / "
           "ceil\n";
    char th[512];
    std::snprintf(th, sizeof th, "%-7s %-18s | %-28s | %-28s | %-28s | %-28s", "", "", "list JPEG", "batch JPEG",
                  "server JPEG", "batch folder");
    out << th << "\n";
    std::string h = "threads row               ";
    for (int i = 0; i < 4; ++i) h += " | ms/img   x net   ceil x/ceil";
    out << h << "\n" << std::string(h.size(), '-') << "\n";
    for (const auto& r : rows) {
      if (!r.throughput) continue;
      std::string line = std::to_string(r.threads);
      line.insert(0, 7 - std::min<std::size_t>(7, line.size()), ' ');
      char label[64];
      std::snprintf(label, sizeof label, " %-18s", r.label.c_str());
      line += label;
      for (const char* k : {"list_jpeg", "batch_jpeg", "server_jpeg", "batch_images"}) {
        const Throughput tp = throughput_of(r, k);
        line += " | " + fmt(percentile(r.series.at(k).ms, 50), 6) + " " + fmt(tp.x_net, 7, 3) + " " +
                fmt(tp.ceiling, 6, 3) + " " + fmt(tp.x_net / tp.ceiling, 6, 3);
      }
      out << line << "\n";
    }
  }

  // The network frames: forward p50 per frame, x ORT at that frame, and the cost per pixel against 640x480; then
  // the hloc request on the JPEG (its network part's cost per pixel against the 640x480 forward, too).
  std::array<int, 2> hloc_net{0, 0};
  for (const auto& r : rows)
    if (r.request) hloc_net = r.hloc_network;
  const std::string hloc_label = std::string(kHlocPreset) + " on the " + jpeg_label + " (network " +
                                 std::to_string(hloc_net[1]) + "x" + std::to_string(hloc_net[0]) + ")";
  out << "\nnetwork frames: forward p50 ms; x ORT = this p50 / ONNX Runtime's at the same frame and thread count;\n"
         "cost/px = (p50 / this row's 640x480 p50) / (pixels / 640x480 pixels); hloc = the request with preset\n"
      << hloc_label << ": p50, its network part's p50 (net) and that part's cost/px\n\n";
  std::string h1 = std::string(26, ' '), h2, sep;
  {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-7s %-18s", "threads", "row");
    h2 = buf;
    for (const Frame& fr : frames) {
      std::snprintf(buf, sizeof buf, " | %-22s", ("forward " + fr.name()).c_str());
      h1 += buf;
      std::snprintf(buf, sizeof buf, " | %7s %6s %7s", "p50", "x ORT", "cost/px");
      h2 += buf;
    }
    std::snprintf(buf, sizeof buf, " | %-23s", "hloc request");
    h1 += buf;
    std::snprintf(buf, sizeof buf, " | %7s %7s %7s", "p50", "net", "cost/px");
    h2 += buf;
  }
  out << h1 << "\n" << h2 << "\n" << std::string(h2.size(), '-') << "\n";
  json frames_json = json::array();
  for (const Frame& fr : frames) frames_json.push_back(fr.name());
  for (const int t : threads) {
    std::map<std::string, double> ort;  // frame kind -> ONNX Runtime's p50
    for (const auto& r : rows)
      if (r.threads == t && r.label.rfind("ONNX", 0) == 0)
        for (const Frame& fr : frames) ort[fr.kind()] = percentile(r.series.at(fr.kind()).ms, 50);
    for (const auto& r : rows) {
      if (r.threads != t) continue;
      auto p50 = [&](const std::string& kind) {
        const auto it = r.series.find(kind);
        return it == r.series.end() ? std::nan("") : percentile(it->second.ms, 50);
      };
      const double base = p50("forward");
      char buf[256];
      std::snprintf(buf, sizeof buf, "%7d %-18s", t, r.label.c_str());
      std::string line = buf;
      json per_frame = json::object();
      for (const Frame& fr : frames) {
        const double v = p50(fr.kind());
        const double vs_ort = ort.count(fr.kind()) ? v / ort.at(fr.kind()) : std::nan("");
        const double cost = (v / base) / (fr.pixels() / Frame{}.pixels());
        std::snprintf(buf, sizeof buf, " | %s %s %s", fmt(v, 7).c_str(), fmt(vs_ort, 6, 3).c_str(),
                      fmt(cost, 7, 3).c_str());
        line += buf;
        json fj{{"p50", v}, {"cost_per_pixel_vs_640x480", cost}};
        if (!std::isnan(vs_ort)) fj["vs_ort"] = vs_ort;
        per_frame[fr.name()] = fj;
      }
      double hloc = std::nan(""), hloc_net_p50 = std::nan(""), hloc_cost = std::nan("");
      if (const auto it = r.series.find("hloc_jpeg"); it != r.series.end()) {
        hloc = percentile(it->second.ms, 50);
        hloc_net_p50 = percentile(it->second.net_ms, 50);
        hloc_cost = (hloc_net_p50 / base) / (static_cast<double>(hloc_net[0]) * hloc_net[1] / Frame{}.pixels());
      }
      std::snprintf(buf, sizeof buf, " | %s %s %s", fmt(hloc, 7).c_str(), fmt(hloc_net_p50, 7).c_str(),
                    fmt(hloc_cost, 7, 3).c_str());
      line += buf;
      out << line << "\n";
      for (auto& rj : rows_json)
        if (rj.at("row") == r.label && rj.at("threads") == t) {
          rj["frames"] = per_frame;
          if (!std::isnan(hloc))
            rj["hloc_request"] = {
                {"p50", hloc}, {"forward_p50", hloc_net_p50}, {"cost_per_pixel_vs_640x480", hloc_cost}};
        }
    }
  }
  // Memory and plan switching per frame: each forward process's peak RSS, the part of it that the frame costs per
  // frame pixel ((peak - the process before anything of the frame's size) / pixels), and for our rows the time to
  // plan a frame size not seen before (plan(), then its first run).
  out << "\nnetwork frames, memory: peak RSS MB of the forward process; B/px = (peak RSS - RSS before the frame's "
         "plan\n"
         "or session) / frame pixels; plan = ms to plan a new frame size (p50; ours), first = its first forward "
         "(p50)\n\n";
  {
    char buf[256];
    std::string m1 = std::string(26, ' '), m2;
    std::snprintf(buf, sizeof buf, "%-7s %-18s", "threads", "row");
    m2 = buf;
    for (const Frame& fr : frames) {
      std::snprintf(buf, sizeof buf, " | %-29s", ("memory " + fr.name()).c_str());
      m1 += buf;
      std::snprintf(buf, sizeof buf, " | %6s %5s %7s %7s", "MB", "B/px", "plan", "first");
      m2 += buf;
    }
    out << m1 << "\n" << m2 << "\n" << std::string(m2.size(), '-') << "\n";
    for (const int t : threads) {
      for (const auto& r : rows) {
        if (r.threads != t) continue;
        std::snprintf(buf, sizeof buf, "%7d %-18s", t, r.label.c_str());
        std::string line = buf;
        for (const Frame& fr : frames) {
          const double peak = r.rss_of(fr.kind());
          const auto b = r.base_rss.find(fr.kind());
          const double per_px =
              b == r.base_rss.end() ? std::nan("") : (peak - b->second) * 1024.0 * 1024.0 / fr.pixels();
          double plan = std::nan(""), first = std::nan("");
          if (const auto it = r.series.find("plan_" + fr.name()); it != r.series.end()) {
            plan = percentile(it->second.ms, 50);
            first = percentile(it->second.net_ms, 50);
          }
          std::snprintf(buf, sizeof buf, " | %s %s %s %s", fmt(peak, 6, 0).c_str(), fmt(per_px, 5, 0).c_str(),
                        fmt(plan, 7).c_str(), fmt(first, 7).c_str());
          line += buf;
          for (auto& rj : rows_json)
            if (rj.at("row") == r.label && rj.at("threads") == t) {
              json& fj = rj["frames"][fr.name()];
              fj["peak_rss_mb"] = peak;
              if (!std::isnan(per_px)) fj["bytes_per_frame_pixel"] = per_px;
              if (!std::isnan(plan)) {
                fj["plan_ms"] = plan;
                fj["first_run_ms"] = first;
              }
            }
        }
        out << line << "\n";
      }
    }
  }
  for (const auto& n : notes) out << "note: " << n << "\n";
  std::cout << out.str() << std::flush;
  if (!json_path.empty()) {
    const util::CpuFeatures& cf = util::cpu_features();
    const json units{{"avx2", cf.avx2},
                     {"fma", cf.fma},
                     {"avx512", cf.avx512()},
                     {"avx512_vnni", cf.avx512_vnni},
                     {"avx512_bf16", cf.avx512_bf16},
                     {"amx", cf.amx}};
    const json j{{"date", now_string()},
                 {"cpu", cpu_model()},
                 {"cpu_features", util::cpu_features_string()},
                 {"cpu_units", units},
                 // A run capped to a narrower ISA (an AVX-512 machine standing in for an AVX2-only one) says so:
                 // bench/tables.py gives it a table of its own.
                 {"isa_cap", std::getenv("SUPERPOINT_RT_ISA") ? json(std::getenv("SUPERPOINT_RT_ISA")) : json()},
                 // scripts/as-cpu.sh: CPUID itself capped, for ours and every peer process alike.
                 {"cpuid_cap", std::getenv("SPRT_CPUID_CAP") ? json(std::getenv("SPRT_CPUID_CAP")) : json()},
                 {"fastest_precision", fastest_precision_on_this_cpu()},
                 {"precisions", server::precisions_json()},
                 {"rounds", rounds},
                 {"iters", iters},
                 {"warmup", warmup},
                 {"jpeg", jpeg},
                 {"png", png},
                 {"frames", frames_json},
                 {"hloc_request", {{"preset", kHlocPreset}, {"image", jpeg}, {"network_size", hloc_net}}},
                 {"weights_dir", weights_dir},
                 {"rows", rows_json},
                 {"notes", notes},
                 {"table", out.str()}};
    std::ofstream f(json_path);
    f << j.dump(1) << "\n";
    if (!f.flush()) throw Error(ErrorKind::Io, "bench: cannot write " + json_path);
    std::cerr << "wrote " << json_path << "\n";
  }
  return 0;
}

}  // namespace

int bench_main(int argc, char** argv) {
  ArgReader args(argc, argv, 2);
  if (!args.done()) {
    const std::string first = args.next();
    if (first == "-h" || first == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (first == "--worker") return worker_main(args, args.value(first));
    if (first == "--matching") return bench_matching_main(args);
    ArgReader all(argc, argv, 2);
    return driver_main(all);
  }
  return driver_main(args);
}

}  // namespace superpoint_rt::cli
