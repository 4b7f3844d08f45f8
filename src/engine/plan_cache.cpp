// ResizePlans and NetworkPlans: see plan_cache.hpp.
#include "engine/plan_cache.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace superpoint_rt::engine {

std::shared_ptr<const image::ResizePlan> ResizePlans::get(int in_w, int in_h, int out_w, int out_h) {
  const Key key{in_w, in_h, out_w, out_h};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) {
      it->second.used = ++clock_;
      return it->second.plan;
    }
  }
  // Built outside the lock (a large plan takes a while). A size the plan refuses (kMaxResizePlanBytes: extreme
  // aspect ratios) throws here and leaves nothing behind in the cache.
  auto plan = std::make_shared<const image::ResizePlan>(in_w, in_h, out_w, out_h);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) {  // another thread built it meanwhile
    it->second.used = ++clock_;
    return it->second.plan;
  }
  if (plan->bytes > kMaxBytes) return plan;
  while (!plans_.empty() && (plans_.size() >= kMaxPlans || bytes_ + plan->bytes > kMaxBytes)) {
    const auto victim = std::min_element(plans_.begin(), plans_.end(),
                                         [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    bytes_ -= victim->second.plan->bytes;
    plans_.erase(victim);
  }
  plans_[key] = {plan, ++clock_};
  bytes_ += plan->bytes;
  return plan;
}

void ResizePlans::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  plans_.clear();
  bytes_ = 0;
}

backend::PlanOptions NetworkPlans::options_of(int width, int height, Lane lane) const {
  backend::PlanOptions po;
  po.height = height;
  po.width = width;
  po.threads = lane == Lane::Full ? 0 : std::max(1, backend_.threads() / 2);
  po.slot = slot_of(lane);
  return po;
}

std::shared_ptr<backend::Executor> NetworkPlans::get(int width, int height, Lane lane) {
  const auto key = std::make_tuple(width, height, lane);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) {
      it->second.used = ++clock_;
      return it->second.executor;
    }
  }
  // Planning (oneDNN's primitives and weight layouts, ~0.1-0.3 s) runs outside the lock: other frames are served
  // meanwhile, and the network keeps running. The workspace is not touched until the plan runs.
  std::shared_ptr<backend::Executor> ex = backend_.plan(options_of(width, height, lane));
  std::vector<std::shared_ptr<backend::Executor>> evicted;  // let go after the lock (a destructor may wait for a run)
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) {  // planned meanwhile by another request: use that one
    it->second.used = ++clock_;
    return it->second.executor;
  }
  while (plans_.size() >= kMaxPlans) {
    const auto victim = std::min_element(plans_.begin(), plans_.end(),
                                         [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    evicted.push_back(std::move(victim->second.executor));  // holders keep it; the workspace shrinks after the last
    plans_.erase(victim);
  }
  plans_[key] = {ex, ++clock_};
  return ex;
}

bool NetworkPlans::cached(int width, int height, Lane lane) const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.count(std::make_tuple(width, height, lane)) != 0;
}

std::size_t NetworkPlans::resident_bytes() const {
  std::size_t total = backend_.workspace_bytes() + backend_.weights_bytes();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, e] : plans_) total += e.executor->plan_bytes();
  return total;
}

std::size_t NetworkPlans::workspace_claim(int width, int height) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Per cached frame, what its forwards hold at once: the largest plan of each workspace slot, summed (a list in
  // lanes runs Half0 and Half1 side by side; the Full lane shares slot 0 with Half0).
  std::map<std::pair<int, int>, std::array<std::size_t, backend::kWorkspaceSlots>> frames;
  for (const auto& [key, e] : plans_) {
    std::size_t& slot =
        frames[{std::get<0>(key), std::get<1>(key)}][static_cast<std::size_t>(slot_of(std::get<2>(key)))];
    slot = std::max(slot, e.executor->workspace_bytes());
  }
  auto total = [](const std::array<std::size_t, backend::kWorkspaceSlots>& slots) {
    std::size_t t = 0;
    for (const std::size_t s : slots) t += s;
    return t;
  };
  if (const auto it = frames.find({width, height}); it != frames.end()) return total(it->second);
  const double pixels = double(width) * height;
  double per_pixel = 0;
  std::size_t floor = 0;
  for (const auto& [frame, slots] : frames) {
    const double px = double(frame.first) * frame.second;
    const std::size_t ws = total(slots);
    // A small frame's workspace is mostly fixed costs (an 8 x 8 frame needs 6.8 KB per pixel, 640 x 480 about 250
    // B): its rate would make any large frame look too large for the budget, so only frames of kRatePixels or more
    // give the rate, and a smaller cached frame only the least this one needs.
    if (px >= kRatePixels) per_pixel = std::max(per_pixel, double(ws) / px);
    if (px <= pixels) floor = std::max(floor, ws);
  }
  if (per_pixel == 0) per_pixel = kDefaultBytesPerPixel;
  return std::max(floor, static_cast<std::size_t>(per_pixel * pixels));
}

void NetworkPlans::clear() {
  std::map<std::tuple<int, int, Lane>, Entry> drop;
  std::lock_guard<std::mutex> lock(mu_);
  drop.swap(plans_);
}

}  // namespace superpoint_rt::engine
