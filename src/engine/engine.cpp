#include "engine/engine.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <new>

#include "engine/thread_pool.hpp"
#include "image/decode_cv2.hpp"
#include "image/decode_internal.hpp"
#include "image/resize_float.hpp"
#include "image/synthetic.hpp"
#include "model/hub.hpp"
#include "post/post.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt {

namespace engine {

// Per-request scratch, pooled so that steady-state requests do not grow the heap.
struct Context {
  std::array<std::vector<std::uint8_t>, 3> planes;  // resized 8-bit planes (1 or 3 used)
  std::array<std::vector<std::uint8_t>, 3> source;  // float views rounded to 8 bits, source resolution
  image::ResizeScratch resize;
  image::ResizeScratch resize2;               // the second task's of a two-thread JPEG decode (image::ParallelFor)
  std::array<std::vector<float>, 3> fplanes;  // resized planes in [0, 1] as floats (the non-Pillow paths)
  std::vector<float> fsource;                 // one source plane as float32 (cv2 / kornia resize input)
  image::FloatResizeScratch fresize;
  std::vector<float> input;             // the normalised network input, frame_h x frame_w
  std::vector<std::uint8_t> cell_mark;  // post::normalize_sampled_cells scratch
  std::vector<float> heat;              // step 6's scores, 8 Hc x 8 Wc
  std::vector<float> dense;             // the descriptor head's output, Hc x Wc x D (a copy: the executor's is reused)
  post::NmsScratch nms_scratch;
  std::vector<post::Keypoint> keypoints;
};

}  // namespace engine

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// HF image_transforms.rescale: float32(v * float64(1/255)) == v / 255.0f for every u8 (docs/ALGORITHM.md §2.1);
// v * (1/255.f) is NOT the same for 126 values, so the table is built with a division.
const std::array<float, 256>& rescale_lut() {
  static const std::array<float, 256> lut = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return lut;
}

int threads_or_cores(int threads) {
  if (threads > 0) return threads;
  return std::max(1, omp_get_num_procs());
}

// Channel offsets within one pixel of each layout: which interleaved sample is R, G, B.
std::array<int, 3> rgb_offsets(PixelFormat f, bool bgr) {
  bool swapped = f == PixelFormat::BGR || f == PixelFormat::BGRA;
  // Params::bgr: 3/4-channel views in OpenCV order. An explicit BGR/BGRA format already says so.
  if (bgr && (f == PixelFormat::RGB || f == PixelFormat::RGBA)) swapped = true;
  if (swapped) return {2, 1, 0};
  return {0, 1, 2};
}

void validate_view(const ImageView& v, const std::string& what) {
  if (!v.data) throw Error(ErrorKind::InvalidArgument, what + ": pixel pointer is null");
  if (v.width < 1 || v.height < 1)
    throw Error(ErrorKind::InvalidArgument, what + ": image size " + std::to_string(v.width) + "x" +
                                                std::to_string(v.height) + " is empty (must be at least 1x1)");
  const int ch = channels_of(v.format);
  if (ch == 0) throw Error(ErrorKind::InvalidArgument, what + ": unknown pixel format");
  if (v.row_stride != 0 && v.row_stride < v.packed_stride())
    throw Error(ErrorKind::InvalidArgument, what + ": row stride " + std::to_string(v.row_stride) +
                                                " bytes is smaller than a row (" + std::to_string(v.packed_stride()) +
                                                " bytes)");
}

// Float views must hold [0, 1] in EVERY channel (also the ones the network does not read): a value outside says
// the caller passed 0..255 floats or garbage, which is an error, not something to clamp.
void check_float_view(const ImageView& v, const std::string& what) {
  const std::size_t row_len = static_cast<std::size_t>(v.width) * channels_of(v.format);
  const auto* base = static_cast<const std::uint8_t*>(v.data);
  for (int y = 0; y < v.height; ++y) {
    const auto* row = reinterpret_cast<const float*>(base + static_cast<std::ptrdiff_t>(y) * v.stride());
    for (std::size_t i = 0; i < row_len; ++i)
      if (!(row[i] >= 0.0f && row[i] <= 1.0f))  // also catches NaN
        throw Error(ErrorKind::InvalidArgument,
                    what + ": float pixel value " + std::to_string(row[i]) +
                        " at (x=" + std::to_string(i / static_cast<std::size_t>(channels_of(v.format))) +
                        ", y=" + std::to_string(y) + ") is outside [0, 1]");
  }
}

// Rounds one channel of a (checked) float view to 8 bits: nearbyint(v * 255), half to even, at source resolution.
void quantise_float_channel(const ImageView& v, int offset, std::vector<std::uint8_t>& out) {
  const int ch = channels_of(v.format);
  out.resize(static_cast<std::size_t>(v.width) * v.height);
  const auto* base = static_cast<const std::uint8_t*>(v.data);
  for (int y = 0; y < v.height; ++y) {
    const auto* row = reinterpret_cast<const float*>(base + static_cast<std::ptrdiff_t>(y) * v.stride());
    std::uint8_t* o = out.data() + static_cast<std::size_t>(y) * v.width;
    for (int x = 0; x < v.width; ++x) o[x] = static_cast<std::uint8_t>(std::nearbyint(row[x * ch + offset] * 255.0f));
  }
}

// Step 4 for one plane: input[i] = plane[i] / 255.0f (through the exact table), n values.
void normalise_plane(const std::uint8_t* plane, std::size_t n, std::vector<float>& input) {
  const auto& lut = rescale_lut();
  input.resize(n);
  for (std::size_t i = 0; i < n; ++i) input[i] = lut[plane[i]];
}

