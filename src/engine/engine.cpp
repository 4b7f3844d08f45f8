#include "engine/engine.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>
#include <iostream>
#include <new>

#include "engine/request.hpp"
#include "engine/thread_pool.hpp"
#include "image/synthetic.hpp"
#include "model/hub.hpp"
#include "post/post.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt {

namespace {

int threads_or_cores(int threads) {
  if (threads > 0) return threads;
  return std::max(1, omp_get_num_procs());
}

// A fixed frame (resize = WxH) is known before the image: over Options::max_frame_pixels it is refused before the
// image is read or decoded. (Frames that depend on the image size are checked by claim_of(), from the image header,
// before any plan or buffer.)
void check_fixed_frame(const ResolvedParams& rp, const std::string& what, std::int64_t max_frame_pixels) {
  if (rp.resize_mode == ResizeMode::Fixed) (void)rp.network_frame(1, 1, what, max_frame_pixels);
}

}  // namespace

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
  if (options.memory_budget_mb < 0 || options.memory_budget_mb > (std::int64_t{1} << 40))
    throw Error(ErrorKind::InvalidArgument, "memory_budget_mb = " + std::to_string(options.memory_budget_mb) +
                                                " is out of range (0 = half this machine's memory, or >= 1)");
  // The budget exists before anything is prepared (int8 calibration images go through prepare()): what the engine
  // holds idle is its network plans (once they exist) and its pooled contexts.
  budget_ = std::make_unique<engine::MemoryBudget>(
      static_cast<std::size_t>(memory_budget_bytes(options.memory_budget_mb)),
      [this] { return (networks_ ? networks_->resident_bytes() : 0) + contexts_.pooled_bytes(); },
      [this] {
        contexts_.clear();
        if (networks_) networks_->clear();
      });

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
  on_compute_thread_ = bo.threads >= 2;
  backend_ = on_compute([&] { return backend::create_backend(options.device, weights, bo); });
  networks_ = std::make_unique<engine::NetworkPlans>(*backend_);
  const ResolvedParams defaults = resolve(Params{});
  const std::shared_ptr<backend::Executor> first =
      on_compute([&] { return networks_->get(defaults.fixed_width, defaults.fixed_height); });
  log("network planned: " + first->plan_description());
  if (bo.threads >= 2) {
    // Lanes cost a second workspace, and a plan on fewer threads may need a larger one (oneDNN's f32 Winograd
    // transforms the whole frame at once on one thread: 640x480 fp32 needs 140 MB on one thread, 78 MB on two;
    // int8 17 and 22 MB): lists use them only where both lanes together need at most kLanesMemoryFactor times the
    // single forward's workspace. Planned only, not cached (no workspace is touched; lists plan their lanes).
    const std::unique_ptr<backend::Executor> half = on_compute([&] {
      return backend_->plan(networks_->options_of(defaults.fixed_width, defaults.fixed_height, engine::Lane::Half1));
    });
    lanes_ = 2.0 * static_cast<double>(half->workspace_bytes()) <=
             kLanesMemoryFactor * static_cast<double>(first->workspace_bytes());
    log(std::string("lists: ") + (lanes_ ? "two forwards side by side" : "one forward at a time") + " (workspace " +
        std::to_string(first->workspace_bytes() >> 20) + " MB on " + std::to_string(bo.threads) + " threads, " +
        std::to_string(half->workspace_bytes() >> 20) + " MB per lane)");
  }

  info_.model = options.model;
  info_.revision = resolved.commit;
  info_.weights_dir = resolved.dir;
  info_.source = resolved.source;
  info_.backend = backend_->name();
  info_.device = backend_->device();
  info_.precision = backend_->precision();
  if (info_.precision == "int8")
    info_.calibration =
        options.calibration.empty()
            ? "built-in (" + std::to_string(backend::kDefaultCalibrationPlanes) + " synthetic 640x480 images)"
            : std::to_string(options.calibration.size()) + " image(s)";
  info_.threads = backend_->threads();
  info_.cpu_units = util::cpu_units_string();
  info_.precisions = precisions_on_this_cpu();
  info_.fastest_precision = fastest_precision_on_this_cpu();
  info_.cpu_features = util::cpu_features_string() + " (resize: " + image::resize_kernel_name() +
                       ", post: " + post::post_kernel_name() + ")";
  info_.plan = first->plan_description();
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
      p = prepare(source_of(images[i]), resolve(Params{}));
    } catch (const Error& e) {
      throw Error(e.kind(), "int8 calibration image " + std::to_string(i + 1) + " of " + std::to_string(images.size()) +
                                ": " + e.what());
    }
    planes.push_back({p.frame_h, p.frame_w, p.ctx->input});
    release(p);
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
    for (auto& t : lane_threads_) t.reset();
  }
  {
    std::scoped_lock l(network_mu_[0], network_mu_[1]);
    networks_.reset();  // the plans go before the backend whose workspace they share
  }
  backend_.reset();
  contexts_.clear();
  resize_plans_.clear();
}

