// MemoryBudget and AdmissionTurns: see memory_budget.hpp.
#include "engine/memory_budget.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::engine {

namespace {

std::string mib(std::size_t bytes) {
  return std::to_string((bytes + (std::size_t{1} << 20) - 1) >> 20) + " MiB";
}

// The memory limit of this process's cgroup (v2 memory.max, else v1 memory.limit_in_bytes), 0 when none.
std::size_t cgroup_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(path);
    std::string v;
    if (!(f >> v) || v == "max") continue;
    try {
      const unsigned long long n = std::stoull(v);
      if (n > 0 && n < (std::uint64_t{1} << 60)) return static_cast<std::size_t>(n);  // v1 "unlimited" is ~2^63
    } catch (const std::exception&) {
    }
  }
  return 0;
}

}  // namespace

std::size_t default_memory_budget_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  std::size_t total =
      pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : std::size_t{4} << 30;
  if (const std::size_t cg = cgroup_limit(); cg > 0) total = std::min(total, cg);
  return total / 2;
}

MemoryBudget::Ticket& MemoryBudget::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    budget_ = std::exchange(o.budget_, nullptr);
    claim_ = o.claim_;
  }
  return *this;
}

void MemoryBudget::Ticket::release() {
  if (budget_) std::exchange(budget_, nullptr)->give_back(claim_);
}

MemoryBudget::MemoryBudget(std::size_t limit, std::function<std::size_t()> resident, std::function<void()> reclaim)
    : limit_(limit), resident_(std::move(resident)), reclaim_(std::move(reclaim)) {}

std::size_t MemoryBudget::committed_locked(const Claim& extra) const {
  std::size_t workspace = extra.workspace;
  if (!workspaces_.empty()) workspace = std::max(workspace, *workspaces_.rbegin());
  return host_ + extra.host + std::max(resident_(), workspace);
}

void MemoryBudget::check_alone(const Claim& claim, const std::string& what) const {
  const std::size_t alone = claim.host + claim.workspace;
  if (alone > limit_)
    throw Error(ErrorKind::Overloaded, what + " needs about " + mib(alone) + " (" + mib(claim.host) +
                                           " for the image, " + mib(claim.workspace) +
                                           " for the network), over the memory budget of " + mib(limit_) +
                                           " (memory_budget_mb, serve --memory-budget-mb)");
}

MemoryBudget::Ticket MemoryBudget::try_admit(const Claim& claim, const std::string& what) {
  check_alone(claim, what);
  std::lock_guard<std::mutex> lock(mu_);
  if (committed_locked(claim) > limit_) return {};
  return take_locked(claim);
}

MemoryBudget::Ticket MemoryBudget::take_locked(const Claim& claim) {
  host_ += claim.host;
  workspaces_.insert(claim.workspace);
  peak_ = std::max(peak_, committed_locked({}));
  return Ticket(this, claim);
}

MemoryBudget::Ticket MemoryBudget::admit(const Claim& claim, const std::string& what) {
  check_alone(claim, what);
  const std::size_t alone = claim.host + claim.workspace;
  std::unique_lock<std::mutex> lock(mu_);
  if (committed_locked(claim) > limit_ && reclaim_) {
    lock.unlock();
    reclaim_();  // idle plans and pooled contexts first (a plan's destructor may wait for a run: not under mu_)
    lock.lock();
  }
  const auto deadline = std::chrono::steady_clock::now() + kMemoryWait;
  while (committed_locked(claim) > limit_) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && committed_locked(claim) > limit_)
      throw Error(ErrorKind::Overloaded, what + " waited " + std::to_string(kMemoryWait.count()) + " s for " +
                                             mib(alone) + " of the memory budget of " + mib(limit_) + " (" +
                                             mib(committed_locked({})) +
                                             " in use by the requests in flight and the network); retry later");
  }
  return take_locked(claim);
}

void MemoryBudget::give_back(const Claim& c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    host_ -= c.host;
    workspaces_.erase(workspaces_.find(c.workspace));
  }
  cv_.notify_all();
}

std::size_t MemoryBudget::committed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return committed_locked({});
}

std::size_t MemoryBudget::peak_committed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace superpoint_rt::engine
