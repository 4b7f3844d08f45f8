// LightGlue's library hooks for callers that bound it (the HTTP server's /v1/match?matcher=lightglue): the
// cancellation callback (LightGlueOptions::cancel, checked before every layer and before the assignment), the
// parameter table (lightglue_param_specs, set_lightglue_param_text), one-thread calls from several threads at once,
// and LightGlue::memory_bound against the peak resident memory of a call. On a small network with seeded random
// weights in cvg's key layout, written here as a .safetensors file (exactness against cvg's code is
// tests/lightglue/test_lightglue_exact.py's).
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>
#include "common/sanitizers.hpp"  // before anything tests SPRT_TEST_ASAN

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/lightglue.hpp"

namespace sp = superpoint_rt;

namespace {

// cvg's state dict (lightglue/lightglue.py) for `layers` layers of width d, head_dim hd, and an input_proj from
// input_dim, with uniform random weights of scale 1 / sqrt(fan-in) (LayerNorm: 1 and 0), as a .safetensors file.
std::string write_weights(const std::filesystem::path& path, int input_dim, int d, int hd, int layers, unsigned seed) {
  std::mt19937 rng(seed);
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, float scale, float fill = 0) {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    std::uniform_real_distribution<float> u(-scale, scale);
    const std::size_t begin = data.size();
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = scale > 0 ? u(rng) : fill;
      data.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  };
  auto linear = [&](const std::string& name, int out, int in) {
    const float s = 1.0f / std::sqrt(static_cast<float>(in));
    add(name + ".weight", {out, in}, s);
    add(name + ".bias", {out}, s);
  };
  auto ffn = [&](const std::string& p) {
    linear(p + ".ffn.0", 2 * d, 2 * d);
    add(p + ".ffn.1.weight", {2 * d}, 0, 1.0f);
    add(p + ".ffn.1.bias", {2 * d}, 0, 0.0f);
    linear(p + ".ffn.3", d, 2 * d);
  };
  if (input_dim != d) linear("input_proj", d, input_dim);
  add("posenc.Wr.weight", {hd / 2, 2}, 1.0f);
  for (int i = 0; i < layers; ++i) {
    const std::string t = "transformers." + std::to_string(i) + ".";
    linear(t + "self_attn.Wqkv", 3 * d, d);
    linear(t + "self_attn.out_proj", d, d);
    ffn(t + "self_attn");
    linear(t + "cross_attn.to_qk", d, d);
    linear(t + "cross_attn.to_v", d, d);
    linear(t + "cross_attn.to_out", d, d);
    ffn(t + "cross_attn");
    linear("log_assignment." + std::to_string(i) + ".final_proj", d, d);
    linear("log_assignment." + std::to_string(i) + ".matchability", 1, d);
    if (i + 1 < layers) linear("token_confidence." + std::to_string(i) + ".token.0", 1, d);
  }
  const std::string h = header.dump();
  std::ofstream f(path, std::ios::binary);
  const std::uint64_t len = h.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f << h << data;
  return path.string();
}

struct Image {
  std::vector<float> k, d;
  sp::LightGlueFeatures view(int dim) const { return {k.data(), d.data(), k.size() / 2, dim, 640, 480}; }
};

Image random_image(std::size_t n, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> x(0, 639), y(0, 479);
  std::normal_distribution<float> g;
  Image im;
  for (std::size_t i = 0; i < n; ++i) im.k.insert(im.k.end(), {x(rng), y(rng)});
  for (std::size_t i = 0; i < n * static_cast<std::size_t>(dim); ++i) im.d.push_back(g(rng));
  return im;
}

