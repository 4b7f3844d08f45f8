// Public image API: names, sniffing, the decode dispatcher, file reading. The per-format decoders live in
// decode_<format>.cpp (see decode_internal.hpp for the shared contract).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>

#include "image/decode_internal.hpp"
#include "util/file.hpp"

namespace superpoint_rt {

int channels_of(PixelFormat f) noexcept {
  switch (f) {
    case PixelFormat::Gray: return 1;
    case PixelFormat::RGB:
    case PixelFormat::BGR: return 3;
    case PixelFormat::RGBA:
    case PixelFormat::BGRA: return 4;
  }
  return 0;
}

const char* to_string(PixelFormat f) noexcept {
  switch (f) {
    case PixelFormat::Gray: return "gray";
    case PixelFormat::RGB: return "rgb";
    case PixelFormat::BGR: return "bgr";
    case PixelFormat::RGBA: return "rgba";
    case PixelFormat::BGRA: return "bgra";
  }
  return "unknown";
}

std::ptrdiff_t ImageView::packed_stride() const noexcept {
  const std::ptrdiff_t sample = type == SampleType::F32 ? 4 : 1;
  return static_cast<std::ptrdiff_t>(width) * channels_of(format) * sample;
}

const char* to_string(ImageFormat f) noexcept {
  switch (f) {
    case ImageFormat::Unknown: return "unknown";
    case ImageFormat::JPEG: return "JPEG";
    case ImageFormat::PNG: return "PNG";
    case ImageFormat::GIF: return "GIF";
    case ImageFormat::BMP: return "BMP";
    case ImageFormat::WebP: return "WebP";
    case ImageFormat::TIFF: return "TIFF";
    case ImageFormat::PNM: return "PNM";
  }
  return "unknown";
}

const char* supported_formats() noexcept {
  return "JPEG, PNG, GIF, BMP, WebP, TIFF, PNM";
}

ImageFormat sniff_format(std::span<const std::uint8_t> b) noexcept {
  const auto starts = [&](const char* magic, std::size_t n) {
    return b.size() >= n && std::memcmp(b.data(), magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return ImageFormat::JPEG;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return ImageFormat::PNG;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageFormat::GIF;
  if (starts("BM", 2)) return ImageFormat::BMP;
  if (b.size() >= 12 && starts("RIFF", 4) && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return ImageFormat::WebP;
  // Classic TIFF and BigTIFF, both byte orders (libtiff reads all four).
  if (starts("II*\0", 4) || starts("MM\0*", 4) || starts("II+\0", 4) || starts("MM\0+", 4)) return ImageFormat::TIFF;
  // Netpbm P1..P6; Pillow reads the magic up to the first whitespace, so "P6" must be followed by whitespace.
  if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') {
    const std::uint8_t c = b[2];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') return ImageFormat::PNM;
  }
  return ImageFormat::Unknown;
}

namespace {

[[noreturn]] void unsupported(std::span<const std::uint8_t> b, const std::string& name) {
  if (b.empty()) {
    throw Error(ErrorKind::DecodeError, "image '" + name + "' is empty (0 bytes)");
  }
  throw Error(ErrorKind::UnsupportedFormat, "image '" + name + "' is not in a supported format (supported: " +
                                                std::string(supported_formats()) + ")");
}

}  // namespace

ImageInfo probe_image(std::span<const std::uint8_t> bytes, const std::string& name) {
  switch (sniff_format(bytes)) {
    case ImageFormat::JPEG: return image::probe_jpeg(bytes, name);
    case ImageFormat::PNG: return image::probe_png(bytes, name);
    case ImageFormat::GIF: return image::probe_gif(bytes, name);
    case ImageFormat::BMP: return image::probe_bmp(bytes, name);
    case ImageFormat::WebP: return image::probe_webp(bytes, name);
    case ImageFormat::TIFF: return image::probe_tiff(bytes, name);
    case ImageFormat::PNM: return image::probe_pnm(bytes, name);
    case ImageFormat::Unknown: break;
  }
  unsupported(bytes, name);
}

Image decode_image(std::span<const std::uint8_t> bytes, const std::string& name, std::int64_t max_pixels) {
  if (max_pixels < 1) {
    throw Error(ErrorKind::InvalidArgument,
                "max_pixels must be >= 1 (got " + std::to_string(max_pixels) + ") when decoding '" + name + "'");
  }
  switch (sniff_format(bytes)) {
    case ImageFormat::JPEG: return image::decode_jpeg(bytes, name, max_pixels);
    case ImageFormat::PNG: return image::decode_png(bytes, name, max_pixels);
    case ImageFormat::GIF: return image::decode_gif(bytes, name, max_pixels);
    case ImageFormat::BMP: return image::decode_bmp(bytes, name, max_pixels);
    case ImageFormat::WebP: return image::decode_webp(bytes, name, max_pixels);
    case ImageFormat::TIFF: return image::decode_tiff(bytes, name, max_pixels);
    case ImageFormat::PNM: return image::decode_pnm(bytes, name, max_pixels);
    case ImageFormat::Unknown: break;
  }
  unsupported(bytes, name);
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  return util::read_file(path, util::kNoSizeLimit);
}

Image decode_file(const std::string& path, std::int64_t max_pixels) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  return decode_image(bytes, path, max_pixels);
}

namespace image {

void fail(ErrorKind kind, ImageFormat format, const std::string& name, const std::string& what) {
  throw Error(kind, std::string(to_string(format)) + " image '" + name + "': " + what);
}

void check_dimensions(ImageFormat format, const std::string& name, std::int64_t width, std::int64_t height,
                      std::int64_t max_pixels) {
  if (max_pixels < 1) {
    throw Error(ErrorKind::InvalidArgument,
                "max_pixels must be >= 1 (got " + std::to_string(max_pixels) + ") when decoding '" + name + "'");
  }
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width < 1 || height < 1) fail(ErrorKind::DecodeError, format, name, "invalid size " + size);
  // Image::width/height are int: a side past INT_MAX is refused by name, before any product is formed.
  constexpr std::int64_t kMaxSide = std::numeric_limits<int>::max();
  if (width > kMaxSide || height > kMaxSide) {
    fail(ErrorKind::TooLarge, format, name,
         size + " has a side over " + std::to_string(kMaxSide) + " pixels (INT_MAX), the most an image can hold");
  }
  const std::int64_t pixels = width * height;  // both sides < 2^31: no overflow in int64
  if (pixels > max_pixels) {
    fail(ErrorKind::TooLarge, format, name,
         size + " is " + std::to_string(pixels) + " pixels, over the limit of " + std::to_string(max_pixels) +
             " (max_pixels)");
  }
}

int probe_side(std::uint64_t side) noexcept {
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(std::numeric_limits<int>::max());
  return static_cast<int>(side > kMax ? kMax : side);
}

std::int64_t work_limit(std::size_t input_bytes) noexcept {
  constexpr std::size_t kFree = std::size_t{1} << 20;  // the first MiB gets kDecodeWorkBytes alone
  const std::size_t extra = input_bytes > kFree ? input_bytes - kFree : 0;
  constexpr std::int64_t kMaxExtra =
      (std::numeric_limits<std::int64_t>::max() - kDecodeWorkBytes) / kDecodeWorkBytesPerInputByte;
  const std::int64_t e = extra > static_cast<std::size_t>(kMaxExtra) ? kMaxExtra : static_cast<std::int64_t>(extra);
  return kDecodeWorkBytes + e * kDecodeWorkBytesPerInputByte;
}

void check_work(ImageFormat format, const std::string& name, std::int64_t bytes, std::size_t input_bytes,
                const std::string& what) {
  const std::int64_t limit = work_limit(input_bytes);
  if (bytes > limit) {
    fail(ErrorKind::TooLarge, format, name,
         what + " needs " + std::to_string(bytes) + " bytes, over the decoder's working-memory limit of " +
             std::to_string(limit) + " bytes for a file of " + std::to_string(input_bytes) +
             " bytes (kDecodeWorkBytes, docs/LIMITS.md)");
  }
}

OutputRows::OutputRows(ImageFormat format, const std::string& name, int width, int height, PixelFormat pf,
                       std::uint8_t fill)
    : fill_(fill), format_(format), name_(name) {
  im_.width = width;
  im_.height = height;
  im_.format = pf;
  stride_ = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels_of(pf));
}

void OutputRows::reach(int end) {
  if (end <= rows_) return;
  if (end > im_.height) end = im_.height;
  const std::size_t need = static_cast<std::size_t>(end) * stride_;
  const std::size_t full = static_cast<std::size_t>(im_.height) * stride_;
  try {
    if (need > im_.pixels.capacity()) {
      // Double while under kDecodeGrowthBytes (amortised copies, at most what was decoded), then the full size.
      std::size_t cap = std::max({need, 2 * im_.pixels.capacity(), std::size_t{1} << 16});
      if (cap > static_cast<std::size_t>(kDecodeGrowthBytes)) cap = full;
      im_.pixels.reserve(std::min(cap, full));
    }
    im_.pixels.resize(need, fill_);
  } catch (const std::bad_alloc&) {
    fail(ErrorKind::TooLarge, format_, name_,
         "cannot allocate " + std::to_string(im_.width) + "x" + std::to_string(im_.height) + " pixels");
  }
  rows_ = end;
}

Image OutputRows::finish() {
  reach(im_.height);
  return std::move(im_);
}

Image make_image(ImageFormat format, const std::string& name, int width, int height, PixelFormat pf) {
  Image im;
  im.width = width;
  im.height = height;
  im.format = pf;
  try {
    im.pixels.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) *
                     static_cast<std::size_t>(channels_of(pf)));
  } catch (const std::bad_alloc&) {
    fail(ErrorKind::TooLarge, format, name,
         "cannot allocate " + std::to_string(width) + "x" + std::to_string(height) + " pixels");
  }
  return im;
}

