// BMP: a small decoder written to follow Pillow 9.4's BmpImagePlugin (_bitmap) decision by decision.
//   Headers: OS/2 BITMAPCOREHEADER (12 bytes: 16-bit size, 3-byte palette entries, bottom-up) and Windows
//     BITMAPINFOHEADER / V4 / V5 and the 64-byte OS/2 variant (40, 64, 108, 124), as Pillow; others are refused.
//     Top-down when the top byte of the height is 0xFF (Pillow's y_flip test).
//   Depths: 1/4/8-bit palette, 16-bit (BI_RGB = 5-5-5), 24-bit BGR, 32-bit BGRX (alpha ignored, as convert("RGB")).
//   BI_BITFIELDS: exactly Pillow's supported masks (32-bit byte-aligned BGRX/XBGR/ABGR/RGBA/BGRA, 24-bit BGR,
//     16-bit 5-6-5 and 5-5-5); other masks are refused (Pillow refuses them too).
//   BI_RLE8 / BI_RLE4: a literal port of Pillow's BmpRleDecoder, quirks included (its delta escape reads 4 bytes,
//     absolute runs are not clipped at the row end, word alignment counts from the file start).
//   Palettes: Pillow drops a palette whose entries are the gray ramp (2 colours: black, white) and opens the file as
//     "L" / "1": we return the gray plane. Otherwise RGB through the palette, indices past it map to gray i.
//     (Pillow mis-decodes the rare 1/4-bit files whose palette is a ramp by unpacking them as 8-bit "L"; we decode
//     the indices correctly, so those files differ.)
// The pixel data must be complete (Pillow raises "image file is truncated" otherwise): DecodeError.
#include <algorithm>
#include <cstring>
#include <vector>

#include "image/decode_internal.hpp"

namespace superpoint_rt::image {
namespace {

std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}
std::uint32_t le16(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8);
}

enum class Kind { Palette, Rgb16_555, Rgb16_565, Bytes24, Bytes32 };

struct BmpHeader {
  std::int64_t width = 0, height = 0;
  bool top_down = false;
  int bits = 0;
  std::uint32_t compression = 0;  // 0 RGB, 1 RLE8, 2 RLE4, 3 BITFIELDS
  Kind kind = Kind::Palette;
  int r_byte = 2, g_byte = 1, b_byte = 0;  // byte positions for 24/32-bit pixels
  std::size_t data_offset = 0;
  bool gray = false;  // palette is Pillow's gray ramp (mode "L" / "1")
  Palette palette;
};

[[noreturn]] void bmp_fail(ErrorKind k, const std::string& name, const std::string& what) {
  fail(k, ImageFormat::BMP, name, what);
}

