// Every multi-threaded OpenMP region of the library opens on the process's compute thread (util/compute_thread.hpp),
// whichever thread calls: libgomp gives every thread that opens a region a team of its own, and once it manages more
// threads than there are cores it stops spinning at barriers (the forwards then sleep and wake at each one). A
// server's request threads used to own one team each, and so did a thread that matched.
//
// Observable: a team is a thread that lives as long as the thread that opened it. Callers that each ran a request,
// or a two-thread match, and are still alive add themselves to the process's threads, and nothing more. Their
// results have the bits of the same call made from the test's own thread.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.hpp"
#include "engine/engine.hpp"
#include "match/gemm.hpp"
#include "match/matcher.hpp"
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

// Runs `call` on `callers` new threads and returns how many threads the process had while they were all done but
// still alive, minus how many it had before. `call` returns whether its result was the expected one.
std::size_t threads_added(int callers, const std::function<bool()>& call, std::vector<std::string>& failures) {
  const std::size_t before = process_threads();
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  bool release = false;
  failures.assign(static_cast<std::size_t>(callers), "");
  std::vector<std::thread> ts;
  for (int c = 0; c < callers; ++c)
    ts.emplace_back([&, c] {
      std::string failure;
      try {
        if (!call()) failure = "a different result";
      } catch (const std::exception& e) {  // reported, not thrown out of the thread
        failure = e.what();
      }
      std::unique_lock<std::mutex> lock(mu);
      failures[static_cast<std::size_t>(c)] = failure;
      ++finished;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });  // alive while the threads are counted
    });
  std::size_t during = 0;
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished == callers; });
    during = process_threads();
    release = true;
  }
  cv.notify_all();
  for (auto& t : ts) t.join();
  return during - before;
}

// An engine on two threads (so that it uses the compute thread) and one request it ran from the test's thread.
struct Ran {
  Engine engine{options()};
  std::vector<std::uint8_t> jpeg = sprt_test::read_bytes(sprt_test::shared_jpegs().front());
  ImageInput image = ImageInput::bytes(jpeg, "a.jpg");  // a view: `jpeg` outlives it
  Features first = engine.run(image, Params{});

  static Options options() {
    Options o;
    o.model = sprt_test::weights_dir();
    o.threads = 2;
    o.warmup = WarmupSpec::none();
    return o;
  }
  bool same(const Features& f) const {
    return f.keypoints == first.keypoints && f.scores == first.scores && f.descriptors == first.descriptors;
  }
};

}  // namespace

TEST(ComputeThread, RequestsOnManyThreadsShareOneOpenMPTeam) {
  Ran r;
  std::vector<std::string> failures;
  const std::size_t added = threads_added(
      4, [&] { return r.same(r.engine.run(r.image, Params{})); }, failures);
  EXPECT_EQ(added, 4u) << "each caller that ran a request holds an OpenMP team of its own";
  for (std::size_t c = 0; c < failures.size(); ++c) EXPECT_EQ(failures[c], "") << "caller " << c;
}

TEST(ComputeThread, MatchesOnOtherThreadsOpenNoTeam) {
  namespace md = matching::detail;
  const std::size_t n0 = 700, n1 = 800;
  const int dim = 256;
  const std::vector<float> a = md::random_unit_descriptors(n0, dim, 1), b = md::random_unit_descriptors(n1, dim, 2);
  const DescriptorsView va{a.data(), n0, dim, false}, vb{b.data(), n1, dim, false};
  const MatchOptions options;
  md::Matcher here(2);
  const Matches expected = here.match(va, vb, options);  // starts the compute thread and its team
  std::vector<float> sim(n0 * n1), sim_here(n0 * n1);
  md::similarity_matrix(va, vb, sim_here.data(), 2);
  std::vector<std::string> failures;
  const std::size_t added = threads_added(
      2,
      [&] {
        md::Matcher m(2);
        const Matches got = m.match(va, vb, options);
        std::vector<float> s(n0 * n1);
        md::similarity_matrix(va, vb, s.data(), 2);
        return got.matches0 == expected.matches0 && got.scores0 == expected.scores0 && s == sim_here;
      },
      failures);
  EXPECT_EQ(added, 2u) << "each caller that matched holds an OpenMP team of its own";
  for (std::size_t c = 0; c < failures.size(); ++c) EXPECT_EQ(failures[c], "") << "caller " << c;
}

// A child fork()ed after the model ran has none of the parent's threads: its first request starts a compute thread
// (and an OpenMP team) of its own, and gives the parent's bits. (It used to wait forever for the parent's.)
TEST(ComputeThread, AForkedChildRunsRequests) {
  Ran r;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(300);  // a child that waits forever ends by SIGALRM instead
    int code = 2;
    try {
      code = r.same(r.engine.run(r.image, Params{})) ? 0 : 1;
    } catch (...) {
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: different bits, 2: the request threw";
  EXPECT_TRUE(r.same(r.engine.run(r.image, Params{})));  // the parent's thread still serves
}
