// Internal interface of the image decoders (one file per format, src/image/decode_<format>.cpp).
//
// Every decoder follows Pillow 9.4's Image.open(f) + convert("RGB") (or the gray plane for the modes listed in
// image.hpp) and the same structure:
//   1. read the header only (cheap, no pixel memory),
//   2. check_dimensions(): w, h >= 1 and w * h <= max_pixels, BEFORE any pixel memory is allocated,
//   3. decode straight into the result through OutputRows, which allocates rows as the data produces them (so a
//      header alone never allocates its declared size; image.hpp kDecodeGrowthBytes), with the codec's working
//      memory bounded by work_limit() (image.hpp kDecodeWorkBytes, docs/LIMITS.md).
// All state is per call: the decoders are thread-safe and may run concurrently on any number of threads.
// Failures throw superpoint_rt::Error naming the input (`name`): DecodeError for truncated / corrupt data,
// UnsupportedFormat for a valid file of a variant we do not decode, TooLarge for the pixel limit.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "image/resize.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/image.hpp"

namespace superpoint_rt::image {

using Bytes = std::span<const std::uint8_t>;

/// Throws Error(kind) with the message "<format> image '<name>': <what>".
[[noreturn]] void fail(ErrorKind kind, ImageFormat format, const std::string& name, const std::string& what);

/// The header-time checks every decoder runs before allocating pixels: DecodeError when w or h < 1 (or absurd),
/// TooLarge (naming the size and the limit) when w * h > max_pixels; InvalidArgument when max_pixels < 1.
void check_dimensions(ImageFormat format, const std::string& name, std::int64_t width, std::int64_t height,
                      std::int64_t max_pixels);

/// Allocates the result (height * width * channels bytes). Call only after check_dimensions.
Image make_image(ImageFormat format, const std::string& name, int width, int height, PixelFormat pf);

/// A header's side as ImageInfo holds it: values above INT_MAX saturate (check_dimensions refuses them when
/// decoding), so a caller multiplying the probed sides in 64 bits never sees a wrapped, small size.
int probe_side(std::uint64_t side) noexcept;

/// The codecs' working-memory limit for an input of `input_bytes` bytes (image.hpp: kDecodeWorkBytes plus
/// kDecodeWorkBytesPerInputByte per byte past the first MiB).
std::int64_t work_limit(std::size_t input_bytes) noexcept;

/// Throws TooLarge "<format> image '<name>': <what> needs N bytes, over the decoder's working-memory limit of L
/// bytes for a file of S bytes" when bytes > work_limit(input_bytes).
void check_work(ImageFormat format, const std::string& name, std::int64_t bytes, std::size_t input_bytes,
                const std::string& what);

/// The result image, allocated as rows are decoded: rows [0, end) exist after reach(end) (rows never reached are
/// `fill`). The buffer grows geometrically while it is under kDecodeGrowthBytes and then takes the full size, so a
/// file that ends (or fails) early has allocated about what it decoded, and a large image is copied at most once.
/// Growing moves the rows: pointers obtained before a reach() that grows are invalid after it.
class OutputRows {
 public:
  OutputRows(ImageFormat format, const std::string& name, int width, int height, PixelFormat pf, std::uint8_t fill = 0);
  /// Makes rows [0, end) exist (end <= height).
  void reach(int end);
  /// Row y (reached first), width * channels bytes.
  std::uint8_t* row(int y) {
    reach(y + 1);
    return im_.pixels.data() + static_cast<std::size_t>(y) * stride_;
  }
  std::size_t stride() const noexcept { return stride_; }
  int width() const noexcept { return im_.width; }
  int height() const noexcept { return im_.height; }
  /// All rows (reaching the rest), moved out.
  Image finish();

