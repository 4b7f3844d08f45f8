// Workspace and MemoryPlan: see workspace.hpp.
#include "backend/workspace.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <utility>

namespace superpoint_rt::backend {

namespace {

std::size_t round_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}

std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

}  // namespace

Workspace::~Workspace() {
  if (data_) ::munmap(data_, mapped_.load());
}

void Workspace::add_user(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(users_mu_);
  ++users_[bytes];
}

void Workspace::remove_user(std::size_t bytes) {
  std::size_t need = 0;
  {
    std::lock_guard<std::mutex> lock(users_mu_);
    const auto it = users_.find(bytes);
    if (it != users_.end() && --it->second == 0) users_.erase(it);
    if (!users_.empty()) need = users_.rbegin()->first;
  }
  std::lock_guard<std::mutex> run(run_mu_);
  if (round_up(need, page_size()) < mapped_) resize_locked(need);
}

Workspace::Lease Workspace::acquire(std::size_t bytes) {
  std::unique_lock<std::mutex> lock(run_mu_);
  if (bytes > mapped_) resize_locked(bytes);
  return Lease(std::move(lock), data_);
}

void Workspace::resize_locked(std::size_t bytes) {
  // Anonymous mappings, not malloc: a new mapping is zero (the blocked layouts' padding, if any, reads as zero),
  // growing with mremap moves page tables instead of copying or re-faulting the bytes already in use, and shrinking
  // returns the tail to the system at once, whatever the allocator's thresholds.
  const std::size_t want = round_up(bytes, page_size()), have = mapped_.load();
  if (want == have) return;
  if (want == 0) {
    ::munmap(data_, have);
    data_ = nullptr;
    mapped_ = 0;
    return;
  }
  void* p = data_ ? ::mremap(data_, have, want, MREMAP_MAYMOVE)
                  : ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<std::byte*>(p);
  mapped_ = want;
}

int MemoryPlan::add(std::size_t bytes) {
  blocks_.push_back({bytes, -1, -1, 0});
  return static_cast<int>(blocks_.size() - 1);
}

void MemoryPlan::grow(int id, std::size_t bytes) {
  auto& b = blocks_[static_cast<std::size_t>(id)];
  b.bytes = std::max(b.bytes, bytes);
}

void MemoryPlan::use(int id, int step) {
  auto& b = blocks_[static_cast<std::size_t>(id)];
  b.first = b.first < 0 ? step : std::min(b.first, step);
  b.last = std::max(b.last, step);
}

std::size_t MemoryPlan::place(std::size_t align) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].first >= 0 && blocks_[i].bytes > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return blocks_[a].bytes > blocks_[b].bytes; });
  std::vector<std::size_t> placed;
  std::size_t total = 0;
  for (const std::size_t i : order) {
    Block& b = blocks_[i];
    const std::size_t size = round_up(b.bytes, align);
    // The placed blocks whose lifetimes overlap this one, by offset: take the first gap that fits.
    std::vector<std::pair<std::size_t, std::size_t>> busy;  // [begin, end)
    for (const std::size_t j : placed) {
      const Block& o = blocks_[j];
      if (o.first <= b.last && b.first <= o.last) busy.emplace_back(o.offset, o.offset + round_up(o.bytes, align));
    }
    std::sort(busy.begin(), busy.end());
    std::size_t at = 0;
    for (const auto& [begin, end] : busy) {
      if (at + size <= begin) break;
      at = std::max(at, end);
    }
    b.offset = at;
    total = std::max(total, at + size);
    placed.push_back(i);
  }
  return total;
}

std::size_t MemoryPlan::peak_live_bytes() const {
  int last_step = -1;
  for (const Block& b : blocks_) last_step = std::max(last_step, b.last);
  std::size_t peak = 0;
  for (int s = 0; s <= last_step; ++s) {
    std::size_t live = 0;
    for (const Block& b : blocks_)
      if (b.first >= 0 && b.first <= s && s <= b.last) live += b.bytes;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace superpoint_rt::backend
