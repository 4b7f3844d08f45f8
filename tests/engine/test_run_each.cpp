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

Options small_options() {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 2;
  o.warmup = WarmupSpec::none();
  return o;
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

// Runs the list with the hook: the `held`-th submit's job is held back, the `fails`-th submit throws.
void expect_waits(int workers, int held, int fails, bool stop_at_first_error) {
  Engine engine(small_options());
  const auto jpeg = sprt_test::read_bytes(sprt_test::shared_jpegs().front());
  std::vector<ImageInput> images;
  for (int i = 0; i < 5; ++i) images.push_back(ImageInput::bytes(jpeg, "image" + std::to_string(i) + ".jpg"));
  engine::ThreadPool& pool = engine.worker_pool(workers);
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
