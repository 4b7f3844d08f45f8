// The engine's memory budget (Options::memory_budget_mb, `superpoint-rt serve --memory-budget-mb`; issue 19 §2):
// what the network plans, the pooled request contexts and the requests in flight may hold together. A request
// states what it will need before it allocates anything (Claim: its host buffers from the image header, and the
// workspace of its network frame's plan) and is admitted when
//     sum of the host claims in flight + its host claim
//       + max(resident, the largest workspace claim in flight, its workspace claim)  <=  limit
// where `resident` is what the engine holds idle (the backend's one shared workspace, the cached plans' own bytes
// and the pooled contexts). Workspace claims do not add up: the network runs one request at a time in one shared
// workspace. Otherwise it waits until requests in flight finish (up to kMemoryWait) and then fails with
// ErrorKind::Overloaded (HTTP 503); a request that could never fit fails at once. Nothing is allocated for a request
// before it is admitted, beyond reading its header.
//
// Thread-safety: thread-safe. A Ticket returns its claim when destroyed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace superpoint_rt::engine {

/// How long a request waits for its claim to fit before it fails with Overloaded.
inline constexpr std::chrono::seconds kMemoryWait{30};

/// Half this machine's physical memory, or half the memory limit of the cgroup the process runs in when that is
/// smaller (containers): the default of Options::memory_budget_mb.
std::size_t default_memory_budget_bytes();

class MemoryBudget {
 public:
  struct Claim {
    std::size_t host = 0;       // the request's own buffers (decoded image, planes, scores, descriptor map)
    std::size_t workspace = 0;  // the workspace its network plan runs in
  };

  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : budget_(std::exchange(o.budget_, nullptr)), claim_(o.claim_) {}
    Ticket& operator=(Ticket&& o) noexcept;
    ~Ticket() { release(); }
    void release();
    bool held() const noexcept { return budget_ != nullptr; }

   private:
    friend class MemoryBudget;
    Ticket(MemoryBudget* b, Claim c) : budget_(b), claim_(c) {}
    MemoryBudget* budget_ = nullptr;
    Claim claim_;
  };

  /// `limit` bytes. `resident` reports what the engine holds idle now; `reclaim` lets go of what it can (cached
  /// plans, pooled contexts), tried once before a request waits.
  MemoryBudget(std::size_t limit, std::function<std::size_t()> resident, std::function<void()> reclaim);

  /// Admits `claim` for `what` (an image's description), waiting up to kMemoryWait. Throws Error(Overloaded) naming
  /// the image, its claim and the budget.
  Ticket admit(const Claim& claim, const std::string& what);
  /// Admits `claim` only if it fits now (an empty ticket otherwise); throws Overloaded as admit() when it never can.
  Ticket try_admit(const Claim& claim, const std::string& what);

  std::size_t limit() const { return limit_; }
  /// What the admitted requests and the engine hold by this accounting, now and at most so far.
  std::size_t committed() const;
  std::size_t peak_committed() const;

 private:
  std::size_t committed_locked(const Claim& extra) const;
  void check_alone(const Claim& claim, const std::string& what) const;
  Ticket take_locked(const Claim& claim);
  void give_back(const Claim& c);

  const std::size_t limit_;
  std::function<std::size_t()> resident_;
  std::function<void()> reclaim_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::size_t host_ = 0;                   // sum of the host claims in flight
  std::multiset<std::size_t> workspaces_;  // the workspace claims in flight
  std::size_t peak_ = 0;
};

}  // namespace superpoint_rt::engine
