#include "util/compute_thread.hpp"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace superpoint_rt::util {

namespace {

thread_local bool t_compute = false;

class ComputeThread {
 public:
  ComputeThread() : thread_([this] { loop(); }) {}

  void run(const std::function<void()>& job) {
    Pending p{&job};
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(&p);
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return p.done; });
  }

 private:
  struct Pending {
    const std::function<void()>* job;
    bool done = false;  // guarded by mu_
  };

  [[noreturn]] void loop() {
    t_compute = true;
    for (;;) {
      Pending* p = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        p = queue_.front();
        queue_.pop_front();
      }
      (*p->job)();
      {
        std::lock_guard<std::mutex> lock(mu_);
        p->done = true;
      }
      done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Pending*> queue_;
  std::thread thread_;  // last: starts once the queue exists
};

// The thread, made on first use and never destroyed: it outlives every caller, static destructors included (a Python
// interpreter may still run a model while it shuts down). A fork()ed child has only the forking thread: its first
// call starts a thread of its own (the parent's object is left as it was, perhaps with a lock held), whose OpenMP
// team is new too (libgomp cannot reuse the parent's team threads in a child).
std::mutex g_mu;  // guards g_thread; held across fork() so that the child's copy is consistent
ComputeThread* g_thread = nullptr;

void before_fork() {
  g_mu.lock();
}
void after_fork_parent() {
  g_mu.unlock();
}
void after_fork_child() {
  g_thread = nullptr;
  g_mu.unlock();
}

}  // namespace

bool on_compute_thread() noexcept {
  return t_compute;
}

void run_on_compute_thread(const std::function<void()>& job) {
  ComputeThread* t = nullptr;
  {
    static const bool handlers = pthread_atfork(before_fork, after_fork_parent, after_fork_child) == 0;
    (void)handlers;  // without them a forked child's call would wait for a thread it does not have
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_thread) g_thread = new ComputeThread;
    t = g_thread;
  }
  t->run(job);
}

}  // namespace superpoint_rt::util
