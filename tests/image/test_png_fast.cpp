// The PNG fast path (src/image/png_fast.hpp) against the libpng path it replaces: same pixels for every file it
// takes, same result (image, or error with the same message) through decode_png / decode_png_cv2 for every file,
// valid or not; the unfilter kernels against the scalar reference. PNGs are written here by a small encoder with
// chosen filters, chunk splits and damage, compressed with zlib.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "image/decode_cv2.hpp"
#include "image/png_fast.hpp"
#include "superpoint_rt/errors.hpp"

namespace sp = superpoint_rt;
namespace img = superpoint_rt::image;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<std::uint8_t>;

void put32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

void chunk(Bytes& b, const char* type, const Bytes& data, bool bad_crc = false) {
  put32(b, static_cast<std::uint32_t>(data.size()));
  const std::size_t at = b.size();
  b.insert(b.end(), type, type + 4);
  b.insert(b.end(), data.begin(), data.end());
  uLong crc = crc32(0, b.data() + at, static_cast<uInt>(data.size() + 4));
  if (bad_crc) crc ^= 1;
  put32(b, static_cast<std::uint32_t>(crc));
}

int samples_of(int ct) {
  switch (ct) {
    case 2: return 3;
    case 4: return 2;
    case 6: return 4;
    default: return 1;
  }
}

std::uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return static_cast<std::uint8_t>(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

// Filters one row (the encoder side of PNG spec §9).
Bytes filter_row(int f, const std::uint8_t* row, const std::uint8_t* prev, std::size_t n, std::size_t bpp) {
  Bytes out(n + 1);
  out[0] = static_cast<std::uint8_t>(f);
  for (std::size_t i = 0; i < n; ++i) {
    const int a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0, c = prev && i >= bpp ? prev[i - bpp] : 0;
    int pred = 0;
    switch (f) {
      case 1: pred = a; break;
      case 2: pred = b; break;
      case 3: pred = (a + b) / 2; break;
      case 4: pred = paeth(a, b, c); break;
      default: break;
    }
    out[i + 1] = static_cast<std::uint8_t>(row[i] - pred);
  }
  return out;
}

struct Spec {
  int width = 17, height = 9, color_type = 2, depth = 8;
  int filter = -1;                  // -1: row y uses filter y % 5
  std::vector<std::size_t> splits;  // IDAT chunk sizes (the rest in a last chunk); 0 = a zero-length IDAT
  int palette_entries = 256;        // PLTE entries for colour type 3
  int trns = -1;                    // tRNS length (-1: none)
  bool gama = false, srgb = false, text_after = false, exif = false;
  int level = 6, window_bits = 15;
  unsigned seed = 1;
};

Bytes raw_rows(const Spec& s) {
  std::mt19937 rng(s.seed);
  const std::size_t bpp = static_cast<std::size_t>(samples_of(s.color_type) * s.depth / 8);
  const std::size_t n = static_cast<std::size_t>(s.width) * bpp;
  Bytes img(n * static_cast<std::size_t>(s.height));
  // Smooth-ish content with noise (so every predictor sees varied neighbours), palette indices over the full range.
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = static_cast<std::uint8_t>((i * 7 + (rng() % 23)) ^ (rng() % 3));
  Bytes filtered;
  for (int y = 0; y < s.height; ++y) {
    const int f = s.filter >= 0 ? s.filter : y % 5;
    const Bytes r = filter_row(f, img.data() + y * n, y ? img.data() + (y - 1) * n : nullptr, n, bpp);
    filtered.insert(filtered.end(), r.begin(), r.end());
  }
  return filtered;
}

Bytes zlib_compress(const Bytes& raw, int level, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, raw.size()) + 64);
  z.next_in = const_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Bytes ihdr(const Spec& s) {
  Bytes h;
  put32(h, static_cast<std::uint32_t>(s.width));
  put32(h, static_cast<std::uint32_t>(s.height));
  h.insert(h.end(), {static_cast<std::uint8_t>(s.depth), static_cast<std::uint8_t>(s.color_type), 0, 0, 0});
  return h;
}