// OpenCV's 14-bit fixed-point BGR->gray (image::cv2_gray) over a view: the hloc presets' gray for colour pixel arrays
// (what cv2.cvtColor(img, COLOR_RGB2GRAY) gives).
void cv_gray_of(const std::uint8_t* base, std::ptrdiff_t stride, int ch, const std::array<int, 3>& off, int w, int h,
                std::vector<std::uint8_t>& out) {
  out.resize(static_cast<std::size_t>(w) * h);
  for (int y = 0; y < h; ++y) {
    const std::uint8_t* row = base + static_cast<std::ptrdiff_t>(y) * stride;
    std::uint8_t* o = out.data() + static_cast<std::size_t>(y) * w;
    for (int x = 0; x < w; ++x) {
      const std::uint8_t* px = row + static_cast<std::ptrdiff_t>(x) * ch;
      o[x] = image::cv2_gray(px[off[0]], px[off[1]], px[off[2]]);
    }
  }
}

// A fixed frame (resize = WxH) is known before the image: over Options::max_frame_pixels it is refused before the
// image is read or decoded. (Frames that depend on the image size are checked in prepare(), before any plan.)
void check_fixed_frame(const ResolvedParams& rp, const std::string& what, std::int64_t max_frame_pixels) {
  if (rp.resize_mode == ResizeMode::Fixed) (void)rp.network_frame(1, 1, what, max_frame_pixels);
}

}  // namespace

struct Engine::Prepared {
  std::unique_ptr<engine::Context> ctx;
  int width = 0, height = 0;     // original image size (after the EXIF rotation when exif_orientation)
  int frame_w = 0, frame_h = 0;  // the network frame ctx->input holds
  Timing timing;
};

Engine::Engine(const Options& options) : options_(options) {
  const auto t0 = Clock::now();
  if (options.threads < 0)
    throw Error(ErrorKind::InvalidArgument,
                "threads = " + std::to_string(options.threads) + " is out of range (0 = all cores, or >= 1)");
  if (options.max_pixels < 1)
    throw Error(ErrorKind::InvalidArgument, "max_pixels = " + std::to_string(options.max_pixels) + " must be >= 1");
  if (options.max_frame_pixels < Params::kMinNetworkPixels || options.max_frame_pixels > Params::kMaxNetworkPixels)
    throw Error(ErrorKind::InvalidArgument,
                "max_frame_pixels = " + std::to_string(options.max_frame_pixels) + " is out of range (allowed: " +
                    std::to_string(Params::kMinNetworkPixels) + ".." + std::to_string(Params::kMaxNetworkPixels) + ")");

  model::HubRequest req;
  req.repo_id = options.model;
  req.revision = options.revision;
  req.cache_dir = options.cache_dir;
  req.local_files_only = options.local_files_only;
  const model::ResolvedModel resolved = model::resolve_model(options.model, req);
  log("weights: " + resolved.dir + " (" + resolved.source + ")");
  const model::Weights weights = model::load_weights_dir(resolved.dir);
  weights_config_ = weights.config;

  backend::BackendOptions bo;
  bo.threads = threads_or_cores(options.threads);
  bo.precision = options.precision;
  if (!options.calibration.empty()) {
    if (options.precision != "int8")
      throw Error(ErrorKind::InvalidArgument, std::to_string(options.calibration.size()) +
                                                  " calibration image(s) given, but only precision \"int8\" uses "
                                                  "them (precision is \"" +
                                                  options.precision + "\")");
    bo.calibration = calibration_planes(options.calibration);
  }
  options_.calibration.clear();  // caller-owned inputs, valid during from_pretrained only
  backend_ = backend::create_backend(options.device, weights, bo);
  const ResolvedParams defaults = resolve(Params{});
  backend::Executor& first = executor_for(defaults.fixed_width, defaults.fixed_height);
  log("network planned: " + first.plan_description());

  info_.model = options.model;
  info_.revision = resolved.commit;
  info_.weights_dir = resolved.dir;
  info_.source = resolved.source;
  info_.backend = backend_->name();
  info_.device = backend_->device();
  info_.precision = backend_->precision();
  if (info_.precision == "int8")
    info_.calibration = options.calibration.empty() ? std::string("built-in (3 synthetic 640x480 images)")
                                                    : std::to_string(options.calibration.size()) + " image(s)";
  info_.threads = backend_->threads();
  info_.cpu_units = util::cpu_units_string();
  info_.precisions = precisions_on_this_cpu();
  info_.fastest_precision = fastest_precision_on_this_cpu();
  info_.cpu_features = util::cpu_features_string() + " (resize: " + image::resize_kernel_name() +
                       ", post: " + post::post_kernel_name() + ")";
  info_.plan = first.plan_description();
  info_.warmup_s["load"] = ms_since(t0) / 1000.0;
  for (const auto& [k, v] : warmup(options.warmup)) info_.warmup_s[k] = v;
}

std::vector<backend::CalibrationPlane> Engine::calibration_planes(const std::vector<ImageInput>& images) {
  // Each image goes through the request's own steps 1-4 (decode, channel, Pillow resize, v / 255) with the default
  // Params, so the ranges are those of the planes the network will really see.
  std::vector<backend::CalibrationPlane> planes;
  planes.reserve(images.size());
  for (std::size_t i = 0; i < images.size(); ++i) {
    Prepared p;
    try {
      p = prepare(images[i], resolve(Params{}));
    } catch (const Error& e) {
      throw Error(e.kind(), "int8 calibration image " + std::to_string(i + 1) + " of " + std::to_string(images.size()) +
                                ": " + e.what());
    }
    planes.push_back({p.frame_h, p.frame_w, p.ctx->input});
    release_context(std::move(p.ctx));
  }
  log("int8 calibration: " + std::to_string(planes.size()) + " image(s) prepared");
  return planes;
}

