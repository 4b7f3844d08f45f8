#include "util/compute_thread.hpp"

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

}  // namespace

bool on_compute_thread() noexcept {
  return t_compute;
}

void run_on_compute_thread(const std::function<void()>& job) {
  // Made on first use and never destroyed: the thread outlives every caller, static destructors included (a Python
  // interpreter may still run a model while it shuts down).
  static ComputeThread* const thread = new ComputeThread;
  thread->run(job);
}

}  // namespace superpoint_rt::util
