// decode_image_cv2 (decode_cv2.hpp): the dispatcher, OpenCV's conversions for the formats decoded by our own
// decoders, and the EXIF orientation.
#include "image/decode_cv2.hpp"

#include <utility>

#include "image/decode_internal.hpp"
#include "image/exif.hpp"

namespace superpoint_rt::image {
namespace {

// An RGB image made gray in place with one of OpenCV's fixed-point lumas (decode_cv2.hpp).
template <std::uint8_t (*Luma)(unsigned, unsigned, unsigned)>
Image to_gray(Image im) {
  if (im.format == PixelFormat::Gray) return im;
  const std::size_t n = static_cast<std::size_t>(im.width) * static_cast<std::size_t>(im.height);
  std::uint8_t* p = im.pixels.data();
  for (std::size_t i = 0; i < n; ++i) p[i] = Luma(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
  im.pixels.resize(n);
  im.pixels.shrink_to_fit();
  im.format = PixelFormat::Gray;
  return im;
}

// A gray image as RGB with the plane replicated (icvCvt_Gray2BGR_8u_C1C3R).
Image to_rgb(Image im) {
  if (im.format == PixelFormat::RGB) return im;
  const std::size_t n = static_cast<std::size_t>(im.width) * static_cast<std::size_t>(im.height);
  Image out;
  out.width = im.width;
  out.height = im.height;
  out.format = PixelFormat::RGB;
  out.pixels.resize(3 * n);
  std::uint8_t* d = out.pixels.data();
  for (std::size_t i = 0; i < n; ++i) d[3 * i] = d[3 * i + 1] = d[3 * i + 2] = im.pixels[i];
  return out;
}

// imgcodecs' converters (BMP, TIFF, PNM; GIF).
Image convert(Image im, Cv2Read mode) {
  return mode == Cv2Read::Grayscale ? to_gray<cv2_gray>(std::move(im)) : to_rgb(std::move(im));
}

// The WebP reader's cvtColor.
Image convert_cvtcolor(Image im, Cv2Read mode) {
  return mode == Cv2Read::Grayscale ? to_gray<cv2_gray15>(std::move(im)) : to_rgb(std::move(im));
}

}  // namespace

Image decode_image_cv2(std::span<const std::uint8_t> bytes, const std::string& name, std::int64_t max_pixels,
                       Cv2Read mode, Cv2Orientation apply) {
  if (max_pixels < 1) {
    throw Error(ErrorKind::InvalidArgument,
                "max_pixels must be >= 1 (got " + std::to_string(max_pixels) + ") when decoding '" + name + "'");
  }
  // imread: `if (!(flags & IMREAD_IGNORE_ORIENTATION)) ApplyExifOrientation(...)` (JPEG, PNG). The decoders report
  // the orientation they found in `orientation` (read after they return).
  int orientation = 0;
  const auto oriented = [&](Image im) {
    if (apply == Cv2Orientation::Ignore) return im;
    return apply_exif_orientation(std::move(im), orientation);
  };
  switch (sniff_format(bytes)) {
    case ImageFormat::JPEG: return oriented(decode_jpeg_cv2(bytes, name, max_pixels, mode, &orientation));
    case ImageFormat::PNG: return oriented(decode_png_cv2(bytes, name, max_pixels, mode, &orientation));
    case ImageFormat::TIFF:
      // OpenCV 4.6's TIFF decoder orients the image by the file's own Orientation tag (IFD0: the file starts with its
      // TIFF header) itself, so IMREAD_IGNORE_ORIENTATION changes nothing for TIFF (tests/python/test_decode_cv2.py).
      return apply_exif_orientation(convert(decode_tiff(bytes, name, max_pixels), mode), exif_orientation_cv2(bytes));
    case ImageFormat::BMP: return convert(decode_bmp(bytes, name, max_pixels), mode);
    case ImageFormat::WebP: return convert_cvtcolor(decode_webp(bytes, name, max_pixels), mode);
    case ImageFormat::PNM: return convert(decode_pnm(bytes, name, max_pixels), mode);
    case ImageFormat::GIF: return convert(decode_gif(bytes, name, max_pixels), mode);  // not in OpenCV 4.6
    case ImageFormat::Unknown: break;
  }
  // decode_image's errors for empty and unknown input.
  return decode_image(bytes, name, max_pixels);
}

}  // namespace superpoint_rt::image
