// The EXIF orientation reader and transform of the cv2-exact decoders (src/image/exif.hpp): OpenCV 4.6's rules on
// well-formed data, and no read outside the buffer on truncated or hostile IFDs (each input lives in a vector of
// exactly its size, so the ASan build reports any read past its end).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "image/exif.hpp"

namespace sp = superpoint_rt;
using sp::image::apply_exif_orientation;
using sp::image::exif_orientation_cv2;

namespace {

using Bytes = std::vector<std::uint8_t>;

void put16(Bytes& b, std::uint32_t v, bool le) {
  if (le) {
    b.push_back(static_cast<std::uint8_t>(v));
    b.push_back(static_cast<std::uint8_t>(v >> 8));
  } else {
    b.push_back(static_cast<std::uint8_t>(v >> 8));
    b.push_back(static_cast<std::uint8_t>(v));
  }
}
void put32(Bytes& b, std::uint32_t v, bool le) {
  put16(b, le ? v & 0xFFFF : v >> 16, le);
  put16(b, le ? v >> 16 : v & 0xFFFF, le);
}

struct Entry {
  std::uint16_t tag, type;
  std::uint32_t count, value;  // a SHORT value goes in the first two bytes of the value field
};

// TIFF header + IFD0 with the entries, next-IFD 0, then `tail` bytes (data that entries may point at).
Bytes ifd(const std::vector<Entry>& entries, bool le = true, const Bytes& tail = {}) {
  Bytes b = {le ? std::uint8_t{'I'} : std::uint8_t{'M'}, le ? std::uint8_t{'I'} : std::uint8_t{'M'}};
  put16(b, 42, le);
  put32(b, 8, le);
  put16(b, static_cast<std::uint32_t>(entries.size()), le);
  for (const Entry& e : entries) {
    put16(b, e.tag, le);
    put16(b, e.type, le);
    put32(b, e.count, le);
    if (e.type == 3) {
      put16(b, e.value, le);
      put16(b, 0, le);
    } else {
      put32(b, e.value, le);
    }
  }
  put32(b, 0, le);
  b.insert(b.end(), tail.begin(), tail.end());
  return b;
}

std::uint16_t orientation_of(const Bytes& b) {
  const Bytes exact(b.begin(), b.end());  // capacity == size
  return exif_orientation_cv2(exact);
}

}  // namespace

TEST(ExifCv2, ReadsOrientationInBothByteOrders) {
  for (std::uint32_t o = 1; o <= 8; ++o) {
    EXPECT_EQ(orientation_of(ifd({{0x0112, 3, 1, o}}, true)), o);
    EXPECT_EQ(orientation_of(ifd({{0x0112, 3, 1, o}}, false)), o);
  }
  // The value is read as a 16-bit field whatever the type says (OpenCV's getOrientation), any value.
  EXPECT_EQ(orientation_of(ifd({{0x0112, 4, 1, 6}}, false)), 0);  // big-endian LONG 6: its first 16 bits are 0
  EXPECT_EQ(orientation_of(ifd({{0x0112, 4, 1, 6}}, true)), 6);
  EXPECT_EQ(orientation_of(ifd({{0x0112, 3, 1, 300}})), 300);
}

TEST(ExifCv2, FollowsOpenCvParseOrder) {
  // Entries OpenCV reads without trouble come first: the orientation is found.
  const Bytes rational_data = {0, 0, 0, 72, 0, 0, 0, 1};
  const std::uint32_t data_at = 8 + 2 + 3 * 12 + 4;
  EXPECT_EQ(orientation_of(
                ifd({{0x9999, 7, 1000, 0xFFFFFFFF}, {0x011A, 5, 1, data_at}, {0x0112, 3, 1, 8}}, true, rational_data)),
            8);
  // A string, rational or short OpenCV cannot read stops its parse: an Orientation after it is not seen.
  EXPECT_EQ(orientation_of(ifd({{0x010F, 2, 100, 5000}, {0x0112, 3, 1, 6}})), 0);
  EXPECT_EQ(orientation_of(ifd({{0x011A, 5, 1, 0xFFFFFFF0}, {0x0112, 3, 1, 6}})), 0);
  EXPECT_EQ(orientation_of(ifd({{0x0214, 5, 6, 8}, {0x0112, 3, 1, 6}})), 0);  // 6 rationals from 8: past the end
  // ...but an Orientation before it is (the entries read so far stay).
  EXPECT_EQ(orientation_of(ifd({{0x0112, 3, 1, 6}, {0x010F, 2, 100, 5000}})), 6);
  // The first Orientation entry counts.
  EXPECT_EQ(orientation_of(ifd({{0x0112, 3, 1, 3}, {0x0112, 3, 1, 6}})), 3);
  // Short strings sit in the entry (only their bounds matter).
  EXPECT_EQ(orientation_of(ifd({{0x0110, 2, 4, 0x41424300}, {0x0112, 3, 1, 5}})), 5);
  // Not a TIFF header: no tag mark 42, or nothing at all.
  Bytes b = ifd({{0x0112, 3, 1, 6}});
  b[2] = 43;
  EXPECT_EQ(orientation_of(b), 0);
  EXPECT_EQ(orientation_of({}), 0);
  // "IM" is not little-endian: OpenCV reads it big-endian, so the tag mark (2A 00 LE) does not match.
  b = ifd({{0x0112, 3, 1, 6}});
  b[1] = 'M';
  EXPECT_EQ(orientation_of(b), 0);
}