void Engine::release(Prepared& p) {
  contexts_.release(std::move(p.ctx));
  p.ticket.release();
}

void Engine::network(Prepared& p, const ResolvedParams& rp, bool reuse_network_output, engine::Lane lane) {
  // The Full lane's forward runs on the compute thread (util/compute_thread.hpp): its OpenMP team is the process's
  // only one.
  if (lane == engine::Lane::Full && on_compute_thread_ && !util::on_compute_thread()) {
    on_compute([&] { network(p, rp, reuse_network_output, lane); });
    return;
  }
  engine::Context& ctx = *p.ctx;
  const int hc = p.frame_h / 8, wc = p.frame_w / 8;
  // The network lock covers the forward, the scores (step 6, which read the logits) and a copy of the descriptor
  // map: the executor's output buffers are rewritten by the next request, and the rest of the post-processing
  // (NMS, top-k, normalisation, sampling: steps 7-11) then runs without the lock, beside the next forward.
  const auto t0 = Clock::now();  // a frame's first request plans its network: that time counts as forward
  const std::shared_ptr<backend::Executor> plan = networks_->get(p.frame_w, p.frame_h, lane);  // outside the lock
  // The score map and the descriptor map's copy are sized before the lock (a context that is not warm allocates them
  // here: its page faults must not hold up the network).
  ctx.heat.resize(static_cast<std::size_t>(8 * wc) * static_cast<std::size_t>(8 * hc));
  const std::size_t n = static_cast<std::size_t>(hc) * wc * weights_config_.descriptor_decoder_dim;
  if (rp.return_descriptors) ctx.dense.resize(n);
  // Full holds both slots: its threads are every thread the lanes would use.
  std::unique_lock<std::mutex> slot0, slot1;
  if (lane == engine::Lane::Full) {
    std::lock(network_mu_[0], network_mu_[1]);
    slot0 = std::unique_lock<std::mutex>(network_mu_[0], std::adopt_lock);
    slot1 = std::unique_lock<std::mutex>(network_mu_[1], std::adopt_lock);
  } else {
    slot0 = std::unique_lock<std::mutex>(network_mu_[static_cast<std::size_t>(engine::NetworkPlans::slot_of(lane))]);
  }
  backend::Executor& ex = *plan;
  if (!reuse_network_output) {
    const int slot = engine::NetworkPlans::slot_of(lane);
    if (lane != engine::Lane::Full) lane_clock_.started(slot, double(p.frame_w) * double(p.frame_h));
    ex.run(ctx.input.data(), rp.return_descriptors);
    if (lane != engine::Lane::Full) lane_clock_.finished(slot);
  }
  p.timing.forward = ms_since(t0);
  const auto t1 = Clock::now();
  post::scores_from_logits(ex.logits(), hc, wc, ctx.heat.data());  // step 6
  if (rp.return_descriptors) std::memcpy(ctx.dense.data(), ex.descriptors(), n * sizeof(float));
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
    Prepared p = prepare(source_of(image), params, {}, /*may_split=*/true);
    Features f = finish(p, params);
    release(p);
    return f;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::TooLarge, image.describe() + ": out of memory while processing the image");
  }
}