class LightGlueApi : public ::testing::Test {
 protected:
  static constexpr int kInputDim = 32, kDim = 64, kHeadDim = 16, kLayers = 3;
  static void SetUpTestSuite() {
    const auto dir = std::filesystem::temp_directory_path() / ("sprt_lg_api_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    lg_ = new sp::LightGlue(write_weights(dir / "lg.safetensors", kInputDim, kDim, kHeadDim, kLayers, 7));
    std::filesystem::remove_all(dir);
  }
  static void TearDownTestSuite() {
    delete lg_;
    lg_ = nullptr;
  }
  static sp::LightGlueOptions full() {
    sp::LightGlueOptions o;
    o.depth_confidence = -1;  // every layer runs: the callback's count is known
    o.width_confidence = -1;
    o.threads = 1;
    return o;
  }
  static sp::LightGlue* lg_;
};
sp::LightGlue* LightGlueApi::lg_ = nullptr;

TEST_F(LightGlueApi, CancelIsAskedBeforeEveryLayerAndTheAssignment) {
  const Image a = random_image(200, kInputDim, 1), b = random_image(150, kInputDim, 2);
  sp::LightGlueOptions o = full();
  const sp::LightGlueMatches plain = lg_->match(a.view(kInputDim), b.view(kInputDim), o);
  EXPECT_EQ(plain.stop, kLayers);
  int calls = 0;
  o.cancel = [&] {
    ++calls;
    return false;
  };
  const sp::LightGlueMatches asked = lg_->match(a.view(kInputDim), b.view(kInputDim), o);
  EXPECT_EQ(calls, kLayers + 1);  // before each layer and before the assignment
  EXPECT_EQ(asked.matches0, plain.matches0);
  EXPECT_EQ(asked.scores0, plain.scores0);
  // Stopping at the k-th question: k - 1 layers ran, and the call throws.
  for (int k = 1; k <= kLayers + 1; ++k) {
    calls = 0;
    o.cancel = [&] { return ++calls == k; };
    try {
      (void)lg_->match(a.view(kInputDim), b.view(kInputDim), o);
      ADD_FAILURE() << "not cancelled at question " << k;
    } catch (const sp::LightGlueCancelled& e) {
      EXPECT_EQ(calls, k);
      EXPECT_EQ(e.layers_done(), std::min(k - 1, kLayers));
      EXPECT_EQ(e.kind(), sp::ErrorKind::Overloaded);
      EXPECT_NE(std::string(e.what()).find(k <= kLayers ? "layer " + std::to_string(k) : "the assignment"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(LightGlueApi, DeadlineStopsWithinALayer) {
  // A deadline as the server sets it: past before the call, nothing runs; during a call of many layers' time, it
  // stops at the next layer.
  const Image a = random_image(1500, kInputDim, 3), b = random_image(1500, kInputDim, 4);
  sp::LightGlueOptions o = full();
  o.cancel = [] { return true; };
  EXPECT_THROW((void)lg_->match(a.view(kInputDim), b.view(kInputDim), o), sp::LightGlueCancelled);
  using Clock = std::chrono::steady_clock;
  o.cancel = nullptr;
  auto full_time = Clock::duration::max();  // the fastest of three: a deadline at its half falls inside any call
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    (void)lg_->match(a.view(kInputDim), b.view(kInputDim), o);
    full_time = std::min(full_time, Clock::now() - t0);
  }
  const auto deadline = Clock::now() + full_time / 2;
  o.cancel = [deadline] { return Clock::now() >= deadline; };
  try {
    (void)lg_->match(a.view(kInputDim), b.view(kInputDim), o);
    ADD_FAILURE() << "a deadline at half the call's time did not stop it";
  } catch (const sp::LightGlueCancelled& e) {
    EXPECT_GE(e.layers_done(), 1);
    EXPECT_LE(e.layers_done(), kLayers);
  }
}

TEST_F(LightGlueApi, OneThreadCallsRunTogetherWithTheSameResult) {
  const Image a = random_image(300, kInputDim, 5), b = random_image(250, kInputDim, 6);
  const sp::LightGlueOptions o = full();
  const sp::LightGlueMatches want = lg_->match(a.view(kInputDim), b.view(kInputDim), o);
  std::vector<sp::LightGlueMatches> got(3);
  std::vector<std::thread> ts;
  for (auto& g : got) ts.emplace_back([&] { g = lg_->match(a.view(kInputDim), b.view(kInputDim), o); });
  for (auto& t : ts) t.join();
  for (const auto& g : got) {
    EXPECT_EQ(g.matches0, want.matches0);
    EXPECT_EQ(g.scores0, want.scores0);
  }
}

TEST(LightGlueParams, TableRangesAndText) {
  std::vector<std::string> names;
  for (const auto& s : sp::lightglue_param_specs()) names.emplace_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"depth_confidence", "width_confidence", "filter_threshold"}));
  sp::LightGlueOptions o;
  EXPECT_EQ(sp::lightglue_param_value(o, "depth_confidence"), 0.95);  // cvg's default_conf
  EXPECT_EQ(sp::lightglue_param_value(o, "width_confidence"), 0.99);
  EXPECT_EQ(sp::lightglue_param_value(o, "filter_threshold"), 0.1);
  sp::set_lightglue_param_text(o, "depth_confidence", "-1");
  sp::set_lightglue_param_text(o, "filter_threshold", "0.25");
  EXPECT_EQ(o.depth_confidence, -1);
  EXPECT_EQ(o.filter_threshold, 0.25);
  o.validate();
  auto refused = [&](const char* name, const char* value) {
    try {
      sp::set_lightglue_param_text(o, name, value);
    } catch (const sp::Error& e) {
      EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    ADD_FAILURE() << name << "=" << value << " accepted";
    return std::string();
  };
  EXPECT_NE(refused("width_confidence", "1.5").find("width_confidence"), std::string::npos);
  EXPECT_NE(refused("depth_confidence", "-2").find("-1..1"), std::string::npos);
  EXPECT_NE(refused("filter_threshold", "nan").find("filter_threshold"), std::string::npos);
  EXPECT_NE(refused("filter_threshold", "0x1p-3").find("not a number"), std::string::npos);
  EXPECT_NE(refused("ratio", "0.5").find("unknown LightGlue parameter"), std::string::npos);
  sp::LightGlueOptions bad;
  bad.filter_threshold = 2;
  EXPECT_THROW(bad.validate(), sp::Error);
}

// Resident memory in bytes from /proc/self/status (VmRSS or VmHWM, its peak since the last reset).
[[maybe_unused]] std::int64_t status_bytes(const std::string& key) {  // unused under ASan (below)
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  return -1;
}

TEST_F(LightGlueApi, MemoryBoundHoldsThePeakOfACall) {
#if defined(SPRT_TEST_ASAN)
  GTEST_SKIP() << "ASan's allocator keeps freed memory in quarantine: resident memory is not what a call holds";
#else
  // Linear in the keypoints: doubling them at most doubles the part that grows.
  const std::size_t b1 = lg_->memory_bound(1000, 1000, 1), b2 = lg_->memory_bound(2000, 2000, 1);
  const std::size_t b0 = lg_->memory_bound(0, 0, 1);
  EXPECT_GT(b1, b0);
  EXPECT_LE(b2 - b0, 2 * (b1 - b0) + 2 * 4 * 32 * 2000);  // + the assignment block's longer rows
  EXPECT_GT(lg_->memory_bound(1000, 1000, 2), b1);        // per-thread buffers
  // The peak resident memory of a call stays under its bound: keypoints enough that the state dominates.
  const std::size_t n = 4000;
  const Image a = random_image(n, kInputDim, 8), b = random_image(n, kInputDim, 9);
  sp::LightGlueOptions o = full();
  // Every block of 128 KiB or more mapped and unmapped with its buffer (a fixed threshold turns off glibc's dynamic
  // one, which would keep freed buffers resident in the heap): resident memory then follows what is held.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  (void)lg_->match(a.view(kInputDim), b.view(kInputDim), o);  // oneDNN's one-time state, the kernels' tables
  malloc_trim(0);
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";  // resets VmHWM to the current VmRSS (Linux 4.0)
  }
  const std::int64_t before = status_bytes("VmRSS");
  (void)lg_->match(a.view(kInputDim), b.view(kInputDim), o);
  const std::int64_t peak = status_bytes("VmHWM");
  ASSERT_GT(before, 0);
  ASSERT_GE(peak, before);
  const std::size_t bound = lg_->memory_bound(n, n, 1);
  std::printf("LightGlue %zu x %zu keypoints, 1 thread: peak resident +%.1f MiB, memory_bound %.1f MiB\n", n, n,
              static_cast<double>(peak - before) / (1 << 20), static_cast<double>(bound) / (1 << 20));
  EXPECT_LE(static_cast<std::size_t>(peak - before), bound) << "peak +" << (peak - before) << " bytes";
  // And the bound is not a blanket: the call's own buffers are most of it.
  EXPECT_GE(static_cast<double>(peak - before), 0.25 * static_cast<double>(bound)) << "peak +" << (peak - before);
#endif
}

}  // namespace