Engine::~Engine() {
  close();
}

void Engine::log(const std::string& msg) const {
  if (options_.verbose) std::cerr << "[superpoint-rt] " << msg << "\n";
}

void Engine::close() {
  std::unique_lock<std::shared_mutex> lock(life_mu_);  // waits for calls in flight
  if (closed_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> l(pool_mu_);
    pool_.reset();
  }
  {
    std::lock_guard<std::mutex> l(executor_mu_);
    executors_.clear();
  }
  backend_.reset();
  std::lock_guard<std::mutex> l(contexts_mu_);
  contexts_.clear();
  std::lock_guard<std::mutex> p(plans_mu_);
  plans_.clear();
  plan_used_.clear();
  plan_bytes_ = 0;
}

std::unique_ptr<engine::Context> Engine::acquire_context() {
  {
    std::lock_guard<std::mutex> lock(contexts_mu_);
    if (!contexts_.empty()) {
      auto c = std::move(contexts_.back());
      contexts_.pop_back();
      return c;
    }
  }
  return std::make_unique<engine::Context>();
}

void Engine::release_context(std::unique_ptr<engine::Context> ctx) {
  if (!ctx) return;
  std::lock_guard<std::mutex> lock(contexts_mu_);
  if (contexts_.size() < 16) contexts_.push_back(std::move(ctx));
}

std::shared_ptr<const image::ResizePlan> Engine::resize_plan(int in_w, int in_h, int out_w, int out_h) {
  const auto key = std::make_tuple(in_w, in_h, out_w, out_h);
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    if (auto it = plans_.find(key); it != plans_.end()) {
      plan_used_[key] = ++plan_clock_;
      return it->second;
    }
  }
  // Built outside the lock (a large plan takes a while). A size the plan refuses (kMaxResizePlanBytes: extreme
  // aspect ratios) throws here and leaves nothing behind in the cache.
  auto plan = std::make_shared<const image::ResizePlan>(in_w, in_h, out_w, out_h);
  std::lock_guard<std::mutex> lock(plans_mu_);
  if (auto it = plans_.find(key); it != plans_.end()) {  // another thread built it meanwhile
    plan_used_[key] = ++plan_clock_;
    return it->second;
  }
  // Bounded cache (sizes are unbounded): at most kMaxPlans plans and kPlanCacheBytes of plan memory; the least
  // recently used go first. A plan over the byte budget alone is used without being cached.
  constexpr std::size_t kMaxPlans = 32;
  constexpr std::size_t kPlanCacheBytes = std::size_t{64} << 20;
  if (plan->bytes > kPlanCacheBytes) return plan;
  while (!plans_.empty() && (plans_.size() >= kMaxPlans || plan_bytes_ + plan->bytes > kPlanCacheBytes)) {
    const auto oldest = std::min_element(plan_used_.begin(), plan_used_.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
    const auto victim = plans_.find(oldest->first);
    plan_bytes_ -= victim->second->bytes;
    plans_.erase(victim);
    plan_used_.erase(oldest);
  }
  plans_[key] = plan;
  plan_used_[key] = ++plan_clock_;
  plan_bytes_ += plan->bytes;
  return plan;
}

backend::Executor& Engine::executor_for(int w, int h) {
  // Caller holds executor_mu_ (or is the constructor). One executor per network frame, least recently used first
  // out: at most kMaxExecutors plans and kExecutorPixels frame pixels in all (activations cost about 520 bytes per
  // frame pixel at fp32), the one asked for always kept.
  const auto key = std::make_pair(w, h);
  ++executor_clock_;
  if (auto it = executors_.find(key); it != executors_.end()) {
    it->second.used = executor_clock_;
    return *it->second.executor;
  }
  constexpr std::size_t kMaxExecutors = 8;
  constexpr std::int64_t kExecutorPixels = std::int64_t{8} << 20;
  const std::int64_t pixels = std::int64_t{w} * h;
  auto total = [&] {
    std::int64_t t = 0;
    for (const auto& [k, e] : executors_) t += std::int64_t{k.first} * k.second;
    return t;
  };
  while (!executors_.empty() && (executors_.size() >= kMaxExecutors || total() + pixels > kExecutorPixels)) {
    auto victim = executors_.begin();
    for (auto it = executors_.begin(); it != executors_.end(); ++it)
      if (it->second.used < victim->second.used) victim = it;
    executors_.erase(victim);
  }
  auto ex = backend_->plan({h, w});
  backend::Executor& ref = *ex;
  executors_[key] = {std::move(ex), executor_clock_};
  return ref;
}

