// The parameter table and the presets (superpoint_rt/params.hpp), and requests at network frames other than 640x480.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "common/test_util.hpp"
#include "superpoint_rt/params.hpp"
#include "superpoint_rt/superpoint.hpp"

using namespace superpoint_rt;

namespace {

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::Internal;  // "did not throw"
}

TEST(Params, PresetDefaultsAreTheToolsValues) {
  const ResolvedParams hf = resolve(Params{});
  EXPECT_EQ(hf.max_keypoints, 1024);
  EXPECT_EQ(hf.nms_radius, 4);
  EXPECT_EQ(hf.resize_mode, ResizeMode::Fixed);
  EXPECT_EQ(hf.network_frame(1600, 900, "x"), std::make_pair(640, 480));
  Params p;
  p.preset = "hloc:superpoint_aachen";
  const ResolvedParams a = resolve(p);
  EXPECT_EQ(a.max_keypoints, 4096);
  EXPECT_EQ(a.nms_radius, 3);
  EXPECT_EQ(a.pixels, PixelPath::CvGray);
  // hloc: (round(W * s), round(H * s)), s = 1024 / max; 4032x3024 -> 1024x768; 1063 tall -> 751 x 1024 (780 * 0.963..)
  EXPECT_EQ(a.network_frame(4032, 3024, "x"), std::make_pair(1024, 768));
  EXPECT_EQ(a.network_frame(780, 1063, "x"), std::make_pair(751, 1024));
  EXPECT_EQ(a.network_frame(800, 600, "x"), std::make_pair(800, 600));  // not larger: not resized
  p.preset = "hloc:superpoint_max";
  EXPECT_EQ(resolve(p).network_frame(800, 600, "x"), std::make_pair(1600, 1200));  // resize_force
  p.preset = "lightglue";
  const ResolvedParams lg = resolve(p);
  EXPECT_EQ(lg.max_keypoints, 2048);
  EXPECT_FLOAT_EQ(lg.keypoint_threshold, 0.0005f);
  // kornia side="long": int(1024 / (1600 / 900)) = 576; portrait int(1024 * 731 / 1024)
  EXPECT_EQ(lg.network_frame(1600, 900, "x"), std::make_pair(1024, 576));
  EXPECT_EQ(lg.network_frame(768, 1024, "x"), std::make_pair(768, 1024));
}

TEST(Params, ExifOrientationFollowsEachToolsImageReader) {
  // hloc's read_image: IMREAD_IGNORE_ORIENTATION since "Don't autorotate images on load (#373)"; LightGlue's
  // load_image: plain cv2.imread(IMREAD_COLOR), which applies it; Pillow (hf) never does.
  Params p;
  EXPECT_FALSE(resolve(p).exif_orientation);
  for (const char* hloc : {"hloc:superpoint_aachen", "hloc:superpoint_max", "hloc:superpoint_inloc"}) {
    p.preset = hloc;
    EXPECT_FALSE(resolve(p).exif_orientation) << hloc;
  }
  p.preset = "lightglue";
  EXPECT_TRUE(resolve(p).exif_orientation);
  set_param_text(p, "exif_orientation", "false");
  EXPECT_FALSE(resolve(p).exif_orientation);
  p.preset = "hloc:superpoint_aachen";
  set_param(p, "exif_orientation", ParamValue{true});  // users of hloc before #373
  EXPECT_TRUE(resolve(p).exif_orientation);
  Params hf;
  hf.exif_orientation = true;
  EXPECT_EQ(kind_of([&] { hf.validate(); }), ErrorKind::InvalidArgument);
  hf.exif_orientation = false;
  EXPECT_NO_THROW(hf.validate());
}

TEST(Params, ExplicitValuesOverrideThePreset) {
  Params p;
  p.preset = "hloc:superpoint_aachen";
  p.max_keypoints = 100;
  p.resize_max = 512;
  const ResolvedParams r = resolve(p);
  EXPECT_EQ(r.max_keypoints, 100);
  EXPECT_EQ(r.network_frame(1024, 768, "x"), std::make_pair(512, 384));
  Params q;  // hf with resize_max: the fixed frame gives way
  q.resize_max = 800;
  EXPECT_EQ(resolve(q).network_frame(1600, 900, "x"), std::make_pair(800, 450));
  Params n;
  n.resize = "none";
  EXPECT_EQ(resolve(n).network_frame(333, 251, "x"), std::make_pair(333, 251));
}

