// Hand-made hostile image files for tests/image/test_hostile.cpp: each a few bytes to a few tens of KB, generated
// here (no binary blobs in the repository). Every generator writes exactly the bytes a hostile client could send.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sprt_hostile {

using Bytes = std::vector<std::uint8_t>;

/// PNG with the given IHDR; `idat` is the zlib stream of the filtered rows (empty: no IDAT chunk at all).
Bytes png(std::uint32_t width, std::uint32_t height, int depth, int color_type, int interlace, const Bytes& idat);
/// zlib stream of `rows` rows of `row_bytes` zero bytes, each with filter byte 0 (an all-black image).
Bytes zero_rows(std::size_t rows, std::size_t row_bytes);

/// A real JPEG of a small gradient (libjpeg), `components` 1 or 3; progressive: libjpeg's simple progression.
Bytes jpeg(int width, int height, int components, bool progressive);
/// A gray progressive JPEG whose scan script has `scans` scans (1 + 63 * k, as libjpeg validates them).
Bytes jpeg_many_scans(int width, int height, int refinements);
/// Rewrites the frame header's size (SOF0/SOF2) and cuts the file right after the first scan header.
Bytes jpeg_header_only(Bytes jpeg, int width, int height);

/// GIF with a logical screen and one frame of width x height and nothing after the LZW code size.
Bytes gif_header_only(int width, int height);
/// "P<kind>\n<w> <h>\n255\n" and no raster.
Bytes pnm_header_only(int kind, std::uint64_t width, std::uint64_t height);
/// BMP (BITMAPINFOHEADER, 8-bit, gray-ramp palette, BI_RLE8) with `rle` as the pixel data.
Bytes bmp_rle8(std::uint32_t width, std::uint32_t height, const Bytes& rle);
/// Little-endian TIFF with one strip at offset data (64 bytes of 0x55 follow the IFD), MinIsBlack (photometric 1) or
/// RGB (2), compression 1 (none; libtiff then chops a single strip into small ones) or e.g. 8 (deflate): the strip's
/// byte count may claim more than the file holds.
Bytes tiff(std::uint32_t width, std::uint32_t height, std::uint16_t spp, std::uint16_t bps, std::uint16_t photometric,
           std::uint32_t rows_per_strip, std::uint32_t strip_bytes, std::uint16_t compression = 1);
/// A lossy WebP whose RIFF and VP8 chunk claim `claimed` bytes but which ends after the frame header.
Bytes webp_header_only(int width, int height, std::uint32_t claimed);

}  // namespace sprt_hostile