void expand_palette_row_inplace(std::uint8_t* row, int width, const Palette& pal) noexcept {
  // Back to front: output pixel x occupies bytes 3x..3x+2 >= x, so every index is read before it is overwritten.
  for (int x = width - 1; x >= 0; --x) {
    const std::uint8_t* c = &pal.rgb[3 * static_cast<std::size_t>(row[x])];
    std::uint8_t* o = row + 3 * static_cast<std::ptrdiff_t>(x);
    o[2] = c[2];
    o[1] = c[1];
    o[0] = c[0];
  }
}

void cmyk_to_rgb_row(const std::uint8_t* cmyk, std::uint8_t* rgb, int width, bool inverted) noexcept {
  // Pillow Convert.c: MULDIV255(a, b) = ((a*b + 128) >> 8 + (a*b + 128)) >> 8, CLIP8. "CMYK;I" (Adobe JPEGs)
  // stores 255 - value; Pillow's unpacker inverts it first.
  const auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (int x = 0; x < width; ++x) {
    int v[4];
    for (int c = 0; c < 4; ++c) v[c] = inverted ? 255 - cmyk[4 * x + c] : cmyk[4 * x + c];
    const int nk = 255 - v[3];
    for (int c = 0; c < 3; ++c) {
      int o = nk - muldiv255(v[c], nk);
      o = o < 0 ? 0 : (o > 255 ? 255 : o);
      rgb[3 * x + c] = static_cast<std::uint8_t>(o);
    }
  }
}

}  // namespace image
}  // namespace superpoint_rt
