// EXIF orientation, read and applied as OpenCV 4.6's imgcodecs does (see exif.hpp). Our own reader: every field is
// bounds-checked before it is read, with OpenCV's limits (a read at `offset` of n bytes needs offset + n - 1 < size).
#include "image/exif.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace superpoint_rt::image {
namespace {

// OpenCV's ExifTagName values (exif.hpp) that ExifReader::parseExifEntry reads, grouped by what it reads.
enum : std::uint16_t {
  kImageDescription = 0x010E,
  kMake = 0x010F,
  kModel = 0x0110,
  kOrientation = 0x0112,
  kXResolution = 0x011A,
  kYResolution = 0x011B,
  kResolutionUnit = 0x0128,
  kSoftware = 0x0131,
  kDateTime = 0x0132,
  kWhitePoint = 0x013E,
  kPrimaryChromaticities = 0x013F,
  kYCbCrCoefficients = 0x0211,
  kYCbCrPositioning = 0x0213,
  kReferenceBlackWhite = 0x0214,
  kCopyright = 0x8298,
};

constexpr std::uint16_t kTagMark = 42;     // ExifReader tagMarkRequired
constexpr std::uint32_t kEntryBytes = 12;  // tiffFieldSize
constexpr std::uint64_t kInlineBytes = 4;  // maxDataSize: strings up to this long sit in the entry

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> d) : d_(d) {
    // ExifReader::getFormat: "II" is little-endian (INTEL); everything else, "MM" or not, reads big-endian.
    intel_ = !d.empty() && d[0] == 'I' && (d.size() == 1 || d[1] == 'I');
  }
  // getU16 / getU32: false where OpenCV throws ExifParsingError.
  bool u16(std::uint64_t off, std::uint32_t* v) const {
    if (off + 1 >= d_.size()) return false;
    const std::uint32_t a = d_[off], b = d_[off + 1];
    *v = intel_ ? a | (b << 8) : (a << 8) | b;
    return true;
  }
  bool u32(std::uint64_t off, std::uint32_t* v) const {
    if (off + 3 >= d_.size()) return false;
    const std::uint32_t a = d_[off], b = d_[off + 1], c = d_[off + 2], e = d_[off + 3];
    *v = intel_ ? a | (b << 8) | (c << 16) | (e << 24) : (a << 24) | (b << 16) | (c << 8) | e;
    return true;
  }
  // getString: the count at +4, the data in the entry (OpenCV uses offset 8 of the whole block there, a quirk we keep
  // since only its bounds check matters) or at the offset at +8; the whole string must lie inside the data.
  bool string(std::uint64_t entry) const {
    std::uint32_t size = 0;
    if (!u32(entry + 4, &size)) return false;
    std::uint64_t at = 8;
    if (size > kInlineBytes) {
      std::uint32_t off = 0;
      if (!u32(entry + 8, &off)) return false;
      at = off;
    }
    return at <= d_.size() && at + size <= d_.size();
  }
  // n unsigned rationals at the offset stored at +8 (getResolution, getWhitePoint, ...), 32-bit offset arithmetic as
  // OpenCV's uint32_t rationalOffset.
  bool rationals(std::uint64_t entry, int n) const {
    std::uint32_t off = 0, v = 0;
    if (!u32(entry + 8, &off)) return false;
    for (int i = 0; i < n; ++i, off += 8) {
      if (!u32(off, &v) || !u32(std::uint64_t{off} + 4, &v)) return false;
    }
    return true;
  }

 private:
  std::span<const std::uint8_t> d_;
  bool intel_ = false;
};

}  // namespace

std::uint16_t exif_orientation_cv2(std::span<const std::uint8_t> tiff) noexcept {
  if (tiff.empty()) return 0;
  const Reader r(tiff);
  std::uint32_t v = 0, start = 0, count = 0;
  if (!r.u16(2, &v) || v != kTagMark) return 0;
  if (!r.u32(4, &start) || !r.u16(start, &count)) return 0;
  std::uint32_t entry = start + 2;  // OpenCV's uint32_t offset
  for (std::uint32_t i = 0; i < count; ++i, entry += kEntryBytes) {
    std::uint32_t tag = 0;
    if (!r.u16(entry, &tag)) return 0;
    bool ok = true;
    switch (tag) {
      case kOrientation: return r.u16(std::uint64_t{entry} + 8, &v) ? static_cast<std::uint16_t>(v) : 0;
      case kImageDescription:
      case kMake:
      case kModel:
      case kSoftware:
      case kDateTime:
      case kCopyright: ok = r.string(entry); break;
      case kXResolution:
      case kYResolution: ok = r.rationals(entry, 1); break;
      case kWhitePoint: ok = r.rationals(entry, 2); break;
      case kPrimaryChromaticities:
      case kReferenceBlackWhite: ok = r.rationals(entry, 6); break;
      case kYCbCrCoefficients: ok = r.rationals(entry, 3); break;
      case kResolutionUnit:
      case kYCbCrPositioning: ok = r.u16(std::uint64_t{entry} + 8, &v); break;
      default: break;  // EXIF_OFFSET and unknown tags: nothing read
    }
    // OpenCV stops at the first entry it cannot read (the exception leaves parseExif); the entries before it stay.
    if (!ok) return 0;
  }
  return 0;
}

