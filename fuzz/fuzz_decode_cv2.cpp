// Fuzz harness: the cv2-exact decoders (decode_image_cv2, src/image/decode_cv2.hpp) in both modes, and the EXIF
// reader (exif_orientation_cv2, src/image/exif.hpp) on the raw input as a TIFF header + IFD0 (what the TIFF path
// hands it), with a small pixel limit. Properties checked besides the sanitizers: a decoded image has the mode's
// format (Grayscale -> Gray, Color -> RGB), is non-empty, within the limit, with exactly width * height * channels
// bytes; only sniffed formats decode; when both modes decode, they give the same size (the orientation depends on
// the file only); with IMREAD_IGNORE_ORIENTATION (Cv2Orientation::Ignore) the outcome (decoded or refused) is the
// same and the size is the oriented one or its transpose. PNG, differentially: decode_png_cv2 (the fast path,
// png_fast.hpp, falling back to libpng) and decode_png_cv2_libpng give the same outcome in each mode (same image and
// orientation, or the same error).
#include <string>

#include "fuzz_util.hpp"
#include "image/decode_cv2.hpp"
#include "image/exif.hpp"
#include "image/png_fast.hpp"

using namespace superpoint_rt;

namespace {

bool decode(std::span<const std::uint8_t> bytes, image::Cv2Read mode, Image* im,
            image::Cv2Orientation orientation = image::Cv2Orientation::Apply) {
  if (!sprt_fuzz::ok(
          [&] { *im = image::decode_image_cv2(bytes, "fuzz-input", sprt_fuzz::kMaxPixels, mode, orientation); }))
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

struct Outcome {
  bool ok = false;
  Image im;
  int orientation = -1;
  std::string error;
};

template <class F>
Outcome outcome(F&& f) {
  Outcome o;
  try {
    o.im = f(&o.orientation);
    o.ok = true;
  } catch (const Error& e) {
    o.error = e.what();
  }
  return o;
}

void check_png_paths(std::span<const std::uint8_t> bytes, image::Cv2Read mode) {
  const Outcome fast =
      outcome([&](int* o) { return image::decode_png_cv2(bytes, "fuzz-input", sprt_fuzz::kMaxPixels, mode, o); });
  const Outcome ref = outcome(
      [&](int* o) { return image::decode_png_cv2_libpng(bytes, "fuzz-input", sprt_fuzz::kMaxPixels, mode, o); });
  FUZZ_CHECK(fast.ok == ref.ok, "mode %d: decode_png_cv2 %s, libpng %s", static_cast<int>(mode),
             fast.ok ? "decoded" : fast.error.c_str(), ref.ok ? "decoded" : ref.error.c_str());
  FUZZ_CHECK(fast.error == ref.error, "mode %d: errors differ: '%s' vs libpng '%s'", static_cast<int>(mode),
             fast.error.c_str(), ref.error.c_str());
  if (fast.ok) {
    FUZZ_CHECK(fast.im.width == ref.im.width && fast.im.height == ref.im.height && fast.im.format == ref.im.format &&
                   fast.im.pixels == ref.im.pixels && fast.orientation == ref.orientation,
               "mode %d: decode_png_cv2 and libpng give different images (%dx%d)", static_cast<int>(mode), ref.im.width,
               ref.im.height);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const int o = image::exif_orientation_cv2(bytes);
  FUZZ_CHECK(o >= 0 && o <= 0xFFFF, "orientation %d", o);
  const ImageFormat format = sniff_format(bytes);
  if (format == ImageFormat::PNG) {
    check_png_paths(bytes, image::Cv2Read::Grayscale);
    check_png_paths(bytes, image::Cv2Read::Color);
  }
  Image gray, color, stored;
  const bool g = decode(bytes, image::Cv2Read::Grayscale, &gray);
  const bool c = decode(bytes, image::Cv2Read::Color, &color);
  const bool s = decode(bytes, image::Cv2Read::Grayscale, &stored, image::Cv2Orientation::Ignore);
  FUZZ_CHECK(g == s, "with the orientation %s, ignoring it %s", g ? "decoded" : "refused", s ? "decoded" : "refused");
  if (g && s) {
    FUZZ_CHECK((gray.width == stored.width && gray.height == stored.height) ||
                   (gray.width == stored.height && gray.height == stored.width),
               "oriented %dx%d, stored %dx%d", gray.width, gray.height, stored.width, stored.height);
  }
  if (g || c) FUZZ_CHECK(format != ImageFormat::Unknown, "decoded an input whose format was not sniffed");
  if (g && c) {
    FUZZ_CHECK(gray.width == color.width && gray.height == color.height, "gray %dx%d, colour %dx%d", gray.width,
               gray.height, color.width, color.height);
  }
  return 0;
}
