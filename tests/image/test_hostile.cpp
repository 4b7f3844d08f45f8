// Hostile inputs cannot crash, exhaust or fool the decoders and the resize plans (docs/LIMITS.md). Each case is a
// small hand-made file (hostile_files.cpp) decoded while every heap allocation of the process is counted: the
// peak of the bytes in use during the call, beyond what was in use before it, must stay under the stated bound:
//   "no input of at most 1 MB makes the process allocate more than 64 MB beyond its own decoded pixel buffer".
// The counter: in the plain build this program replaces malloc & co. (forwarding to glibc's __libc_* functions);
// under ASan (which owns malloc) it uses the sanitizer allocator's malloc / free hooks. Both count every
// allocation of the process, libpng's / libjpeg's / libtiff's included, whatever their size.
#include <gtest/gtest.h>
#include "common/sanitizers.hpp"  // before anything tests SPRT_TEST_ASAN

#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "image/hostile_files.hpp"
#include "image/resize.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/image.hpp"
#include "superpoint_rt/superpoint.hpp"

namespace sp = superpoint_rt;
namespace hf = sprt_hostile;

// ---- allocation counter -----------------------------------------------------------------------------------------

namespace {
std::atomic<std::int64_t> g_in_use{0};
std::atomic<std::int64_t> g_peak{0};

inline void counted(std::int64_t delta) {
  const std::int64_t now = g_in_use.fetch_add(delta, std::memory_order_relaxed) + delta;
  std::int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

#if defined(SPRT_TEST_ASAN)
extern "C" {
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                              void (*free_hook)(const volatile void*));
std::size_t __sanitizer_get_allocated_size(const volatile void* p);
}
namespace {
void on_malloc(const volatile void*, std::size_t n) {
  counted(static_cast<std::int64_t>(n));
}
void on_free(const volatile void* p) {
  counted(-static_cast<std::int64_t>(__sanitizer_get_allocated_size(p)));
}
const bool g_hooks = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}  // namespace
#else
#include <malloc.h>
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

void* malloc(std::size_t n) {
  void* p = __libc_malloc(n);
  if (p) counted(static_cast<std::int64_t>(malloc_usable_size(p)));
  return p;
}
void* calloc(std::size_t a, std::size_t b) {
  void* p = __libc_calloc(a, b);
  if (p) counted(static_cast<std::int64_t>(malloc_usable_size(p)));
  return p;
}
void* realloc(void* old, std::size_t n) {
  const std::int64_t before = old ? static_cast<std::int64_t>(malloc_usable_size(old)) : 0;
  void* p = __libc_realloc(old, n);
  if (p) {
    counted(static_cast<std::int64_t>(malloc_usable_size(p)) - before);
  } else if (old && n == 0) {
    counted(-before);  // realloc(p, 0) freed p
  }
  return p;
}
void free(void* p) {
  if (p) counted(-static_cast<std::int64_t>(malloc_usable_size(p)));
  __libc_free(p);
}
void* memalign(std::size_t align, std::size_t n) {
  void* p = __libc_memalign(align, n);
  if (p) counted(static_cast<std::int64_t>(malloc_usable_size(p)));
  return p;
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  return memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(std::size_t n) {
  return memalign(4096, n);
}
void* pvalloc(std::size_t n) {
  return memalign(4096, (n + 4095) / 4096 * 4096);
}
}
namespace {
const bool g_hooks = true;
}  // namespace
#endif

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
// The stated bound (docs/LIMITS.md): for inputs of at most 1 MB, beyond the decoded result.
constexpr std::int64_t kBound = 64 * kMiB;

struct Outcome {
  bool ok = false;
  sp::ErrorKind kind = sp::ErrorKind::Internal;
  std::string message;
  std::int64_t result_bytes = 0;  // the decoded pixel buffer (0 on failure)
  std::int64_t peak = 0;          // peak heap bytes beyond those in use before the call
  double seconds = 0;
};

template <class F>
Outcome measure(F&& call) {
  Outcome o;
  const std::int64_t start = g_in_use.load();
  g_peak.store(start);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    o.result_bytes = call();
    o.ok = true;
  } catch (const sp::Error& e) {
    o.kind = e.kind();
    o.message = e.what();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.peak = g_peak.load() - start;
  return o;
}

Outcome decode(const hf::Bytes& file, const std::string& name) {
  EXPECT_LE(file.size(), std::size_t{1} << 20) << name << ": the bound is stated for inputs of at most 1 MB";
  return measure([&] {
    const sp::Image im = sp::decode_image(file, name);
    return static_cast<std::int64_t>(im.pixels.size());
  });
}

// The bound, with the numbers in the failure message.
void expect_bounded(const Outcome& o, const std::string& what) {
  EXPECT_LE(o.peak - o.result_bytes, kBound)
      << what << ": peak " << o.peak / kMiB << " MiB with a result of " << o.result_bytes / kMiB << " MiB ("
      << (o.ok ? "decoded" : o.message) << ")";
}

}  // namespace

