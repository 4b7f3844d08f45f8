// Image decoding vs Pillow 9.4 (tests/image/pillow_ref.py), bad inputs, limits, threads, write_png.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/test_util.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/image.hpp"

namespace sp = superpoint_rt;
namespace fs = std::filesystem;

namespace {

std::string script() {
  return std::string(SPRT_SOURCE_DIR) + "/tests/image/pillow_ref.py";
}

std::string python() {
  const std::string py = sprt_test::python_with(true);
  if (py.empty()) ADD_FAILURE() << "no python3 with numpy + Pillow: cannot compare with Pillow";
  return py;
}

struct Expected {
  bool ok = false;
  int width = 0, height = 0, channels = 0;
  std::string error;
  std::vector<std::uint8_t> pixels;
};

// Runs Pillow on `files`, returns one expectation per file.
std::vector<Expected> pillow_expectations(const std::vector<std::string>& files, const sprt_test::TempDir& tmp) {
  std::vector<Expected> out;
  const std::string py = python();
  if (py.empty()) return out;
  const std::string ref = tmp.file("ref");
  fs::create_directories(ref);
  std::string cmd = py + " " + script() + " dump " + ref;
  for (const auto& f : files) cmd += " '" + f + "'";
  std::string log;
  if (sprt_test::run_command(cmd, &log) != 0) {
    ADD_FAILURE() << "pillow_ref.py dump failed: " << log;
    return out;
  }
  std::ifstream idx(ref + "/index.tsv");
  std::string line;
  while (std::getline(idx, line)) {
    std::istringstream ls(line);
    std::string i, status;
    std::getline(ls, i, '\t');
    std::getline(ls, status, '\t');
    Expected e;
    if (status == "ok") {
      e.ok = true;
      ls >> e.width >> e.height >> e.channels;
      e.pixels = sprt_test::read_bytes(ref + "/" + i + ".bin");
    } else {
      std::getline(ls, e.error);
    }
    out.push_back(std::move(e));
  }
  EXPECT_EQ(out.size(), files.size());
  return out;
}

void expect_same(const sp::Image& im, const Expected& e, const std::string& what) {
  ASSERT_TRUE(e.ok) << what;
  ASSERT_EQ(im.width, e.width) << what;
  ASSERT_EQ(im.height, e.height) << what;
  ASSERT_EQ(sp::channels_of(im.format), e.channels) << what;
  ASSERT_EQ(im.pixels.size(), e.pixels.size()) << what;
  if (im.pixels != e.pixels) {
    const auto mm = std::mismatch(im.pixels.begin(), im.pixels.end(), e.pixels.begin());
    const auto at = mm.first - im.pixels.begin();
    const std::size_t n = static_cast<std::size_t>(
        std::count_if(im.pixels.begin(), im.pixels.end(),
                      [&, k = std::size_t{0}](std::uint8_t v) mutable { return v != e.pixels[k++]; }));
    ADD_FAILURE() << what << ": " << n << " of " << im.pixels.size() << " bytes differ; first at byte " << at
                  << " (ours " << int(*mm.first) << ", Pillow " << int(*mm.second) << ")";
  }
}

std::vector<std::string> list_dir(const std::string& dir, bool skip_tsv) {
  std::vector<std::string> files;
  for (const auto& de : fs::directory_iterator(dir)) {
    if (!de.is_regular_file()) continue;
    if (skip_tsv && de.path().extension() == ".tsv") continue;
    files.push_back(de.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

template <class F>
sp::Error expect_error(F&& f, sp::ErrorKind kind, const std::string& must_contain) {
  try {
    f();
  } catch (const sp::Error& e) {
    EXPECT_EQ(sp::to_string(e.kind()), std::string(sp::to_string(kind))) << e.what();
    EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos)
        << "message '" << e.what() << "' does not name '" << must_contain << "'";
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a superpoint_rt::Error: " << e.what();
    return sp::Error(sp::ErrorKind::Internal, "");
  }
  ADD_FAILURE() << "no error (expected " << sp::to_string(kind) << ")";
  return sp::Error(sp::ErrorKind::Internal, "");
}

std::vector<std::uint8_t> png_header_only(std::uint32_t w, std::uint32_t h) {
  // IHDR for w x h RGB 8-bit, then a tiny IDAT and IEND (CRCs are not checked before the size test).
  std::vector<std::uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (std::uint32_t v : {w, h}) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
  }
  for (int v : {8, 2, 0, 0, 0, 0, 0, 0, 0}) b.push_back(static_cast<std::uint8_t>(v));
  for (int v : {0, 0, 0, 0, int{'I'}, int{'E'}, int{'N'}, int{'D'}, 0xAE, 0x42, 0x60, 0x82})
    b.push_back(static_cast<std::uint8_t>(v));
  return b;
}

}  // namespace

// Every image of the shared test set decodes to exactly Pillow's pixels (the 12 MP ones included).
TEST(ImageDecode, SharedImagesMatchPillow) {
  const auto files = list_dir(sprt_test::images_dir(), true);
  ASSERT_GE(files.size(), 40u) << "shared images missing in " << sprt_test::images_dir();
  sprt_test::TempDir tmp;
  const auto exp = pillow_expectations(files, tmp);
  ASSERT_EQ(exp.size(), files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(files[i]);
    const sp::Image im = sp::decode_file(files[i]);
    expect_same(im, exp[i], files[i]);
    const sp::ImageInfo info = sp::probe_image(sprt_test::read_bytes(files[i]), files[i]);
    EXPECT_EQ(info.width, im.width);
    EXPECT_EQ(info.height, im.height);
    EXPECT_EQ(info.channels, sp::channels_of(im.format));
  }
}

// Synthetic files in every format / mode Pillow writes (or that we build by hand), vs Pillow.
TEST(ImageDecode, SyntheticFormatsMatchPillow) {
  sprt_test::TempDir tmp;
  const std::string py = python();
  ASSERT_FALSE(py.empty());
  const std::string dir = tmp.file("img");
  fs::create_directories(dir);
  std::string log;
  ASSERT_EQ(sprt_test::run_command(py + " " + script() + " gen " + dir, &log), 0) << log;
  const auto files = list_dir(dir, false);
  ASSERT_GE(files.size(), 80u);
  const auto exp = pillow_expectations(files, tmp);
  ASSERT_EQ(exp.size(), files.size());
  std::map<sp::ImageFormat, int> per_format;
  for (std::size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(files[i]);
    ASSERT_TRUE(exp[i].ok) << "Pillow cannot read its own test file: " << exp[i].error;
    sp::Image im;
    try {
      im = sp::decode_file(files[i]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "decode failed: " << e.what();
      continue;
    }
    expect_same(im, exp[i], files[i]);
    const auto bytes = sprt_test::read_bytes(files[i]);
    const sp::ImageInfo info = sp::probe_image(bytes, files[i]);
    EXPECT_EQ(info.width, im.width);
    EXPECT_EQ(info.height, im.height);
    EXPECT_EQ(info.channels, sp::channels_of(im.format));
    ++per_format[sp::sniff_format(bytes)];
  }
  for (auto f : {sp::ImageFormat::JPEG, sp::ImageFormat::PNG, sp::ImageFormat::GIF, sp::ImageFormat::BMP,
                 sp::ImageFormat::WebP, sp::ImageFormat::TIFF, sp::ImageFormat::PNM}) {
    EXPECT_GE(per_format[f], 5) << sp::to_string(f);
  }
}

// Truncated files: an error whenever Pillow raises one, never a crash; the message names the file.
TEST(ImageDecode, TruncatedFilesFailLikePillow) {
  sprt_test::TempDir tmp;
  const std::string py = python();
  ASSERT_FALSE(py.empty());
  const std::string dir = tmp.file("img");
  fs::create_directories(dir);
  std::string log;
  ASSERT_EQ(sprt_test::run_command(py + " " + script() + " gen " + dir, &log), 0) << log;
  std::vector<std::string> sources = {sprt_test::images_dir() + "/berlin01_1600x900.jpg",
                                      sprt_test::images_dir() + "/icl_250.png"};
  for (const char* n :
       {"jpeg_rgb_progressive.jpg", "jpeg_gray.jpg", "png_rgb_adam7.png", "png_p.png", "gif_animated.gif",
        "gif_interlaced.gif", "bmp_24.bmp", "bmp_4.bmp", "bmp_rle8.bmp", "webp_lossy.webp", "webp_lossless.webp",
        "tiff_rgb.tif", "tiff_rgb_lzw.tif", "pnm_p6.ppm", "pnm_p5_16bit.pgm", "pnm_p4.pbm"}) {
    sources.push_back(dir + "/" + n);
  }
  std::vector<std::string> cuts;
  for (const auto& s : sources) {
    const auto bytes = sprt_test::read_bytes(s);
    for (double frac : {0.0, 0.01, 0.3, 0.5, 0.9}) {
      const auto n = static_cast<std::size_t>(static_cast<double>(bytes.size()) * frac);
      if (n == 0 && frac > 0) continue;
      const std::string p = tmp.file("cut_" + std::to_string(cuts.size()) + "_" + fs::path(s).filename().string());
      sprt_test::write_bytes(p, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
      cuts.push_back(p);
    }
  }
  const auto exp = pillow_expectations(cuts, tmp);
  ASSERT_EQ(exp.size(), cuts.size());
  int errors = 0;
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    SCOPED_TRACE(cuts[i] + (exp[i].ok ? " (Pillow: ok)" : " (Pillow: " + exp[i].error + ")"));
    try {
      const sp::Image im = sp::decode_file(cuts[i]);
      // Accepted: Pillow must have accepted it too, with the same pixels.
      expect_same(im, exp[i], cuts[i]);
    } catch (const sp::Error& e) {
      ++errors;
      EXPECT_FALSE(exp[i].ok) << "we refuse a file Pillow decodes: " << e.what();
      EXPECT_NE(std::string(e.what()).find(cuts[i]), std::string::npos) << e.what();
      const auto k = e.kind();
      EXPECT_TRUE(k == sp::ErrorKind::DecodeError || k == sp::ErrorKind::UnsupportedFormat) << e.what();
    }
  }
  EXPECT_GE(errors, static_cast<int>(cuts.size()) * 3 / 4);
}

TEST(ImageDecode, JpegAndPngCutJustBeforeTheEnd) {
  // libjpeg's "premature end of data" warning must be an error (Pillow: "image file is truncated").
  sprt_test::TempDir tmp;
  const auto jpg = sprt_test::read_bytes(sprt_test::images_dir() + "/berlin01_1600x900.jpg");
  for (std::size_t drop : {1u, 2u, 3u, 100u}) {
    const std::string p = tmp.file("cut" + std::to_string(drop) + ".jpg");
    sprt_test::write_bytes(p, std::vector<std::uint8_t>(jpg.begin(), jpg.end() - static_cast<long>(drop)));
    expect_error([&] { sp::decode_file(p); }, sp::ErrorKind::DecodeError, p);
  }
  const auto png = sprt_test::read_bytes(sprt_test::images_dir() + "/icl_250.png");
  for (std::size_t drop : {40u, 1000u, 100000u}) {
    const std::string p = tmp.file("cut" + std::to_string(drop) + ".png");
    sprt_test::write_bytes(p, std::vector<std::uint8_t>(png.begin(), png.end() - static_cast<long>(drop)));
    expect_error([&] { sp::decode_file(p); }, sp::ErrorKind::DecodeError, p);
  }
}

// Plain (ASCII) PNM cut short: an error. Deliberately stricter than Pillow 9.4, whose PpmPlainDecoder never clears
// its "half token" at the end of the data and so repeats the last partial number until the image is full.
TEST(ImageDecode, TruncatedPlainPnmIsAnError) {
  sprt_test::TempDir tmp;
  const std::string p2 = tmp.file("short.pgm"), p3 = tmp.file("short.ppm"), p1 = tmp.file("short.pbm");
  const std::string s2 = "P2\n4 4\n255\n1 2 3 4 5 6 7 8 9 1";
  const std::string s3 = "P3 2 2 255 1 2 3 4 5 6 7 8 9 10 11 ";
  const std::string s1 = "P1 4 4 0101 1100 10";
  sprt_test::write_bytes(p2, std::vector<std::uint8_t>(s2.begin(), s2.end()));
  sprt_test::write_bytes(p3, std::vector<std::uint8_t>(s3.begin(), s3.end()));
  sprt_test::write_bytes(p1, std::vector<std::uint8_t>(s1.begin(), s1.end()));
  for (const auto& p : {p2, p3, p1}) expect_error([&] { sp::decode_file(p); }, sp::ErrorKind::DecodeError, p);
  // Values above maxval are an error in the plain formats (as Pillow).
  const std::string big = tmp.file("big.pgm");
  const std::string sb = "P2 2 1 100 50 101\n";
  sprt_test::write_bytes(big, std::vector<std::uint8_t>(sb.begin(), sb.end()));
  expect_error([&] { sp::decode_file(big); }, sp::ErrorKind::DecodeError, "big.pgm");
}

// Random corruption of every synthetic file: decoding either succeeds or throws superpoint_rt::Error.
TEST(ImageDecode, CorruptedBytesNeverCrash) {
  sprt_test::TempDir tmp;
  const std::string py = python();
  ASSERT_FALSE(py.empty());
  const std::string dir = tmp.file("img");
  fs::create_directories(dir);
  std::string log;
  ASSERT_EQ(sprt_test::run_command(py + " " + script() + " gen " + dir, &log), 0) << log;
  std::uint32_t seed = 12345;
  const auto rnd = [&] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  int decoded = 0, refused = 0;
  for (const auto& f : list_dir(dir, false)) {
    const auto orig = sprt_test::read_bytes(f);
    for (int r = 0; r < 30; ++r) {
      auto b = orig;
      const int flips = 1 + static_cast<int>(rnd() % 8);
      for (int k = 0; k < flips; ++k) {
        // Mostly near the start (headers), sometimes anywhere.
        const std::size_t span = (r % 3 == 0) ? b.size() : std::min<std::size_t>(b.size(), 64);
        b[rnd() % span] = static_cast<std::uint8_t>(rnd());
      }
      try {
        const sp::Image im = sp::decode_image(b, f, 1 << 24);
        EXPECT_EQ(im.pixels.size(), static_cast<std::size_t>(im.width) * im.height * sp::channels_of(im.format));
        ++decoded;
      } catch (const sp::Error&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(decoded, 0);
  EXPECT_GT(refused, 0);
}

TEST(ImageDecode, BadInputs) {
  sprt_test::TempDir tmp;
  expect_error([&] { sp::decode_file(tmp.file("missing.png")); }, sp::ErrorKind::NotFound, "missing.png");
  expect_error([&] { sp::read_file(tmp.file("missing.png")); }, sp::ErrorKind::NotFound, "missing.png");
  expect_error([&] { sp::decode_file(tmp.path()); }, sp::ErrorKind::Io, tmp.path());
  const std::string empty = tmp.file("empty.jpg");
  sprt_test::write_bytes(empty, {});
  expect_error([&] { sp::decode_file(empty); }, sp::ErrorKind::DecodeError, "empty.jpg");
  const std::string text = tmp.file("notes.txt");
  sprt_test::write_bytes(text, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  const auto e = expect_error([&] { sp::decode_file(text); }, sp::ErrorKind::UnsupportedFormat, "notes.txt");
  EXPECT_NE(std::string(e.what()).find(sp::supported_formats()), std::string::npos) << e.what();
  EXPECT_EQ(sp::sniff_format(std::span<const std::uint8_t>()), sp::ImageFormat::Unknown);
  // Magic alone, nothing else: corrupt, never a crash.
  const std::vector<std::vector<std::uint8_t>> stubs = {{0xFF, 0xD8, 0xFF},
                                                        {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'},
                                                        {'G', 'I', 'F', '8', '9', 'a'},
                                                        {'B', 'M'},
                                                        {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'},
                                                        {'I', 'I', '*', 0},
                                                        {'P', '6', '\n'},
                                                        {'P', '1', ' ', '2', ' ', '2', ' ', '0'}};
  for (const auto& s : stubs) {
    try {
      sp::decode_image(s, "stub");
      ADD_FAILURE() << "decoded a stub of " << s.size() << " bytes";
    } catch (const sp::Error& err) {
      EXPECT_NE(std::string(err.what()).find("stub"), std::string::npos) << err.what();
    }
  }
  // A zero-sized PNG and a BMP with zero width.
  expect_error([&] { sp::decode_image(png_header_only(0, 10), "zero.png"); }, sp::ErrorKind::DecodeError, "zero.png");
  expect_error([&] { sp::decode_image(png_header_only(10, 10), "x.png", 0); }, sp::ErrorKind::InvalidArgument,
               "max_pixels");
}

TEST(ImageDecode, TooLargeFailsFastBeforeAllocating) {
  const auto b = png_header_only(100000, 100000);
  const auto e = expect_error([&] { sp::decode_image(b, "huge.png"); }, sp::ErrorKind::TooLarge, "huge.png");
  EXPECT_NE(std::string(e.what()).find("100000x100000"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(std::to_string(sp::kDefaultMaxPixels)), std::string::npos) << e.what();
  // probe_image reads the header only.
  const sp::ImageInfo info = sp::probe_image(b, "huge.png");
  EXPECT_EQ(info.width, 100000);
  EXPECT_EQ(info.height, 100000);
  // An explicit limit on a real image: exactly at the limit passes, one pixel less fails.
  const std::string f = sprt_test::images_dir() + "/skimage_coins.png";  // 384 x 303
  EXPECT_NO_THROW(sp::decode_file(f, 384 * 303));
  expect_error([&] { sp::decode_file(f, 384 * 303 - 1); }, sp::ErrorKind::TooLarge, "skimage_coins.png");
  const std::string j = sprt_test::images_dir() + "/berlin01_1600x900.jpg";
  expect_error([&] { sp::decode_file(j, 1000); }, sp::ErrorKind::TooLarge, "1600x900");
}

TEST(ImageDecode, ConcurrentDecodesAreIndependent) {
  const std::vector<std::string> files = {sprt_test::images_dir() + "/berlin01_1600x900.jpg",
                                          sprt_test::images_dir() + "/icl_250.png",
                                          sprt_test::images_dir() + "/skimage_camera.png",
                                          sprt_test::images_dir() + "/pt_london_bridge_78916675_4568141288.jpg"};
  std::vector<sp::Image> ref;
  for (const auto& f : files) ref.push_back(sp::decode_file(f));
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) {
        for (std::size_t i = 0; i < files.size(); ++i) {
          const std::size_t k = (i + static_cast<std::size_t>(t)) % files.size();
          if (sp::decode_file(files[k]).pixels != ref[k].pixels) ++bad[t];
          try {  // errors in parallel too (libpng / libjpeg longjmp paths)
            sp::decode_image(std::span(ref[k].pixels.data(), 1000), "garbage");
          } catch (const sp::Error&) {
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

TEST(ImageDecode, WritePngRoundTrip) {
  sprt_test::TempDir tmp;
  // RGB with a padded stride, and gray.
  const int w = 37, h = 11;
  const std::ptrdiff_t stride = w * 3 + 5;
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(stride * h));
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>(i * 7 + 3);
  const std::string p = tmp.file("plot.png");
  sp::write_png(p, sp::ImageView::rgb(rgb.data(), w, h, stride));
  const sp::Image back = sp::decode_file(p);
  ASSERT_EQ(back.format, sp::PixelFormat::RGB);
  ASSERT_EQ(back.width, w);
  ASSERT_EQ(back.height, h);
  for (int y = 0; y < h; ++y) {
    ASSERT_TRUE(
        std::equal(back.pixels.begin() + y * w * 3, back.pixels.begin() + (y + 1) * w * 3, rgb.begin() + y * stride));
  }
  std::vector<std::uint8_t> g(static_cast<std::size_t>(w * h));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<std::uint8_t>(255 - i);
  const std::string q = tmp.file("gray.png");
  sp::write_png(q, sp::ImageView::gray(g.data(), w, h));
  const sp::Image gb = sp::decode_file(q);
  EXPECT_EQ(gb.format, sp::PixelFormat::Gray);
  EXPECT_EQ(gb.pixels, g);
  // Pillow reads it back too.
  const auto exp = pillow_expectations({p, q}, tmp);
  ASSERT_EQ(exp.size(), 2u);
  expect_same(back, exp[0], p);
  expect_same(gb, exp[1], q);
  // Errors: bad format, unwritable path.
  expect_error([&] { sp::write_png(p, sp::ImageView::bgr(rgb.data(), w, h)); }, sp::ErrorKind::InvalidArgument,
               "plot.png");
  expect_error([&] { sp::write_png(tmp.file("no/such/dir/x.png"), sp::ImageView::gray(g.data(), w, h)); },
               sp::ErrorKind::Io, "x.png");
}

TEST(ImageDecode, NamesAndViews) {
  EXPECT_EQ(sp::channels_of(sp::PixelFormat::Gray), 1);
  EXPECT_EQ(sp::channels_of(sp::PixelFormat::BGR), 3);
  EXPECT_EQ(sp::channels_of(sp::PixelFormat::BGRA), 4);
  EXPECT_STREQ(sp::to_string(sp::ImageFormat::WebP), "WebP");
  EXPECT_STREQ(sp::supported_formats(), "JPEG, PNG, GIF, BMP, WebP, TIFF, PNM");
  sp::ImageView v{nullptr, 10, 2, sp::PixelFormat::RGBA, sp::SampleType::F32, 0};
  EXPECT_EQ(v.packed_stride(), 160);
  EXPECT_EQ(v.stride(), 160);
  v.row_stride = 200;
  EXPECT_EQ(v.stride(), 200);
}