// The file around a given zlib stream.
Bytes png_with_stream(const Spec& s, const Bytes& z) {
  Bytes b{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  chunk(b, "IHDR", ihdr(s));
  if (s.gama) chunk(b, "gAMA", {0, 0, 0xB1, 0x8F});
  if (s.srgb) chunk(b, "sRGB", {0});
  if (s.exif) chunk(b, "eXIf", {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 0});
  if (s.color_type == 3) {
    Bytes pal;
    for (int i = 0; i < s.palette_entries; ++i) {
      pal.insert(pal.end(), {static_cast<std::uint8_t>(i * 3), static_cast<std::uint8_t>(255 - i),
                             static_cast<std::uint8_t>(i * 11)});
    }
    chunk(b, "PLTE", pal);
  }
  if (s.trns >= 0) {
    Bytes t(static_cast<std::size_t>(s.trns));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(i * 5);
    chunk(b, "tRNS", t);
  }
  std::size_t at = 0;
  for (std::size_t n : s.splits) {
    n = std::min(n, z.size() - at);
    chunk(b, "IDAT",
          Bytes(z.begin() + static_cast<std::ptrdiff_t>(at), z.begin() + static_cast<std::ptrdiff_t>(at + n)));
    at += n;
  }
  chunk(b, "IDAT", Bytes(z.begin() + static_cast<std::ptrdiff_t>(at), z.end()));
  if (s.text_after) chunk(b, "tEXt", {'a', 0, 'b'});
  chunk(b, "IEND", {});
  return b;
}

Bytes make_png(const Spec& s) {
  return png_with_stream(s, zlib_compress(raw_rows(s), s.level, s.window_bits));
}

struct Outcome {
  bool ok = false;
  std::string error;
  sp::Image im;
  int orientation = -1;
};

template <class F>
Outcome run(F&& f) {
  Outcome o;
  try {
    o.im = f(&o.orientation);
    o.ok = true;
  } catch (const sp::Error& e) {
    o.error = e.what();
  }
  return o;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_EQ(a.ok, b.ok) << what << ": fast path " << (a.ok ? "decoded" : a.error) << ", libpng "
                        << (b.ok ? "decoded" : b.error);
  if (!a.ok) {
    EXPECT_EQ(a.error, b.error) << what;
    return;
  }
  EXPECT_EQ(a.im.width, b.im.width) << what;
  EXPECT_EQ(a.im.height, b.im.height) << what;
  EXPECT_EQ(a.im.format, b.im.format) << what;
  EXPECT_EQ(a.orientation, b.orientation) << what;
  ASSERT_EQ(a.im.pixels.size(), b.im.pixels.size()) << what;
  EXPECT_TRUE(a.im.pixels == b.im.pixels) << what << ": pixels differ";
}

constexpr std::int64_t kMax = sp::kDefaultMaxPixels;

// decode_png and decode_png_cv2 (both modes) against their libpng-only forms. Returns whether the fast path took
// the file in each of the three targets (Pillow, cv2 gray, cv2 colour).
std::array<bool, 3> compare_all(const Bytes& b, const std::string& what) {
  const std::span<const std::uint8_t> s(b);
  expect_same(run([&](int*) { return img::decode_png(s, "t", kMax); }),
              run([&](int*) { return img::decode_png_libpng(s, "t", kMax); }), what + " (Pillow)");
  for (auto mode : {img::Cv2Read::Grayscale, img::Cv2Read::Color}) {
    expect_same(run([&](int* o) { return img::decode_png_cv2(s, "t", kMax, mode, o); }),
                run([&](int* o) { return img::decode_png_cv2_libpng(s, "t", kMax, mode, o); }),
                what + (mode == img::Cv2Read::Grayscale ? " (cv2 gray)" : " (cv2 colour)"));
  }
  std::array<bool, 3> took{};
  if (b.size() >= 33 && std::memcmp(b.data() + 12, "IHDR", 4) == 0) {
    img::PngHeader h;
    h.width = (std::uint32_t{b[16]} << 24) | (std::uint32_t{b[17]} << 16) | (std::uint32_t{b[18]} << 8) | b[19];
    h.height = (std::uint32_t{b[20]} << 24) | (std::uint32_t{b[21]} << 16) | (std::uint32_t{b[22]} << 8) | b[23];
    h.depth = b[24];
    h.color_type = b[25];
    h.interlace = b[28];
    const img::PngTarget t[3] = {img::PngTarget::Pillow, img::PngTarget::Cv2Gray, img::PngTarget::Cv2Color};
    for (int i = 0; i < 3; ++i) took[i] = img::decode_png_fast(s, h, t[i], std::int64_t{1} << 30).has_value();
  }
  return took;
}

// ---- unfilter kernels

TEST(PngFast, UnfilterMatchesReferenceOnRandomRows) {
  std::mt19937 rng(7);
  for (int bpp : {1, 2, 3, 4, 6, 8}) {
    for (int px = 1; px <= 67; ++px) {
      const std::size_t n = static_cast<std::size_t>(px) * static_cast<std::size_t>(bpp);
      for (int f = 0; f <= 4; ++f) {
        Bytes in(n + 8), prior(n + 8);
        for (auto& v : in) v = static_cast<std::uint8_t>(rng());
        for (auto& v : prior) v = static_cast<std::uint8_t>(rng());
        for (bool first : {false, true}) {
          const std::uint8_t* pr = first ? nullptr : prior.data();
          Bytes want(n + 8), got(n + 8, 0xEE);
          ASSERT_TRUE(img::png_unfilter_row_reference(f, in.data(), pr, want.data(), n, bpp));
          ASSERT_TRUE(img::png_unfilter_row(f, in.data(), pr, got.data(), n, bpp));
          ASSERT_TRUE(std::equal(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(n), got.begin()))
              << "bpp " << bpp << " width " << px << " filter " << f << " first row " << first;
          EXPECT_EQ(got[n], 0xEE) << "wrote past the row: bpp " << bpp << " width " << px << " filter " << f;
          // In place, and shifted back by d bytes (the compacting layout of the fast path).
          for (std::size_t d : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
            Bytes buf(n + d + 8);
            std::copy(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n),
                      buf.begin() + static_cast<std::ptrdiff_t>(d));
            ASSERT_TRUE(img::png_unfilter_row(f, buf.data() + d, pr, buf.data(), n, bpp));
            ASSERT_TRUE(std::equal(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(n), buf.begin()))
                << "aliased by " << d << ": bpp " << bpp << " width " << px << " filter " << f;
          }
        }
      }
    }
  }
  EXPECT_FALSE(img::png_unfilter_row(5, Bytes(16).data(), nullptr, Bytes(16).data(), 4, 1));
}

