// The fast PNG path (png_fast.cpp): whole-stream inflate with libdeflate, our own unfiltering and the conversions
// of decode_png (Pillow) and decode_png_cv2 (OpenCV), for the PNGs almost every encoder writes: non-interlaced,
// 8- or 16-bit, colour types 0, 2, 3, 4, 6, a well-formed chunk list and a complete zlib stream. Everything else
// (interlaced, bit depth < 8, unknown critical chunks, APNG, bad CRCs, truncated or damaged streams, files libpng
// would only warn about) returns "not handled", and the caller decodes the file with libpng as before, so errors,
// warnings-as-accepted and pixels stay libpng's. When the fast path returns an image it is bit-identical to the
// libpng path's (tests/image/test_png_fast.cpp, fuzz/fuzz_decode.cpp and fuzz/fuzz_decode_cv2.cpp compare them).
//
// Known difference of the inflaters, not reachable by any real encoder's output: libdeflate accepts a few streams
// that RFC 1951 forbids and zlib refuses (HLIT > 286 or HDIST > 30 in a dynamic block header, the reserved
// length / distance symbols 286-287 / 30-31, an incomplete precode), which libpng then refuses as corrupt. For such a
// stream the fast path returns pixels where libpng fails; see png_fast.cpp (inflate) for what is checked instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "image/decode_cv2.hpp"
#include "image/decode_internal.hpp"

namespace superpoint_rt::image {

/// The IHDR fields the fast path needs (decode_png.cpp reads them).
struct PngHeader {
  std::uint32_t width = 0, height = 0;
  int depth = 0, color_type = 0, interlace = 0;
};

/// Whose conversion the fast path reproduces: decode_png's (Pillow) or decode_png_cv2's in either mode.
enum class PngTarget { Pillow, Cv2Gray, Cv2Color };

/// The image, or nullopt when the file is not one the fast path handles (then decode with libpng). Never throws
/// for anything in the bytes; call after the header checks (check_dimensions, check_work) of the caller.
/// `work_limit_bytes`: the most working memory it may take (the inflated rows); larger images go to libpng, which
/// works row by row.
std::optional<Image> decode_png_fast(Bytes b, const PngHeader& h, PngTarget target, std::int64_t work_limit_bytes);

/// decode_png / decode_png_cv2 through libpng only (decode_png.cpp): the reference the fast path is tested against
/// and what they fall back to.
Image decode_png_libpng(Bytes b, const std::string& name, std::int64_t max_pixels);
Image decode_png_cv2_libpng(Bytes b, const std::string& name, std::int64_t max_pixels, Cv2Read mode, int* orientation);

/// Reverses one row's PNG filter (PNG spec §9: 0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth) over `n` bytes with `bpp`
/// bytes per complete pixel (1..8). `prior`: the previous row, unfiltered (nullptr for the first row: zeros, as
/// libpng's zeroed prev_row). `out` may be `in` or lie before it in the same buffer (each byte is read before the
/// bytes at and before its position are written), never overlapping `prior`. Reads up to 3 bytes past the ends of
/// `in` and `prior` (they must be addressable; their values do not matter). Returns false for a filter type > 4.
bool png_unfilter_row_reference(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out,
                                std::size_t n, int bpp) noexcept;
/// The same with the fastest kernel for this CPU (AVX2 build of Sub / Average / Paeth for bpp 3 and 4).
bool png_unfilter_row(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t n,
                      int bpp) noexcept;
/// Paeth-unfilters two consecutive rows in place (`row0` follows `prior`, `row1` follows `row0`, `n` bytes each,
/// `n` a multiple of bpp), with the results of png_unfilter_row(4, row0, prior, row0) then (4, row1, row0, row1).
/// Returns false, having done nothing, when there is no paired kernel for bpp / this CPU (AVX2, bpp 3 or 4).
bool png_unpaeth_two_rows(const std::uint8_t* prior, std::uint8_t* row0, std::uint8_t* row1, std::size_t n,
                          int bpp) noexcept;
/// "avx2" or "scalar": the kernel png_unfilter_row uses.
const char* png_unfilter_kernel_name() noexcept;

namespace detail {
/// Sub / Average / Paeth for bpp 3 or 4 (png_unfilter_avx2.cpp); call only when the CPU has AVX2. Same contract as
/// png_unfilter_row_reference for filter 1, 3, 4 (prior non-null).
void png_unfilter_row_avx2(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out,
                           std::size_t n, int bpp) noexcept;
/// png_unpaeth_two_rows for bpp 3 or 4; call only when the CPU has AVX2.
void png_unpaeth_two_rows_avx2(const std::uint8_t* prior, std::uint8_t* row0, std::uint8_t* row1, std::size_t n,
                               int bpp) noexcept;
}  // namespace detail

}  // namespace superpoint_rt::image
