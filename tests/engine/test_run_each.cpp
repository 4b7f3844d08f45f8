// Engine::run_each must not return while tasks it queued still run (issue 19 §4): they reference the caller's
// images and run_each's own stack (the prepare lambda, the params). When submit() throws (a failed allocation; here
// the pool's test hook) or an exception that is not an Error escapes, every submitted task is waited for before the
// exception leaves run_each.
//
// The first image is a FIFO whose writer waits, so its prepare task is still blocked in read_file when the second
// submit throws: run_each may only return once the writer has fed it and the task has finished. Before the fix the
// exception left at once (the task then called a destroyed lambda: this program crashed right after the failure).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
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

// Feeds `fifo` with `bytes` 300 ms after `failed` turns true (the injected failure), then closes it (the reader
// sees EOF). Until then the task reading the FIFO cannot end.
std::thread feed_later(const std::string& fifo, const std::vector<std::uint8_t>& bytes, std::atomic<bool>& failed,
                       std::atomic<bool>& fed) {
  return std::thread([fifo, bytes, &failed, &fed] {
    while (!failed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(fifo, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    fed = true;
  });
}

}  // namespace

TEST(RunEach, WaitsForItsTasksWhenSubmitThrows) {
  Engine engine(small_options());
  sprt_test::TempDir tmp;
  const std::string fifo = tmp.file("slow.jpg");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto jpeg = sprt_test::read_bytes(sprt_test::shared_jpegs().front());
  const std::vector<ImageInput> images{ImageInput::file(fifo), ImageInput::bytes(jpeg, "b.jpg"),
                                       ImageInput::bytes(jpeg, "c.jpg")};
  engine::ThreadPool& pool = engine.worker_pool(2);
  int submits = 0;
  std::atomic<bool> failed{false}, fed{false};
  pool.set_submit_hook([&submits, &failed] {
    if (++submits != 2) return;
    failed = true;
    throw SubmitFailure("injected: the second submit fails");
  });
  std::thread writer = feed_later(fifo, jpeg, failed, fed);
  bool thrown = false;
  try {
    engine.run_each(images, Params{}, 2, /*stop_at_first_error=*/false);
  } catch (const SubmitFailure&) {
    thrown = true;
    // The first image's task was still reading the FIFO when submit threw: it can only end after the writer has
    // fed the FIFO, and run_each must have waited for it.
    EXPECT_TRUE(fed.load()) << "run_each returned while its first task still waited for its input";
  }
  failed = true;  // the writer must end even if nothing failed
  writer.join();
  pool.set_submit_hook({});
  EXPECT_TRUE(thrown);
  // The engine is still usable: the list runs to the end.
  const auto again = engine.run_each(std::vector<ImageInput>(3, ImageInput::bytes(jpeg, "d.jpg")), Params{}, 2, false);
  ASSERT_EQ(again.size(), 3u);
  for (const auto& r : again) EXPECT_TRUE(std::holds_alternative<Features>(r));
}

TEST(RunEach, WaitsForItsTasksWhenAForeignExceptionEscapes) {
  // The network stage's submit (post-processing of image 0) fails: images 1.. are being prepared meanwhile.
  Engine engine(small_options());
  sprt_test::TempDir tmp;
  const std::string fifo = tmp.file("slow.jpg");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto jpeg = sprt_test::read_bytes(sprt_test::shared_jpegs().front());
  // Image 0 is ready at once; image 1 (the FIFO) is prepared while image 0's post-processing is submitted.
  const std::vector<ImageInput> images{ImageInput::bytes(jpeg, "a.jpg"), ImageInput::file(fifo),
                                       ImageInput::bytes(jpeg, "c.jpg"), ImageInput::bytes(jpeg, "d.jpg"),
                                       ImageInput::bytes(jpeg, "e.jpg")};
  engine::ThreadPool& pool = engine.worker_pool(1);
  int submits = 0;
  // With one worker, run_each prepares 2 images ahead, then submits image 2's preparation and image 0's
  // post-processing: the 4th submit is that post-processing.
  std::atomic<bool> failed{false}, fed{false};
  pool.set_submit_hook([&submits, &failed] {
    if (++submits != 4) return;
    failed = true;
    throw SubmitFailure("injected: a post-processing submit fails");
  });
  std::thread writer = feed_later(fifo, jpeg, failed, fed);
  bool thrown = false;
  try {
    engine.run_each(images, Params{}, 1, /*stop_at_first_error=*/true);
  } catch (const SubmitFailure&) {
    thrown = true;
    EXPECT_TRUE(fed.load()) << "run_each returned while a queued task still waited for its input";
  }
  failed = true;
  writer.join();
  pool.set_submit_hook({});
  EXPECT_TRUE(thrown);
}
