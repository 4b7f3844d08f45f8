// Context and ContextPool: see context.hpp.
#include "engine/context.hpp"

#include <algorithm>
#include <functional>
#include <utility>

namespace superpoint_rt::engine {

namespace {

template <class V>
void give_back(V& v) {
  V().swap(v);
}

// The buffers of steps 1-3 (decode, channels, resize): dead once the network input is ready.
template <class F>
void for_each_source_buffer(Context& c, F&& visit) {
  for (auto& v : c.planes) visit(v);
  for (auto& v : c.source) visit(v);
  for (auto* s : {&c.resize, &c.resize2}) {
    visit(s->tmp);
    visit(s->row16);
  }
  for (auto& v : c.fplanes) visit(v);
  visit(c.fsource);
  image::FloatResizeScratch& fr = c.fresize;
  for (auto* v : {&fr.ofs, &fr.xofs, &fr.yofs, &fr.tabofs}) visit(*v);
  for (auto* v : {&fr.alpha, &fr.beta, &fr.buf, &fr.sum, &fr.rows, &fr.plane, &fr.kernel_x, &fr.kernel_y}) visit(*v);
  visit(fr.xtab);
  visit(fr.ytab);
}

// Calls f(bytes, grown, release) for every buffer of the context: its capacity in bytes, whether it holds more than
// its last use (an earlier, larger request grew it), and a function that gives its memory back.
template <class F>
void for_each_buffer(Context& c, F&& f) {
  auto visit = [&f](auto& v) { f(v.capacity() * sizeof(v[0]), v.capacity() > v.size(), [&v] { give_back(v); }); };
  for_each_source_buffer(c, visit);
  visit(c.input);
  visit(c.cell_mark);
  visit(c.heat);
  visit(c.dense);
  visit(c.nms_scratch.work);
  visit(c.nms_scratch.map);
  visit(c.keypoints);
}

}  // namespace

std::size_t Context::bytes() {
  std::size_t total = 0;
  for_each_buffer(*this, [&](std::size_t b, bool, auto&&) { total += b; });
  return total;
}

void Context::trim(std::size_t keep) {
  std::vector<std::pair<std::size_t, std::function<void()>>> buffers;
  std::size_t total = 0;
  for_each_buffer(*this, [&](std::size_t b, bool grown, auto&& release) {
    if (grown) {  // sized for an earlier, larger request: what it keeps follows the last one
      release();
      return;
    }
    total += b;
    if (b > 0) buffers.emplace_back(b, release);
  });
  std::sort(buffers.begin(), buffers.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [b, release] : buffers) {
    if (total <= keep) break;
    release();
    total -= b;
  }
}

void Context::input_ready() {
  if (!warm) for_each_source_buffer(*this, [](auto& v) { give_back(v); });
}

std::unique_ptr<Context> ContextPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pooled_.empty()) {  // warm ones are at the back
      auto c = std::move(pooled_.back());
      pooled_.pop_back();
      bytes_ -= c->bytes();
      return c;
    }
  }
  return std::make_unique<Context>();
}

void ContextPool::release(std::unique_ptr<Context> ctx) {
  if (!ctx) return;
  std::size_t warm = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : pooled_) warm += c->warm ? 1 : 0;
  }
  ctx->warm = warm < kWarmContexts;
  ctx->trim(ctx->warm ? kContextKeepBytes : 0);
  const std::size_t b = ctx->bytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (pooled_.size() >= kPooledContexts) return;  // freed on return, outside the pool
  if (ctx->warm)
    pooled_.push_back(std::move(ctx));
  else
    pooled_.insert(pooled_.begin(), std::move(ctx));
  bytes_ += b;
}

std::size_t ContextPool::pooled_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void ContextPool::clear() {
  std::vector<std::unique_ptr<Context>> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(pooled_);
    bytes_ = 0;
  }
}

}  // namespace superpoint_rt::engine
