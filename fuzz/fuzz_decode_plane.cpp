// Fuzz harness: the one-plane JPEG paths of src/image/decode_internal.hpp, against the full decode.
//   decode_jpeg_channel (the channel-selecting entry) must give plane c of decode_jpeg, and
//   decode_jpeg_resized_plane (fused decode + resize) must give resize_plane of that plane, bit for bit,
// and each must fail exactly when decode_jpeg fails, with the same error kind (their documented contract).
// Input: 4 bytes of parameters, then the file.
//   byte 0: the RGB channel (0, 1, 2; 3 means -1: the fused path must refuse a colour file and decode nothing)
//   byte 1, 2: the output width and height of the resize plan, 1..64 (small, so one execution stays cheap; up- and
//              down-scaling both occur)
//   byte 3: how the fused path may use a second thread (image::ParallelFor), bits 0-1: 0 none (one thread); 1 two
//           threads, the split where decode_jpeg.cpp's model puts it; 2 two threads, the split from bits 2-7 (first
//           rows 1 + bits 2-4, split row first rows + bits 5-7, clamped by the decoder); 3 both tasks one after the
//           other on this thread. In modes 1-3 every file size may take the two-thread path (the server's takes
//           files of 300,000 pixels and more: jpeg_skip_scanlines on untrusted bytes), which must give the same bits
//           and the same error kind as one thread.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_util.hpp"
#include "image/decode_internal.hpp"
#include "image/resize.hpp"

using namespace superpoint_rt;

namespace {

constexpr std::size_t kParams = 4;
constexpr int kMaxOut = 64;

// How often the two-thread path ran (replay_main asks at the end: the corpus must reach it).
std::atomic<long> g_inputs{0}, g_two_threads{0};

// Task 0 on the calling thread, the others on threads of their own, as the engine's OpenMP team runs them.
void two_threads(int n, const std::function<void(int)>& task) {
  std::vector<std::thread> others;
  for (int i = 1; i < n; ++i) others.emplace_back(task, i);
  task(0);
  for (std::thread& t : others) t.join();
}

void one_after_the_other(int n, const std::function<void(int)>& task) {
  for (int i = 0; i < n; ++i) task(i);
}

struct Outcome {
  bool ok = false;
  ErrorKind kind = ErrorKind::Internal;
};

template <class F>
Outcome run(F&& f) {
  try {
    f();
    return {true, ErrorKind::Internal};
  } catch (const Error& e) {
    return {false, e.kind()};
  }
}

}  // namespace

