// Tests of image/resize: every SIMD kernel == the scalar reference (random planes, awkward shapes, strides, pixel
// steps, guard pages after the source and destination), and the reference == Pillow 9.4 (random images through
// /usr/bin/python3, a real 12 MP JPEG, and the pixel_values of the dense goldens).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "image/resize.hpp"
#include "image/resize_kernels.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"
#include "util/npz.hpp"

namespace si = superpoint_rt::image;
namespace su = superpoint_rt::util;

namespace {

// n bytes that end right before a PROT_NONE page, so reading or writing one byte past them faults.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t n) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t body = (n + page - 1) / page * page;
    total_ = body + page;
    void* p = ::mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<std::uint8_t*>(p);
    if (::mprotect(base_ + body, page, PROT_NONE) != 0) throw std::runtime_error("mprotect failed");
    data_ = base_ + body - n;
  }
  ~GuardedBuffer() { ::munmap(base_, total_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  std::uint8_t* data() { return data_; }

 private:
  std::uint8_t* base_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::size_t total_ = 0;
};

using Fn = void (*)(const si::ResizePlan&, const std::uint8_t*, std::ptrdiff_t, int, std::uint8_t*, si::ResizeScratch&);
struct NamedKernel {
  const char* name;
  Fn fn;
};

// Every kernel this CPU can run by the library's detection (after the SUPERPOINT_RT_ISA cap, so that a capped run
// tests what a CPU of that level has), plus the dispatching entry point itself.
std::vector<NamedKernel> kernels() {
  std::vector<NamedKernel> k;
  k.push_back({"resize_plane", si::resize_plane});
  const auto& f = su::cpu_features();
  if (f.avx2_fma()) k.push_back({"avx2", si::detail::resize_plane_avx2});
  if (f.avx512()) k.push_back({"avx512", si::detail::resize_plane_avx512});
  return k;
}

struct Case {
  int in_w, in_h, out_w, out_h;
  int step = 1, channel = 0;
  std::ptrdiff_t pad = 0;  // extra bytes per row
};

std::string describe(const Case& c) {
  return std::to_string(c.in_w) + "x" + std::to_string(c.in_h) + " -> " + std::to_string(c.out_w) + "x" +
         std::to_string(c.out_h) + " step " + std::to_string(c.step) + " channel " + std::to_string(c.channel) +
         " pad " + std::to_string(c.pad);
}

// Fills a guarded source (last sample = last byte before the guard page), runs the reference and every kernel
// (each into a guarded destination, twice with one scratch to catch stale-scratch bugs), compares bytes.
void check_case(const Case& c, std::mt19937& rng, int fill_kind = 0) {
  const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(c.in_w) * c.step + c.pad;
  const std::size_t n = static_cast<std::size_t>(c.channel + (c.in_h - 1) * stride +
                                                 static_cast<std::ptrdiff_t>(c.in_w - 1) * c.step + 1);
  GuardedBuffer src(n);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::size_t i = 0; i < n; ++i) {
    switch (fill_kind) {
      case 1: src.data()[i] = 255; break;                                                  // clip at 255
      case 2: src.data()[i] = static_cast<std::uint8_t>(((i / c.step) & 1) * 255); break;  // 0/255 stripes
      default: src.data()[i] = static_cast<std::uint8_t>(byte(rng)); break;
    }
  }
  const si::ResizePlan plan(c.in_w, c.in_h, c.out_w, c.out_h);
  const std::size_t out_n = static_cast<std::size_t>(c.out_w) * c.out_h;
  std::vector<std::uint8_t> ref(out_n);
  si::ResizeScratch rs;
  si::resize_plane_reference(plan, src.data() + c.channel, stride, c.step, ref.data(), rs);
  for (const auto& k : kernels()) {
    GuardedBuffer dst(out_n);
    si::ResizeScratch scratch;
    for (int rep = 0; rep < 2; ++rep) {
      std::memset(dst.data(), 0xA5, out_n);
      k.fn(plan, src.data() + c.channel, stride, c.step, dst.data(), scratch);
      const auto mism = std::mismatch(ref.begin(), ref.end(), dst.data());
      if (mism.first != ref.end()) {
        const std::ptrdiff_t at = mism.first - ref.begin();
        ADD_FAILURE() << k.name << " differs from the reference for " << describe(c) << " fill " << fill_kind
                      << " at x=" << at % c.out_w << " y=" << at / c.out_w << ": " << int(*mism.second) << " vs "
                      << int(*mism.first);
        return;
      }
    }
  }
}

TEST(Resize, KernelNameMatchesIsa) {
  const std::string name = si::resize_kernel_name();
  EXPECT_EQ(name, su::to_string(su::best_isa()));
}