image::ParallelFor Engine::host_parallel(bool& taken) {
  // A second core for one request's decode: only when the request is alone (the network is idle: its lock is free)
  // and no other request is splitting its decode. image::decode_jpeg_resized_plane's two tasks do about 45% more work
  // together than one thread, for about 25% less wall time: a win on an idle core, a loss on a busy one.
  taken = false;
  if (info_.threads < 2 || host_split_busy_.exchange(true)) return {};
  if (!executor_mu_.try_lock()) {
    host_split_busy_.store(false);
    return {};
  }
  executor_mu_.unlock();
  taken = true;
  // The tasks run on this thread's OpenMP team, the threads oneDNN's forward runs on: right after a forward they
  // are still spinning (libgomp's spin-wait) and take the task at once, where a thread of our own would compete with
  // them for the core (measured: 10-12 ms against 7 ms on one thread, instead of about 5 ms). The tasks never wait
  // for each other, so a smaller team (nested calls) runs them one after the other, correctly.
  return [](int n, const std::function<void(int)>& task) {
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
#pragma omp parallel for num_threads(n) schedule(static, 1)
    for (int i = 0; i < n; ++i) {
      try {
        task(i);
      } catch (...) {  // an exception must not leave an OpenMP region
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
    }
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  };
}

Engine::Prepared Engine::prepare(const ImageInput& input, const ResolvedParams& rp, bool may_split) {
  Prepared p;
  const auto t0 = Clock::now();
  const std::string what = input.describe();

  // Step 1: decode (paths and bytes) or take the caller's pixels.
  Image decoded;
  ImageView view;
  std::vector<std::uint8_t> file_bytes;
  std::span<const std::uint8_t> encoded;
  const std::string* encoded_name = nullptr;
  if (const auto* path = std::get_if<ImageInput::Path>(&input.source)) {
    file_bytes = read_file(path->path);
    encoded = file_bytes;
    encoded_name = &path->path;
  } else if (const auto* bytes = std::get_if<ImageInput::Bytes>(&input.source)) {
    encoded = bytes->data;
    encoded_name = &bytes->name;
  }
  // hf JPEG paths and bytes of a request that needs one plane (not the HF luma of a colour image): decode and resize
  // in one pass (image::decode_jpeg_resized_plane), so the full-size RGB image is never written and re-read. Same
  // bits and errors as decode + steps 2-3 below; the decode time then includes the resize.
  if (encoded_name && rp.pixels == PixelPath::Hf && rp.interpolation == Interpolation::PilBilinear &&
      options_.max_pixels >= 1 && sniff_format(encoded) == ImageFormat::JPEG) {
    p.ctx = acquire_context();
    engine::Context& ctx = *p.ctx;
    const int rgb_channel = rp.grayscale ? -1 : rgb_offsets(PixelFormat::RGB, rp.bgr)[0];
    const auto plan_for = [&](int w, int h) {
      const auto [fw, fh] = rp.network_frame(w, h, what, options_.max_frame_pixels);
      p.frame_w = fw;
      p.frame_h = fh;
      return resize_plan(w, h, fw, fh);
    };
    bool taken = false;
    const image::ParallelFor parallel = may_split ? host_parallel(taken) : image::ParallelFor{};
    struct Release {
      std::atomic<bool>& busy;
      bool taken;
      ~Release() {
        if (taken) busy.store(false);
      }
    } release{host_split_busy_, taken};
    if (image::decode_jpeg_resized_plane(encoded, *encoded_name, options_.max_pixels, rgb_channel, plan_for,
                                         ctx.planes[0], ctx.resize, &p.width, &p.height, parallel, &ctx.resize2)) {
      p.timing.decode = ms_since(t0);
      const auto t1 = Clock::now();
      normalise_plane(ctx.planes[0].data(), static_cast<std::size_t>(p.frame_w) * p.frame_h, ctx.input);
      p.timing.preprocess = ms_since(t1);
      return p;
    }
  }
  if (encoded_name) {
    if (rp.pixels == PixelPath::Hf)
      decoded = decode_image(encoded, *encoded_name, options_.max_pixels);
    else  // hloc / LightGlue: what cv2.imread returns (with IMREAD_IGNORE_ORIENTATION unless exif_orientation)
      decoded =
          image::decode_image_cv2(encoded, *encoded_name, options_.max_pixels,
                                  rp.pixels == PixelPath::CvGray ? image::Cv2Read::Grayscale : image::Cv2Read::Color,
                                  rp.exif_orientation ? image::Cv2Orientation::Apply : image::Cv2Orientation::Ignore);
    view = decoded.view();
  } else if (const auto* v = std::get_if<ImageView>(&input.source)) {
    view = *v;
  } else {
    const Image* im = std::get<const Image*>(input.source);
    if (!im) throw Error(ErrorKind::InvalidArgument, "image pointer is null");
    view = im->view();
  }
  validate_view(view, what);
  if (view.type == SampleType::F32) check_float_view(view, what);
  p.timing.decode = ms_since(t0);
  const auto t1 = Clock::now();
  p.width = view.width;
  p.height = view.height;
  const auto [fw, fh] = rp.network_frame(view.width, view.height, what, options_.max_frame_pixels);
  p.frame_w = fw;
  p.frame_h = fh;
  if (!p.ctx) p.ctx = acquire_context();
  engine::Context& ctx = *p.ctx;
  const std::size_t n = static_cast<std::size_t>(fw) * fh;

  // Step 2: the source planes, as 8-bit samples read from the view (pointer, row stride, pixel step).
  // hf: gray images their plane; colour images channel 0 (R), or channel 2 with bgr, or all three for the HF luma.
  // hloc (cv2 gray): the gray plane; a colour pixel array through OpenCV's fixed-point gray. LightGlue (cv2 colour,
  // then luma after the resize): R, G, B; a gray image's plane three times (IMREAD_COLOR replicates it).
  struct Src {
    const std::uint8_t* data;
    std::ptrdiff_t stride;
    int step;
  };
  std::array<Src, 3> src{};
  int nplanes = 1;
  const bool is_gray = view.format == PixelFormat::Gray;
  const int ch = channels_of(view.format);
  const std::array<int, 3> off = rgb_offsets(view.format, rp.bgr);
  const auto* base = static_cast<const std::uint8_t*>(view.data);
  // Float views are rounded to 8 bits per channel first (SampleType::F32), at source resolution.
  auto channel = [&](int offset, std::size_t slot) -> Src {
    if (view.type == SampleType::U8) return {base + offset, view.stride(), ch};
    quantise_float_channel(view, offset, ctx.source[slot]);
    return {ctx.source[slot].data(), view.width, 1};
  };
  if (is_gray) {
    src[0] = channel(0, 0);
    nplanes = rp.pixels == PixelPath::CvColorLuma ? 3 : 1;
    src[1] = src[2] = src[0];
  } else if (rp.pixels == PixelPath::CvGray) {
    if (view.type == SampleType::U8) {
      cv_gray_of(base, view.stride(), ch, off, view.width, view.height, ctx.source[0]);
    } else {
      for (std::size_t i = 0; i < 3; ++i) quantise_float_channel(view, off[i], ctx.source[i]);
      std::vector<std::uint8_t> rgb(static_cast<std::size_t>(view.width) * view.height * 3);
      for (std::size_t i = 0; i < rgb.size() / 3; ++i)
        for (std::size_t c = 0; c < 3; ++c) rgb[3 * i + c] = ctx.source[c][i];
      cv_gray_of(rgb.data(), std::ptrdiff_t{view.width} * 3, 3, {0, 1, 2}, view.width, view.height, ctx.source[0]);
    }
    src[0] = {ctx.source[0].data(), view.width, 1};
  } else if (rp.pixels == PixelPath::CvColorLuma || rp.grayscale) {
    nplanes = 3;
    for (std::size_t i = 0; i < 3; ++i) src[i] = channel(off[i], i);
  } else {
    src[0] = channel(off[0], 0);
  }

  // Step 3: resize each plane to the frame; the results are floats in [0, 1] (or, on the Pillow path, 8-bit planes
  // read through the exact v / 255 table).
  const bool same_size = fw == view.width && fh == view.height;
  for (int i = 0; i < nplanes; ++i) {
    const auto si = static_cast<std::size_t>(i);
    if (i > 0 && src[si].data == src[0].data) {  // a gray image read three times: same plane
      ctx.fplanes[si] = ctx.fplanes[0];
      continue;
    }
    // One plane is the network input itself (no copy); three are combined in step 4.
    auto& out = nplanes == 1 ? ctx.input : ctx.fplanes[si];
    out.resize(n);
    if (rp.interpolation == Interpolation::PilBilinear) {
      auto& dst = ctx.planes[si];
      dst.resize(n);
      const auto plan = resize_plan(view.width, view.height, fw, fh);
      image::resize_plane(*plan, src[si].data, src[si].stride, src[si].step, dst.data(), ctx.resize);
      const auto& lut = rescale_lut();
      for (std::size_t k = 0; k < n; ++k) out[k] = lut[dst[k]];
      continue;
    }
    // cv2 / kornia work on a float32 plane: hloc resizes the 0..255 values and divides after (ImageDataset), LightGlue
    // divides first (numpy_image_to_torch: float32(image / 255.0), which equals v / 255.0f for every u8).
    const bool divide_first = rp.interpolation == Interpolation::AntialiasBilinear;
    const auto& lut = rescale_lut();
    auto& fs = ctx.fsource;
    fs.resize(static_cast<std::size_t>(view.width) * view.height);
    for (int y = 0; y < view.height; ++y) {
      const std::uint8_t* row = src[si].data + static_cast<std::ptrdiff_t>(y) * src[si].stride;
      float* o = fs.data() + static_cast<std::size_t>(y) * view.width;
      for (int x = 0; x < view.width; ++x) {
        const std::uint8_t v = row[static_cast<std::ptrdiff_t>(x) * src[si].step];
        o[x] = divide_first ? lut[v] : static_cast<float>(v);
      }
    }
    if (same_size) {
      // Neither tool resizes then (hloc calls cv2.resize only when the size changes or resize_force asks for the
      // same size, which cv2.resize copies; kornia returns its input for an unchanged size).
      out.assign(fs.begin(), fs.end());
    } else if (rp.interpolation == Interpolation::Cv2Area) {
      // hloc resize_image: INTER_AREA, or INTER_LINEAR when either side grows.
      if (fw > view.width || fh > view.height)
        image::cv2_resize_linear(fs.data(), view.width, view.height, view.width, out.data(), fw, fh, fw, ctx.fresize);
      else
        image::cv2_resize_area(fs.data(), view.width, view.height, view.width, out.data(), fw, fh, fw, ctx.fresize);
    } else {
      image::kornia_resize_antialias(fs.data(), view.width, view.height, view.width, out.data(), fw, fh, fw,
                                     ctx.fresize);
    }
    if (!divide_first)
      for (auto& v : out) v = v / 255.0f;  // hloc: image / 255.0 on float32
  }

  // Step 4: the network input: the plane (already in ctx.input), or the luma of three.
  p.timing.preprocess = ms_since(t1);
  if (nplanes == 1) return p;
  ctx.input.resize(n);
  const float* r = ctx.fplanes[0].data();
  if (rp.pixels == PixelPath::CvColorLuma) {
    // kornia rgb_to_grayscale: w_r * r + w_g * g + w_b * b with float32 weights (0.299, 0.587, 0.114), evaluated
    // left to right in float32 (-ffp-contract=off: no FMA).
    const float* g = ctx.fplanes[1].data();
    const float* b = ctx.fplanes[2].data();
    for (std::size_t i = 0; i < n; ++i) ctx.input[i] = (0.299f * r[i] + 0.587f * g[i]) + 0.114f * b[i];
  } else {
    const float* g = ctx.fplanes[1].data();
    const float* b = ctx.fplanes[2].data();
    // HF's original processor skips the conversion when the three channels are equal everywhere.
    const std::size_t bytes = n * sizeof(float);
    if (std::memcmp(r, g, bytes) != 0 || std::memcmp(r, b, bytes) != 0) {
      // ((r*0.2989f) + (g*0.5870f)) + (b*0.1140f): float32, each product and sum rounded (no FMA; the library is
      // compiled with -ffp-contract=off), exactly numpy's float32 arithmetic in the HF processor.
      for (std::size_t i = 0; i < n; ++i) ctx.input[i] = (r[i] * 0.2989f + g[i] * 0.5870f) + b[i] * 0.1140f;
    } else {
      std::memcpy(ctx.input.data(), r, bytes);
    }
  }
  p.timing.preprocess = ms_since(t1);
  return p;
}

void Engine::network(Prepared& p, const ResolvedParams& rp, bool reuse_network_output) {
  engine::Context& ctx = *p.ctx;
  const int hc = p.frame_h / 8, wc = p.frame_w / 8;
  // The network lock covers the forward, the scores (step 6, which read the logits) and a copy of the descriptor
  // map: the executor's output buffers are rewritten by the next request, and the rest of the post-processing
  // (NMS, top-k, normalisation, sampling: steps 7-11) then runs without the lock, beside the next forward.
  std::lock_guard<std::mutex> lock(executor_mu_);
  const auto t0 = Clock::now();  // a frame's first request plans its network: that time counts as forward
  backend::Executor& ex = executor_for(p.frame_w, p.frame_h);
  if (!reuse_network_output) {
    std::memcpy(ex.input(), ctx.input.data(), ctx.input.size() * sizeof(float));
    ex.run(rp.return_descriptors);
  }
  p.timing.forward = ms_since(t0);
  const auto t1 = Clock::now();
  ctx.heat.resize(static_cast<std::size_t>(8 * wc) * static_cast<std::size_t>(8 * hc));
  post::scores_from_logits(ex.logits(), hc, wc, ctx.heat.data());  // step 6
  if (rp.return_descriptors) {
    const std::size_t n = static_cast<std::size_t>(hc) * wc * weights_config_.descriptor_decoder_dim;
    ctx.dense.resize(n);
    std::memcpy(ctx.dense.data(), ex.descriptors(), n * sizeof(float));
  }
  p.timing.postprocess = ms_since(t1);
}

Features Engine::postprocess(Prepared& p, const ResolvedParams& rp) {
  engine::Context& ctx = *p.ctx;
  Features f;
  f.timing_ms = p.timing;
  f.image_size = {p.height, p.width};
  f.network_size = {p.frame_h, p.frame_w};
  // float32 of the double quotient, as hloc's (original_size / size).astype(np.float32); for hf W / 640.f is the
  // same value (both operands are exact in float).
  f.scale = {static_cast<float>(static_cast<double>(p.width) / p.frame_w),
             static_cast<float>(static_cast<double>(p.height) / p.frame_h)};
  // The encoder's three pools floor odd sizes (as PyTorch's MaxPool2d), so the score map covers 8 hc x 8 wc.
  const int hc = p.frame_h / 8, wc = p.frame_w / 8;
  const int h8 = 8 * hc, w8 = 8 * wc;
  const int dim = weights_config_.descriptor_decoder_dim;
  f.descriptor_dim = dim;

  const auto t2 = Clock::now();
  // hloc / LightGlue (SuperGlue's top_k_keypoints): when at most k points pass they stay in the raster order of
  // torch.nonzero; only a cut sorts them (torch.topk). Asking for k + 1 tells the two cases apart.
  const bool raster = rp.output != OutputConvention::Hf;
  const int k = rp.max_keypoints;
  const int ask = raster && k >= 0 ? k + 1 : k;
  post::nms_select_keypoints(ctx.heat.data(), h8, w8, rp.nms_radius, rp.keypoint_threshold,  // 7-10
                             weights_config_.border_removal_distance, ask, ctx.keypoints, ctx.nms_scratch);
  if (raster) {
    if (k >= 0 && ctx.keypoints.size() > static_cast<std::size_t>(k))
      ctx.keypoints.resize(static_cast<std::size_t>(k));
    else
      std::sort(ctx.keypoints.begin(), ctx.keypoints.end(),
                [](const post::Keypoint& a, const post::Keypoint& b) { return a.y != b.y ? a.y < b.y : a.x < b.x; });
  }
  const std::size_t n = ctx.keypoints.size();
  f.scores.resize(n);
  f.keypoints.resize(2 * n);
  const float fw = static_cast<float>(p.frame_w), fh = static_cast<float>(p.frame_h);
  const float W = static_cast<float>(p.width), H = static_cast<float>(p.height);
  // LightGlue's scales: torch.Tensor([resized_w / w, resized_h / h]), float32 of the double quotient.
  const float lg_sx = static_cast<float>(static_cast<double>(p.frame_w) / p.width);
  const float lg_sy = static_cast<float>(static_cast<double>(p.frame_h) / p.height);
  for (std::size_t i = 0; i < n; ++i) {
    const post::Keypoint& kp = ctx.keypoints[i];
    f.scores[i] = kp.score;
    const float x = static_cast<float>(kp.x), y = static_cast<float>(kp.y);
    switch (rp.output) {
      case OutputConvention::Hf:  // step 12, as HF computes it: (kp / [w, h]) * [W, H] in float32
        f.keypoints[2 * i] = (x / fw) * W;
        f.keypoints[2 * i + 1] = (y / fh) * H;
        break;
      case OutputConvention::Hloc:  // extract_features.main: (kp + 0.5) * scales - 0.5 in float32
        f.keypoints[2 * i] = (x + 0.5f) * f.scale[0] - 0.5f;
        f.keypoints[2 * i + 1] = (y + 0.5f) * f.scale[1] - 0.5f;
        break;
      case OutputConvention::LightGlue:  // Extractor.extract: (kp + 0.5) / scales - 0.5 in float32
        f.keypoints[2 * i] = (x + 0.5f) / lg_sx - 0.5f;
        f.keypoints[2 * i + 1] = (y + 0.5f) / lg_sy - 0.5f;
        break;
    }
  }
  if (rp.return_descriptors) {  // step 11
    float* dense = ctx.dense.data();
    // Only the cells the sampler reads are normalised (same bits as normalising all hc * wc).
    post::normalize_sampled_cells(dense, hc, wc, dim, ctx.keypoints.data(), static_cast<int>(n), ctx.cell_mark);
    f.descriptors.resize(n * static_cast<std::size_t>(dim));
    post::sample_descriptors(dense, hc, wc, dim, ctx.keypoints.data(), static_cast<int>(n), f.descriptors.data());
    f.has_descriptors = true;
  }
  f.timing_ms.postprocess += ms_since(t2);
  return f;
}

Features Engine::finish(Prepared& p, const ResolvedParams& rp, bool reuse_network_output) {
  network(p, rp, reuse_network_output);
  return postprocess(p, rp);
}

Features Engine::run(const ImageInput& image, const Params& request) {
  const ResolvedParams params = resolve(request);
  check_fixed_frame(params, image.describe(), options_.max_frame_pixels);
  std::shared_lock<std::shared_mutex> life(life_mu_);
  if (closed_) throw Error(ErrorKind::Closed, "the model is closed");
  try {
    Prepared p = prepare(image, params, /*may_split=*/true);
    Features f = finish(p, params);
    release_context(std::move(p.ctx));
    return f;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::TooLarge, image.describe() + ": out of memory while processing the image");
  }
}

