// The public C++ API: inputs of every kind give the same features, parameters are validated with clear messages,
// lifetime and threading rules hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <thread>

#include "common/test_util.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/cpu.hpp"

using namespace superpoint_rt;

namespace {

SuperPoint& model() {
  static SuperPoint m = [] {
    Options o;
    o.model = sprt_test::weights_dir();
    o.threads = 2;
    o.warmup = WarmupSpec::minimal();
    return SuperPoint::from_pretrained(o);
  }();
  return m;
}

std::string img(const std::string& name) {
  return sprt_test::images_dir() + "/" + name;
}

void expect_same(const Features& a, const Features& b) {
  EXPECT_EQ(a.keypoints, b.keypoints);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.descriptors, b.descriptors);
  EXPECT_EQ(a.image_size, b.image_size);
}

std::string error_of(const std::function<void()>& fn, ErrorKind* kind = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

TEST(Params, OutOfRangeAndNanAreErrorsNamingTheParameter) {
  struct Case {
    Params p;
    const char* name;
  };
  std::vector<Case> cases;
  Params p;
  p.max_keypoints = -2;
  cases.push_back({p, "max_keypoints"});
  p = {};
  p.max_keypoints = 307201;
  cases.push_back({p, "max_keypoints"});
  p = {};
  p.keypoint_threshold = -0.1f;
  cases.push_back({p, "keypoint_threshold"});
  p = {};
  p.keypoint_threshold = 1.5f;
  cases.push_back({p, "keypoint_threshold"});
  p = {};
  p.keypoint_threshold = std::numeric_limits<float>::quiet_NaN();
  cases.push_back({p, "keypoint_threshold"});
  p = {};
  p.nms_radius = -1;
  cases.push_back({p, "nms_radius"});
  p = {};
  p.nms_radius = 33;
  cases.push_back({p, "nms_radius"});
  const Image im = decode_file(img("skimage_coins.png"));
  for (const auto& c : cases) {
    ErrorKind kind{};
    const std::string msg = error_of([&] { model().run(ImageInput::image(im), c.p); }, &kind);
    EXPECT_EQ(kind, ErrorKind::InvalidArgument) << msg;
    EXPECT_NE(msg.find(c.name), std::string::npos) << msg;
    EXPECT_NE(msg.find("range"), std::string::npos) << msg;
  }
  // The edges of every range are accepted.
  for (int k : {-1, 0, 307200}) {
    Params ok;
    ok.max_keypoints = k;
    EXPECT_NO_THROW(model().run(ImageInput::image(im), ok));
  }
  for (int r : {0, 32}) {
    Params ok;
    ok.nms_radius = r;
    EXPECT_NO_THROW(model().run(ImageInput::image(im), ok));
  }
  for (float t : {0.0f, 1.0f}) {
    Params ok;
    ok.keypoint_threshold = t;
    const Features f = model().run(ImageInput::image(im), ok);
    if (t == 1.0f) {
      EXPECT_EQ(f.size(), 0u);  // strict '>': nothing beats 1
    }
  }
}

TEST(Inputs, FileBytesDecodedAndPixelViewsAgree) {
  const std::string path = img("berlin01_1600x900.jpg");
  const Features ref = model().run(ImageInput::file(path));
  ASSERT_GT(ref.size(), 100u);
  const auto bytes = read_file(path);
  expect_same(ref, model().run(ImageInput::bytes(bytes, "berlin.jpg")));
  const Image im = decode_file(path);
  expect_same(ref, model().run(ImageInput::image(im)));
  const int w = im.width, h = im.height;
  // BGR order, RGBA, padded strides, float views.
  std::vector<std::uint8_t> bgr(im.pixels.size()), rgba(static_cast<std::size_t>(w) * h * 4),
      padded(static_cast<std::size_t>(w * 3 + 17) * h);
  std::vector<float> f32(im.pixels.size());
  for (int i = 0; i < w * h; ++i) {
    for (int c = 0; c < 3; ++c) {
      bgr[3 * i + c] = im.pixels[3 * i + 2 - c];
      rgba[4 * i + c] = im.pixels[3 * i + c];
      f32[3 * i + c] = static_cast<float>(im.pixels[3 * i + c]) / 255.0f;
    }
    rgba[4 * i + 3] = static_cast<std::uint8_t>(i);
  }
  for (int y = 0; y < h; ++y)
    std::copy_n(&im.pixels[static_cast<std::size_t>(y) * w * 3], w * 3,
                &padded[static_cast<std::size_t>(y) * (w * 3 + 17)]);
  expect_same(ref, model().run(ImageInput::pixels(ImageView::bgr(bgr.data(), w, h))));
  Params bgr_flag;
  bgr_flag.bgr = true;
  expect_same(ref, model().run(ImageInput::pixels(ImageView::rgb(bgr.data(), w, h)), bgr_flag));
  expect_same(ref, model().run(ImageInput::pixels(ImageView::rgba(rgba.data(), w, h))));
  expect_same(ref, model().run(ImageInput::pixels(ImageView::rgb(padded.data(), w, h, w * 3 + 17))));
  ImageView fv{f32.data(), w, h, PixelFormat::RGB, SampleType::F32, 0};
  expect_same(ref, model().run(ImageInput::pixels(fv)));
}

TEST(Inputs, GrayImagesAndTheGrayscaleOption) {
  const std::string path = img("skimage_camera.png");  // a gray (mode L) PNG
  const Image im = decode_file(path);
  ASSERT_EQ(im.format, PixelFormat::Gray);
  const Features ref = model().run(ImageInput::file(path));
  Params gray;
  gray.grayscale = true;
  // A gray image feeds v / 255 unchanged with grayscale=True (HF's original processor).
  expect_same(ref, model().run(ImageInput::file(path), gray));
  // An RGB image with three equal channels is treated the same way.
  std::vector<std::uint8_t> rgb(im.pixels.size() * 3);
  for (std::size_t i = 0; i < im.pixels.size(); ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = im.pixels[i];
  expect_same(ref, model().run(ImageInput::pixels(ImageView::rgb(rgb.data(), im.width, im.height)), gray));
  expect_same(ref, model().run(ImageInput::pixels(ImageView::gray(im.pixels.data(), im.width, im.height))));
}

TEST(Inputs, TinyAndThinImagesWork) {
  for (auto [w, h] : {std::pair{1, 1}, std::pair{1, 5000}, std::pair{5000, 1}, std::pair{7, 3}}) {
    std::vector<std::uint8_t> px(static_cast<std::size_t>(w) * h);
    for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>((i * 37) % 251);
    const Features f = model().run(ImageInput::pixels(ImageView::gray(px.data(), w, h)));
    EXPECT_EQ(f.image_size[0], h);
    EXPECT_EQ(f.image_size[1], w);
    for (std::size_t i = 0; i < f.size(); ++i) {
      EXPECT_GE(f.keypoints[2 * i], 0.f);
      EXPECT_LT(f.keypoints[2 * i], static_cast<float>(w));
    }
  }
}

TEST(Inputs, BadViewsAndFloatsAreErrors) {
  std::vector<float> f(12, 0.5f);
  f[5] = 1.5f;
  ImageView v{f.data(), 2, 2, PixelFormat::RGB, SampleType::F32, 0};
  ErrorKind kind{};
  std::string msg = error_of([&] { model().run(ImageInput::pixels(v)); }, &kind);
  EXPECT_EQ(kind, ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("outside [0, 1]"), std::string::npos) << msg;
  f[5] = std::numeric_limits<float>::quiet_NaN();
  msg = error_of([&] { model().run(ImageInput::pixels(v)); }, &kind);
  EXPECT_EQ(kind, ErrorKind::InvalidArgument) << msg;
  std::uint8_t px[4] = {};
  msg = error_of([&] { model().run(ImageInput::pixels(ImageView::gray(px, 0, 4))); }, &kind);
  EXPECT_EQ(kind, ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("0x4"), std::string::npos) << msg;
  msg = error_of([&] { model().run(ImageInput::pixels(ImageView::gray(px, 4, 1, 2))); }, &kind);
  EXPECT_NE(msg.find("stride"), std::string::npos) << msg;
  msg = error_of([&] { model().run(ImageInput::pixels(ImageView::gray(nullptr, 4, 1))); }, &kind);
  EXPECT_NE(msg.find("null"), std::string::npos) << msg;
}

TEST(Inputs, MissingFileNamesTheFile) {
  ErrorKind kind{};
  const std::string msg = error_of([&] { model().run(ImageInput::file("/nonexistent/dir/x.jpg")); }, &kind);
  EXPECT_EQ(kind, ErrorKind::NotFound);
  EXPECT_NE(msg.find("/nonexistent/dir/x.jpg"), std::string::npos) << msg;
}

TEST(Outputs, ParametersShapeTheOutput) {
  const std::string path = img("berlin02_1600x900.jpg");
  Params all;
  all.max_keypoints = -1;
  const Features a = model().run(ImageInput::file(path), all);
  ASSERT_GT(a.size(), 1024u);
  for (std::size_t i = 1; i < a.size(); ++i) EXPECT_GE(a.scores[i - 1], a.scores[i]);
  for (float s : a.scores) EXPECT_GT(s, 0.005f);
  Params k;
  k.max_keypoints = 100;
  const Features b = model().run(ImageInput::file(path), k);
  ASSERT_EQ(b.size(), 100u);
  // The top-k are the first k of the full, sorted list.
  EXPECT_TRUE(std::equal(b.scores.begin(), b.scores.end(), a.scores.begin()));
  EXPECT_TRUE(std::equal(b.keypoints.begin(), b.keypoints.end(), a.keypoints.begin()));
  EXPECT_EQ(b.descriptors.size(), 100u * 256u);
  for (std::size_t i = 0; i < 100; ++i) {
    double n2 = 0;
    for (int c = 0; c < 256; ++c) n2 += double(b.descriptors[i * 256 + c]) * b.descriptors[i * 256 + c];
    EXPECT_NEAR(n2, 1.0, 1e-5);
  }
  Params nd;
  nd.return_descriptors = false;
  const Features c = model().run(ImageInput::file(path), nd);
  EXPECT_FALSE(c.has_descriptors);
  EXPECT_TRUE(c.descriptors.empty());
  EXPECT_EQ(c.scores, model().run(ImageInput::file(path)).scores);
  Params zero;
  zero.max_keypoints = 0;
  EXPECT_EQ(model().run(ImageInput::file(path), zero).size(), 0u);
  // Coordinates: (p / 640) * W with integer network positions p; the scale is W / 640.
  EXPECT_FLOAT_EQ(a.scale[0], 1600.0f / 640.0f);
  EXPECT_FLOAT_EQ(a.scale[1], 900.0f / 480.0f);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float px = a.keypoints[2 * i] / a.scale[0];
    EXPECT_NEAR(px, std::round(px), 1e-3);
    EXPECT_GE(std::round(px), 4.f);
    EXPECT_LT(std::round(px), 636.f);
  }
  EXPECT_GT(a.timing_ms.forward, 0.0);
  EXPECT_GT(a.timing_ms.decode, 0.0);
}

TEST(Lists, RunEachReportsPerImageErrorsInOrder) {
  std::vector<ImageInput> in = {ImageInput::file(img("icl_250.png")), ImageInput::file("/no/such/file.png"),
                                ImageInput::file(img("skimage_coins.png"))};
  for (int workers : {0, 3}) {
    auto r = model().run_each(in, {}, workers);
    ASSERT_EQ(r.size(), 3u);
    ASSERT_TRUE(std::holds_alternative<Features>(r[0]));
    ASSERT_TRUE(std::holds_alternative<Error>(r[1]));
    EXPECT_NE(std::string(std::get<Error>(r[1]).what()).find("/no/such/file.png"), std::string::npos);
    ASSERT_TRUE(std::holds_alternative<Features>(r[2]));
    expect_same(std::get<Features>(r[2]), model().run(in[2]));
    EXPECT_THROW(model().run(in, {}, workers), Error);
  }
}

// run_each with a sink hands over each result in input order, the same results run_each returns, at every worker
// count; an exception from the sink stops the list and propagates, and the model still serves the next list.
TEST(Lists, ASinkGetsRunEachsResultsInOrder) {
  std::vector<ImageInput> in = {ImageInput::file(img("icl_250.png")), ImageInput::file("/no/such/file.png"),
                                ImageInput::file(img("skimage_coins.png")), ImageInput::file(img("icl_254.png")),
                                ImageInput::file(img("opencv_box.png"))};
  const auto ref = model().run_each(in, {}, 0);
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    std::vector<std::size_t> order;
    std::vector<std::variant<Features, Error>> got;
    model().run_each(in, {}, workers, [&](std::size_t i, std::variant<Features, Error>&& r) {
      order.push_back(i);
      got.push_back(std::move(r));
    });
    ASSERT_EQ(order.size(), in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(order[i], i);
      ASSERT_EQ(got[i].index(), ref[i].index()) << i;
      if (const auto* f = std::get_if<Features>(&got[i]))
        expect_same(*f, std::get<Features>(ref[i]));
      else
        EXPECT_STREQ(std::get<Error>(got[i]).what(), std::get<Error>(ref[i]).what());
    }
    std::size_t seen = 0;
    EXPECT_THROW(model().run_each(in, {}, workers,
                                  [&](std::size_t i, std::variant<Features, Error>&&) {
                                    seen = i + 1;
                                    if (i == 2) throw std::runtime_error("the sink stops at 2");
                                  }),
                 std::runtime_error);
    EXPECT_EQ(seen, 3u);
    expect_same(std::get<Features>(model().run_each(in, {}, workers)[4]), std::get<Features>(ref[4]));
  }
  EXPECT_THROW(model().run_each(in, {}, 1, SuperPoint::ResultSink{}), Error);
}

