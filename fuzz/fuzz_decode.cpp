// Fuzz harness: the format sniffer, the header probe and every decoder through the public entry points
// (sniff_format, probe_image, decode_image: include/superpoint_rt/image.hpp), with a small pixel limit.
// Properties checked besides the sanitizers: a decoded image is Gray or RGB, non-empty, within the limit, with
// exactly width * height * channels bytes; only sniffed formats decode; when the probe succeeds, it reports the
// size and channel count that the decode produces (the HTTP server refuses by probe before decoding).
// PNG, differentially: decode_png (the fast path, png_fast.hpp, falling back to libpng) and decode_png_libpng must
// give the same outcome: both the same image, or both an error with the same message.
#include <optional>
#include <string>

#include "fuzz_util.hpp"
#include "image/png_fast.hpp"
#include "superpoint_rt/image.hpp"

using namespace superpoint_rt;

namespace {

// The outcome of one decode: the image, or the error message.
struct Outcome {
  bool ok = false;
  Image im;
  std::string error;
};

template <class F>
Outcome outcome(F&& f) {
  Outcome o;
  try {
    o.im = f();
    o.ok = true;
  } catch (const Error& e) {
    o.error = e.what();
  }
  return o;
}

void check_png_paths(std::span<const std::uint8_t> bytes) {
  const Outcome fast = outcome([&] { return image::decode_png(bytes, "fuzz-input", sprt_fuzz::kMaxPixels); });
  const Outcome ref = outcome([&] { return image::decode_png_libpng(bytes, "fuzz-input", sprt_fuzz::kMaxPixels); });
  FUZZ_CHECK(fast.ok == ref.ok, "decode_png %s, libpng %s", fast.ok ? "decoded" : fast.error.c_str(),
             ref.ok ? "decoded" : ref.error.c_str());
  FUZZ_CHECK(fast.error == ref.error, "errors differ: '%s' vs libpng '%s'", fast.error.c_str(), ref.error.c_str());
  if (fast.ok) {
    FUZZ_CHECK(fast.im.width == ref.im.width && fast.im.height == ref.im.height && fast.im.format == ref.im.format &&
                   fast.im.pixels == ref.im.pixels,
               "decode_png and libpng give different images (%dx%d)", ref.im.width, ref.im.height);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const ImageFormat format = sniff_format(bytes);
  if (format == ImageFormat::PNG) check_png_paths(bytes);
  std::optional<ImageInfo> info;
  sprt_fuzz::ok([&] { info = probe_image(bytes, "fuzz-input"); });
  if (info) FUZZ_CHECK(info->format == format, "probe says %s, sniff %s", to_string(info->format), to_string(format));
  Image im;
  if (!sprt_fuzz::ok([&] { im = decode_image(bytes, "fuzz-input", sprt_fuzz::kMaxPixels); })) return 0;
  FUZZ_CHECK(format != ImageFormat::Unknown, "decoded an input whose format was not sniffed");
  FUZZ_CHECK(im.format == PixelFormat::Gray || im.format == PixelFormat::RGB, "format %s", to_string(im.format));
  FUZZ_CHECK(im.width >= 1 && im.height >= 1, "size %dx%d", im.width, im.height);
  FUZZ_CHECK(std::int64_t{im.width} * im.height <= sprt_fuzz::kMaxPixels, "%dx%d over the limit", im.width, im.height);
  FUZZ_CHECK(im.pixels.size() == static_cast<std::size_t>(im.width) * im.height * channels_of(im.format),
             "%zu bytes for %dx%d %s", im.pixels.size(), im.width, im.height, to_string(im.format));
  FUZZ_CHECK(info.has_value(), "%s decoded (%dx%d) but its header probe failed", to_string(format), im.width,
             im.height);
  FUZZ_CHECK(info->width == im.width && info->height == im.height && info->channels == channels_of(im.format),
             "%s probe %dx%d x%d, decode %dx%d x%d", to_string(format), info->width, info->height, info->channels,
             im.width, im.height, channels_of(im.format));
  return 0;
}
