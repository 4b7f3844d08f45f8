// Fuzz harness: the cv2-exact decoders (decode_image_cv2, src/image/decode_cv2.hpp) in both modes, and the EXIF
// reader (exif_orientation_cv2, src/image/exif.hpp) on the raw input as a TIFF header + IFD0 (what the TIFF path
// hands it), with a small pixel limit. Properties checked besides the sanitizers: a decoded image has the mode's
// format (Grayscale -> Gray, Color -> RGB), is non-empty, within the limit, with exactly width * height * channels
// bytes; only sniffed formats decode; when both modes decode, they give the same size (the orientation depends on
// the file only).
#include "fuzz_util.hpp"
#include "image/decode_cv2.hpp"
#include "image/exif.hpp"

using namespace superpoint_rt;

namespace {

bool decode(std::span<const std::uint8_t> bytes, image::Cv2Read mode, Image* im) {
  if (!sprt_fuzz::ok([&] { *im = image::decode_image_cv2(bytes, "fuzz-input", sprt_fuzz::kMaxPixels, mode); }))
    return false;
  const PixelFormat want = mode == image::Cv2Read::Grayscale ? PixelFormat::Gray : PixelFormat::RGB;
  FUZZ_CHECK(im->format == want, "mode %d gave %s", static_cast<int>(mode), to_string(im->format));
  FUZZ_CHECK(im->width >= 1 && im->height >= 1, "size %dx%d", im->width, im->height);
  FUZZ_CHECK(std::int64_t{im->width} * im->height <= sprt_fuzz::kMaxPixels, "%dx%d over the limit", im->width,
             im->height);
  FUZZ_CHECK(im->pixels.size() == static_cast<std::size_t>(im->width) * im->height * channels_of(im->format),
             "%zu bytes for %dx%d %s", im->pixels.size(), im->width, im->height, to_string(im->format));
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const int o = image::exif_orientation_cv2(bytes);
  FUZZ_CHECK(o >= 0 && o <= 0xFFFF, "orientation %d", o);
  const ImageFormat format = sniff_format(bytes);
  Image gray, color;
  const bool g = decode(bytes, image::Cv2Read::Grayscale, &gray);
  const bool c = decode(bytes, image::Cv2Read::Color, &color);
  if (g || c) FUZZ_CHECK(format != ImageFormat::Unknown, "decoded an input whose format was not sniffed");
  if (g && c) {
    FUZZ_CHECK(gray.width == color.width && gray.height == color.height, "gray %dx%d, colour %dx%d", gray.width,
               gray.height, color.width, color.height);
  }
  return 0;
}
