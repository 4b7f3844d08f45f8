// A small thread pool for the host stages of list requests (decode + resize of
// the next images while the network runs the current one). Tasks run on
// whichever worker is free, the lowest rank first and, within a rank, in
// submission order: each list request ranks its tasks by when it started, so
// that of two concurrent lists the earlier one finishes first, instead of both
// finishing together at the end.
//
// The pool only grows (grow()), it is never replaced: concurrent list requests
// with different num_workers share one pool, and each keeps submitting to it
// for its whole duration (issue 14 §2: the engine used to replace a smaller
// pool by a bigger one, destroying it under a request that was still submitting
// to it). Thread-safety: submit(), grow() and size() may be called from any
// thread; the destructor (which must not run concurrently with them: the owner
// destroys the pool after the calls that use it) finishes the queued tasks,
// then joins.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace superpoint_rt::engine {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;
  /// Starts workers until there are at least `threads`; never stops any. Throws
  /// Error(Internal) when the system refuses a thread (the workers started so
  /// far stay).
  void grow(int threads);

  /// The rank of tasks that do not say: after every ranked task.
  static constexpr std::uint64_t kUnranked = ~std::uint64_t{0};

  /// Queues `f` with `rank` (lower runs first; equal ranks in submission order); its result or exception arrives
  /// through the future. May throw (std::bad_alloc, or the test hook's exception) before anything is queued.
  template <class F>
  auto submit(F&& f, std::uint64_t rank = kUnranked) -> std::future<decltype(f())> {
    using R = decltype(f());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    std::future<R> fut = task->get_future();
    std::function<void()> job = [task] { (*task)(); };
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (submit_hook_) submit_hook_(job);
      queue_.push_back(Job{rank, next_seq_++, std::move(job)});
      std::push_heap(queue_.begin(), queue_.end());
    }
    cv_.notify_one();
    return fut;
  }

  /// Tests only: `hook` sees every job submit() is about to queue (under the pool's lock: it must not call the pool).
  /// It may wrap the job (e.g. hold it back), and an exception it throws leaves submit() without queueing anything,
  /// as a failed allocation would. Empty = none.
  void set_submit_hook(std::function<void(std::function<void()>& job)> hook);

 private:
  void loop();
  void stop_and_join() noexcept;
  std::vector<std::thread> workers_;  // guarded by mu_
  struct Job {
    std::uint64_t rank, seq;
    std::function<void()> run;
    // A max-heap puts the greatest first: the greatest here is the lowest (rank, seq).
    bool operator<(const Job& o) const { return rank != o.rank ? rank > o.rank : seq > o.seq; }
  };
  std::vector<Job> queue_;      // a heap (std::push_heap / pop_heap); guarded by mu_
  std::uint64_t next_seq_ = 0;  // guarded by mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::function<void(std::function<void()>&)> submit_hook_;  // guarded by mu_
};

}  // namespace superpoint_rt::engine