TEST(Resize, FastEqualsReferenceFixedShapes) {
  std::mt19937 rng(1234);
  const std::vector<std::array<int, 4>> sizes = {
      {1, 1, 1, 1},          {1, 1, 5, 7},           {1, 1, 640, 480},     {7, 5, 1, 1},         {1, 37, 1, 5},
      {37, 1, 5, 1},         {1, 50, 13, 50},        {50, 1, 50, 13},      {1, 30, 1, 90},       {33, 1, 90, 1},
      {17, 13, 17, 13},      {31, 29, 31, 7},        {31, 29, 9, 29},      {31, 29, 70, 29},     {31, 29, 31, 70},
      {37, 53, 20, 31},      {30, 40, 48, 64},       {25, 33, 25, 70},     {63, 65, 127, 33},    {129, 17, 15, 65},
      {100, 100, 99, 101},   {640, 480, 640, 480},   {641, 481, 640, 480}, {639, 479, 640, 480}, {324, 223, 640, 480},
      {1600, 900, 640, 480}, {1920, 1080, 640, 480}, {3000, 20, 7, 3},     {20, 3000, 3, 7},     {5, 700, 300, 2},
      {700, 5, 2, 300},      {65, 65, 64, 64},       {64, 64, 65, 65},     {16, 16, 17, 15},     {200, 3, 33, 47},
      {2, 2, 1000, 3}};
  for (const auto& s : sizes) {
    for (int step : {1, 3, 4}) {
      const Case c{s[0], s[1], s[2], s[3], step, step - 1, step == 3 ? 5 : 0};
      check_case(c, rng);
      if (s[0] * s[1] <= 100000) check_case(Case{s[0], s[1], s[2], s[3], step, 0, 0}, rng);
    }
  }
}

TEST(Resize, FastEqualsReferenceRandomShapes) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> dim(1, 90), stepd(1, 5), padd(0, 9), coin(0, 3);
  for (int t = 0; t < 400; ++t) {
    Case c{dim(rng), dim(rng), dim(rng), dim(rng)};
    const int kind = coin(rng);  // sometimes keep one axis
    if (kind == 1) c.out_w = c.in_w;
    if (kind == 2) c.out_h = c.in_h;
    c.step = stepd(rng);
    c.channel = std::uniform_int_distribution<int>(0, c.step - 1)(rng);
    c.pad = padd(rng);
    check_case(c, rng, t % 7 == 0 ? 1 : (t % 7 == 1 ? 2 : 0));
  }
}

TEST(Resize, FastEqualsReferenceSaturatedAndStriped) {
  std::mt19937 rng(5);
  for (int fill : {1, 2}) {
    for (const Case& c :
         {Case{1600, 900, 640, 480, 3, 0, 0}, Case{324, 223, 640, 480, 1, 0, 3}, Case{97, 45, 13, 300, 4, 3, 0}}) {
      check_case(c, rng, fill);
    }
  }
}

TEST(Resize, FastEqualsReference12MP) {
  std::mt19937 rng(7);
  check_case(Case{4032, 3024, 640, 480, 3, 0, 0}, rng);
  check_case(Case{3024, 4032, 640, 480, 3, 2, 0}, rng);
}

TEST(Resize, CoefficientsInvariants) {
  for (const auto& [in, out] : std::vector<std::pair<int, int>>{
           {1, 1}, {10, 3}, {3, 10}, {1600, 640}, {4032, 640}, {900, 480}, {223, 480}, {5000, 1}}) {
    const si::AxisCoeffs c = si::make_axis_coeffs(in, out);
    ASSERT_EQ(c.out_size, out);
    ASSERT_EQ(c.k.size(), static_cast<std::size_t>(out) * c.ksize);
    for (int o = 0; o < out; ++o) {
      const int xmin = c.bounds[2 * o], cnt = c.bounds[2 * o + 1];
      ASSERT_GE(xmin, 0);
      ASSERT_GE(cnt, 1);
      ASSERT_LE(cnt, c.ksize);
      ASSERT_LE(xmin + cnt, in);
      std::int64_t sum = 0;
      for (int t = 0; t < c.ksize; ++t) {
        const std::int32_t k = c.k[static_cast<std::size_t>(o) * c.ksize + t];
        ASSERT_GE(k, 0);
        if (t >= cnt) {
          ASSERT_EQ(k, 0) << "padding weight";
        }
        sum += k;
      }
      // Each weight is rounded to nearest: the 22-bit sum is 2^22 up to half a unit per tap.
      EXPECT_LE(std::llabs(sum - (std::int64_t{1} << 22)), c.ksize) << in << "->" << out << " output " << o;
    }
  }
}