TEST(PngFast, PairedPaethMatchesTwoReferenceRows) {
  std::mt19937 rng(11);
  for (int bpp : {3, 4}) {
    for (int px = 1; px <= 67; ++px) {
      const std::size_t n = static_cast<std::size_t>(px) * static_cast<std::size_t>(bpp);
      // The fast path's layout: each row after a filter byte, rows back to back.
      Bytes buf(3 * (n + 1) + 8);
      for (auto& v : buf) v = static_cast<std::uint8_t>(rng());
      std::uint8_t *prior = buf.data() + 1, *r0 = prior + n + 1, *r1 = r0 + n + 1;
      Bytes want0(n + 8), want1(n + 8);
      ASSERT_TRUE(img::png_unfilter_row_reference(4, r0, prior, want0.data(), n, bpp));
      ASSERT_TRUE(img::png_unfilter_row_reference(4, r1, want0.data(), want1.data(), n, bpp));
      const Bytes before = buf;
      if (!img::png_unpaeth_two_rows(prior, r0, r1, n, bpp)) {
        EXPECT_TRUE(buf == before) << "changed the rows but returned false";
        continue;
      }
      EXPECT_TRUE(std::equal(want0.begin(), want0.begin() + static_cast<std::ptrdiff_t>(n), r0))
          << "row 0, bpp " << bpp << " width " << px;
      EXPECT_TRUE(std::equal(want1.begin(), want1.begin() + static_cast<std::ptrdiff_t>(n), r1))
          << "row 1, bpp " << bpp << " width " << px;
      EXPECT_EQ(r0[n], before[static_cast<std::size_t>(r0 + n - buf.data())]) << "row 1's filter byte overwritten";
      EXPECT_EQ(r1[n], before[static_cast<std::size_t>(r1 + n - buf.data())]) << "wrote past row 1";
    }
  }
}

