// Generators of hostile image files (see hostile_files.hpp).
#include "image/hostile_files.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

// clang-format off
#include <jpeglib.h>
// clang-format on

namespace sprt_hostile {
namespace {

void be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}
void le16(Bytes& b, std::uint32_t v) {
  b.push_back(static_cast<std::uint8_t>(v));
  b.push_back(static_cast<std::uint8_t>(v >> 8));
}
void le32(Bytes& b, std::uint32_t v) {
  le16(b, v & 0xFFFF);
  le16(b, v >> 16);
}

void png_chunk(Bytes& out, const char* type, const Bytes& data) {
  be32(out, static_cast<std::uint32_t>(data.size()));
  Bytes body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  out.insert(out.end(), body.begin(), body.end());
  be32(out, static_cast<std::uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
}

}  // namespace

Bytes png(std::uint32_t width, std::uint32_t height, int depth, int color_type, int interlace, const Bytes& idat) {
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  Bytes ihdr;
  be32(ihdr, width);
  be32(ihdr, height);
  for (int v : {depth, color_type, 0, 0, interlace}) ihdr.push_back(static_cast<std::uint8_t>(v));
  png_chunk(out, "IHDR", ihdr);
  if (!idat.empty()) png_chunk(out, "IDAT", idat);
  png_chunk(out, "IEND", {});
  return out;
}

Bytes zero_rows(std::size_t rows, std::size_t row_bytes) {
  // Filter byte 0 and zero samples: the raw stream is all zeros, deflated in chunks (Z_RLE: fast, and the same
  // ~1030:1 as the best zlib can do on zeros).
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15, 9, Z_RLE) != Z_OK) throw std::runtime_error("deflateInit2");
  const Bytes zeros(std::size_t{1} << 20, 0);
  std::size_t left = rows * (row_bytes + 1);
  Bytes out;
  std::uint8_t buf[65536];
  for (;;) {
    const std::size_t n = std::min(left, zeros.size());
    left -= n;
    z.next_in = const_cast<Bytef*>(zeros.data());
    z.avail_in = static_cast<uInt>(n);
    const int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = buf;
      z.avail_out = sizeof buf;
      deflate(&z, flush);
      out.insert(out.end(), buf, buf + (sizeof buf - z.avail_out));
    } while (z.avail_out == 0);
    if (left == 0) break;
  }
  deflateEnd(&z);
  return out;
}

namespace {

Bytes compress_jpeg(int width, int height, int components, bool progressive, const jpeg_scan_info* scans,
                    int num_scans) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  if (progressive) jpeg_simple_progression(&c);
  if (scans) {
    c.scan_info = scans;
    c.num_scans = num_scans;
  }
  jpeg_start_compress(&c, TRUE);
  std::vector<JSAMPLE> row(static_cast<std::size_t>(width) * static_cast<std::size_t>(components));
  while (c.next_scanline < c.image_height) {
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<JSAMPLE>((i * 7 + c.next_scanline * 3) & 0xFF);
    JSAMPROW p = row.data();
    jpeg_write_scanlines(&c, &p, 1);
  }
  jpeg_finish_compress(&c);
  Bytes out(mem, mem + size);
  jpeg_destroy_compress(&c);
  std::free(mem);
  return out;
}

}  // namespace

Bytes jpeg(int width, int height, int components, bool progressive) {
  return compress_jpeg(width, height, components, progressive, nullptr, 0);
}

Bytes jpeg_many_scans(int width, int height, int refinements) {
  // DC in one scan, then each AC coefficient on its own: a first scan at Al = refinements and one refinement scan
  // per bit below it (libjpeg's rules for successive approximation).
  std::vector<jpeg_scan_info> s;
  s.push_back({1, {0, 0, 0, 0}, 0, 0, 0, 0});
  for (int k = 1; k < 64; ++k) {
    s.push_back({1, {0, 0, 0, 0}, k, k, 0, refinements});
    for (int al = refinements - 1; al >= 0; --al) s.push_back({1, {0, 0, 0, 0}, k, k, al + 1, al});
  }
  return compress_jpeg(width, height, 1, false, s.data(), static_cast<int>(s.size()));
}

Bytes jpeg_header_only(Bytes j, int width, int height) {
  std::size_t i = 2;
  bool sized = false;
  while (i + 4 <= j.size() && j[i] == 0xFF) {
    const int marker = j[i + 1];
    const std::size_t len = (std::size_t{j[i + 2]} << 8) | j[i + 3];
    if (marker == 0xC0 || marker == 0xC2) {
      j[i + 5] = static_cast<std::uint8_t>(height >> 8);
      j[i + 6] = static_cast<std::uint8_t>(height);
      j[i + 7] = static_cast<std::uint8_t>(width >> 8);
      j[i + 8] = static_cast<std::uint8_t>(width);
      sized = true;
    }
    if (marker == 0xDA) {
      if (!sized) break;
      j.resize(i + 2 + len);  // the scan header, and no entropy-coded data
      return j;
    }
    i += 2 + len;
  }
  throw std::runtime_error("jpeg_header_only: no SOF / SOS found");
}

