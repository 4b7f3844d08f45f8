// See lane_clock.hpp.
#include "engine/lane_clock.hpp"

#include <algorithm>

namespace superpoint_rt::engine {

namespace {
double ms_between(LaneClock::Clock::time_point a, LaneClock::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

void LaneClock::preparing(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  lanes_[static_cast<std::size_t>(slot & 1)] = {true, true, {}, 0};
}

void LaneClock::started(int slot, double pixels, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  lanes_[static_cast<std::size_t>(slot & 1)] = {true, false, now, pixels};
}

void LaneClock::idle(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  lanes_[static_cast<std::size_t>(slot & 1)] = {};
}

void LaneClock::finished(int slot, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Lane& l = lanes_[static_cast<std::size_t>(slot & 1)];
  if (!l.busy || l.preparing) return;
  l.busy = false;
  if (l.pixels <= 0) return;
  const double rate = ms_between(l.since, now) / l.pixels;
  // A quarter of each new forward: one forward slowed by the host work, or by another process, moves it little.
  ms_per_pixel_ = ms_per_pixel_ == 0 ? rate : 0.75 * ms_per_pixel_ + 0.25 * rate;
}

bool LaneClock::full_ends_sooner(int slot, double pixels, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (ms_per_pixel_ == 0) return false;
  const Lane& other = lanes_[static_cast<std::size_t>((slot & 1) ^ 1)];
  if (other.preparing) return false;
  const double left = other.busy ? std::max(0.0, other.pixels * ms_per_pixel_ - ms_between(other.since, now)) : 0.0;
  const double half = pixels * ms_per_pixel_;
  return left + kFullShare * half < half;
}

}  // namespace superpoint_rt::engine
