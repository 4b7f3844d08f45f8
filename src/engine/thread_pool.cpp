#include "engine/thread_pool.hpp"

#include <string>
#include <system_error>
#include <utility>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::engine {

ThreadPool::ThreadPool(int threads) {
  try {
    grow(threads);
  } catch (...) {
    stop_and_join();  // the destructor does not run for a constructor that
                      // throws: joinable threads would terminate
    throw;
  }
}

ThreadPool::~ThreadPool() {
  stop_and_join();
}

void ThreadPool::stop_and_join() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();  // no grow() runs concurrently (see the header)
}

int ThreadPool::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(workers_.size());
}

void ThreadPool::grow(int threads) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto want = static_cast<std::size_t>(threads > 0 ? threads : 0);
  if (workers_.size() >= want) return;
  try {
    while (workers_.size() < want) workers_.emplace_back([this] { loop(); });  // they wait for mu_ to run
  } catch (const std::system_error& e) {
    throw Error(ErrorKind::Internal, "cannot start worker thread " + std::to_string(workers_.size() + 1) + " of " +
                                         std::to_string(want) + ": " + e.what());
  }
}

void ThreadPool::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      std::pop_heap(queue_.begin(), queue_.end());
      job = std::move(queue_.back().run);
      queue_.pop_back();
    }
    job();  // packaged_task stores exceptions in its future
  }
}

void ThreadPool::set_submit_hook(std::function<void(std::function<void()>&)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  submit_hook_ = std::move(hook);
}

}  // namespace superpoint_rt::engine