Bytes gif_header_only(int width, int height) {
  Bytes b = {'G', 'I', 'F', '8', '9', 'a'};
  le16(b, static_cast<std::uint32_t>(width));
  le16(b, static_cast<std::uint32_t>(height));
  b.insert(b.end(), {0x80, 0, 0});                 // global colour table of 2 entries
  b.insert(b.end(), {0, 0, 0, 0xFF, 0x20, 0x10});  // not a gray ramp: an RGB result
  b.push_back(0x2C);                               // image descriptor
  le16(b, 0);
  le16(b, 0);
  le16(b, static_cast<std::uint32_t>(width));
  le16(b, static_cast<std::uint32_t>(height));
  b.push_back(0);
  b.push_back(2);  // LZW minimum code size, then the file ends
  return b;
}

Bytes pnm_header_only(int kind, std::uint64_t width, std::uint64_t height) {
  char buf[96];
  const int n = std::snprintf(buf, sizeof buf, "P%d\n%llu %llu\n%s", kind, static_cast<unsigned long long>(width),
                              static_cast<unsigned long long>(height), kind == 1 || kind == 4 ? "" : "255\n");
  return Bytes(buf, buf + n);
}

Bytes bmp_rle8(std::uint32_t width, std::uint32_t height, const Bytes& rle) {
  const std::uint32_t palette = 256 * 4, offset = 14 + 40 + palette;
  Bytes b = {'B', 'M'};
  le32(b, offset + static_cast<std::uint32_t>(rle.size()));
  le32(b, 0);
  le32(b, offset);
  le32(b, 40);
  le32(b, width);
  le32(b, height);
  le16(b, 1);
  le16(b, 8);
  le32(b, 1);  // BI_RLE8
  le32(b, static_cast<std::uint32_t>(rle.size()));
  le32(b, 2835);
  le32(b, 2835);
  le32(b, 256);
  le32(b, 0);
  for (int i = 0; i < 256; ++i)
    b.insert(b.end(), {static_cast<std::uint8_t>(i), static_cast<std::uint8_t>(i), static_cast<std::uint8_t>(i), 0});
  b.insert(b.end(), rle.begin(), rle.end());
  return b;
}

Bytes tiff(std::uint32_t width, std::uint32_t height, std::uint16_t spp, std::uint16_t bps, std::uint16_t photometric,
           std::uint32_t rows_per_strip, std::uint32_t strip_bytes, std::uint16_t compression) {
  struct Tag {
    std::uint16_t id, type;
    std::uint32_t value;
  };
  const std::vector<Tag> tags = {
      {256, 4, width},       {257, 4, height}, {258, 3, bps}, {259, 3, compression},
      {262, 3, photometric}, {273, 4, 0},      {277, 3, spp}, {278, 4, rows_per_strip},
      {279, 4, strip_bytes}, {284, 3, 1},
  };
  Bytes b = {'I', 'I', 42, 0};
  le32(b, 8);
  le16(b, static_cast<std::uint32_t>(tags.size()));
  const std::uint32_t data = 8 + 2 + 12 * static_cast<std::uint32_t>(tags.size()) + 4;
  for (const Tag& t : tags) {
    le16(b, t.id);
    le16(b, t.type);
    le32(b, 1);
    const std::uint32_t v = t.id == 273 ? data : t.value;
    if (t.type == 3) {
      le16(b, v);
      le16(b, 0);
    } else {
      le32(b, v);
    }
  }
  le32(b, 0);                   // no next IFD
  b.insert(b.end(), 64, 0x55);  // 64 bytes of "strip"
  return b;
}

Bytes webp_header_only(int width, int height, std::uint32_t claimed) {
  Bytes b = {'R', 'I', 'F', 'F'};
  le32(b, claimed + 12);
  b.insert(b.end(), {'W', 'E', 'B', 'P', 'V', 'P', '8', ' '});
  le32(b, claimed);
  const std::uint32_t part = 1000;  // first partition size (< the chunk size, as VP8GetInfo checks)
  const std::uint32_t bits = 0 /*key frame*/ | (0 << 1) /*version*/ | (1 << 4) /*shown*/ | (part << 5);
  b.insert(b.end(), {static_cast<std::uint8_t>(bits), static_cast<std::uint8_t>(bits >> 8),
                     static_cast<std::uint8_t>(bits >> 16), 0x9D, 0x01, 0x2A});
  le16(b, static_cast<std::uint32_t>(width));
  le16(b, static_cast<std::uint32_t>(height));
  b.insert(b.end(), 16, 0);
  return b;
}

}  // namespace sprt_hostile