// The list pipeline (prepare on workers, network in order, post-processing on workers beside the next forward)
// gives every image the single call's bits at any worker count, keeps the input order, and throws the first
// failing image in input order even when a later one fails earlier in time.
TEST(Lists, PipelineKeepsOrderBitsAndTheFirstError) {
  const std::vector<std::string> names = {"icl_250.png",         "skimage_coins.png", "/no/such/first.png",
                                          "icl_254.png",         "opencv_box.png",    "skimage_camera.png",
                                          "/no/such/second.png", "xfeat_ref.png"};
  std::vector<ImageInput> in;
  for (const auto& n : names) in.push_back(ImageInput::file(n[0] == '/' ? n : img(n)));
  std::vector<Features> ref;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (names[i][0] != '/') ref.push_back(model().run(in[i]));
  for (int workers : {1, 2, 5}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    const auto r = model().run_each(in, {}, workers);
    ASSERT_EQ(r.size(), in.size());
    std::size_t k = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (names[i][0] == '/') {
        ASSERT_TRUE(std::holds_alternative<Error>(r[i])) << i;
        EXPECT_NE(std::string(std::get<Error>(r[i]).what()).find(names[i]), std::string::npos);
      } else {
        ASSERT_TRUE(std::holds_alternative<Features>(r[i])) << i;
        expect_same(std::get<Features>(r[i]), ref[k++]);
      }
    }
    const std::string msg = error_of([&] { model().run(in, {}, workers); });
    EXPECT_NE(msg.find("/no/such/first.png"), std::string::npos) << msg;
  }
}