engine::ThreadPool& Engine::pool(int workers) {
  // One pool for the engine's life, grown in place and never replaced: concurrent run_each / warmup calls keep a
  // reference to it while they submit (issue 14 §2: replacing a smaller pool by a bigger one destroyed it under a
  // call still submitting to it). close() destroys it once the calls in flight are done (life_mu_).
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (!pool_)
    pool_ = std::make_unique<engine::ThreadPool>(workers);
  else
    pool_->grow(workers);
  return *pool_;
}

std::vector<std::variant<Features, Error>> Engine::run_each(std::span<const ImageInput> images, const Params& request,
                                                            int num_workers, bool stop_at_first_error) {
  const ResolvedParams params = resolve(request);
  check_fixed_frame(params, "the request", options_.max_frame_pixels);
  if (num_workers < 0)
    throw Error(ErrorKind::InvalidArgument,
                "num_workers = " + std::to_string(num_workers) + " is out of range (0 or more)");
  std::shared_lock<std::shared_mutex> life(life_mu_);
  if (closed_) throw Error(ErrorKind::Closed, "the model is closed");
  std::vector<std::variant<Features, Error>> out;
  out.reserve(images.size());

  auto prepare_one = [this, &params](const ImageInput& in) -> Prepared {
    try {
      return prepare(in, params);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorKind::TooLarge, in.describe() + ": out of memory while processing the image");
    }
  };
  auto finish_one = [&](Prepared& p) {
    Features f = finish(p, params);
    release_context(std::move(p.ctx));
    return f;
  };

  if (num_workers == 0 || images.size() <= 1) {
    for (const auto& in : images) {
      try {
        Prepared p = prepare_one(in);
        out.emplace_back(finish_one(p));
      } catch (const Error& e) {
        if (stop_at_first_error) throw;
        out.emplace_back(e);
      }
    }
    return out;
  }

  // Three stages: the workers prepare up to num_workers + 1 images ahead; this thread runs the network in input
  // order; the workers then post-process each image (steps 7-12) while this thread runs the next forward. At most
  // `ahead` post-processings are pending, so the contexts in flight stay bounded (2 * ahead + 1).
  engine::ThreadPool& workers = pool(num_workers);
  std::vector<std::future<Prepared>> pending(images.size());
  std::vector<std::future<Features>> done(images.size());
  out.resize(images.size(), Error(ErrorKind::Internal, "not processed"));
  const std::size_t ahead = static_cast<std::size_t>(num_workers) + 1;
  std::size_t submitted = 0;
  auto submit_upto = [&](std::size_t limit) {
    for (; submitted < std::min(limit, images.size()); ++submitted) {
      const ImageInput* in = &images[submitted];
      pending[submitted] = workers.submit([&prepare_one, in] { return prepare_one(*in); });
    }
  };
  auto post_one = [this, &params](const std::shared_ptr<Prepared>& p) {
    Features f = postprocess(*p, params);
    release_context(std::move(p->ctx));
    return f;
  };
  auto oom = [&](std::size_t i) {
    return Error(ErrorKind::TooLarge, images[i].describe() + ": out of memory while processing the image");
  };
  bool stop = false;  // stop_at_first_error and an image failed: later images are drained, not run
  auto fail = [&](std::size_t i, Error e) {
    out[i] = std::move(e);
    stop = stop || stop_at_first_error;
  };
  std::size_t collected = 0;  // the post-processings of images [0, collected) are done
  auto collect_upto = [&](std::size_t limit) {
    for (; collected < limit; ++collected) {
      if (!done[collected].valid()) continue;
      try {
        out[collected] = done[collected].get();
      } catch (const Error& e) {
        fail(collected, e);
      } catch (const std::bad_alloc&) {
        fail(collected, oom(collected));
      }
    }
  };
  submit_upto(ahead);
  for (std::size_t i = 0; i < images.size(); ++i) {
    submit_upto(i + 1 + ahead);
    if (i >= ahead) collect_upto(i - ahead);
    try {
      auto p = std::make_shared<Prepared>(pending[i].get());
      if (stop) {
        release_context(std::move(p->ctx));
        continue;  // drain the futures that were submitted (they reference `images`)
      }
      try {
        network(*p, params, false);
      } catch (...) {
        release_context(std::move(p->ctx));
        throw;
      }
      done[i] = workers.submit([&post_one, p] { return post_one(p); });
    } catch (const Error& e) {
      fail(i, e);
    } catch (const std::bad_alloc&) {
      fail(i, oom(i));
    }
  }
  collect_upto(images.size());
  if (stop) {  // the first failing image in input order, as the serial path throws it
    for (auto& r : out)
      if (auto* e = std::get_if<Error>(&r)) throw *e;
  }
  return out;
}