BmpHeader read_header(Bytes b, const std::string& name) {
  const std::size_t n = b.size();
  const std::uint8_t* p = b.data();
  if (n < 18) bmp_fail(ErrorKind::DecodeError, name, "truncated header");
  BmpHeader h;
  std::size_t offset = le32(p + 10);
  const std::uint32_t hs = le32(p + 14);
  if (hs < 12 || hs > n - 14) bmp_fail(ErrorKind::DecodeError, name, "truncated or corrupt header");
  const std::uint8_t* hd = p + 18;  // header_data: the info header after its size field
  std::size_t pos = 14 + hs;
  int padding = 4;
  std::uint32_t colors = 0;
  std::uint32_t masks[4] = {0, 0, 0, 0};
  if (hs == 12) {
    h.width = le16(hd);
    h.height = le16(hd + 2);
    h.bits = static_cast<int>(le16(hd + 6));
    padding = 3;
  } else if (hs == 40 || hs == 64 || hs == 108 || hs == 124) {
    h.top_down = hd[7] == 0xFF;
    h.width = le32(hd);
    h.height = h.top_down ? (std::int64_t{1} << 32) - le32(hd + 4) : le32(hd + 4);
    h.bits = static_cast<int>(le16(hd + 10));
    h.compression = le32(hd + 12);
    colors = le32(hd + 28);
    if (h.compression == 3) {
      if (hs - 4 >= 52) {
        for (int i = 0; i < 4; ++i) masks[i] = le32(hd + 36 + 4 * i);
      } else {
        if (n - pos < 12) bmp_fail(ErrorKind::DecodeError, name, "truncated bit masks");
        for (int i = 0; i < 3; ++i) masks[i] = le32(p + pos + 4 * i);
        pos += 12;
      }
    }
  } else {
    bmp_fail(ErrorKind::UnsupportedFormat, name, "unsupported header size " + std::to_string(hs));
  }
  const std::uint64_t ncolors = colors ? colors : (std::uint64_t{1} << std::min(h.bits, 32));
  if (offset == 14 + hs && h.bits <= 8) offset += 4 * ncolors;  // Pillow's fix-up for a missing palette offset

  switch (h.bits) {
    case 1:
    case 4:
    case 8: h.kind = Kind::Palette; break;
    case 16: h.kind = Kind::Rgb16_555; break;
    case 24: h.kind = Kind::Bytes24; break;
    case 32: h.kind = Kind::Bytes32; break;
    default: bmp_fail(ErrorKind::UnsupportedFormat, name, "unsupported pixel depth " + std::to_string(h.bits));
  }
  if (h.compression == 3) {
    const auto is = [&](std::uint32_t r, std::uint32_t g, std::uint32_t bl, std::uint32_t a) {
      return masks[0] == r && masks[1] == g && masks[2] == bl && masks[3] == a;
    };
    const auto bytes = [&](int r, int g, int bl) { h.r_byte = r, h.g_byte = g, h.b_byte = bl; };
    bool ok = true;
    if (h.bits == 32) {
      if (is(0xFF0000, 0xFF00, 0xFF, 0) || is(0xFF0000, 0xFF00, 0xFF, 0xFF000000) || is(0, 0, 0, 0)) {
        bytes(2, 1, 0);  // BGRX / BGRA
      } else if (is(0xFF000000, 0xFF0000, 0xFF00, 0) || is(0xFF000000, 0xFF0000, 0xFF00, 0xFF)) {
        bytes(3, 2, 1);  // XBGR / ABGR
      } else if (is(0xFF, 0xFF00, 0xFF0000, 0xFF000000)) {
        bytes(0, 1, 2);  // RGBA
      } else {
        ok = false;
      }
    } else if (h.bits == 24) {
      ok = masks[0] == 0xFF0000 && masks[1] == 0xFF00 && masks[2] == 0xFF;
    } else if (h.bits == 16) {
      if (masks[0] == 0xF800 && masks[1] == 0x7E0 && masks[2] == 0x1F) {
        h.kind = Kind::Rgb16_565;
      } else {
        ok = masks[0] == 0x7C00 && masks[1] == 0x3E0 && masks[2] == 0x1F;
      }
    } else {
      ok = false;
    }
    if (!ok) bmp_fail(ErrorKind::UnsupportedFormat, name, "unsupported BI_BITFIELDS layout (as Pillow)");
  } else if (h.compression == 1 || h.compression == 2) {
    if (h.kind != Kind::Palette) bmp_fail(ErrorKind::UnsupportedFormat, name, "RLE compression needs a palette");
  } else if (h.compression != 0) {
    bmp_fail(ErrorKind::UnsupportedFormat, name, "unsupported compression " + std::to_string(h.compression));
  }

  if (h.kind == Kind::Palette) {
    if (ncolors == 0 || ncolors > 65536) {
      bmp_fail(ErrorKind::UnsupportedFormat, name, "unsupported palette size " + std::to_string(ncolors));
    }
    if ((n - pos) / padding < ncolors) bmp_fail(ErrorKind::DecodeError, name, "truncated palette");
    const std::uint8_t* pal = p + pos;
    h.gray = true;
    for (std::uint64_t i = 0; i < ncolors; ++i) {
      const std::uint8_t* e = pal + i * padding;  // B G R (X)
      const std::uint64_t want = ncolors == 2 ? (i ? 255 : 0) : i;
      if (!(e[0] == want && e[1] == want && e[2] == want)) h.gray = false;
      if (i < 256) {
        h.palette.rgb[3 * i] = e[2];
        h.palette.rgb[3 * i + 1] = e[1];
        h.palette.rgb[3 * i + 2] = e[0];
      }
    }
    pos += padding * ncolors;
  }
  h.data_offset = offset ? offset : pos;
  return h;
}