TEST(Hostile, CounterSeesTheCodecsAllocations) {
  ASSERT_TRUE(g_hooks);
  // A valid 2000 x 1000 RGB PNG: the counter must see the result and not much more (libpng's rows).
  const hf::Bytes file = hf::png(2000, 1000, 8, 2, 0, hf::zero_rows(1000, 6000));
  const Outcome o = decode(file, "valid.png");
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_EQ(o.result_bytes, 2000 * 1000 * 3);
  EXPECT_GE(o.peak, o.result_bytes);
  // The result grows with the rows (its last doubling copies 4 MiB into 6 MiB), plus libpng's rows.
  EXPECT_LE(o.peak, 2 * o.result_bytes + 2 * kMiB);
  // Direct: a malloc the program makes is counted.
  const Outcome m = measure([] {
    void* volatile p = std::malloc(10 * kMiB);
    std::free(p);
    return std::int64_t{0};
  });
  EXPECT_GE(m.peak, 10 * kMiB);
}

// Defect 1: 4294967295 x 4294967295 (33 bytes). The size is refused by name, without a wrapped product in the
// message, and the probe (the server's pre-check) does not see a small size.
TEST(Hostile, HugeSidesAreRefusedByName) {
  const hf::Bytes file = hf::png(0xFFFFFFFFu, 0xFFFFFFFFu, 8, 2, 0, {});
  const Outcome o = decode(file, "huge.png");
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.kind, sp::ErrorKind::TooLarge);
  EXPECT_NE(o.message.find("4294967295x4294967295"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("INT_MAX"), std::string::npos) << o.message;
  EXPECT_EQ(o.message.find('-'), std::string::npos) << o.message;
  const sp::ImageInfo info = sp::probe_image(file, "huge.png");
  EXPECT_EQ(info.width, INT_MAX);
  EXPECT_EQ(info.height, INT_MAX);
  EXPECT_GT(static_cast<std::int64_t>(info.width) * info.height, sp::kDefaultMaxPixels);
  // One side too long, the other 1: still refused by name (not "1 pixel" nor a negative count).
  const Outcome p = decode(hf::png(0x80000000u, 1, 8, 0, 0, {}), "wide.png");
  EXPECT_EQ(p.kind, sp::ErrorKind::TooLarge);
  EXPECT_NE(p.message.find("2147483648x1"), std::string::npos) << p.message;
  EXPECT_EQ(sp::probe_image(hf::png(0x80000000u, 1, 8, 0, 0, {})).width, INT_MAX);
  const Outcome q = decode(hf::pnm_header_only(5, 9999999999, 1), "wide.pgm");
  EXPECT_EQ(q.kind, sp::ErrorKind::TooLarge) << q.message;
}

