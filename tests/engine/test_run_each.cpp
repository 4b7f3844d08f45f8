// Engine::run_each must not return while tasks it queued still run (issue 19 §4): they reference the caller's
// images and run_each's own stack (the prepare and post-processing lambdas, the params). When submit() throws (a
// failed allocation; here the pool's test hook) or an exception that is not an Error escapes, every submitted task
// is waited for before the exception leaves run_each.
//
// The pool's test hook holds one of the list's jobs back behind a gate that opens 300 ms after the injected failure:
// run_each may only return once that job has run. Before the fix the exception left at once (the gate still shut;
// the job then called a destroyed lambda: the test program crashed right after the failure).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.hpp"
#include "engine/engine.hpp"
#include "engine/thread_pool.hpp"
#include "superpoint_rt/superpoint.hpp"

using namespace superpoint_rt;

namespace {

struct SubmitFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Options small_options(const std::string& precision = "fp32") {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 2;
  o.precision = precision;
  o.warmup = WarmupSpec::none();
  return o;
}

bool runs_here(const std::string& precision) {
  for (const PrecisionReport& r : precisions_on_this_cpu())
    if (r.precision == precision) return r.runs;
  return false;
}

// A gate that opens 300 ms after `failed` turns true (the injected failure).
struct Gate {
  std::atomic<bool> failed{false}, open{false};
  std::thread opener{[this] {
    while (!failed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    open = true;
  }};
  ~Gate() {
    failed = true;  // opens even if nothing failed
    opener.join();
  }
  // `job`, held back until the gate opens.
  std::function<void()> hold(std::function<void()> job) {
    return [this, job = std::move(job)] {
      while (!open) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      job();
    };
  }
};

// Runs the list with the hook on the worker pool (lists without lanes) or on the first lane's thread (lists in lanes,
// where each image's task is queued on both lane threads): the `held`-th submit's job is held back, the `fails`-th
// submit throws.
void expect_waits(int workers, int held, int fails, bool stop_at_first_error, const std::string& precision = "fp32") {
  Engine engine(small_options(precision));
  const auto jpeg = sprt_test::read_bytes(sprt_test::shared_jpegs().front());
  std::vector<ImageInput> images;
  for (int i = 0; i < 5; ++i) images.push_back(ImageInput::bytes(jpeg, "image" + std::to_string(i) + ".jpg"));
  engine::ThreadPool& pool =
      engine.list_lanes() ? engine.lane_thread(engine::Lane::Half0) : engine.worker_pool(workers);
  Gate gate;
  int submits = 0;
  pool.set_submit_hook([&](std::function<void()>& job) {
    ++submits;
    if (submits == held) job = gate.hold(std::move(job));
    if (submits == fails) {
      gate.failed = true;
      throw SubmitFailure("injected: submit " + std::to_string(fails) + " fails");
    }
  });
  bool thrown = false;
  try {
    engine.run_each(images, Params{}, workers, stop_at_first_error);
  } catch (const SubmitFailure&) {
    thrown = true;
    EXPECT_TRUE(gate.open.load()) << "run_each returned while a job it queued was still held back";
  }
  pool.set_submit_hook({});
  EXPECT_TRUE(thrown);
  // The engine is still usable: a list runs to the end.
  const auto again = engine.run_each(images, Params{}, workers, false);
  ASSERT_EQ(again.size(), images.size());
  for (const auto& r : again) EXPECT_TRUE(std::holds_alternative<Features>(r));
}

}  // namespace

TEST(RunEach, WaitsForItsTasksWhenSubmitThrows) {
  // The first preparation is held back; the second image's submit fails (outside any per-image handling).
  expect_waits(2, 1, 2, false);
}

TEST(RunEach, WaitsForItsTasksWhenAForeignExceptionEscapes) {
  // One worker: images 0-2 are queued (submits 1-3), image 0 runs through the network, and the 4th submit (its
  // post-processing) fails while image 1's preparation (submit 2) is held back.
  expect_waits(1, 2, 4, true);
}

// int8 on two threads: lists run their forwards in the two half lanes (both lanes' workspaces are smaller than twice
// the single forward's). Each image's outputs are those of a single request (Lane::Full), bit for bit, in input
// order, with per-image errors in their places and the first one thrown by a stopping list.
TEST(RunEach, LanesGiveEachImageTheBitsOfASingleRequest) {
  if (!runs_here("int8")) GTEST_SKIP() << "int8 does not run on this CPU (or under SUPERPOINT_RT_ISA)";
  Engine engine(small_options("int8"));
  ASSERT_TRUE(engine.list_lanes()) << "int8 at two threads is expected to run lists in lanes";
  std::vector<ImageInput> images;
  std::vector<bool> bad;
  for (const std::string& path : sprt_test::shared_jpegs()) {
    if (images.size() == 3) {
      images.push_back(ImageInput::file("/no/such/lane.jpg"));
      bad.push_back(true);
    }
    images.push_back(ImageInput::file(path));
    bad.push_back(false);
    if (images.size() >= 8) break;
  }
  ASSERT_GE(images.size(), 5u);
  std::vector<Features> single(images.size());
  for (std::size_t i = 0; i < images.size(); ++i)
    if (!bad[i]) single[i] = engine.run(images[i], Params{});
  for (int workers : {1, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    const auto r = engine.run_each(images, Params{}, workers, false);
    ASSERT_EQ(r.size(), images.size());
    for (std::size_t i = 0; i < images.size(); ++i) {
      if (bad[i]) {
        ASSERT_TRUE(std::holds_alternative<Error>(r[i])) << i;
        EXPECT_NE(std::string(std::get<Error>(r[i]).what()).find("/no/such/lane.jpg"), std::string::npos);
        continue;
      }
      ASSERT_TRUE(std::holds_alternative<Features>(r[i])) << i;
      const Features& f = std::get<Features>(r[i]);
      EXPECT_EQ(f.keypoints, single[i].keypoints) << i;
      EXPECT_EQ(f.scores, single[i].scores) << i;
      EXPECT_EQ(f.descriptors, single[i].descriptors) << i;
    }
    try {
      engine.run_each(images, Params{}, workers, true);
      ADD_FAILURE() << "a stopping list with a missing file returned";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/no/such/lane.jpg"), std::string::npos) << e.what();
    }
  }
}

TEST(RunEach, WaitsForItsTasksWhenSubmitThrowsInLanes) {
  if (!runs_here("int8")) GTEST_SKIP() << "int8 does not run on this CPU (or under SUPERPOINT_RT_ISA)";
  // The first lane's copy of image 0 is held back (the second lane runs the image); image 1's first submit fails.
  expect_waits(2, 1, 2, false, "int8");
}

// Concurrent single requests (each on every thread: both workspace slots) beside a list in lanes (one slot each):
// every result has the bits of the same request alone.
TEST(RunEach, ConcurrentRequestsAndListsInLanesGiveTheSameBits) {
  if (!runs_here("int8")) GTEST_SKIP() << "int8 does not run on this CPU (or under SUPERPOINT_RT_ISA)";
  Engine engine(small_options("int8"));
  ASSERT_TRUE(engine.list_lanes());
  const std::vector<std::string> paths = sprt_test::shared_jpegs();
  ASSERT_GE(paths.size(), 3u);
  std::vector<ImageInput> images;
  std::vector<Features> alone;
  for (std::size_t i = 0; i < 3; ++i) {
    images.push_back(ImageInput::file(paths[i]));
    alone.push_back(engine.run(images.back(), Params{}));
  }
  auto same = [](const Features& a, const Features& b) {
    return a.keypoints == b.keypoints && a.scores == b.scores && a.descriptors == b.descriptors;
  };
  std::atomic<int> mismatches{0}, runs{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) {
        const std::size_t i = static_cast<std::size_t>(t + r) % images.size();
        try {
          if (!same(engine.run(images[i], Params{}), alone[i])) ++mismatches;
        } catch (const std::exception&) {  // counted, not thrown out of the thread
          ++mismatches;
        }
        ++runs;
      }
    });
  ts.emplace_back([&] {
    try {
      const auto list = engine.run_each(images, Params{}, 2, false);
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto* f = std::get_if<Features>(&list[i]);
        if (!f || !same(*f, alone[i])) ++mismatches;
        ++runs;
      }
    } catch (const std::exception&) {
      ++mismatches;
    }
  });
  for (auto& t : ts) t.join();
  EXPECT_EQ(runs.load(), 15);
  EXPECT_EQ(mismatches.load(), 0);
}