TEST(Resize, BadSizesThrow) {
  for (const auto& s : std::vector<std::array<int, 4>>{{0, 1, 1, 1}, {1, 0, 1, 1}, {1, 1, 0, 1}, {1, 1, 1, -3}}) {
    try {
      si::ResizePlan p(s[0], s[1], s[2], s[3]);
      ADD_FAILURE() << "no error for " << s[0] << "x" << s[1] << " -> " << s[2] << "x" << s[3];
    } catch (const superpoint_rt::Error& e) {
      EXPECT_EQ(e.kind(), superpoint_rt::ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("must be >= 1"), std::string::npos) << e.what();
    }
  }
}

// ---- Pillow ----

std::string pillow_python() {
  const std::string py = sprt_test::python_with(true);
  if (py.empty()) {
    ADD_FAILURE() << "no python3 with numpy + Pillow (set SUPERPOINT_RT_PYTHON or install python3-pil)";
  }
  return py;
}

std::string script() {
  return std::string(SPRT_SOURCE_DIR) + "/tests/resize/pillow_resize.py";
}

const su::NpyArray& member(const std::map<std::string, su::NpyArray>& m, const std::string& name) {
  const auto it = m.find(name);
  if (it == m.end()) throw std::runtime_error("npz lacks " + name);
  return it->second;
}

TEST(ResizePillow, ReferenceEqualsPillowRandom) {
  const std::string py = pillow_python();
  if (py.empty()) return;
  struct PCase {
    int in_w, in_h, out_w, out_h, channels;
  };
  std::vector<PCase> cases = {{37, 53, 20, 31, 1},      {30, 40, 48, 64, 3},     {25, 33, 25, 70, 1},
                              {25, 33, 70, 33, 3},      {1, 1, 9, 4, 1},         {9, 4, 1, 1, 3},
                              {1600, 900, 640, 480, 3}, {324, 223, 640, 480, 1}, {1920, 1080, 640, 480, 1},
                              {1000, 7, 3, 900, 3},     {3, 1000, 900, 2, 1},    {640, 480, 640, 480, 3}};
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> dim(1, 160), ch(0, 1);
  for (int i = 0; i < 40; ++i) cases.push_back({dim(rng), dim(rng), dim(rng), dim(rng), ch(rng) ? 3 : 1});

  std::uniform_int_distribution<int> byte(0, 255);
  std::map<std::string, su::NpyArray> in;
  std::vector<std::vector<std::uint8_t>> imgs;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const PCase& c = cases[i];
    std::vector<std::uint8_t> img(static_cast<std::size_t>(c.in_w) * c.in_h * c.channels);
    const bool smooth = i % 3 == 0;  // natural-looking gradients as well as noise and saturation
    for (std::size_t j = 0; j < img.size(); ++j) {
      img[j] = smooth ? static_cast<std::uint8_t>((j / c.channels * 7 + j % c.channels * 40) % 256)
                      : static_cast<std::uint8_t>(i % 5 == 1 ? 255 : byte(rng));
    }
    std::vector<std::int64_t> shape = {c.in_h, c.in_w};
    if (c.channels == 3) shape.push_back(3);
    in["img_" + std::to_string(i)] = su::NpyArray::from_bytes("u1", img.data(), img.size(), shape);
    in["size_" + std::to_string(i)] = su::NpyArray::from_int64({c.out_w, c.out_h}, {2});
    imgs.push_back(std::move(img));
  }
  sprt_test::TempDir dir;
  sprt_test::write_bytes(dir.file("in.npz"), su::npz_bytes(in));
  std::string log;
  ASSERT_EQ(
      sprt_test::run_command(py + " " + script() + " cases " + dir.file("in.npz") + " " + dir.file("out.npz"), &log), 0)
      << log;
  const auto out = su::load_npz(dir.file("out.npz"));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const PCase& c = cases[i];
    const su::NpyArray& want = member(out, "out_" + std::to_string(i));
    ASSERT_EQ(want.data.size(), static_cast<std::size_t>(c.out_w) * c.out_h * c.channels);
    const si::ResizePlan plan(c.in_w, c.in_h, c.out_w, c.out_h);
    si::ResizeScratch scratch;
    for (int channel = 0; channel < c.channels; ++channel) {
      std::vector<std::uint8_t> ref(static_cast<std::size_t>(c.out_w) * c.out_h), fast(ref.size());
      si::resize_plane_reference(plan, imgs[i].data() + channel, static_cast<std::ptrdiff_t>(c.in_w) * c.channels,
                                 c.channels, ref.data(), scratch);
      si::resize_plane(plan, imgs[i].data() + channel, static_cast<std::ptrdiff_t>(c.in_w) * c.channels, c.channels,
                       fast.data(), scratch);
      int bad = 0;
      for (std::size_t p = 0; p < ref.size(); ++p) {
        const std::uint8_t w = want.data[p * c.channels + channel];
        if (ref[p] != w || fast[p] != w) ++bad;
      }
      EXPECT_EQ(bad, 0) << "case " << i << ": " << c.in_w << "x" << c.in_h << " -> " << c.out_w << "x" << c.out_h
                        << " channels " << c.channels << " channel " << channel;
    }
  }
}

