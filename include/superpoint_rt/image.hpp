// superpoint-rt: images in and out of the library.
//
// Coordinates: x to the right, y down, origin at the top-left corner of the top-left pixel; sizes are width x height
// in pixels. Pixel rows are stored top to bottom.
//
// ImageView is a NON-OWNING view of caller memory: the memory must stay valid and unchanged for the duration of the
// call that receives the view; the library never keeps a view after the call returns and never writes through it.
// Image is an owning, decoded 8-bit image. Both are plain values; neither is synchronised (share them read-only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace superpoint_rt {

/// Channel layout of a pixel view. Interleaved channels, one pixel after the other within a row.
enum class PixelFormat {
  Gray,  // 1 channel
  RGB,   // 3 channels, R G B
  BGR,   // 3 channels, B G R (OpenCV order)
  RGBA,  // 4 channels, R G B A (alpha ignored, as Pillow's convert("RGB"))
  BGRA,  // 4 channels, B G R A (OpenCV order with alpha; alpha ignored)
};

/// Element type of a pixel view.
enum class SampleType {
  U8,   // 0..255
  F32,  // [0, 1]; rounded to 8 bits as nearbyint(v * 255) (round half to even); NaN or out of range is an error
};

int channels_of(PixelFormat f) noexcept;
const char* to_string(PixelFormat f) noexcept;

/// A caller-owned image. `row_stride` is in BYTES between the starts of two consecutive rows (>= width * channels *
/// sizeof(sample)); 0 means tightly packed. Any stride is accepted, including padded OpenCV Mats and numpy views.
struct ImageView {
  const void* data = nullptr;
  int width = 0;
  int height = 0;
  PixelFormat format = PixelFormat::Gray;
  SampleType type = SampleType::U8;
  std::ptrdiff_t row_stride = 0;

  static ImageView gray(const std::uint8_t* p, int w, int h, std::ptrdiff_t stride = 0) {
    return {p, w, h, PixelFormat::Gray, SampleType::U8, stride};
  }
  static ImageView rgb(const std::uint8_t* p, int w, int h, std::ptrdiff_t stride = 0) {
    return {p, w, h, PixelFormat::RGB, SampleType::U8, stride};
  }
  static ImageView bgr(const std::uint8_t* p, int w, int h, std::ptrdiff_t stride = 0) {
    return {p, w, h, PixelFormat::BGR, SampleType::U8, stride};
  }
  static ImageView rgba(const std::uint8_t* p, int w, int h, std::ptrdiff_t stride = 0) {
    return {p, w, h, PixelFormat::RGBA, SampleType::U8, stride};
  }
  /// Bytes per row when tightly packed.
  std::ptrdiff_t packed_stride() const noexcept;
  /// row_stride, or packed_stride() when row_stride is 0.
  std::ptrdiff_t stride() const noexcept { return row_stride ? row_stride : packed_stride(); }
};

/// A decoded 8-bit image owned by the library: Gray (1 channel) or RGB (3 channels), tightly packed.
/// Decoding follows Pillow's Image.open(f).convert("RGB"), except that gray files (L, LA, 1-bit, 16-bit gray)
/// keep their gray plane, as the reference does (Pillow mode "L" is not converted).
struct Image {
  int width = 0;
  int height = 0;
  PixelFormat format = PixelFormat::Gray;  // Gray or RGB only
  std::vector<std::uint8_t> pixels;        // height * width * channels

  ImageView view() const noexcept { return {pixels.data(), width, height, format, SampleType::U8, 0}; }
};

/// Image file formats the decoders understand.
enum class ImageFormat { Unknown, JPEG, PNG, GIF, BMP, WebP, TIFF, PNM };
const char* to_string(ImageFormat f) noexcept;

/// What a file's header says, read without decoding the pixels.
struct ImageInfo {
  ImageFormat format = ImageFormat::Unknown;
  int width = 0;
  int height = 0;
  int channels = 0;  // of the decoded result: 1 (gray) or 3 (RGB)
};

/// Pillow's decompression-bomb limit (Image.MAX_IMAGE_PIXELS * 2 is Pillow's hard error; we refuse above this).
inline constexpr std::int64_t kDefaultMaxPixels = 178956970;

// Memory bounds of decoding (docs/LIMITS.md states them and how the tests check them). A header's claims never
// allocate memory by themselves: beyond its result (width * height * channels bytes), one decode_image call
// allocates at most about kDecodeWorkBytes + kDecodeGrowthBytes for an input of at most 1 MiB, and
// kDecodeWorkBytesPerInputByte more per input byte past the first MiB (a large file may need a codec's
// whole-image buffers: progressive JPEG coefficients, lossless WebP's ARGB plane, TIFF strips). A file whose
// decoding would need more is refused with TooLarge naming the limit.

/// The codecs' working memory (libjpeg-turbo's whole-image buffers, libtiff's and our strip buffers, libpng's row
/// buffers, libwebp's lossless plane) for an input of at most 1 MiB.
inline constexpr std::int64_t kDecodeWorkBytes = std::int64_t{40} << 20;
/// Working memory allowed per input byte past the first MiB.
inline constexpr std::int64_t kDecodeWorkBytesPerInputByte = 64;
/// The result grows with the rows the data actually produced, up to this size; past it the full result is
/// allocated at once (so a large image is copied at most once). A header-only or truncated file therefore never
/// allocates its declared size; one that decodes this many bytes of rows before failing may.
inline constexpr std::int64_t kDecodeGrowthBytes = std::int64_t{16} << 20;
/// Progressive JPEG scans read before the file is refused (libjpeg-turbo's LJT-01-003 advice, TurboJPEG's
/// TJPARAM_SCANLIMIT default): each scan is a pass over the whole coefficient buffer.
inline constexpr int kMaxJpegScans = 500;

/// "JPEG, PNG, GIF, BMP, WebP, TIFF, PNM": the list used in error messages.
const char* supported_formats() noexcept;

/// Sniffs the format from the first bytes (magic numbers). Unknown when nothing matches.
ImageFormat sniff_format(std::span<const std::uint8_t> bytes) noexcept;

/// Reads the header only. Throws UnsupportedFormat (names `name` and the supported formats) or DecodeError.
ImageInfo probe_image(std::span<const std::uint8_t> bytes, const std::string& name = "<memory>");

/// Decodes encoded bytes. `name` is used in error messages (a file name, or "<memory>"). The pixel count from the
/// header is checked against `max_pixels` BEFORE pixel memory is allocated (TooLarge), and so is each side against
/// INT_MAX. Truncated or corrupt data is a DecodeError naming `name`. GIF: the first frame. EXIF orientation is not
/// applied (as Pillow). Memory: see kDecodeWorkBytes above (the bounds hold for any bytes, hostile ones included).
Image decode_image(std::span<const std::uint8_t> bytes, const std::string& name = "<memory>",
                   std::int64_t max_pixels = kDefaultMaxPixels);

/// Reads and decodes a file. NotFound when it does not exist, Io when it cannot be read.
Image decode_file(const std::string& path, std::int64_t max_pixels = kDefaultMaxPixels);

/// Reads a whole file into memory. NotFound / Io errors name the path.
std::vector<std::uint8_t> read_file(const std::string& path);

/// Writes an 8-bit Gray or RGB image as PNG (used for keypoint plots). Io error names the path.
void write_png(const std::string& path, const ImageView& image);

}  // namespace superpoint_rt