MemoryEstimate Engine::estimate(const ImageInput& image, const Params& request) {
  const ResolvedParams rp = resolve(request);
  check_fixed_frame(rp, image.describe(), options_.max_frame_pixels);
  std::shared_lock<std::shared_mutex> life(life_mu_);
  if (closed_) throw Error(ErrorKind::Closed, "the model is closed");
  const Source src = source_of(image);
  const engine::MemoryBudget::Claim c = claim_of(src, rp);
  int w = src.view.width, h = src.view.height;
  if (src.name) {
    const ImageInfo info = probe_image(src.encoded, *src.name);
    w = info.width;
    h = info.height;
  }
  const auto [fw, fh] = rp.network_frame(w, h, src.what, options_.max_frame_pixels);
  MemoryEstimate e;
  e.host_bytes = static_cast<std::int64_t>(c.host);
  e.workspace_bytes = static_cast<std::int64_t>(c.workspace);
  e.max_keypoints = max_keypoints_of(rp, fw, fh, weights_config_.border_removal_distance);
  e.descriptor_dim = rp.return_descriptors ? weights_config_.descriptor_decoder_dim : 0;
  e.budget_bytes = static_cast<std::int64_t>(budget_->limit());
  return e;
}

engine::ThreadPool& Engine::worker_pool(int workers) {
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

engine::ThreadPool& Engine::lane_thread(engine::Lane lane) {
  // One thread per lane, shared by every list: concurrent lists queue on the lane's thread (by rank, run_each)
  // instead of holding one thread each while they wait for the lane's workspace.
  std::lock_guard<std::mutex> lock(pool_mu_);
  auto& t = lane_threads_[static_cast<std::size_t>(engine::NetworkPlans::slot_of(lane))];
  if (!t) t = std::make_unique<engine::ThreadPool>(1);
  return *t;
}

std::vector<std::variant<Features, Error>> Engine::run_each(std::span<const ImageInput> images, const Params& request,
                                                            int num_workers, bool stop_at_first_error,
                                                            const SuperPoint::ResultSink* sink) {
  const ResolvedParams params = resolve(request);
  check_fixed_frame(params, "the request", options_.max_frame_pixels);
  if (num_workers < 0)
    throw Error(ErrorKind::InvalidArgument,
                "num_workers = " + std::to_string(num_workers) + " is out of range (0 or more)");
  std::shared_lock<std::shared_mutex> life(life_mu_);
  if (closed_) throw Error(ErrorKind::Closed, "the model is closed");
  std::vector<std::variant<Features, Error>> out;
  out.reserve(images.size());

  auto prepare_one = [this, &params](Source src, engine::MemoryBudget::Ticket ticket) -> Prepared {
    const std::string what = src.what;
    try {
      return prepare(std::move(src), params, std::move(ticket));
    } catch (const std::bad_alloc&) {
      throw Error(ErrorKind::TooLarge, what + ": out of memory while processing the image");
    }
  };
  auto oom = [&](std::size_t i) {
    return Error(ErrorKind::TooLarge, images[i].describe() + ": out of memory while processing the image");
  };

  if (num_workers == 0 || images.size() <= 1) {
    for (std::size_t i = 0; i < images.size(); ++i) {
      try {
        Prepared p;
        try {
          p = prepare_one(source_of(images[i]), {});
        } catch (const std::bad_alloc&) {  // reading the file
          throw oom(i);
        }
        Features f = finish(p, params);
        release(p);
        out.emplace_back(std::move(f));
      } catch (const Error& e) {
        if (stop_at_first_error) throw;
        out.emplace_back(e);
      }
      if (sink) (*sink)(i, std::move(out.back()));
    }
    return out;
  }

  // Three stages: the workers prepare up to num_workers + 1 images ahead; this thread runs the network in input
  // order; the workers then post-process each image (steps 7-12) while this thread runs the next forward. At most
  // `ahead` post-processings are pending, so the contexts in flight stay bounded (2 * ahead + 1).
  // With lanes (list_lanes(), decided at load), each image is instead one task (prepare, network, post-process) for
  // whichever lane thread is free first (submit_to_lanes): two forwards on half the threads each, side by side.
  // Every task of this list carries its rank: where concurrent lists share the workers and the lanes, the earlier
  // list's images go first, so it finishes (and its caller goes on) while the later one still computes, instead of
  // both finishing together at the end. Its images are queued on the lanes as soon as they are admitted: a later
  // list's image queued meanwhile would otherwise take the lane first.
  const bool lanes = list_lanes();
  engine::ThreadPool* workers = lanes ? nullptr : &worker_pool(num_workers);  // lanes prepare their own images
  const std::uint64_t rank = next_list_rank_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::future<Prepared>> pending(images.size());
  std::vector<std::future<Features>> done(images.size());
  out.resize(images.size(), Error(ErrorKind::Internal, "not processed"));
  const std::size_t ahead = static_cast<std::size_t>(num_workers) + 1;
  bool stop = false;  // stop_at_first_error and an image failed: later images are drained, not run
  auto fail = [&](std::size_t i, Error e) {
    out[i] = std::move(e);
    stop = stop || stop_at_first_error;
  };
  // Admission (memory_budget.hpp) happens here, in input order, before an image's task is queued (its header read,
  // nothing decoded). Image i is admitted, waiting if it must, only once every earlier image has had its network
  // stage (or, in lanes, was queued): what it waits for is then freed by post-processing on the workers, by the
  // lanes or by other calls. Images ahead of it are admitted only if they fit now: they would otherwise wait for
  // memory that this thread's network stage frees.
  // The workers never wait for memory, so a post-processing task is never stuck behind a waiting preparation.
  std::size_t submitted = 0;  // images [0, submitted) were admitted and queued, or failed on the way
  // An image that fails before its task (its file, its header, its claim) counts as failed when this thread gets to
  // it, in input order: the earlier images still run first.
  std::vector<char> failed_early(images.size(), 0);
  auto post_one = [this, &params](const std::shared_ptr<Prepared>& p) {
    Features f = postprocess(*p, params);
    release(*p);
    return f;
  };
  // With lanes, each image is one task (prepare, network, post-process) queued on both lane threads; the first free
  // one claims it and the other's copy returns at once. Each lane thus prepares its own images between its forwards:
  // host work taken from the cores by other threads would slow one lane more than the other, at random, and the lane
  // left behind would finish the list alone. The last image runs Full instead (both lanes' threads) where that ends
  // sooner than on its lane (lane_clock.hpp), if that frame's Full plan is at hand (planning it costs more than the
  // wait it saves).
  struct LaneJob {
    std::atomic<bool> claimed{false};
    Source source;
    engine::MemoryBudget::Ticket ticket;
    std::promise<Features> result;
  };
  // The copies of the images' tasks not known to have run. run_each returns once every image's task has run; a copy
  // that finds its image claimed touches nothing but its job, so a list does not wait for the other lane to reach
  // it, except on the way out after an exception (drain), where every copy is waited for. Those that have run are
  // dropped as the list goes (a long list would otherwise hold two futures per image).
  std::deque<std::future<void>> copies;
  auto submit_to_lanes = [&](std::size_t k, Source src, engine::MemoryBudget::Ticket ticket) {
    auto job = std::make_shared<LaneJob>();
    job->source = std::move(src);
    job->ticket = std::move(ticket);
    std::future<Features> result = job->result.get_future();
    const bool last = k + 1 == images.size();
    for (const engine::Lane lane : {engine::Lane::Half0, engine::Lane::Half1}) {
      auto task = [this, &params, &prepare_one, &post_one, job, lane, last] {
        if (job->claimed.exchange(true)) return;
        const int slot = engine::NetworkPlans::slot_of(lane);
        lane_clock_.preparing(slot);
        try {
          auto p = std::make_shared<Prepared>(prepare_one(std::move(job->source), std::move(job->ticket)));
          const double pixels = double(p->frame_w) * double(p->frame_h);
          const engine::Lane use = last && networks_->cached(p->frame_w, p->frame_h, engine::Lane::Full) &&
                                           lane_clock_.full_ends_sooner(slot, pixels)
                                       ? engine::Lane::Full
                                       : lane;
          try {
            network(*p, params, false, use);
          } catch (...) {
            release(*p);
            throw;
          }
          Features f = post_one(p);
          lane_clock_.idle(slot);
          job->result.set_value(std::move(f));
        } catch (...) {
          lane_clock_.idle(slot);
          job->result.set_exception(std::current_exception());
        }
      };
      if (lane == engine::Lane::Half0) {
        copies.push_back(lane_thread(lane).submit(std::move(task), rank));  // may throw: nothing queued
      } else {
        try {
          copies.push_back(lane_thread(lane).submit(std::move(task), rank));
        } catch (...) {  // the first lane's copy runs it
        }
      }
    }
    done[k] = std::move(result);
    while (!copies.empty() && copies.front().wait_for(std::chrono::seconds(0)) == std::future_status::ready)
      copies.pop_front();
  };
  auto admit_and_submit = [&](std::size_t k, bool wait) -> bool {
    try {
      Source src = source_of(images[k]);
      const engine::MemoryBudget::Claim claim = claim_of(src, params);
      engine::MemoryBudget::Ticket t = wait ? budget_->admit(claim, src.what) : budget_->try_admit(claim, src.what);
      if (!t.held()) return false;
      if (lanes) {
        submit_to_lanes(k, std::move(src), std::move(t));
      } else {
        pending[k] = workers->submit([&prepare_one, s = std::move(src),
                                      t = std::move(t)]() mutable { return prepare_one(std::move(s), std::move(t)); },
                                     rank);
      }
    } catch (const Error& e) {
      out[k] = e;
      failed_early[k] = 1;
    } catch (const std::bad_alloc&) {
      out[k] = oom(k);
      failed_early[k] = 1;
    }
    return true;
  };
  std::size_t collected = 0;  // the results of images [0, collected) are in `out` (or went to the sink)
  auto collect_one = [&] {
    if (done[collected].valid()) {
      try {
        out[collected] = done[collected].get();
      } catch (const Error& e) {
        fail(collected, e);
      } catch (const std::bad_alloc&) {
        fail(collected, oom(collected));
      }
    }
    if (sink) (*sink)(collected, std::move(out[collected]));
    ++collected;
  };
  auto collect_upto = [&](std::size_t limit) {
    while (collected < limit) collect_one();
  };
  // Also the results of images before `limit` (all handed over: a task, or failed) that are ready now, so that a sink
  // gets them while the network runs the next images rather than `ahead` images later.
  auto collect_ready = [&](std::size_t limit) {
    while (collected < limit &&
           (!done[collected].valid() || done[collected].wait_for(std::chrono::seconds(0)) == std::future_status::ready))
      collect_one();
  };
  // Every task refers to this frame (prepare_one, post_one, `params`) and to the caller's `images`: whatever leaves
  // here (a failed submit, an exception that is not an Error) first waits for every task submitted (issue 19 §4).
  auto drain = [&]() noexcept {
    for (std::size_t k = 0; k < submitted; ++k) {
      if (!pending[k].valid()) continue;
      try {
        Prepared p = pending[k].get();
        release(p);
      } catch (...) {  // the task's own failure: what is propagating is the reason to drain
      }
    }
    for (auto& d : done)
      if (d.valid()) d.wait();
    for (auto& c : copies) c.wait();
  };
  try {
    for (std::size_t i = 0; i < images.size(); ++i) {
      if (!stop && submitted == i) {
        admit_and_submit(i, /*wait=*/true);
        ++submitted;
      }
      while (!stop && submitted < std::min(images.size(), i + 1 + ahead) && admit_and_submit(submitted, false))
        ++submitted;
      if (i >= ahead) collect_upto(i - ahead);
      collect_ready(i);
      if (failed_early[i]) stop = stop || stop_at_first_error;
      // In lanes, or failed before its task (out[i] says why), or never queued after a stop.
      if (!pending[i].valid()) continue;
      try {
        auto p = std::make_shared<Prepared>(pending[i].get());
        if (stop) {
          release(*p);
          continue;  // drain the futures that were submitted (they reference `images`)
        }
        try {
          network(*p, params, false);
        } catch (...) {
          release(*p);
          throw;
        }
        done[i] = workers->submit([&post_one, p] { return post_one(p); }, rank);
      } catch (const Error& e) {
        fail(i, e);
      } catch (const std::bad_alloc&) {
        fail(i, oom(i));
      }
    }
    collect_upto(images.size());
  } catch (...) {
    drain();
    throw;
  }
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
    Prepared p = prepare(source_of(ImageInput::image(im)), rp);
    finish(p, rp, reuse);
    release(p);
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
    // libjpeg / libpng need no set-up comparable to Pillow's plug-in import; decoding a small PNG once faults in
    // the decoder code and its tables. From memory, not a temporary file: processes started together (bench's
    // workers; ASan gives them the same heap addresses) must not share a path.
    step("decoder:" + d, [&] {
      if (d != "png") return;
      // An 8 x 8 gray ramp: signature, IHDR, one zlib IDAT, IEND (written by Python's zlib and struct).
      static constexpr std::uint8_t kPng[] = {
          0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00,
          0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x08, 0x08, 0x00, 0x00, 0x00, 0x00, 0xe1, 0x64, 0xe1, 0x57, 0x00,
          0x00, 0x00, 0x3b, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x60, 0x50, 0x70, 0x48, 0x68, 0x58, 0x70,
          0xe0, 0x01, 0x03, 0x87, 0x86, 0x47, 0x46, 0xc7, 0x8a, 0x13, 0x2f, 0x18, 0x04, 0x0c, 0x02, 0x0a, 0x26,
          0x6c, 0xb8, 0xf0, 0x81, 0x41, 0xc2, 0x22, 0xa2, 0x62, 0xc6, 0x8e, 0x1b, 0x3f, 0xe0, 0x4a, 0x18, 0xa0,
          0x4a, 0x38, 0x18, 0xa0, 0x4a, 0x04, 0x18, 0xa0, 0x4a, 0x24, 0x00, 0x2a, 0x04, 0x1f, 0x01, 0xf3, 0x86,
          0xe3, 0xff, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
      const Image im = decode_image(kPng, "<warm-up PNG>");
      if (im.width != 8 || im.height != 8) throw Error(ErrorKind::Internal, "warm-up PNG decoded to the wrong size");
    });
  }
  if (spec.num_workers > 0) {
    step("workers:" + std::to_string(spec.num_workers), [&] {
      engine::ThreadPool& tp = worker_pool(spec.num_workers);
      std::vector<std::future<void>> fs;
      for (int i = 0; i < tp.size(); ++i) fs.push_back(tp.submit([] {}));
      for (auto& f : fs) f.get();
      // Lists run their forwards in the half lanes: plan and fault in both (the default frame) on their threads.
      if (list_lanes()) {
        const ResolvedParams rp = resolve(params);
        std::vector<std::future<void>> ls;
        auto wait_all = [&ls] {  // every task, before an error leaves this frame (the tasks refer to it)
          for (auto& f : ls) f.wait();
        };
        try {
          for (const engine::Lane lane : {engine::Lane::Half0, engine::Lane::Half1})
            ls.push_back(lane_thread(lane).submit([&, lane] {
              Prepared p = prepare(source_of(ImageInput::image(base)), rp);
              try {
                network(p, rp, false, lane);
              } catch (...) {
                release(p);
                throw;
              }
              release(p);
            }));
        } catch (...) {
          wait_all();
          throw;
        }
        wait_all();
        for (auto& f : ls) f.get();
      }
    });
  }
  return steps;
}

}  // namespace superpoint_rt