TEST(Threads, ConcurrentCallsOnOneModelGiveTheSameResults) {
  const std::string a = img("lg_DSC_0410.JPG"), b = img("tum_fr3_1341847980.722988.png");
  const Features ra = model().run(ImageInput::file(a)), rb = model().run(ImageInput::file(b));
  std::vector<std::thread> ts;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 2; ++i) {
        const bool first = (t + i) % 2 == 0;
        const Features f = model().run(ImageInput::file(first ? a : b));
        const Features& ref = first ? ra : rb;
        if (f.scores != ref.scores || f.keypoints != ref.keypoints || f.descriptors != ref.descriptors) ++mismatches;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Lifetime, CloseIsIdempotentAndLaterCallsThrowClosed) {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 1;
  o.warmup = WarmupSpec::none();
  SuperPoint m = SuperPoint::from_pretrained(o);
  std::uint8_t px[64] = {};
  EXPECT_NO_THROW(m.run(ImageInput::pixels(ImageView::gray(px, 8, 8))));
  m.close();
  m.close();
  EXPECT_TRUE(m.closed());
  ErrorKind kind{};
  error_of([&] { m.run(ImageInput::pixels(ImageView::gray(px, 8, 8))); }, &kind);
  EXPECT_EQ(kind, ErrorKind::Closed);
}