 private:
  Image im_;
  std::size_t stride_ = 0;
  int rows_ = 0;
  std::uint8_t fill_ = 0;
  ImageFormat format_;
  const std::string& name_;
};

/// A 256-entry RGB palette initialised the way Pillow initialises one (ImagingPaletteNew: a gray ramp i -> (i,i,i)),
/// so indices beyond the entries a file defines map to gray i, exactly as Pillow's P -> RGB convert does.
struct Palette {
  std::array<std::uint8_t, 768> rgb{};
  Palette() {
    for (int i = 0; i < 256; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = static_cast<std::uint8_t>(i);
  }
};

/// Expands `width` 8-bit palette indices at the start of `row` in place to RGB (3 * width bytes), back to front.
void expand_palette_row_inplace(std::uint8_t* row, int width, const Palette& pal) noexcept;

/// Pillow's CMYK -> RGB (libImaging/Convert.c cmyk2rgb): nk = 255 - k; c' = clip(nk - muldiv255(c, nk)).
void cmyk_to_rgb_row(const std::uint8_t* cmyk, std::uint8_t* rgb, int width, bool inverted) noexcept;

// Per-format entry points (the bytes were sniffed as that format).
ImageInfo probe_jpeg(Bytes b, const std::string& name);
Image decode_jpeg(Bytes b, const std::string& name, std::int64_t max_pixels);
/// One plane of what decode_jpeg returns (channel 0 = R, 1 = G, 2 = B of the RGB result; a gray JPEG gives its
/// gray plane), as a Gray image with the same bits. 3-component files are decoded to RGB 16 rows at a time and
/// only the channel is kept: no full RGB image (3 bytes per pixel) is allocated and the resize then reads a
/// contiguous plane. CMYK files take the full decode. Same errors as decode_jpeg; InvalidArgument for a bad channel.
Image decode_jpeg_channel(Bytes b, const std::string& name, std::int64_t max_pixels, int channel);
/// The plan for an input size (the engine's per-size cache); called once, after the header checks.
using PlanFor = std::function<std::shared_ptr<const ResizePlan>(int width, int height)>;

/// Fused JPEG decode + Pillow resize of one plane, for requests that need only one plane: the scanlines are decoded
/// (same settings and JCS_RGB / JCS_GRAYSCALE output as decode_jpeg, so the same bits) 64 rows at a time into a
/// small band buffer and each row goes straight into the horizontal resize pass (resize_plane_rows); the full-size
/// image is never stored. `dst` receives plan.out_w x plan.out_h bytes, bit-identical to decode_jpeg + resize_plane
/// of the plane. Gray files give their plane; 3-component files give `rgb_channel` (0 = R, 1 = G, 2 = B) and are
/// refused when rgb_channel < 0 (all three planes are needed). Every scanline is decoded, also those the resize
/// does not read, so truncated and corrupt files fail as decode_jpeg fails them (same errors).
/// Returns false, having decoded no pixels, when the fused path does not apply (CMYK or a refused RGB file, or
/// !resize_rows_available()): the caller then decodes normally. On success sets *width, *height (the source size).
///
/// Two threads: with a `parallel` hook, a baseline (single-scan) file of at least 300,000 pixels whose plan has a
/// vertical pass is decoded in two parts, task 0 the top rows (the one-thread path) and task 1 the bottom rows (a
/// second libjpeg decompressor that skips to them with jpeg_skip_scanlines, which only Huffman-decodes the skipped
/// rows), each computing its own output rows; the split balances the two (decode_jpeg.cpp). Same bits and errors as
/// one thread. Task 1 resizes with `*scratch2` (a local one when null). Progressive, multi-scan and small files, and
/// an empty hook, take the one-thread path. The tasks never wait for each other, so a hook that runs them one after
/// the other is correct, only slower than no hook (the skip costs ~60% of a decode). The two parts do ~45% more work
/// in all than one thread (the Huffman decoding above the split twice), for ~25% less wall time when both run at once:
/// pass a hook only when a second core is idle (a single request), not when other requests keep the cores busy.
/// ParallelFor: runs task(0) .. task(n - 1), possibly concurrently, and returns when all have returned (the tasks
/// do not throw: failures are carried back and thrown here, on the calling thread).
using ParallelFor = std::function<void(int n, const std::function<void(int)>& task)>;
bool decode_jpeg_resized_plane(Bytes b, const std::string& name, std::int64_t max_pixels, int rgb_channel,
                               const PlanFor& plan_for, std::vector<std::uint8_t>& dst, ResizeScratch& scratch,
                               int* width, int* height, const ParallelFor& parallel = {},
                               ResizeScratch* scratch2 = nullptr);

namespace detail {
/// Test and bench hooks of decode_jpeg_resized_plane's two-thread path (-1: what decode_jpeg_resized_plane uses).
struct JpegSplitHooks {
  std::int64_t min_pixels = -1;  // smaller files stay on one thread
  int first_rows = -1;           // output rows task 0 takes before the split is decided (clamped to 1..out_h-1)
  int split_row = -1;            // the first output row task 1 asks for (clamped to first_rows..out_h-1)
};
/// What the two-thread path did (for tests and bench_host).
struct JpegSplitInfo {
  bool parallel = false;        // the two-thread path ran
  int first_rows = 0;           // output rows task 0 took before the split was decided
  int split_row = 0;            // task 1's first output row
  bool top_raw = false;         // task 0 took the raw-component path
  bool bottom_decided = false;  // task 1 chose the split (else task 0 claimed split_row = first_rows)
};
bool decode_jpeg_resized_plane_hooked(Bytes b, const std::string& name, std::int64_t max_pixels, int rgb_channel,
                                      const PlanFor& plan_for, std::vector<std::uint8_t>& dst, ResizeScratch& scratch,
                                      int* width, int* height, const ParallelFor& parallel, ResizeScratch* scratch2,
                                      const JpegSplitHooks& hooks, JpegSplitInfo* info);
}  // namespace detail
ImageInfo probe_png(Bytes b, const std::string& name);
Image decode_png(Bytes b, const std::string& name, std::int64_t max_pixels);
ImageInfo probe_gif(Bytes b, const std::string& name);
Image decode_gif(Bytes b, const std::string& name, std::int64_t max_pixels);
ImageInfo probe_bmp(Bytes b, const std::string& name);
Image decode_bmp(Bytes b, const std::string& name, std::int64_t max_pixels);
ImageInfo probe_webp(Bytes b, const std::string& name);
Image decode_webp(Bytes b, const std::string& name, std::int64_t max_pixels);
ImageInfo probe_tiff(Bytes b, const std::string& name);
Image decode_tiff(Bytes b, const std::string& name, std::int64_t max_pixels);
ImageInfo probe_pnm(Bytes b, const std::string& name);
Image decode_pnm(Bytes b, const std::string& name, std::int64_t max_pixels);

}  // namespace superpoint_rt::image
