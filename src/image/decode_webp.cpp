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
  Image im = make_image(ImageFormat::WebP, name, f.width, f.height, PixelFormat::RGB);
  const int stride = f.width * 3;
  if (!WebPDecodeRGBInto(b.data(), b.size(), im.pixels.data(), im.pixels.size(), stride)) {
    fail(ErrorKind::DecodeError, ImageFormat::WebP, name, "truncated or corrupt data");
  }
  return im;
}

}  // namespace superpoint_rt::image