TEST(Warmup, ReportsStepsOnceAndValidates) {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 1;
  o.warmup = WarmupSpec::none();
  SuperPoint m = SuperPoint::from_pretrained(o);
  WarmupSpec s = WarmupSpec::minimal();
  s.sizes = {{1024, 768}};
  s.nms_radii = {3};
  const auto first = m.warmup(s);
  EXPECT_TRUE(first.count("size:1024x768"));
  EXPECT_TRUE(first.count("nms_radius:3"));
  EXPECT_TRUE(m.warmup(s).empty());  // everything ready: nothing runs
  WarmupSpec bad;
  bad.nms_radii = {40};
  EXPECT_THROW(m.warmup(bad), Error);
  bad = {};
  bad.decoders = {"heic"};
  EXPECT_THROW(m.warmup(bad), Error);
}

TEST(Options, BadOptionsAreErrors) {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = -1;
  EXPECT_THROW(SuperPoint::from_pretrained(o), Error);
  o.threads = 1;
  o.precision = "fp7";
  ErrorKind kind{};
  const std::string msg = error_of([&] { SuperPoint::from_pretrained(o); }, &kind);
  EXPECT_EQ(kind, ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("fp7"), std::string::npos) << msg;
  o.precision = "fp32";
  o.model = "/definitely/not/a/dir";
  EXPECT_THROW(SuperPoint::from_pretrained(o), Error);
}

}  // namespace