// Decodes `paths` with Pillow (RGB) and, when resize_to is set, also returns Pillow's resize of the RGB image.
std::map<std::string, su::NpyArray> pillow_decode(const std::string& py, const std::vector<std::string>& paths,
                                                  const std::string& resize_to, const sprt_test::TempDir& dir) {
  std::string cmd = (resize_to.empty() ? "" : "RESIZE_TO=" + resize_to + " ") + py + " " + script() + " decode " +
                    dir.file("dec.npz");
  for (const auto& p : paths) cmd += " " + p;
  std::string log;
  if (sprt_test::run_command(cmd, &log) != 0) throw std::runtime_error("pillow decode failed: " + log);
  return su::load_npz(dir.file("dec.npz"));
}

TEST(ResizePillow, Real12MegapixelJpeg) {
  const std::string py = pillow_python();
  if (py.empty()) return;
  sprt_test::TempDir dir;
  const auto dec = pillow_decode(py, {sprt_test::images_dir() + "/monstree_IMG_1027.JPG"}, "640,480", dir);
  const su::NpyArray& rgb = member(dec, "rgb_0");
  const su::NpyArray& want = member(dec, "rs_0");
  ASSERT_EQ(rgb.shape.size(), 3u);
  const int h = static_cast<int>(rgb.shape[0]), w = static_cast<int>(rgb.shape[1]);
  EXPECT_EQ(w * h, 4032 * 3024);
  const si::ResizePlan plan(w, h, 640, 480);
  si::ResizeScratch scratch;
  for (int channel : {0, 2}) {
    std::vector<std::uint8_t> ref(640 * 480), fast(640 * 480);
    si::resize_plane_reference(plan, rgb.data.data() + channel, static_cast<std::ptrdiff_t>(w) * 3, 3, ref.data(),
                               scratch);
    si::resize_plane(plan, rgb.data.data() + channel, static_cast<std::ptrdiff_t>(w) * 3, 3, fast.data(), scratch);
    int bad_ref = 0, bad_fast = 0;
    for (std::size_t p = 0; p < ref.size(); ++p) {
      bad_ref += ref[p] != want.data[p * 3 + channel];
      bad_fast += fast[p] != want.data[p * 3 + channel];
    }
    EXPECT_EQ(bad_ref, 0) << "channel " << channel;
    EXPECT_EQ(bad_fast, 0) << "channel " << channel;
  }
}

// The dense goldens' pixel_values are HF's processor output: v / 255.0f of Pillow's resize of the R plane.
TEST(ResizePillow, DenseGoldenPixelValues) {
  const std::string py = pillow_python();
  if (py.empty()) return;
  sprt_test::TempDir dir;
  const std::vector<std::string> names = {"berlin01_1600x900.jpg", "icl_250.png"};
  std::vector<std::string> paths;
  for (const auto& n : names) paths.push_back(sprt_test::images_dir() + "/" + n);
  const auto dec = pillow_decode(py, paths, "", dir);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const su::NpyArray& rgb = member(dec, "rgb_" + std::to_string(i));
    const int h = static_cast<int>(rgb.shape[0]), w = static_cast<int>(rgb.shape[1]);
    const auto golden = su::load_npz(sprt_test::golden_dir() + "/dense/" + names[i] + ".npz");
    const std::vector<float> pv = member(golden, "pixel_values").as_float();
    ASSERT_EQ(pv.size(), 640u * 480u) << names[i];
    const si::ResizePlan plan(w, h, 640, 480);
    si::ResizeScratch scratch;
    std::vector<std::uint8_t> ref(640 * 480), fast(640 * 480);
    si::resize_plane_reference(plan, rgb.data.data(), static_cast<std::ptrdiff_t>(w) * 3, 3, ref.data(), scratch);
    si::resize_plane(plan, rgb.data.data(), static_cast<std::ptrdiff_t>(w) * 3, 3, fast.data(), scratch);
    int bad_ref = 0, bad_fast = 0;
    for (std::size_t p = 0; p < pv.size(); ++p) {
      const float r = static_cast<float>(ref[p]) / 255.0f, f = static_cast<float>(fast[p]) / 255.0f;
      bad_ref += std::memcmp(&pv[p], &r, sizeof(float)) != 0;  // bit for bit
      bad_fast += std::memcmp(&pv[p], &f, sizeof(float)) != 0;
    }
    EXPECT_EQ(bad_ref, 0) << names[i];
    EXPECT_EQ(bad_fast, 0) << names[i];
  }
}

}  // namespace