// Defect 5: header-only files of each format declare ~169 MP (13000 x 13000, under max_pixels) and hold no pixel
// data. Before: the full result (up to 507 MB) was allocated and zeroed before the first row was read.
TEST(Hostile, HeaderOnlyFilesAllocateNothingLarge) {
  const int n = 13000;
  struct Case {
    std::string name;
    hf::Bytes file;
  };
  const std::vector<Case> cases = {
      {"header.png", hf::png(n, n, 8, 2, 0, {})},
      {"header-interlaced.png", hf::png(n, n, 8, 2, 1, {})},
      {"header.jpg", hf::jpeg_header_only(hf::jpeg(64, 64, 3, false), n, n)},
      {"header-gray.jpg", hf::jpeg_header_only(hf::jpeg(64, 64, 1, false), n, n)},
      {"header-progressive.jpg", hf::jpeg_header_only(hf::jpeg(64, 64, 3, true), n, n)},
      {"header.gif", hf::gif_header_only(n, n)},
      {"header.ppm", hf::pnm_header_only(6, n, n)},
      {"header.pbm", hf::pnm_header_only(1, n, n)},
      {"header.pgm", hf::pnm_header_only(2, n, n)},
      {"header-rle.bmp", hf::bmp_rle8(n, n, {})},
      {"header.tif", hf::tiff(10000, 10000, 3, 8, 2, 10000, 300000000)},
      {"header-strips.tif", hf::tiff(10000, 10000, 3, 8, 2, 16, 480000)},
      {"header-deflate.tif", hf::tiff(10000, 10000, 3, 8, 2, 16, 480000, 8)},
      {"header.webp", hf::webp_header_only(16000, 10000, 1000000)},
  };
  for (const Case& c : cases) {
    const Outcome o = decode(c.file, c.name);
    EXPECT_FALSE(o.ok) << c.name;
    EXPECT_FALSE(o.message.empty()) << c.name;
    EXPECT_NE(o.message.find(c.name), std::string::npos) << o.message;
    // Far under the bound: nothing proportional to the declared size.
    EXPECT_LE(o.peak, 8 * kMiB) << c.name << ": " << o.message << " (peak " << o.peak / kMiB << " MiB)";
    expect_bounded(o, c.name);
  }
}

// Defect 2: extreme aspect ratios. The 20,000,000 x 1 and 1 x 4,000,000 gray PNGs (~20 / 8 KB) decode within the
// bound (rows allocated as decoded); the 20,000,000 x 1 and 1 x 20,000,000 resize plans (16 bytes per input pixel of
// the long axis, 320 MB) are refused by the plan before anything is allocated.
TEST(Hostile, ExtremeAspectRatios) {
  const Outcome wide = decode(hf::png(20000000, 1, 8, 0, 0, hf::zero_rows(1, 20000000)), "wide.png");
  EXPECT_TRUE(wide.ok) << wide.message;
  expect_bounded(wide, "20000000x1 PNG");
  // (4,000,000 rows, not 20,000,000: libpng's per-row cost would make this test take seconds.)
  const Outcome tall = decode(hf::png(1, 4000000, 8, 0, 0, hf::zero_rows(4000000, 1)), "tall.png");
  EXPECT_TRUE(tall.ok) << tall.message;
  expect_bounded(tall, "1x4000000 PNG");
  for (const auto& wh : {std::pair{20000000, 1}, std::pair{1, 20000000}}) {
    const int w = wh.first, h = wh.second;  // (clang 14 cannot capture a structured binding in the lambda)
    const Outcome o = measure([&] {
      const superpoint_rt::image::ResizePlan plan(w, h, 640, 480);
      return static_cast<std::int64_t>(plan.bytes);
    });
    EXPECT_FALSE(o.ok) << w << "x" << h;
    EXPECT_EQ(o.kind, sp::ErrorKind::TooLarge);
    EXPECT_NE(o.message.find(std::to_string(w) + "x" + std::to_string(h)), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("kMaxResizePlanBytes"), std::string::npos) << o.message;
    EXPECT_LE(o.peak, kMiB) << o.message;
  }
  // A tall image within the limit: the plan's intermediate is a window, not in_h x 640 bytes (1 x 1,000,000 would
  // need 640 MB); the estimate is what the plan is checked against.
  EXPECT_LE(superpoint_rt::image::resize_plan_bytes(100, 1000000, 640, 480), superpoint_rt::image::kMaxResizePlanBytes);
}

