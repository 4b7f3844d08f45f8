// Every multi-threaded OpenMP region of an engine opens on its compute thread (engine.hpp), whichever thread calls:
// libgomp gives every thread that opens a region a team of its own, and once it manages more threads than there are
// cores it stops spinning at barriers (its forwards then sleep and wake at each one). A server's request threads
// used to own one team each.
//
// Observable: a team is a thread that lives as long as the thread that opened it. Four callers that each ran a
// single request (a JPEG: the network and the split decode) and are still alive add four threads to the process, not
// eight. Their results have the bits of the same request made from the loading thread.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.hpp"
#include "engine/engine.hpp"
#include "superpoint_rt/superpoint.hpp"

using namespace superpoint_rt;

namespace {

std::size_t process_threads() {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)e;
    ++n;
  }
  return n;
}

}  // namespace

TEST(ComputeThread, CallersOnManyThreadsShareOneOpenMPTeam) {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 2;
  o.warmup = WarmupSpec::none();
  Engine engine(o);
  const std::vector<std::uint8_t> jpeg = sprt_test::read_bytes(sprt_test::shared_jpegs().front());
  const ImageInput image = ImageInput::bytes(jpeg, "a.jpg");  // a view: `jpeg` outlives it
  const Features alone = engine.run(image, Params{});
  const std::size_t before = process_threads();

  constexpr int kCallers = 4;
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  bool release = false;
  std::vector<int> same(kCallers, 0);
  std::vector<std::string> errors(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      try {
        const Features f = engine.run(image, Params{});
        same[static_cast<std::size_t>(c)] =
            f.keypoints == alone.keypoints && f.scores == alone.scores && f.descriptors == alone.descriptors;
      } catch (const std::exception& e) {  // reported, not thrown out of the thread
        errors[static_cast<std::size_t>(c)] = e.what();
      }
      std::unique_lock<std::mutex> lock(mu);
      ++finished;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });  // alive while the threads are counted
    });
  std::size_t during = 0;
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished == kCallers; });
    during = process_threads();
    release = true;
  }
  cv.notify_all();
  for (auto& t : callers) t.join();
  EXPECT_EQ(during, before + kCallers) << "each caller that ran a request holds an OpenMP team of its own";
  for (int c = 0; c < kCallers; ++c)
    EXPECT_TRUE(same[static_cast<std::size_t>(c)]) << "caller " << c << " " << errors[static_cast<std::size_t>(c)];
}
