// engine::LaneClock (lane_clock.hpp): when a list's last image goes to both lanes' threads at once (Lane::Full)
// instead of its half lane. Times are given, not measured: the decisions are exact.
#include <gtest/gtest.h>

#include "engine/lane_clock.hpp"

namespace superpoint_rt::engine {
namespace {

using Clock = LaneClock::Clock;
using std::chrono::milliseconds;

constexpr double kPixels = 640.0 * 480.0;

// Lane 1 ran one forward of kPixels in `ms`: the rate is ms / kPixels.
void learn(LaneClock& c, Clock::time_point t0, int ms) {
  c.started(1, kPixels, t0);
  c.finished(1, t0 + milliseconds(ms));
}

TEST(LaneClock, NoRateYetKeepsTheHalfLane) {
  LaneClock c;
  EXPECT_FALSE(c.full_ends_sooner(0, kPixels));
}

TEST(LaneClock, TheOtherLaneIdleGivesFull) {
  LaneClock c;
  const Clock::time_point t0{};
  learn(c, t0, 80);
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t0 + milliseconds(100)));
  EXPECT_TRUE(c.full_ends_sooner(1, kPixels, t0 + milliseconds(100)));
}

TEST(LaneClock, FullOnlyWhereTheOtherLaneIsNearlyDone) {
  LaneClock c;
  const Clock::time_point t0{};
  learn(c, t0, 80);  // 80 ms per kPixels forward
  const Clock::time_point t1 = t0 + milliseconds(200);
  c.started(1, kPixels, t1);  // lane 1 busy from t1: 80 ms expected
  // Lane 0's last image would take 80 ms on its half lane, or the other lane's rest + 0.7 * 80 = rest + 56 in Full:
  // Full ends sooner while the rest is under 24 ms, i.e. from 56 ms into lane 1's forward.
  EXPECT_FALSE(c.full_ends_sooner(0, kPixels, t1 + milliseconds(10)));
  EXPECT_FALSE(c.full_ends_sooner(0, kPixels, t1 + milliseconds(50)));
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t1 + milliseconds(60)));
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t1 + milliseconds(79)));
  // Past its expected end the other lane counts as nearly done, not as negative time.
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t1 + milliseconds(120)));
  // A small last image is not worth waiting for the other lane: a quarter of the pixels takes 20 ms on its lane.
  EXPECT_FALSE(c.full_ends_sooner(0, kPixels / 4, t1 + milliseconds(60)));
  // Once lane 1 is done it is idle: Full.
  c.finished(1, t1 + milliseconds(80));
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels / 4, t1 + milliseconds(81)));
}

// A lane that took an image and prepares it has a whole forward ahead: a Full forward would hold it up.
TEST(LaneClock, TheOtherLanePreparingKeepsTheHalfLane) {
  LaneClock c;
  const Clock::time_point t0{};
  learn(c, t0, 80);
  c.preparing(1);
  EXPECT_FALSE(c.full_ends_sooner(0, kPixels, t0 + milliseconds(100)));
  c.finished(1, t0 + milliseconds(150));  // no forward ran: neither free nor a rate from it
  EXPECT_FALSE(c.full_ends_sooner(0, kPixels, t0 + milliseconds(150)));
  c.started(1, kPixels, t0 + milliseconds(150));
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t0 + milliseconds(220)));  // 10 ms left: Full
  c.idle(1);
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t0 + milliseconds(160)));
  c.preparing(1);
  c.idle(1);  // gave up on its image
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t0 + milliseconds(160)));
}

TEST(LaneClock, TheRateMovesByAQuarterOfEachForward) {
  LaneClock c;
  const Clock::time_point t0{};
  learn(c, t0, 80);
  learn(c, t0 + milliseconds(100), 160);  // rate: 0.75 * 80 + 0.25 * 160 = 100 ms per kPixels
  const Clock::time_point t1 = t0 + milliseconds(1000);
  c.started(1, kPixels, t1);
  // Full ends sooner while the rest (100 - elapsed) is under 0.3 * 100 = 30 ms: from 70 ms on.
  EXPECT_FALSE(c.full_ends_sooner(0, kPixels, t1 + milliseconds(69)));
  EXPECT_TRUE(c.full_ends_sooner(0, kPixels, t1 + milliseconds(71)));
}

TEST(LaneClock, AForwardThatNeverStartedChangesNothing) {
  LaneClock c;
  c.finished(0);  // no started(): no rate
  EXPECT_FALSE(c.full_ends_sooner(1, kPixels));
}

}  // namespace
}  // namespace superpoint_rt::engine
