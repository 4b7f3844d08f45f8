// The public SuperPoint handle, Params validation and small public helpers; the work is in engine.cpp.
#include <cmath>
#include <sstream>

#include "engine/engine.hpp"
#include "engine/memory_budget.hpp"
#include "image/decode_cv2.hpp"
#include "superpoint_rt/params.hpp"
#include "superpoint_rt/superpoint.hpp"

#ifndef SUPERPOINT_RT_VERSION
#define SUPERPOINT_RT_VERSION "0.0.0"
#endif

namespace superpoint_rt {

const char* version() noexcept {
  return SUPERPOINT_RT_VERSION;
}

Image decode_file_as(const std::string& path, const Params& params, std::int64_t max_pixels) {
  const ResolvedParams r = resolve(params);
  if (r.pixels == PixelPath::Hf) return decode_file(path, max_pixels);
  const std::vector<std::uint8_t> bytes = read_file(path);
  return image::decode_image_cv2(bytes, path, max_pixels,
                                 r.pixels == PixelPath::CvGray ? image::Cv2Read::Grayscale : image::Cv2Read::Color,
                                 r.exif_orientation ? image::Cv2Orientation::Apply : image::Cv2Orientation::Ignore);
}

WarmupSpec WarmupSpec::all() {
  WarmupSpec s;
  s.nms_radii.clear();
  for (int r = 0; r <= Params::kNmsRadiusMax; ++r) s.nms_radii.push_back(r);
  s.decoders = {"jpeg", "png", "gif", "bmp", "webp", "tiff", "pnm"};
  return s;
}

std::string ImageInput::describe() const {
  if (const auto* p = std::get_if<Path>(&source)) return p->path;
  if (const auto* b = std::get_if<Bytes>(&source)) return b->name;
  if (const auto* v = std::get_if<ImageView>(&source))
    return "<pixels " + std::to_string(v->width) + "x" + std::to_string(v->height) + " " + to_string(v->format) + ">";
  const Image* im = std::get<const Image*>(source);
  if (!im) return "<null image>";
  return "<image " + std::to_string(im->width) + "x" + std::to_string(im->height) + ">";
}

std::int64_t memory_budget_bytes(std::int64_t memory_budget_mb) {
  return memory_budget_mb > 0 ? memory_budget_mb << 20
                              : static_cast<std::int64_t>(engine::default_memory_budget_bytes());
}

SuperPoint SuperPoint::from_pretrained(const Options& options) {
  return SuperPoint(std::make_shared<Engine>(options));
}

namespace {
Engine& live(const std::shared_ptr<Engine>& e) {
  if (!e || e->closed()) throw Error(ErrorKind::Closed, "the model is closed");
  return *e;
}
}  // namespace

Features SuperPoint::run(const ImageInput& image, const Params& params) const {
  return live(engine_).run(image, params);
}

std::vector<Features> SuperPoint::run(std::span<const ImageInput> images, const Params& params, int num_workers) const {
  auto results = live(engine_).run_each(images, params, num_workers, /*stop_at_first_error=*/true);
  std::vector<Features> out;
  out.reserve(results.size());
  for (auto& r : results) out.push_back(std::move(std::get<Features>(r)));
  return out;
}

std::vector<std::variant<Features, Error>> SuperPoint::run_each(std::span<const ImageInput> images,
                                                                const Params& params, int num_workers) const {
  return live(engine_).run_each(images, params, num_workers, /*stop_at_first_error=*/false);
}

void SuperPoint::run_each(std::span<const ImageInput> images, const Params& params, int num_workers,
                          const ResultSink& sink) const {
  if (!sink) throw Error(ErrorKind::InvalidArgument, "run_each: the result sink is empty");
  live(engine_).run_each(images, params, num_workers, /*stop_at_first_error=*/false, &sink);
}

std::map<std::string, double> SuperPoint::warmup(const WarmupSpec& spec) const {
  return live(engine_).warmup(spec);
}

MemoryEstimate SuperPoint::estimate_memory(const ImageInput& image, const Params& params) const {
  return live(engine_).estimate(image, params);
}

// The engine is kept alive by its claims: the budget a ticket returns to is the engine's.
struct MemoryClaim::State {
  std::shared_ptr<Engine> engine;
  engine::MemoryBudget::Ticket ticket;
  std::int64_t bytes = 0;
};

MemoryClaim::MemoryClaim() noexcept = default;
MemoryClaim::~MemoryClaim() = default;
MemoryClaim::MemoryClaim(MemoryClaim&& other) noexcept = default;
MemoryClaim& MemoryClaim::operator=(MemoryClaim&& other) noexcept = default;

bool MemoryClaim::held() const noexcept {
  return state_ && state_->ticket.held();
}

std::int64_t MemoryClaim::bytes() const noexcept {
  return held() ? state_->bytes : 0;
}

void MemoryClaim::reset() noexcept {
  state_.reset();
}

MemoryClaim SuperPoint::claim_memory(std::int64_t bytes, const std::string& what) const {
  Engine& e = live(engine_);
  if (bytes < 0)
    throw Error(ErrorKind::InvalidArgument,
                "claim_memory: " + what + " claims " + std::to_string(bytes) + " bytes (must be >= 0)");
  MemoryClaim c;
  engine::MemoryBudget::Ticket t = e.memory_budget().try_admit({static_cast<std::size_t>(bytes), 0}, what);
  if (!t.held()) return c;
  c.state_ = std::make_unique<MemoryClaim::State>(MemoryClaim::State{engine_, std::move(t), bytes});
  return c;
}

void SuperPoint::close() {
  if (engine_) engine_->close();
}

bool SuperPoint::closed() const noexcept {
  return !engine_ || engine_->closed();
}

const ModelInfo& SuperPoint::info() const {
  return live(engine_).info();
}

}  // namespace superpoint_rt