// Pillow's BmpRleDecoder, literally (see the file comment), writing the indices in file row order straight into
// `out` (index i of the stream is column i % xsize of file row i / xsize; the stream stops at xsize * ysize
// indices, as Pillow's "while len(data) < dest_length" and its raw decode of the first dest_length bytes do). A
// delta escape adds right + up * xsize zeros: only those up to the end of the image are written (Pillow's extra
// zeros are never read), so an escape costs at most the image it fills.
void decode_rle(Bytes b, std::size_t start, bool rle4, OutputRows& out, const std::string& name) {
  const std::size_t xsize = static_cast<std::size_t>(out.width());
  const std::size_t total = xsize * static_cast<std::size_t>(out.height());
  std::size_t n = 0;  // indices written (Pillow's len(data), capped at total)
  std::size_t pos = start, x = 0;
  std::uint8_t* row = nullptr;
  std::size_t row_index = static_cast<std::size_t>(-1);
  const auto put = [&](std::uint8_t v) {
    if (n >= total) return;
    const std::size_t r = n / xsize;
    if (r != row_index) {
      row = out.row(static_cast<int>(r));
      row_index = r;
    }
    row[n % xsize] = v;
    ++n;
  };
  const auto zeros = [&](std::size_t count) {
    count = std::min(count, total - n);
    while (count > 0) {  // whole rows at a time: a delta of 255 rows of a wide image is not 255 * width calls
      const std::size_t r = n / xsize, c = n % xsize, k = std::min(count, xsize - c);
      if (r != row_index) {
        row = out.row(static_cast<int>(r));
        row_index = r;
      }
      std::memset(row + c, 0, k);
      n += k;
      count -= k;
    }
  };
  const auto remaining = [&]() { return pos < b.size() ? b.size() - pos : 0; };
  while (n < total) {
    if (remaining() < 2) break;
    std::size_t num = b[pos];
    const std::uint8_t byte = b[pos + 1];
    pos += 2;
    if (num) {
      if (x + num > xsize) num = xsize > x ? xsize - x : 0;
      for (std::size_t i = 0; i < num; ++i)
        put(rle4 ? static_cast<std::uint8_t>(i % 2 == 0 ? byte >> 4 : byte & 0x0F) : byte);
      x += num;
    } else if (byte == 0) {
      zeros((xsize - n % xsize) % xsize);
      x = 0;
    } else if (byte == 1) {
      break;
    } else if (byte == 2) {
      if (remaining() < 2) break;
      pos += 2;  // Pillow reads these two bytes and then two more for (right, up)
      if (remaining() < 2) bmp_fail(ErrorKind::DecodeError, name, "truncated RLE delta");
      const std::size_t right = b[pos], up = b[pos + 1];
      pos += 2;
      zeros(right + up * xsize);
      x = n % xsize;
    } else {
      const std::size_t count = rle4 ? byte / 2 : byte;
      const std::size_t got = std::min(count, remaining());
      for (std::size_t i = 0; i < got; ++i) {
        const std::uint8_t v = b[pos + i];
        if (rle4) {
          put(v >> 4);
          put(v & 0x0F);
        } else {
          put(v);
        }
      }
      pos += got;
      if (got < count) break;
      x += byte;
      if (pos % 2 != 0) ++pos;
    }
  }
  if (n < total) bmp_fail(ErrorKind::DecodeError, name, "truncated RLE data (not enough image data)");
}

}  // namespace

ImageInfo probe_bmp(Bytes b, const std::string& name) {
  const BmpHeader h = read_header(b, name);
  return {ImageFormat::BMP, probe_side(static_cast<std::uint64_t>(h.width)),
          probe_side(static_cast<std::uint64_t>(h.height)), (h.kind == Kind::Palette && h.gray) ? 1 : 3};
}