TEST(ExifCv2, EveryTruncationIsSafe) {
  const Bytes full = ifd({{0x010F, 2, 6, 8 + 2 + 3 * 12 + 4}, {0x011A, 5, 1, 8}, {0x0112, 3, 1, 6}}, false,
                         {'C', 'a', 'n', 'o', 'n', 0});
  ASSERT_EQ(orientation_of(full), 6);
  for (std::size_t n = 0; n < full.size(); ++n) {
    const Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    // The string's data (past the IFD) must be there for OpenCV to go on to the Orientation entry.
    EXPECT_EQ(orientation_of(cut), n >= full.size() ? 6 : 0) << n << " bytes";
  }
}

TEST(ExifCv2, HostileOffsetsAndCounts) {
  // IFD offset at the 32-bit limit, entry count far past the data, rational offsets that wrap in 32 bits.
  Bytes b = ifd({{0x0112, 3, 1, 6}});
  b[4] = b[5] = b[6] = b[7] = 0xFF;
  EXPECT_EQ(orientation_of(b), 0);
  b = ifd({{0x0112, 3, 1, 6}});
  b[8] = b[9] = 0xFF;  // 65535 entries; the first is the Orientation
  EXPECT_EQ(orientation_of(b), 6);
  b = ifd({{0x9999, 3, 1, 6}});
  b[8] = b[9] = 0xFF;  // 65535 entries of which one exists
  EXPECT_EQ(orientation_of(b), 0);
  EXPECT_EQ(orientation_of(ifd({{0x013F, 5, 6, 0xFFFFFFF8}, {0x0112, 3, 1, 6}})), 0);
  EXPECT_EQ(orientation_of(ifd({{0x013E, 5, 2, 0xFFFFFFFC}, {0x0112, 3, 1, 6}})), 0);
  EXPECT_EQ(orientation_of(ifd({{0x8298, 2, 0xFFFFFFFF, 0xFFFFFFFF}, {0x0112, 3, 1, 6}})), 0);
  // Random corruption of a valid IFD: only bounds-checked reads (ASan), and a result is always returned.
  const Bytes base = ifd({{0x010E, 2, 9, 60},
                          {0x011A, 5, 1, 60},
                          {0x013F, 5, 6, 60},
                          {0x0211, 5, 3, 60},
                          {0x0213, 3, 1, 1},
                          {0x0214, 5, 6, 60},
                          {0x0112, 3, 1, 6}},
                         true, Bytes(64, 7));
  std::mt19937 rng(1234);
  int found = 0;
  for (int i = 0; i < 20000; ++i) {
    Bytes m = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) m[rng() % m.size()] = static_cast<std::uint8_t>(rng());
    m.resize(rng() % (m.size() + 1));
    found += orientation_of(m) == 6;
  }
  EXPECT_GT(found, 0);  // some mutants keep the valid path
}

TEST(ExifCv2, OrientationTransformsAsOpenCv) {
  // A 3 x 2 RGB image whose pixel (x, y) holds (x, y, 10x + y).
  sp::Image im;
  im.width = 3;
  im.height = 2;
  im.format = sp::PixelFormat::RGB;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) {
      im.pixels.push_back(static_cast<std::uint8_t>(x));
      im.pixels.push_back(static_cast<std::uint8_t>(y));
      im.pixels.push_back(static_cast<std::uint8_t>(10 * x + y));
    }
  // For each orientation: the source (x, y) that lands at destination (u, v), W x H the source size.
  const auto source = [](int o, int u, int v, int w, int h, int* x, int* y) {
    switch (o) {
      case 2: *x = w - 1 - u, *y = v; break;
      case 3: *x = w - 1 - u, *y = h - 1 - v; break;
      case 4: *x = u, *y = h - 1 - v; break;
      case 5: *x = v, *y = u; break;                  // transpose
      case 6: *x = v, *y = h - 1 - u; break;          // rotate 90 clockwise
      case 7: *x = w - 1 - v, *y = h - 1 - u; break;  // transverse
      case 8: *x = w - 1 - v, *y = u; break;          // rotate 90 counter-clockwise
      default: *x = u, *y = v; break;
    }
  };
  for (int o = 0; o <= 9; ++o) {
    const sp::Image out = apply_exif_orientation(im, o);
    const bool t = o >= 5 && o <= 8;
    ASSERT_EQ(out.width, t ? 2 : 3) << o;
    ASSERT_EQ(out.height, t ? 3 : 2) << o;
    for (int v = 0; v < out.height; ++v)
      for (int u = 0; u < out.width; ++u) {
        int x = 0, y = 0;
        source(o, u, v, 3, 2, &x, &y);
        const std::uint8_t* p = out.pixels.data() + 3 * (v * out.width + u);
        EXPECT_EQ(p[0], x) << "orientation " << o << " at " << u << "," << v;
        EXPECT_EQ(p[1], y) << "orientation " << o << " at " << u << "," << v;
      }
  }
  // Gray images take the same paths (one byte per pixel).
  sp::Image g;
  g.width = 2;
  g.height = 1;
  g.pixels = {1, 2};
  const sp::Image r = apply_exif_orientation(g, 6);
  EXPECT_EQ(r.width, 1);
  EXPECT_EQ(r.height, 2);
  EXPECT_EQ(r.pixels, (std::vector<std::uint8_t>{1, 2}));
}
