// The worker pool of list requests is shared by concurrent calls with different num_workers: a call that asks for
// more workers than the pool has must not pull the pool out from under a call still submitting to it (issue 14 §2:
// Engine::pool() used to replace the pool, and a concurrent run_each kept submitting to the destroyed one: a
// use-after-free that the ASan build reports as heap-use-after-free in ThreadPool::submit; without ASan the freed
// pool's memory is usually reused by its replacement at the same address, so the release build rarely shows it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.hpp"
#include "engine/thread_pool.hpp"
#include "superpoint_rt/superpoint.hpp"

using namespace superpoint_rt;

TEST(Pool, ListsKeepTheirWorkersWhileOtherCallsGrowThePool) {
  // Tiny images: the host stages are cheap, and the network (one image at a time) paces the lists, which submit the
  // next image to the pool after each network run.
  std::vector<std::uint8_t> px(16 * 12);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>(i * 37 % 251);
  const std::vector<ImageInput> list(5, ImageInput::pixels(ImageView::gray(px.data(), 16, 12)));

  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 2;
  o.warmup = WarmupSpec::none();
  SuperPoint m = SuperPoint::from_pretrained(o);
  const Features ref = m.run(list[0]);

  std::atomic<int> errors{0}, mismatches{0}, lists_running{0};
  std::atomic<bool> started{false};
  std::vector<std::thread> ts;
  // Lists with 1 and 2 workers (prepared up to 2 and 3 images ahead: the rest is submitted while they run) ...
  for (const int workers : {1, 2}) {
    ++lists_running;
    ts.emplace_back([&, workers] {
      try {
        started = true;
        for (const Features& f : m.run(list, {}, workers))
          if (f.scores != ref.scores || f.keypoints != ref.keypoints) ++mismatches;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "list with " << workers << " workers: " << e.what();
        ++errors;
      }
      --lists_running;
    });
  }
  // ... while another thread keeps asking for more workers (warm-up step "workers:N" and a list with N workers both
  // take the pool through Engine::pool(N)), up to 16.
  ts.emplace_back([&] {
    while (!started) std::this_thread::yield();
    for (int n = 3; n <= 16 && lists_running > 0; ++n) {
      try {
        WarmupSpec s = WarmupSpec::none();
        s.num_workers = n;
        m.warmup(s);
        if (n % 4 == 0)  // a list with more workers grows the pool too
          for (const Features& f : m.run(std::vector<ImageInput>(2, list[0]), {}, n))
            if (f.scores != ref.scores) ++mismatches;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "growing the pool to " << n << " workers: " << e.what();
        ++errors;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// Tasks run the lowest rank first and, within a rank, in submission order; unranked tasks after every ranked one.
// (Lists rank their tasks by when they started, so that of two lists in flight the earlier one finishes first.)
TEST(Pool, RunsTheLowestRankFirstThenInSubmissionOrder) {
  engine::ThreadPool pool(1);
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  auto blocker = pool.submit([opened] { opened.wait(); });  // holds the one worker while the others queue
  std::vector<char> ran;                                    // written by the one worker only
  std::vector<std::future<void>> fs;
  const std::uint64_t u = engine::ThreadPool::kUnranked;
  const std::vector<std::pair<char, std::uint64_t>> jobs = {{'a', 7}, {'b', u}, {'c', 2}, {'d', 7},
                                                            {'e', 2}, {'f', u}, {'g', 0}};
  for (const auto& [name, rank] : jobs) fs.push_back(pool.submit([&ran, name = name] { ran.push_back(name); }, rank));
  open.set_value();
  blocker.get();
  for (auto& f : fs) f.get();
  EXPECT_EQ(std::string(ran.begin(), ran.end()), "gceadbf");
}
