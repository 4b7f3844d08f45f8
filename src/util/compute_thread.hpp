// The process's compute thread: every multi-threaded OpenMP region of the library opens on it (the engines' loads,
// plans, full forwards and split JPEG decodes; the matcher), so the process keeps a single OpenMP team.
//
// Why: libgomp gives every thread that opens a parallel region a team of its own, kept while that thread lives, and
// once it manages more threads than there are cores it spins only ~100 iterations at a barrier before it sleeps
// (GOMP_SPINCOUNT's throttled value). A server whose request threads each ran forwards, or a script that extracts on
// one thread and matches on another, made every forward sleep and wake at each barrier: a single fp32 request took
// 122.6-124.3 ms instead of 118.8-121.2 once four other threads had run one (AMD Zen 4, 2 threads), and 114-125
// instead of 113-116 after one match call on the calling thread.
//
// Thread-safety: on_compute may be called from any thread; tasks run one at a time in the order they arrive. A task
// on the compute thread that calls on_compute runs the inner task inline. A task must not wait for another thread
// that is itself waiting in on_compute (it would wait forever). The thread starts on first use and lives until the
// process ends; a fork()ed child starts its own on its first call.
#pragma once

#include <functional>
#include <future>
#include <utility>

namespace superpoint_rt::util {

/// Whether the calling thread is the compute thread.
bool on_compute_thread() noexcept;

/// Runs `job` on the compute thread and returns when it has run. `job` must not throw (on_compute wraps it).
void run_on_compute_thread(const std::function<void()>& job);

/// f() on the compute thread (inline when the caller is the compute thread); its result or exception comes back.
template <class F>
auto on_compute(F&& f) -> decltype(f()) {
  if (on_compute_thread()) return f();
  using R = decltype(f());
  std::packaged_task<R()> task(std::forward<F>(f));
  std::future<R> result = task.get_future();
  run_on_compute_thread([&task] { task(); });  // packaged_task keeps an exception for get()
  return result.get();
}

}  // namespace superpoint_rt::util
