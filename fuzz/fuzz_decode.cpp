// Fuzz harness: the format sniffer, the header probe and every decoder through the public entry points
// (sniff_format, probe_image, decode_image: include/superpoint_rt/image.hpp), with a small pixel limit.
// Properties checked besides the sanitizers: a decoded image is Gray or RGB, non-empty, within the limit, with
// exactly width * height * channels bytes; only sniffed formats decode; when the probe succeeds, it reports the
// size and channel count that the decode produces (the HTTP server refuses by probe before decoding).
#include <optional>

#include "fuzz_util.hpp"
#include "superpoint_rt/image.hpp"

using namespace superpoint_rt;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const ImageFormat format = sniff_format(bytes);
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
