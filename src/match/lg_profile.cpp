// LightGlue's stage table (lg_profile.hpp).
#include "match/lg_profile.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace superpoint_rt::lightglue::detail {
namespace {

constexpr auto kStages = static_cast<std::size_t>(Stage::kCount);
constexpr std::array<const char*, kStages> kNames = {
    "linear layers: sgemm",
    "linear layers: bias + element-wise step",
    "self attention: q k^T",
    "softmax over rows (online)",
    "attention values (rows)",
    "cross attention: sim",
    "softmax over columns + rescale",
    "cross attention: column values",
    "cross attention: merge of the parts",
    "assignment",
    "point heads, stop and pruning",
};

std::array<std::atomic<std::int64_t>, kStages>& table() {
  static std::array<std::atomic<std::int64_t>, kStages> t{};
  return t;
}

// Prints the table when the process exits (a static object made on the first profiled stage, so destroyed after
// the matching that used it).
struct Printer {
  ~Printer() {
    std::int64_t total = 0;
    for (const auto& v : table()) total += v.load();
    if (total <= 0) return;
    std::fprintf(stderr, "superpoint_rt LightGlue profile (SUPERPOINT_RT_LIGHTGLUE_PROFILE; thread ms, share):\n");
    for (std::size_t i = 0; i < kStages; ++i) {
      const double ns = static_cast<double>(table()[i].load());
      std::fprintf(stderr, "  %-40s %10.1f ms %6.1f %%\n", kNames[i], ns / 1e6,
                   100.0 * ns / static_cast<double>(total));
    }
    std::fprintf(stderr, "  %-40s %10.1f ms\n", "total", static_cast<double>(total) / 1e6);
  }
};

}  // namespace

bool profiling() noexcept {
  static const bool on = [] {
    const char* e = std::getenv("SUPERPOINT_RT_LIGHTGLUE_PROFILE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

void add_stage_time(Stage s, std::int64_t ns, int threads) noexcept {
  auto& t = table();       // made before the printer, so destroyed after it
  static Printer printer;  // NOLINT: its destructor prints the table at exit
  t[static_cast<std::size_t>(s)].fetch_add(ns * threads, std::memory_order_relaxed);
}

}  // namespace superpoint_rt::lightglue::detail