// The replay's closing check (replay_main.cpp): 0 when the corpus reached the two-thread path.
extern "C" int SprtFuzzReplayCheck() {
  std::fprintf(stderr, "decode_plane: the two-thread path ran on %ld of %ld inputs\n", g_two_threads.load(),
               g_inputs.load());
  return g_two_threads.load() > 0 ? 0 : 1;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kParams) return 0;
  ++g_inputs;
  const int channel = data[0] % 4 == 3 ? -1 : data[0] % 4;
  const int out_w = 1 + data[1] % kMaxOut, out_h = 1 + data[2] % kMaxOut;
  const int mode = data[3] & 3;
  image::ParallelFor parallel;
  image::detail::JpegSplitHooks hooks;
  if (mode == 1 || mode == 2) parallel = two_threads;
  if (mode == 3) parallel = one_after_the_other;
  if (mode != 0) hooks.min_pixels = 0;
  if (mode == 2) {
    hooks.first_rows = 1 + ((data[3] >> 2) & 7);
    hooks.split_row = hooks.first_rows + ((data[3] >> 5) & 7);
  }
  const image::Bytes bytes(data + kParams, size - kParams);
  if (sniff_format(bytes) != ImageFormat::JPEG) return 0;  // the per-format entries take sniffed bytes only
  const std::string name = "fuzz-input";

  Image full;
  const Outcome full_r = run([&] { full = image::decode_jpeg(bytes, name, sprt_fuzz::kMaxPixels); });
  const int nch = full_r.ok ? channels_of(full.format) : 0;
  // Plane c of the full decode: the gray plane of a gray file, channel c of an RGB one.
  auto plane_of = [&](int c) {
    std::vector<std::uint8_t> p(static_cast<std::size_t>(full.width) * full.height);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = full.pixels[i * nch + (nch == 1 ? 0 : c)];
    return p;
  };

  if (channel >= 0) {
    Image one;
    const Outcome r = run([&] { one = image::decode_jpeg_channel(bytes, name, sprt_fuzz::kMaxPixels, channel); });
    FUZZ_CHECK(r.ok == full_r.ok && (r.ok || r.kind == full_r.kind),
               "decode_jpeg_channel(%d) %s (kind %s), decode_jpeg %s (kind %s)", channel, r.ok ? "ok" : "failed",
               to_string(r.kind), full_r.ok ? "ok" : "failed", to_string(full_r.kind));
    if (r.ok) {
      FUZZ_CHECK(one.format == PixelFormat::Gray && one.width == full.width && one.height == full.height,
                 "channel image %dx%d %s, full %dx%d", one.width, one.height, to_string(one.format), full.width,
                 full.height);
      FUZZ_CHECK(one.pixels == plane_of(channel), "decode_jpeg_channel(%d) differs from the full decode", channel);
    }
  }

  std::vector<std::uint8_t> dst(static_cast<std::size_t>(out_w) * out_h, 0xA5);
  image::ResizeScratch scratch;
  int w = 0, h = 0, plans = 0;
  std::shared_ptr<const image::ResizePlan> plan;
  const image::PlanFor plan_for = [&](int in_w, int in_h) {
    ++plans;
    plan = std::make_shared<const image::ResizePlan>(in_w, in_h, out_w, out_h);
    return plan;
  };
  bool fused = false;
  image::ResizeScratch scratch2;
  image::detail::JpegSplitInfo split;
  const Outcome fr = run([&] {
    fused = image::detail::decode_jpeg_resized_plane_hooked(bytes, name, sprt_fuzz::kMaxPixels, channel, plan_for, dst,
                                                            scratch, &w, &h, parallel, &scratch2, hooks, &split);
  });
  if (split.parallel) ++g_two_threads;
  FUZZ_CHECK(plans <= 1, "the plan was asked for %d times", plans);
  FUZZ_CHECK(!split.parallel || mode != 0, "the two-thread path ran without a ParallelFor");
  if (fr.ok && !fused) {
    // Refused (CMYK, a colour file with channel -1, or no SIMD rows kernel): nothing decoded, nothing written.
    FUZZ_CHECK(std::all_of(dst.begin(), dst.end(), [](std::uint8_t v) { return v == 0xA5; }),
               "the fused path refused the file but wrote pixels");
    return 0;
  }
  FUZZ_CHECK(fr.ok == full_r.ok && (fr.ok || fr.kind == full_r.kind),
             "decode_jpeg_resized_plane %s (kind %s), decode_jpeg %s (kind %s)", fr.ok ? "ok" : "failed",
             to_string(fr.kind), full_r.ok ? "ok" : "failed", to_string(full_r.kind));
  if (!fr.ok) return 0;
  FUZZ_CHECK(w == full.width && h == full.height, "fused size %dx%d, full %dx%d", w, h, full.width, full.height);
  FUZZ_CHECK(nch == 1 || channel >= 0, "the fused path decoded a colour file with channel -1");
  const std::vector<std::uint8_t> src = plane_of(channel < 0 ? 0 : channel);
  std::vector<std::uint8_t> want(dst.size());
  image::resize_plane(*plan, src.data(), full.width, 1, want.data(), scratch);
  FUZZ_CHECK(dst == want,
             "fused decode + resize (%s) differs from decode_jpeg + resize_plane (%dx%d -> %dx%d, split at output row "
             "%d)",
             split.parallel ? "two threads" : "one thread", w, h, out_w, out_h, split.split_row);
  return 0;
}