// Defect 3: BMP RLE delta escapes. Pillow's delta inserts right + up * width zeros (here 255 rows of 10,000,000
// pixels: 2.55 GB) and keeps only the image's first width * height of them; so do we, without the rest.
TEST(Hostile, BmpRleDeltaIsBoundedByTheImage) {
  // 00 02 (delta) + Pillow's two skipped bytes + (right 0, up 255), then end of bitmap.
  const hf::Bytes rle = {0x00, 0x02, 0x00, 0x00, 0x00, 0xFF, 0x00, 0x01};
  const Outcome o = decode(hf::bmp_rle8(10000000, 1, rle), "delta.bmp");
  EXPECT_TRUE(o.ok) << o.message;
  EXPECT_EQ(o.result_bytes, 10000000);  // gray ramp palette: the gray plane, all zeros
  expect_bounded(o, "RLE delta");
  // Many deltas in a small image: same bits as a plain fill, bounded.
  hf::Bytes many;
  for (int i = 0; i < 1000; ++i) many.insert(many.end(), {0x00, 0x02, 0x00, 0x00, 0xFF, 0xFF});
  const Outcome m = decode(hf::bmp_rle8(4000, 4000, many), "deltas.bmp");
  EXPECT_TRUE(m.ok) << m.message;
  expect_bounded(m, "RLE deltas");
  // File row 0 (the bottom row): 7, 7; a delta of one row up (zeros to row 1, column 2); end of line.
  const sp::Image im =
      sp::decode_image(hf::bmp_rle8(300, 2, {0x02, 0x07, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00}));
  ASSERT_EQ(im.pixels.size(), 600u);
  EXPECT_EQ(im.pixels[300], 7);
  EXPECT_EQ(im.pixels[301], 7);
  EXPECT_EQ(im.pixels[302], 0);
  EXPECT_EQ(im.pixels[0], 0);
}

// Defect 4: TIFF samples per pixel. Before: 170 x 170 x 65535 samples (1.9 GB) were allocated and zeroed before
// any strip was read. Now: refused by name; strips are read one at a time into buffers under the work limit.
TEST(Hostile, TiffSamplesPerPixelIsBounded) {
  const hf::Bytes file = hf::tiff(170, 170, 65535, 8, 1, 170, 64);
  EXPECT_LE(file.size(), 300u);
  const Outcome o = decode(file, "samples.tif");
  EXPECT_FALSE(o.ok);
  EXPECT_LE(o.peak, 8 * kMiB) << o.message;
  EXPECT_NE(o.message.find("samples.tif"), std::string::npos) << o.message;
  // A compressed strip decoding to 300 MB in a 200-byte file: refused by the working-memory limit, by name.
  const Outcome s = decode(hf::tiff(10000, 10000, 3, 8, 2, 10000, 64, 8), "strip.tif");
  EXPECT_EQ(s.kind, sp::ErrorKind::TooLarge) << s.message;
  EXPECT_NE(s.message.find("kDecodeWorkBytes"), std::string::npos) << s.message;
}

// Defect 6: a progressive JPEG of more than kMaxJpegScans scans is refused by name (a 64 x 64 file: cheap either
// way; the limit is what keeps a large one from costing minutes), one of fewer decodes.
TEST(Hostile, JpegScanLimit) {
  const hf::Bytes many = hf::jpeg_many_scans(64, 64, 7);  // 1 + 63 * 8 = 505 scans
  const Outcome o = decode(many, "scans.jpg");
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.kind, sp::ErrorKind::TooLarge) << o.message;
  EXPECT_NE(o.message.find(std::to_string(sp::kMaxJpegScans)), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("scans"), std::string::npos) << o.message;
  const Outcome fewer = decode(hf::jpeg_many_scans(64, 64, 6), "fewer.jpg");  // 1 + 63 * 7 = 442 scans
  EXPECT_TRUE(fewer.ok) << fewer.message;
}

// A progressive JPEG whose coefficient buffers exceed the working-memory limit is refused before libjpeg allocates
// them (max_memory_to_use), with the limit named; a small progressive file decodes.
TEST(Hostile, ProgressiveJpegCoefficientsAreBounded) {
  const Outcome o = decode(hf::jpeg_header_only(hf::jpeg(64, 64, 3, true), 13000, 13000), "big.jpg");
  EXPECT_EQ(o.kind, sp::ErrorKind::TooLarge) << o.message;
  EXPECT_NE(o.message.find("kDecodeWorkBytes"), std::string::npos) << o.message;
  EXPECT_LE(o.peak, 8 * kMiB);
  const Outcome ok = decode(hf::jpeg(640, 480, 3, true), "small.jpg");
  EXPECT_TRUE(ok.ok) << ok.message;
  expect_bounded(ok, "small progressive JPEG");
}