std::map<std::string, double> Engine::warmup(const WarmupSpec& spec) {
  std::shared_lock<std::shared_mutex> life(life_mu_);
  if (closed_) throw Error(ErrorKind::Closed, "the model is closed");
  for (const auto& [w, h] : spec.sizes)
    if (w < 1 || h < 1)
      throw Error(ErrorKind::InvalidArgument,
                  "warm-up size " + std::to_string(w) + "x" + std::to_string(h) + " must be at least 1x1");
  for (int r : spec.nms_radii)
    if (r < 0 || r > Params::kNmsRadiusMax)
      throw Error(ErrorKind::InvalidArgument, "warm-up nms_radius = " + std::to_string(r) + " is out of range [0, 32]");
  std::vector<Params> frames;  // one request per network size, a fixed frame of that size
  for (const auto& [w, h] : spec.network_sizes) {
    Params fp;
    fp.resize = std::to_string(w) + "x" + std::to_string(h);
    try {
      fp.validate();
    } catch (const Error& e) {
      throw Error(e.kind(), std::string("warm-up network size: ") + e.what());
    }
    check_fixed_frame(resolve(fp), "warm-up network size", options_.max_frame_pixels);
    frames.push_back(fp);
  }
  static const std::set<std::string> kDecoders{"jpeg", "png", "gif", "bmp", "webp", "tiff", "pnm"};
  for (const auto& d : spec.decoders)
    if (!kDecoders.count(d))
      throw Error(ErrorKind::InvalidArgument,
                  "warm-up decoder '" + d + "' is not one of jpeg, png, gif, bmp, webp, tiff, pnm");
  if (spec.num_workers < 0)
    throw Error(ErrorKind::InvalidArgument,
                "warm-up num_workers = " + std::to_string(spec.num_workers) + " must be >= 0");

  std::lock_guard<std::mutex> warm_lock(warm_mu_);
  std::map<std::string, double> steps;
  auto step = [&](const std::string& name, auto&& fn) {
    if (warmed_.count(name)) return;
    const auto t0 = Clock::now();
    fn();
    steps[name] = ms_since(t0) / 1000.0;
    warmed_.insert(name);
    log("warm-up " + name + ": " + std::to_string(steps[name]) + " s");
  };
  const bool any = !spec.sizes.empty() || !spec.nms_radii.empty() || !spec.decoders.empty() || spec.num_workers > 0 ||
                   !spec.network_sizes.empty();
  if (!any) return steps;

  // The network: the first executions fault in the buffers and the JIT code; with and without descriptors.
  Params params;
  const ResolvedParams defaults = resolve(params);
  const Image base = image::synthetic_image(defaults.fixed_width, defaults.fixed_height, 7);
  auto full = [&](const Image& im, const Params& pr, bool reuse) {
    const ResolvedParams rp = resolve(pr);
    Prepared p = prepare(ImageInput::image(im), rp);
    finish(p, rp, reuse);
    release_context(std::move(p.ctx));
  };
  // Other network frames (the hloc / LightGlue sizes): each plans its own executor (oneDNN primitives, buffers).
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto [w, h] = spec.network_sizes[i];
    step("network:" + std::to_string(w) + "x" + std::to_string(h), [&, w = w, h = h] {
      const Image im = image::synthetic_image(w, h, 5);
      full(im, frames[i], false);
    });
  }
  Params nodesc;
  nodesc.return_descriptors = false;
  step("network:no_descriptors", [&] { full(base, nodesc, false); });
  step("network", [&] {  // last, so that the steps below reuse an output that has descriptors
    full(base, params, false);
    full(base, params, false);
  });
  // Per-size host work (resize tables, buffers of that size), reusing the last network output: the network does
  // not depend on the source size.
  for (const auto& [w, h] : spec.sizes) {
    step("size:" + std::to_string(w) + "x" + std::to_string(h), [&, w = w, h = h] {
      const Image im = image::synthetic_image(w, h, 11);
      full(im, params, true);
      full(im, params, true);
    });
  }
  for (int r : spec.nms_radii) {
    step("nms_radius:" + std::to_string(r), [&] {
      Params pr;
      pr.nms_radius = r;
      full(base, pr, true);
      pr.max_keypoints = -1;  // the largest outputs: every point above the threshold
      full(base, pr, true);
    });
  }
  for (const auto& d : spec.decoders) {
    // libjpeg / libpng need no set-up comparable to Pillow's plug-in import; decoding a small file once faults in
    // the decoder code and its tables.
    step("decoder:" + d, [&] {
      if (d != "png") return;
      const auto tmp = std::filesystem::temp_directory_path() /
                       ("superpoint-rt-warmup-" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ".png");
      write_png(tmp.string(), base.view());
      try {
        (void)decode_file(tmp.string());
      } catch (...) {
        std::filesystem::remove(tmp);
        throw;
      }
      std::filesystem::remove(tmp);
    });
  }
  if (spec.num_workers > 0) {
    step("workers:" + std::to_string(spec.num_workers), [&] {
      engine::ThreadPool& tp = pool(spec.num_workers);
      std::vector<std::future<void>> fs;
      for (int i = 0; i < tp.size(); ++i) fs.push_back(tp.submit([] {}));
      for (auto& f : fs) f.get();
    });
  }
  return steps;
}

}  // namespace superpoint_rt
