// Lists' two half lanes (engine.hpp): what each lane's forward in flight has left, and how long a lane takes per
// frame pixel, so that run_each can give a list's last image to both lanes' threads at once (Lane::Full) where the
// other lane is about to be free anyway.
//
// Why: a list's images go to whichever lane is free first, one forward per lane on half the threads. When the last
// image starts while the other lane is nearly done, that lane's threads would then wait, idle, for a whole
// half-lane forward (the 44-image folder of `superpoint-rt bench`: 85 ms of one core of 2.1 s, int8 on AMD Zen 4).
// A Full forward of the last image, once the other lane is done, ends sooner.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <mutex>

namespace superpoint_rt::engine {

class LaneClock {
 public:
  using Clock = std::chrono::steady_clock;

  /// A Full forward of a frame takes at most this share of a half-lane forward of it (measured 0.60 with int8 on
  /// 2 threads of AMD Zen 4: 51 against 85 ms at 640x480; more threads scale less well, hence the margin).
  static constexpr double kFullShare = 0.7;

  /// A lane (workspace slot 0 or 1) took an image and prepares it: its forward has not started, so it is busy for at
  /// least a whole forward more.
  void preparing(int slot);
  /// A lane starts a forward of a frame of `pixels` at `now`.
  void started(int slot, double pixels, Clock::time_point now = Clock::now());
  /// The lane's forward ended at `now`: its time per pixel updates the lanes' rate.
  void finished(int slot, Clock::time_point now = Clock::now());
  /// The lane is done with its image (or gave up on it): free.
  void idle(int slot);

  /// Whether the last image of a list, of `pixels`, about to start on lane `slot`, should rather run as one Full
  /// forward once the other lane's forward in flight is done: when what that forward has left, by the rate so far,
  /// plus the Full forward (kFullShare of the half-lane one) ends before the half-lane forward would. False until a
  /// lane forward has finished (no rate yet), and while the other lane prepares an image.
  bool full_ends_sooner(int slot, double pixels, Clock::time_point now = Clock::now()) const;

 private:
  struct Lane {
    bool busy = false;
    bool preparing = false;  // busy, its forward not started
    Clock::time_point since{};
    double pixels = 0;
  };
  mutable std::mutex mu_;
  std::array<Lane, 2> lanes_{};
  double ms_per_pixel_ = 0;  // 0 = no lane forward finished yet; else a moving average over the last few
};

}  // namespace superpoint_rt::engine