// ---- synthetic files the fast path takes

TEST(PngFast, EveryColourTypeFilterAndOddWidth) {
  for (int ct : {0, 2, 3, 4, 6}) {
    for (int depth : {8, 16}) {
      if (ct == 3 && depth == 16) continue;
      for (int f = -1; f <= 4; ++f) {
        for (int w : {1, 2, 3, 5, 31, 32, 33, 67}) {
          Spec s;
          s.color_type = ct;
          s.depth = depth;
          s.filter = f;
          s.width = w;
          s.height = f < 0 ? 11 : 4;
          s.seed = static_cast<unsigned>(ct * 1000 + depth * 100 + (f + 1) * 70 + w);
          const std::string what = "ct " + std::to_string(ct) + " depth " + std::to_string(depth) + " filter " +
                                   std::to_string(f) + " width " + std::to_string(w);
          const auto took = compare_all(make_png(s), what);
          EXPECT_TRUE(took[0]) << what << ": Pillow target not taken by the fast path";
          EXPECT_TRUE(took[2]) << what << ": cv2 colour target not taken by the fast path";
          // cv2 gray of 16-bit colour runs rgb_to_gray before strip_16: libpng's.
          EXPECT_EQ(took[1], !(depth == 16 && (ct & 2))) << what << ": cv2 gray target";
        }
      }
    }
  }
}

TEST(PngFast, IdatSplitsIncludingZeroLengthChunks) {
  const std::vector<std::vector<std::size_t>> splits = {
      {0}, {1}, {2}, {0, 0, 3}, {1, 0, 1}, {5, 0, 7, 0, 1}, {64, 64, 64}, {3, 3, 3, 3, 3, 3, 3, 3, 3}};
  for (const auto& sp_ : splits) {
    Spec s;
    s.width = 29;
    s.height = 13;
    s.splits = sp_;
    std::string what = "splits";
    for (auto n : sp_) {
      what += ' ';
      what += std::to_string(n);
    }
    const auto took = compare_all(make_png(s), what);
    EXPECT_TRUE(took[0]) << what;
  }
}

TEST(PngFast, PaletteAndTransparencyVariants) {
  for (int entries : {1, 7, 16, 255, 256}) {
    for (int trns : {-1, 0, 1, 5, 256}) {
      Spec s;
      s.color_type = 3;
      s.palette_entries = entries;
      s.trns = trns;  // lengths past the palette or 0: libpng drops the chunk with a warning
      const std::string what = "palette " + std::to_string(entries) + " tRNS " + std::to_string(trns);
      const auto took = compare_all(make_png(s), what);
      EXPECT_TRUE(took[0] && took[1] && took[2]) << what;  // indices past the palette: ramp (Pillow) / black (cv2)
    }
  }
  for (int ct : {0, 2}) {
    for (int trns : {0, 2, 6, 9}) {
      Spec s;
      s.color_type = ct;
      s.trns = trns;
      compare_all(make_png(s), "ct " + std::to_string(ct) + " tRNS " + std::to_string(trns));
    }
  }
}

