// WebP through libwebp. Pillow 9.4 decodes a still WebP with WebPAnimDecoder in MODE_RGBA (or RGBX without alpha);
// for a single frame covering the canvas that is the plain decode, whose R, G, B do not depend on the output mode
// (alpha is not premultiplied in RGBA), so decoding MODE_RGB straight into the result gives convert("RGB")'s pixels
// for lossy, lossless and alpha files alike (the same YUV->RGB "fancy" upsampler as Pillow's call).
// Animated WebP (ANIM/ANMF, first frame composed on the canvas) needs libwebpdemux and is refused for now.
#include <webp/decode.h>

#include "image/decode_internal.hpp"

namespace superpoint_rt::image {
namespace {

WebPBitstreamFeatures features(Bytes b, const std::string& name) {
  WebPBitstreamFeatures f{};
  const VP8StatusCode st = WebPGetFeatures(b.data(), b.size(), &f);
  if (st == VP8_STATUS_NOT_ENOUGH_DATA) fail(ErrorKind::DecodeError, ImageFormat::WebP, name, "truncated header");
  if (st != VP8_STATUS_OK) {
    fail(ErrorKind::DecodeError, ImageFormat::WebP, name, "corrupt header (libwebp status " + std::to_string(st) + ")");
  }
  if (f.has_animation) {
    fail(ErrorKind::UnsupportedFormat, ImageFormat::WebP, name, "animated WebP is not supported");
  }
  return f;
}

}  // namespace

ImageInfo probe_webp(Bytes b, const std::string& name) {
  const WebPBitstreamFeatures f = features(b, name);
  return {ImageFormat::WebP, f.width, f.height, 3};
}

Image decode_webp(Bytes b, const std::string& name, std::int64_t max_pixels) {
  const WebPBitstreamFeatures f = features(b, name);
  check_dimensions(ImageFormat::WebP, name, f.width, f.height, max_pixels);
  // libwebp decodes into a result of the full size (its API has no row-by-row output), so the data must at least
  // all be there before that is allocated: a RIFF container whose declared size runs past the end of the file is
  // truncated (Pillow: "image file is truncated"), found without allocating.
  if (b.size() >= 12) {
    const std::uint64_t riff =
        std::uint64_t{b[4]} | (std::uint64_t{b[5]} << 8) | (std::uint64_t{b[6]} << 16) | (std::uint64_t{b[7]} << 24);
    if (riff + 8 > b.size()) fail(ErrorKind::DecodeError, ImageFormat::WebP, name, "truncated data");
  }
  // Lossless files are decoded by libwebp into a whole-image 32-bit ARGB plane before our RGB rows.
  if (f.format == 2) {
    check_work(ImageFormat::WebP, name, 4 * static_cast<std::int64_t>(f.width) * f.height, b.size(),
               "lossless " + std::to_string(f.width) + "x" + std::to_string(f.height) + " (libwebp's ARGB plane)");
  }
  Image im = make_image(ImageFormat::WebP, name, f.width, f.height, PixelFormat::RGB);
  const int stride = f.width * 3;
  if (!WebPDecodeRGBInto(b.data(), b.size(), im.pixels.data(), im.pixels.size(), stride)) {
    fail(ErrorKind::DecodeError, ImageFormat::WebP, name, "truncated or corrupt data");
  }
  return im;
}

}  // namespace superpoint_rt::image