namespace {

TEST(Options, Int8CalibrationImagesSetTheRanges) {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 2;
  o.warmup = WarmupSpec::none();
  o.precision = "int8";
  const auto png = sprt_test::read_bytes(img("icl_250.png"));
  const Image camera = decode_file(img("skimage_camera.png"));
  const std::vector<ImageInput> calibration{ImageInput::file(img("berlin01_1600x900.jpg")),
                                            ImageInput::bytes(png, "icl_250.png"), ImageInput::pixels(camera.view())};
  {  // another precision does not use calibration images: refused, not ignored
    Options f = o;
    f.precision = "fp32";
    f.calibration = calibration;
    try {
      (void)SuperPoint::from_pretrained(f);
      ADD_FAILURE() << "calibration images accepted with fp32";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos) << e.what();
    }
  }
  {  // a bad calibration image names itself and its place in the list
    Options f = o;
    f.calibration = {ImageInput::file(img("icl_250.png")), ImageInput::file("/no/such/calibration.jpg")};
    try {
      (void)SuperPoint::from_pretrained(f);
      ADD_FAILURE() << "missing calibration image accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::NotFound);
      EXPECT_NE(std::string(e.what()).find("/no/such/calibration.jpg"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("calibration image 2 of 2"), std::string::npos) << e.what();
    }
  }
  if (!util::cpu_features().avx2_fma()) {
    Options f = o;
    f.calibration = calibration;
    EXPECT_THROW((void)SuperPoint::from_pretrained(f), Error) << "int8 accepted without AVX2 + FMA";
    return;
  }
  const SuperPoint builtin = SuperPoint::from_pretrained(o);
  EXPECT_EQ(builtin.info().calibration, "built-in (6 synthetic 640x480 images)");
  o.calibration = calibration;
  const SuperPoint a = SuperPoint::from_pretrained(o);
  const SuperPoint b = SuperPoint::from_pretrained(o);
  EXPECT_EQ(a.info().calibration, "3 image(s)");
  EXPECT_EQ(a.info().precision, "int8");
  const ImageInput probe = ImageInput::file(img("berlin02_1600x900.jpg"));
  const Features fa = a.run(probe), fb = b.run(probe), fc = builtin.run(probe);
  expect_same(fa, fb);  // calibration is deterministic
  EXPECT_GT(fa.size(), 100u);
  // Other ranges give other int8 bits: the images were used, not the built-in set.
  EXPECT_NE(fa.scores, fc.scores);
}

}  // namespace