// Truncated files of a valid image: what they allocate follows what they decoded.
TEST(Hostile, TruncatedFilesAllocateWhatTheyDecoded) {
  hf::Bytes png = hf::png(8000, 8000, 8, 2, 0, hf::zero_rows(8000, 24000));  // 192 MB of pixels, ~190 KB
  ASSERT_LE(png.size(), std::size_t{1} << 20);
  png.resize(png.size() / 50);  // about 2% of the rows
  const Outcome o = decode(png, "cut.png");
  EXPECT_FALSE(o.ok);
  EXPECT_LE(o.peak, sp::kDecodeGrowthBytes * 2 + 4 * kMiB) << o.message;
  hf::Bytes jpg = hf::jpeg(2000, 1500, 3, false);
  jpg.resize(jpg.size() / 2);
  const Outcome j = decode(jpg, "cut.jpg");
  EXPECT_FALSE(j.ok);
  expect_bounded(j, "truncated JPEG");
}

// The resize's vertical intermediate is a window once ybox rows x out_w pass kResizeWindowBytes: bit-identical to
// the reference (which keeps every row), for tall shapes where rows move to the window's front many times.
TEST(Hostile, ResizeWindowEqualsReference) {
  namespace im = superpoint_rt::image;
  for (const auto& [w, h, ow, oh] : {std::array{37, 30000, 640, 480}, std::array{700, 9000, 640, 480},
                                     std::array{200, 100000, 64, 48}, std::array{640, 12000, 640, 7}}) {
    std::vector<std::uint8_t> src(static_cast<std::size_t>(w) * h);
    std::uint32_t x = 12345u + static_cast<std::uint32_t>(w);
    for (auto& v : src) {
      x = x * 1664525u + 1013904223u;
      v = static_cast<std::uint8_t>(x >> 24);
    }
    const im::ResizePlan plan(w, h, ow, oh);
    ASSERT_LT(im::resize_window_rows(plan), plan.ybox_last - plan.ybox_first) << w << "x" << h;
    std::vector<std::uint8_t> fast(static_cast<std::size_t>(ow) * oh), ref(fast.size());
    im::ResizeScratch s1, s2;
    im::resize_plane(plan, src.data(), w, 1, fast.data(), s1);
    im::resize_plane_reference(plan, src.data(), w, 1, ref.data(), s2);
    EXPECT_EQ(fast, ref) << w << "x" << h << " -> " << ow << "x" << oh;
    EXPECT_LE(s1.tmp.size(), static_cast<std::size_t>(im::resize_window_rows(plan)) * im::resize_tmp_stride(plan));
  }
}

// The engine's plan cache: a size whose plan is refused leaves nothing behind (before: a use-clock entry per size,
// forever), and the request fails by name within the memory bound (before: ~680 MB resident for a 19.5 KB PNG).
TEST(Hostile, EngineRefusesExtremeAspectRatiosWithoutCaching) {
  sp::Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 1;
  o.warmup = sp::WarmupSpec::minimal();
  sp::SuperPoint model = sp::SuperPoint::from_pretrained(o);
  const auto wide = [](std::uint32_t w) { return hf::png(w, 1, 8, 0, 0, hf::zero_rows(1, w)); };
  const hf::Bytes first = wide(20000000);
  const Outcome o1 = measure([&] {
    (void)model.run(sp::ImageInput::bytes(first, "wide.png"), sp::Params{});
    return std::int64_t{0};
  });
  EXPECT_EQ(o1.kind, sp::ErrorKind::TooLarge) << o1.message;
  EXPECT_NE(o1.message.find("kMaxResizePlanBytes"), std::string::npos) << o1.message;
  EXPECT_LE(o1.peak, 20000000 + kBound) << o1.message;
  std::vector<hf::Bytes> files;
  for (std::uint32_t i = 1; i <= 4; ++i) files.push_back(wide(20000000 + i));
  const std::int64_t before = g_in_use.load();
  for (const hf::Bytes& f : files) {
    EXPECT_THROW((void)model.run(sp::ImageInput::bytes(f, "wide.png"), sp::Params{}), sp::Error);
  }
  EXPECT_EQ(g_in_use.load(), before) << "refused sizes left memory behind";
}