TEST(PngFast, GammaChunksOnlyMatterForCv2GrayOfColour) {
  for (int ct : {0, 2, 3, 6}) {
    for (int g = 0; g < 3; ++g) {
      Spec s;
      s.color_type = ct;
      s.gama = g == 1;
      s.srgb = g == 2;
      const std::string what = "ct " + std::to_string(ct) + (g == 1 ? " gAMA" : g == 2 ? " sRGB" : "");
      const auto took = compare_all(make_png(s), what);
      EXPECT_TRUE(took[0] && took[2]) << what;
      EXPECT_EQ(took[1], g == 0 || ct == 0) << what;
    }
  }
}

TEST(PngFast, ChunksAroundTheImageData) {
  Spec s;
  s.text_after = true;  // cv2's png_read_end reads it: libpng path for cv2, fast for Pillow
  auto took = compare_all(make_png(s), "tEXt after IDAT");
  EXPECT_TRUE(took[0]);
  EXPECT_FALSE(took[2]);
  s = Spec{};
  s.exif = true;
  took = compare_all(make_png(s), "eXIf");
  EXPECT_FALSE(took[0] || took[1] || took[2]);
}

// ---- damaged and unusual files: same outcome as libpng (mostly via the fallback)

TEST(PngFast, DamagedFilesGiveLibpngsOutcome) {
  Spec s;
  s.width = 23;
  s.height = 10;
  s.splits = {40, 0, 40};
  const Bytes good = make_png(s);
  const Bytes z = zlib_compress(raw_rows(s), 6, 15);
  const auto find = [&](const Bytes& b, const char* type, int nth = 0) {
    for (std::size_t p = 8; p + 8 <= b.size();) {
      const std::size_t len =
          (std::size_t{b[p]} << 24) | (std::size_t{b[p + 1]} << 16) | (std::size_t{b[p + 2]} << 8) | b[p + 3];
      if (std::memcmp(b.data() + p + 4, type, 4) == 0 && nth-- == 0) return p;
      p += len + 12;
    }
    return std::size_t{0};
  };
  EXPECT_TRUE(compare_all(good, "good")[0]);

  // A bad CRC in each chunk (IHDR, each IDAT, the zero-length one, IEND).
  for (const char* type : {"IHDR", "IEND"}) {
    Bytes b = good;
    const std::size_t p = find(b, type);
    ASSERT_NE(p, 0u);
    const std::size_t len = (std::size_t{b[p + 2]} << 8) | b[p + 3];
    b[p + 8 + len + 3] ^= 0x40;
    std::string what = "bad CRC ";
    what.append(type);
    compare_all(b, what);
  }
  for (int nth = 0; nth < 3; ++nth) {
    Bytes b = good;
    const std::size_t p = find(b, "IDAT", nth);
    ASSERT_NE(p, 0u);
    const std::size_t len = (std::size_t{b[p + 2]} << 8) | b[p + 3];
    b[p + 8 + len] ^= 0x01;
    EXPECT_FALSE(compare_all(b, "bad CRC IDAT " + std::to_string(nth))[0]);
  }
  // Data flipped inside the stream, CRCs fixed up: libdeflate fails, libpng reports (or warns about) the damage.
  for (std::size_t at :
       {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{10}, z.size() / 2, z.size() - 5, z.size() - 1}) {
    for (int bit : {0x01, 0x10, 0x80}) {
      Bytes zz = z;
      zz[at] = static_cast<std::uint8_t>(zz[at] ^ bit);
      compare_all(png_with_stream(s, zz), "stream byte " + std::to_string(at) + " ^ " + std::to_string(bit));
    }
  }
  // Truncated streams (the rows end early, or only the Adler-32 is missing), and a file cut short.
  for (std::size_t cut : {std::size_t{2}, std::size_t{20}, z.size() - 4, z.size() - 1}) {
    compare_all(png_with_stream(s, Bytes(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(cut))),
                "stream cut at " + std::to_string(cut));
  }
  for (std::size_t cut : {good.size() - 1, good.size() - 12, good.size() - 20, std::size_t{60}}) {
    compare_all(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)),
                "file cut at " + std::to_string(cut));
  }
  // Too much data: more rows in the stream than the header declares; trailing bytes after the stream end.
  {
    Spec more = s;
    more.height = 11;
    const Bytes big = zlib_compress(raw_rows(more), 6, 15);
    compare_all(png_with_stream(s, big), "one row too many");
    Bytes tail = z;
    tail.insert(tail.end(), {1, 2, 3, 4, 5});
    EXPECT_TRUE(compare_all(png_with_stream(s, tail), "bytes after the stream end")[0]);
  }
  // zlib headers: a 512-byte window (valid stream, libpng's zlib honours the window), a preset dictionary flag,
  // CINFO 8 ("invalid window size"), compression method 7.
  {
    const Bytes small_window = zlib_compress(raw_rows(s), 9, 9);
    EXPECT_FALSE(compare_all(png_with_stream(s, small_window), "window 512")[0]);
    for (auto [cmf, flg] : {std::pair<int, int>{0x78, 0xBB}, {0x88, 0x98}, {0x77, 0x00}}) {
      Bytes zz = z;
      zz[0] = static_cast<std::uint8_t>(cmf);
      zz[1] = static_cast<std::uint8_t>(flg + (31 - ((cmf * 256 + flg) % 31)) % 31);
      compare_all(png_with_stream(s, zz), "zlib header " + std::to_string(cmf) + " " + std::to_string(flg));
    }
  }
  // A bad filter type in a row.
  {
    Bytes raw = raw_rows(s);
    raw[(23 * 3 + 1) * 4] = 5;
    compare_all(png_with_stream(s, zlib_compress(raw, 6, 15)), "filter type 5");
  }
  // Odd IHDRs and chunk lists: interlaced, bit depth 4, filter method 1, unknown critical chunk, missing PLTE.
  {
    Bytes b = good;
    b[28] = 1;  // interlace (the CRC fixed below)
    const uLong crc = crc32(0, b.data() + 12, 17);
    for (int i = 0; i < 4; ++i) b[29 + i] = static_cast<std::uint8_t>(crc >> (24 - 8 * i));
    EXPECT_FALSE(compare_all(b, "interlace flag on non-interlaced data")[0]);
  }
  {
    Bytes b(good.begin(), good.begin() + 33);
    chunk(b, "CRIT", {1, 2, 3});
    b.insert(b.end(), good.begin() + 33, good.end());
    EXPECT_FALSE(compare_all(b, "unknown critical chunk")[0]);
    Bytes c(good.begin(), good.begin() + 33);
    chunk(c, "quUx", {1, 2, 3});
    c.insert(c.end(), good.begin() + 33, good.end());
    EXPECT_TRUE(compare_all(c, "unknown ancillary chunk")[0]);
  }
  {
    Spec pal;
    pal.color_type = 3;
    Bytes b = make_png(pal);
    const std::size_t p = find(b, "PLTE");
    const std::size_t len = (std::size_t{b[p + 1]} << 16) | (std::size_t{b[p + 2]} << 8) | b[p + 3];
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(p), b.begin() + static_cast<std::ptrdiff_t>(p + 12 + len));
    EXPECT_FALSE(compare_all(b, "palette image without PLTE")[0]);
  }
}

// ---- the shared test images

TEST(PngFast, SharedImagesMatchLibpng) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(sprt_test::images_dir())) {
    if (e.path().extension() != ".png") continue;
    const Bytes b = sprt_test::read_bytes(e.path().string());
    const auto took = compare_all(b, e.path().filename().string());
    EXPECT_TRUE(took[0] && took[2]) << e.path().filename() << ": not taken by the fast path";
    ++n;
  }
  EXPECT_GE(n, 5) << "too few PNGs in " << sprt_test::images_dir();
}

}  // namespace