Image decode_bmp(Bytes b, const std::string& name, std::int64_t max_pixels) {
  const BmpHeader h = read_header(b, name);
  check_dimensions(ImageFormat::BMP, name, h.width, h.height, max_pixels);
  const int w = static_cast<int>(h.width), ht = static_cast<int>(h.height);
  const bool gray = h.kind == Kind::Palette && h.gray;
  const std::size_t uw = static_cast<std::size_t>(w);

  const int ch = gray ? 1 : 3;
  if (h.compression == 1 || h.compression == 2) {
    // The indices go straight into the rows of the result (first w bytes of each), in file row order; then the
    // rows are put top-down and looked up in place. No index plane of the whole image is kept beside the result.
    if (h.data_offset > b.size()) bmp_fail(ErrorKind::DecodeError, name, "truncated (no pixel data)");
    OutputRows out(ImageFormat::BMP, name, w, ht, gray ? PixelFormat::Gray : PixelFormat::RGB);
    decode_rle(b, h.data_offset, h.compression == 2, out, name);
    Image im = out.finish();
    const std::size_t stride = out.stride();
    if (!h.top_down) {
      for (std::size_t y = 0; y < static_cast<std::size_t>(ht) / 2; ++y) {
        std::swap_ranges(im.pixels.data() + y * stride, im.pixels.data() + y * stride + uw,
                         im.pixels.data() + (static_cast<std::size_t>(ht) - 1 - y) * stride);
      }
    }
    for (std::size_t y = 0; y < static_cast<std::size_t>(ht); ++y) {
      std::uint8_t* o = im.pixels.data() + y * stride;
      if (gray) {
        for (std::size_t x = 0; x < uw; ++x) o[x] = h.palette.rgb[3 * o[x]];
      } else {
        expand_palette_row_inplace(o, w, h.palette);
      }
    }
    return im;
  }
  std::size_t src_stride = 0;
  const std::uint8_t* src = nullptr;
  {
    src_stride = ((static_cast<std::size_t>(w) * h.bits + 31) >> 3) & ~std::size_t{3};
    if (h.data_offset > b.size() || (b.size() - h.data_offset) / src_stride < static_cast<std::size_t>(ht)) {
      bmp_fail(ErrorKind::DecodeError, name, "truncated pixel data");
    }
    src = b.data() + h.data_offset;
  }

  Image im = make_image(ImageFormat::BMP, name, w, ht, gray ? PixelFormat::Gray : PixelFormat::RGB);
  for (int y = 0; y < ht; ++y) {
    const int file_row = h.top_down ? y : ht - 1 - y;
    const std::uint8_t* s = src + static_cast<std::size_t>(file_row) * src_stride;
    std::uint8_t* o = im.pixels.data() + static_cast<std::size_t>(y) * uw * ch;
    switch (h.kind) {
      case Kind::Palette: {
        // Indices first (into the start of the output row), then the lookup in place.
        if (h.bits == 8) {
          std::memcpy(o, s, uw);
        } else if (h.bits == 4) {
          for (std::size_t x = 0; x < uw; ++x) o[x] = (x & 1) ? (s[x >> 1] & 0x0F) : (s[x >> 1] >> 4);
        } else {
          for (std::size_t x = 0; x < uw; ++x) o[x] = (s[x >> 3] >> (7 - (x & 7))) & 1;
        }
        if (gray) {
          for (std::size_t x = 0; x < uw; ++x) o[x] = h.palette.rgb[3 * o[x]];
        } else {
          expand_palette_row_inplace(o, w, h.palette);
        }
        break;
      }
      case Kind::Rgb16_555:
      case Kind::Rgb16_565: {
        // Pillow Unpack.c ImagingUnpackBGR15 / BGR16: v * 255 / max in integer arithmetic.
        const bool g6 = h.kind == Kind::Rgb16_565;
        for (std::size_t x = 0; x < uw; ++x) {
          const unsigned v = s[2 * x] | (unsigned{s[2 * x + 1]} << 8);
          o[3 * x] = static_cast<std::uint8_t>(((v >> (g6 ? 11 : 10)) & 31) * 255 / 31);
          o[3 * x + 1] = static_cast<std::uint8_t>(g6 ? ((v >> 5) & 63) * 255 / 63 : ((v >> 5) & 31) * 255 / 31);
          o[3 * x + 2] = static_cast<std::uint8_t>((v & 31) * 255 / 31);
        }
        break;
      }
      case Kind::Bytes24:
      case Kind::Bytes32: {
        const std::size_t step = h.kind == Kind::Bytes24 ? 3 : 4;
        for (std::size_t x = 0; x < uw; ++x) {
          const std::uint8_t* px = s + x * step;
          o[3 * x] = px[h.r_byte];
          o[3 * x + 1] = px[h.g_byte];
          o[3 * x + 2] = px[h.b_byte];
        }
        break;
      }
    }
  }
  return im;
}

}  // namespace superpoint_rt::image