TEST(Params, BadValuesAndContradictionsAreNamedErrors) {
  Params p;
  p.preset = "hloc";
  EXPECT_EQ(kind_of([&] { p.validate(); }), ErrorKind::InvalidArgument);
  Params q;
  q.resize = "640x480";
  q.resize_max = 1024;
  try {
    q.validate();
    FAIL() << "resize and resize_max together were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("contradict"), std::string::npos) << e.what();
  }
  Params r;
  r.resize = "4x8";  // below the 8-pixel minimum side
  EXPECT_EQ(kind_of([&] { r.validate(); }), ErrorKind::InvalidArgument);
  r.resize = "8193x100";  // a side outside the parameter's range
  EXPECT_EQ(kind_of([&] { r.validate(); }), ErrorKind::InvalidArgument);
  Params s;
  s.preset = "lightglue";
  s.grayscale = false;
  EXPECT_EQ(kind_of([&] { s.validate(); }), ErrorKind::InvalidArgument);
  Params t;
  t.resize = "none";
  EXPECT_EQ(kind_of([&] { (void)resolve(t).network_frame(9000, 100, "big"); }), ErrorKind::TooLarge);
  EXPECT_EQ(kind_of([&] { (void)resolve(t).network_frame(5, 100, "small"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(resolve(t).network_frame(8, 100, "one cell"), std::make_pair(8, 100));
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// docs/LIMITS.md: a frame over the limit is TooLarge (HTTP 413), also when an explicit resize asks for it.
TEST(Params, ExplicitResizeOverTheFrameLimitIsTooLarge) {
  Params p;
  p.resize = "8192x8192";
  EXPECT_EQ(kind_of([&] { p.validate(); }), ErrorKind::TooLarge);
  EXPECT_NE(message_of([&] { p.validate(); }).find("16777216"), std::string::npos) << message_of([&] { p.validate(); });
  p.resize = "4096x4096";  // the network's own limit: fine for the library's default max_frame_pixels
  EXPECT_NO_THROW(p.validate());
  // Options::max_frame_pixels (the server's 1600 x 1600): TooLarge naming the limit and the parameter.
  const std::string m = message_of([&] { (void)resolve(p).network_frame(1, 1, "img.png", 2560000); });
  EXPECT_EQ(kind_of([&] { (void)resolve(p).network_frame(1, 1, "img.png", 2560000); }), ErrorKind::TooLarge);
  for (const char* word : {"img.png", "resize = 4096x4096", "16777216", "2560000", "max_frame_pixels"})
    EXPECT_NE(m.find(word), std::string::npos) << word << " not in: " << m;
  EXPECT_EQ(m.find("(1x1)"), std::string::npos) << "a fixed frame's message shows no image size: " << m;
  Params none;
  none.resize = "none";
  const std::string n = message_of([&] { (void)resolve(none).network_frame(2000, 1500, "big.jpg", 2560000); });
  EXPECT_NE(n.find("big.jpg (2000x1500): resize = none"), std::string::npos) << n;
  EXPECT_EQ(resolve(none).network_frame(1600, 1600, "x", 2560000), std::make_pair(1600, 1600));
  EXPECT_EQ(largest_preset_frame_pixels(), 1600 * 1600);
}

// Panoramas hloc and LightGlue take (issue 19 §3): any source side; a frame too thin for the network is refused
// naming the user's parameter, never an internal function.
TEST(Params, WideAndTallImagesGetTheToolsFrames) {
  for (const char* preset : {"hloc:superpoint_aachen", "hloc:superpoint_max", "hloc:superpoint_inloc", "lightglue"}) {
    Params p;
    p.preset = preset;
    const ResolvedParams r = resolve(p);
    const int n = r.resize_max;
    const std::pair<int, int> wide = r.network_frame(17000, 300, "pano.jpg");
    EXPECT_EQ(wide.first, n) << preset;
    EXPECT_EQ(wide.second, static_cast<int>(300.0 * n / 17000 + (preset[0] == 'h' ? 0.5 : 0.0))) << preset;
    const std::pair<int, int> tall = r.network_frame(300, 17000, "pano.jpg");
    EXPECT_EQ(tall, std::make_pair(wide.second, wide.first)) << preset;
    const std::string m = message_of([&] { (void)r.network_frame(40000, 100, "thin.jpg"); });
    EXPECT_EQ(kind_of([&] { (void)r.network_frame(40000, 100, "thin.jpg"); }), ErrorKind::InvalidArgument) << m;
    for (const char* word : {"thin.jpg (40000x100)", "resize_max = ", "minimum of 8"})
      EXPECT_NE(m.find(word), std::string::npos) << word << " not in: " << m;
    for (const char* internal : {"hloc_resize_size", "kornia_long_side_size", "cv2_resize"})
      EXPECT_EQ(m.find(internal), std::string::npos) << m;
  }
}

// Text values are parsed as decimal numbers only (std::from_chars), and quoted whole in messages.
TEST(Params, TextFloatsAreDecimalAndMessagesShowEveryByte) {
  Params p;
  EXPECT_EQ(kind_of([&] { set_param_text(p, "keypoint_threshold", "0x1p-3"); }), ErrorKind::InvalidArgument);
  EXPECT_FALSE(p.keypoint_threshold.has_value());
  for (const char* bad : {" 0.5", "+0.5", "0.5 ", "0,5", "0x10", "1e", ""})
    EXPECT_EQ(kind_of([&] { set_param_text(p, "keypoint_threshold", bad); }), ErrorKind::InvalidArgument) << bad;
  set_param_text(p, "keypoint_threshold", "5e-3");
  EXPECT_EQ(*p.keypoint_threshold, 0.005f);
  set_param_text(p, "keypoint_threshold", "1e-300");  // under float's range: its nearest float, 0
  EXPECT_EQ(*p.keypoint_threshold, 0.0f);
  set_param_text(p, "keypoint_threshold", "1e-400");  // under double's range too: 0, as Python's float()
  EXPECT_EQ(*p.keypoint_threshold, 0.0f);
  set_param_text(p, "keypoint_threshold", "0.00000000000000000000000000000000000000000000000000000000001");
  EXPECT_EQ(*p.keypoint_threshold, 0.0f);
  for (const char* over : {"1e300", "1e400", "1.0000001", "-1e-3"})
    EXPECT_EQ(kind_of([&] { set_param_text(p, "keypoint_threshold", over); }), ErrorKind::InvalidArgument) << over;
  set_param_text(p, "keypoint_threshold", "1.00000000000000000001");  // the nearest double is 1
  EXPECT_EQ(*p.keypoint_threshold, 1.0f);
  // A NUL in a value (a query's %00) does not end the message: what() shows it as \x00 and the rest follows.
  const std::string nul("7\0tail", 6);
  for (const char* name : {"max_keypoints", "keypoint_threshold", "preset", "grayscale"}) {
    const std::string m = message_of([&] { set_param_text(p, name, nul); });
    EXPECT_NE(m.find("7\\x00tail' is not"), std::string::npos) << name << ": " << m;
  }
  Params q;
  q.resize = std::string("64x\0", 4);
  EXPECT_NE(message_of([&] { q.validate(); }).find("64x\\x00' is not WxH"), std::string::npos)
      << message_of([&] { q.validate(); });
}

TEST(Params, TextAndTypedSettersShareTheTable) {
  Params p;
  set_param_text(p, "max_keypoints", "77");
  set_param_text(p, "keypoint_threshold", "0.01");
  set_param_text(p, "grayscale", "true");
  set_param_text(p, "preset", "hloc:superpoint_inloc");
  EXPECT_EQ(*p.max_keypoints, 77);
  EXPECT_FLOAT_EQ(*p.keypoint_threshold, 0.01f);
  EXPECT_EQ(p.preset, "hloc:superpoint_inloc");
  EXPECT_EQ(kind_of([&] { set_param_text(p, "max_keypoints", "1.5"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { set_param_text(p, "max_keypoints", "307201"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { set_param_text(p, "grayscale", "yes"); }), ErrorKind::TypeMismatch);
  EXPECT_EQ(kind_of([&] { set_param_text(p, "interpolation", "cubic"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { set_param_text(p, "nope", "1"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { set_param(p, "max_keypoints", ParamValue{true}); }), ErrorKind::TypeMismatch);
  EXPECT_EQ(kind_of([&] { set_param(p, "nms_radius", ParamValue{2.0}); }), ErrorKind::TypeMismatch);
  // Every parameter of the table has a text value in every preset (the docs and /v1/info print them).
  for (const auto& preset : preset_specs())
    for (const auto& spec : param_specs()) EXPECT_FALSE(param_value_text(preset.defaults, spec.name).empty());
}

SuperPoint& model();

TEST(ExifOrientation, HlocReadsTheStoredPixelsUnlessAsked) {
  // monstree_IMG_1027.JPG: stored 4032x3024 with EXIF Orientation=6 (displayed 3024x4032). hloc today writes
  // image_size [4032, 3024] (W, H) for it, i.e. (height, width) = (3024, 4032) here.
  const std::string path = sprt_test::images_dir() + "/monstree_IMG_1027.JPG";
  Params p;
  p.preset = "hloc:superpoint_aachen";
  p.max_keypoints = 64;
  const Features f = model().run(ImageInput::file(path), p);
  EXPECT_EQ(f.image_size, (std::array<int, 2>{3024, 4032}));
  EXPECT_EQ(f.network_size, (std::array<int, 2>{768, 1024}));
  const Image stored = decode_file_as(path, p);
  EXPECT_EQ(stored.width, 4032);
  EXPECT_EQ(stored.height, 3024);
  p.exif_orientation = true;
  const Image rotated = decode_file_as(path, p);
  EXPECT_EQ(rotated.width, 3024);
  EXPECT_EQ(rotated.height, 4032);
  // Orientation 6 is a clockwise quarter turn: the rotated image's row 0 is the stored image's column 0, read
  // bottom to top.
  for (int x = 0; x < 3024; x += 101)
    ASSERT_EQ(rotated.pixels[static_cast<std::size_t>(x)], stored.pixels[static_cast<std::size_t>(3023 - x) * 4032])
        << x;
}

SuperPoint& model() {
  static SuperPoint m = [] {
    Options o;
    o.model = sprt_test::weights_dir();
    o.threads = 2;
    o.warmup = WarmupSpec::none();
    return SuperPoint::from_pretrained(o);
  }();
  return m;
}

TEST(AnySize, OddFramesFloorToTheScoreMapAndStayDeterministic) {
  const std::string path = sprt_test::images_dir() + "/pt_piazza_san_marco_18627786_5929294590.jpg";  // 501x380
  Params p;
  p.resize = "none";  // the network runs at 501x380: score map 496x376
  p.max_keypoints = -1;
  const Features a = model().run(ImageInput::file(path), p);
  EXPECT_EQ(a.network_size, (std::array<int, 2>{380, 501}));
  ASSERT_GT(a.size(), 100u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    // hf convention at native size: (p / 501) * 501 ~ p, inside the border of the 496x376 score map
    EXPECT_GE(a.keypoints[2 * i], 4.0f - 1e-3f);
    EXPECT_LT(a.keypoints[2 * i], 496.0f - 4.0f + 1e-3f);
    EXPECT_LT(a.keypoints[2 * i + 1], 376.0f - 4.0f + 1e-3f);
  }
  const Features b = model().run(ImageInput::file(path), p);
  EXPECT_EQ(a.keypoints, b.keypoints);
  EXPECT_EQ(a.descriptors, b.descriptors);
  // The 640x480 request in between and after gives the same result as before (one plan per frame).
  const Features hf1 = model().run(ImageInput::file(path));
  const Features c = model().run(ImageInput::file(path), p);
  const Features hf2 = model().run(ImageInput::file(path));
  EXPECT_EQ(c.scores, a.scores);
  EXPECT_EQ(hf1.scores, hf2.scores);
  EXPECT_EQ(hf1.network_size, (std::array<int, 2>{480, 640}));
}

TEST(AnySize, HlocOrderIsRasterUnlessCut) {
  const std::string path = sprt_test::images_dir() + "/lg_sacre_coeur1.jpg";
  Params p;
  p.preset = "hloc:superpoint_aachen";
  const Features all = model().run(ImageInput::file(path), p);
  ASSERT_GT(all.size(), 200u);
  ASSERT_LT(all.size(), 4096u);
  for (std::size_t i = 1; i < all.size(); ++i) {  // raster: y, then x (hloc convention keeps the order monotone)
    const bool ordered =
        all.keypoints[2 * i + 1] > all.keypoints[2 * i - 1] ||
        (all.keypoints[2 * i + 1] == all.keypoints[2 * i - 1] && all.keypoints[2 * i] > all.keypoints[2 * i - 2]);
    ASSERT_TRUE(ordered) << i;
  }
  p.max_keypoints = 50;
  const Features cut = model().run(ImageInput::file(path), p);
  ASSERT_EQ(cut.size(), 50u);
  for (std::size_t i = 1; i < cut.size(); ++i) ASSERT_GE(cut.scores[i - 1], cut.scores[i]);
  p.max_keypoints = static_cast<int>(all.size());  // exactly as many as pass: no cut, raster order
  const Features same = model().run(ImageInput::file(path), p);
  EXPECT_EQ(same.keypoints, all.keypoints);
}

}  // namespace