namespace {

// dst = the source pixel each destination pixel takes, for a transposing orientation: dst(x', y') for a W x H source
// becomes H x W; src pixel (x, y) goes to row x, column y (transpose), then the flips. Blocked for the caches.
template <int C>
void transpose_into(const std::uint8_t* src, int w, int h, std::uint8_t* dst, bool flip_x, bool flip_y) {
  // Destination is h wide, w high. Transpose: dst(row = x, col = y) = src(x, y).
  // Then flip_x mirrors the destination columns, flip_y its rows.
  constexpr int kBlock = 32;
  const std::size_t dst_stride = static_cast<std::size_t>(h) * C;
  const std::size_t src_stride = static_cast<std::size_t>(w) * C;
  for (int y0 = 0; y0 < h; y0 += kBlock) {
    const int y1 = std::min(h, y0 + kBlock);
    for (int x0 = 0; x0 < w; x0 += kBlock) {
      const int x1 = std::min(w, x0 + kBlock);
      for (int x = x0; x < x1; ++x) {
        const int row = flip_y ? w - 1 - x : x;
        std::uint8_t* d = dst + static_cast<std::size_t>(row) * dst_stride;
        for (int y = y0; y < y1; ++y) {
          const int col = flip_x ? h - 1 - y : y;
          const std::uint8_t* s = src + static_cast<std::size_t>(y) * src_stride + static_cast<std::size_t>(x) * C;
          std::memcpy(d + static_cast<std::size_t>(col) * C, s, C);
        }
      }
    }
  }
}

// Mirrors the image in place: no second buffer. Both flips together reverse the pixel order of the whole image.
template <int C>
void flip_inplace(std::uint8_t* p, int w, int h, bool flip_x, bool flip_y) {
  const auto swap_px = [](std::uint8_t* a, std::uint8_t* b) { std::swap_ranges(a, a + C, b); };
  const std::size_t stride = static_cast<std::size_t>(w) * C;
  if (flip_x && flip_y) {
    const std::size_t n = stride * static_cast<std::size_t>(h) / C;
    for (std::size_t i = 0, j = n - 1; i < j; ++i, --j) swap_px(p + i * C, p + j * C);
  } else if (flip_y) {
    for (int y = 0, z = h - 1; y < z; ++y, --z)
      std::swap_ranges(p + static_cast<std::size_t>(y) * stride, p + static_cast<std::size_t>(y + 1) * stride,
                       p + static_cast<std::size_t>(z) * stride);
  } else if (flip_x) {
    for (int y = 0; y < h; ++y) {
      std::uint8_t* r = p + static_cast<std::size_t>(y) * stride;
      for (int x = 0, z = w - 1; x < z; ++x, --z)
        swap_px(r + static_cast<std::size_t>(x) * C, r + static_cast<std::size_t>(z) * C);
    }
  }
}

}  // namespace

Image apply_exif_orientation(Image im, int orientation) {
  if (orientation < 2 || orientation > 8 || im.pixels.empty()) return im;
  // ApplyExifOrientation: 2 flip(1) (mirror columns), 3 flip(-1), 4 flip(0) (mirror rows); 5 transpose, 6 transpose +
  // flip(1), 7 transpose + flip(-1), 8 transpose + flip(0).
  const bool transpose = orientation >= 5;
  const int k = transpose ? orientation - 4 : orientation;  // 1 none, 2 columns, 3 both, 4 rows
  const bool flip_x = k == 2 || k == 3, flip_y = k == 3 || k == 4;
  const bool rgb = im.format == PixelFormat::RGB;
  if (!transpose) {  // 2, 3, 4: in place
    if (rgb)
      flip_inplace<3>(im.pixels.data(), im.width, im.height, flip_x, flip_y);
    else
      flip_inplace<1>(im.pixels.data(), im.width, im.height, flip_x, flip_y);
    return im;
  }
  // 5-8: one pass into a second buffer of the result's size (a non-square transpose is not done in place).
  Image out;
  out.format = im.format;
  out.width = im.height;
  out.height = im.width;
  out.pixels.resize(im.pixels.size());
  if (rgb)
    transpose_into<3>(im.pixels.data(), im.width, im.height, out.pixels.data(), flip_x, flip_y);
  else
    transpose_into<1>(im.pixels.data(), im.width, im.height, out.pixels.data(), flip_x, flip_y);
  return out;
}

}  // namespace superpoint_rt::image
