// PNG through libpng 1.6, matching Pillow 9.4's PngImagePlugin modes followed by convert("RGB"):
//   gray 1/2/4/8-bit (Pillow "1", "L;2", "L;4", "L")   -> gray plane; 1/2/4-bit scaled to 0..255 (x255, x85, x17),
//                                                          which is what both Pillow's unpackers and
//                                                          png_set_expand_gray_1_2_4_to_8 do
//   gray 16-bit (Pillow "I", raw "I;16B")               -> gray plane, HIGH byte. DIFFERS from Pillow, whose
//                                                          convert("RGB") clips the 16-bit value to 255 (so almost
//                                                          every pixel becomes 255); the high byte is what Pillow
//                                                          itself does for 16-bit RGB / RGBA / LA and is the only
//                                                          useful 8-bit view of the data
//   gray+alpha 8/16-bit (Pillow "LA" / "RGBA" from "LA;16B") -> gray plane (convert("RGB") replicates L; alpha
//                                                          dropped), 16-bit: high byte as Pillow
//   RGB / RGBA 8/16-bit                                 -> RGB, alpha dropped, 16-bit: high byte (Pillow
//                                                          "RGB;16B" / "RGBA;16B" unpackers take the MSB)
//   palette 1/2/4/8-bit (+tRNS)                         -> RGB via the PLTE lookup; tRNS ignored (P -> RGB ignores
//                                                          transparency); indices past the palette map to gray i
//                                                          (Pillow's ramp-initialised palette)
// tRNS never adds alpha (no png_set_expand / png_set_tRNS_to_alpha), gAMA / sBIT / iCCP are ignored (Pillow does not
// apply them). Interlaced files use libpng's interlace handling with row pointers into the result.
//
// The common files (non-interlaced 8/16-bit, well-formed) are decoded by the fast path (png_fast.hpp: libdeflate and
// our own unfiltering, the same pixels); it hands everything else to the libpng code below, which stays the
// reference (decode_png_libpng / decode_png_cv2_libpng) for the errors and the pixels.
//
// libpng reports errors by longjmp: the phases that can jump hold only trivially destructible locals.
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "image/decode_cv2.hpp"
#include "image/decode_internal.hpp"
#include "image/exif.hpp"
#include "image/png_fast.hpp"

namespace superpoint_rt::image {
namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

struct Ihdr {
  std::uint32_t width, height;
  int depth, color_type, interlace;
};

// The IHDR chunk, read by hand so that the size check runs before libpng allocates anything.
Ihdr read_ihdr(Bytes b, const std::string& name) {
  if (b.size() < 33) fail(ErrorKind::DecodeError, ImageFormat::PNG, name, "truncated header (IHDR missing)");
  if (be32(b.data() + 8) != 13 || std::memcmp(b.data() + 12, "IHDR", 4) != 0) {
    fail(ErrorKind::DecodeError, ImageFormat::PNG, name, "corrupt header (first chunk is not IHDR)");
  }
  return {be32(b.data() + 16), be32(b.data() + 20), b[24], b[25], b[28]};
}

int decoded_channels(const Ihdr& h) {
  return (h.color_type == 0 || h.color_type == 4) ? 1 : 3;
}

struct PngSrc {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos;
  char message[256];
};

void on_read(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngSrc*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "truncated (unexpected end of data)");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void on_error(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngSrc*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", msg ? msg : "unknown libpng error");
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

struct PngGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngSrc src{};
  ~PngGuard() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

// Phase 1: chunks up to the first IDAT, transformations, update_info. Trivially destructible locals only.
bool read_info(PngGuard* g, const Ihdr* h, int* rowbytes_ok) {
  png_structp png = g->png;
  png_infop info = g->info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_user_limits(png, 0x7FFFFFFF, 0x7FFFFFFF);  // the pixel limit is ours (max_pixels), not libpng's 1e6
  png_set_benign_errors(png, 1);
  png_set_check_for_invalid_index(png, -1);  // indices past PLTE are legal for Pillow (gray ramp)
  png_read_info(png, info);
  if (h->depth == 16) png_set_strip_16(png);  // high byte, as Pillow's ";16B" unpackers
  switch (h->color_type) {
    case PNG_COLOR_TYPE_GRAY:
      if (h->depth < 8) png_set_expand_gray_1_2_4_to_8(png);
      break;
    case PNG_COLOR_TYPE_PALETTE:
      if (h->depth < 8) png_set_packing(png);  // one index per byte; the lookup is ours
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
    case PNG_COLOR_TYPE_RGB_ALPHA: png_set_strip_alpha(png); break;
    default: break;
  }
  if (h->interlace != PNG_INTERLACE_NONE) png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int ch = h->color_type == PNG_COLOR_TYPE_RGB || h->color_type == PNG_COLOR_TYPE_RGB_ALPHA ? 3 : 1;
  *rowbytes_ok =
      png_get_rowbytes(png, info) == static_cast<png_size_t>(h->width) * ch && png_get_bit_depth(png, info) == 8;
  return true;
}

// One png_read_row (row may be null: libpng then decodes the row and drops it).
bool read_row(PngGuard* g, png_bytep row) {
  if (setjmp(png_jmpbuf(g->png))) return false;
  png_read_row(g->png, row, nullptr);
  return true;
}

// Every row, pass by pass (png_read_image's loop), into rows of `out` allocated as they are decoded. Interlaced
// files: every pass visits every row; a row outside the pass (or a pass without columns) is not written, so it gets
// no storage.
void read_rows(PngGuard& g, const Ihdr& h, OutputRows& out, const std::string& name) {
  const int passes = h.interlace != PNG_INTERLACE_NONE ? PNG_INTERLACE_ADAM7_PASSES : 1;
  const int hh = static_cast<int>(h.height);
  for (int pass = 0; pass < passes; ++pass) {
    const bool columns = passes == 1 || PNG_PASS_COLS(h.width, pass) > 0;
    for (int y = 0; y < hh; ++y) {
      const bool written = passes == 1 || (columns && PNG_ROW_IN_INTERLACE_PASS(y, pass));
      if (!read_row(&g, written ? out.row(y) : nullptr))
        fail(ErrorKind::DecodeError, ImageFormat::PNG, name, g.src.message);
    }
  }
}

// Bytes of one unfiltered row as the file stores it (libpng keeps two of these: the row and the previous one).
std::uint64_t raw_row_bytes(const Ihdr& h) {
  int samples = 1;
  switch (h.color_type) {
    case PNG_COLOR_TYPE_GRAY_ALPHA: samples = 2; break;
    case PNG_COLOR_TYPE_RGB: samples = 3; break;
    case PNG_COLOR_TYPE_RGB_ALPHA: samples = 4; break;
    default: break;
  }
  const std::uint64_t depth = h.depth > 0 && h.depth <= 16 ? static_cast<std::uint64_t>(h.depth) : 16;
  return (std::uint64_t{h.width} * static_cast<std::uint64_t>(samples) * depth + 7) / 8 + 1;
}

void check_chunk_lengths(Bytes b, const std::string& name, const char* until);

}  // namespace

ImageInfo probe_png(Bytes b, const std::string& name) {
  const Ihdr h = read_ihdr(b, name);
  return {ImageFormat::PNG, probe_side(h.width), probe_side(h.height), decoded_channels(h)};
}

namespace {

// The checks decode_png runs before decoding (fast path or libpng), in this order.
Ihdr checked_header(Bytes b, const std::string& name, std::int64_t max_pixels) {
  const Ihdr h = read_ihdr(b, name);
  check_dimensions(ImageFormat::PNG, name, h.width, h.height, max_pixels);
  // libpng's row buffers (png_read_start_row): the previous row as stored, and the current one at the widest pixel
  // of our transformations (8 bits per index / gray sample when expanding 1/2/4-bit ones).
  const std::uint64_t libpng_row = std::max<std::uint64_t>(raw_row_bytes(h), (std::uint64_t{h.width} + 7) / 8 * 8);
  check_work(ImageFormat::PNG, name, static_cast<std::int64_t>(2 * libpng_row + 128), b.size(),
             std::to_string(h.width) + "-pixel rows (libpng's row buffers)");
  check_chunk_lengths(b, name, "IDAT");  // the chunks png_read_info reads (an eXIf among them)
  return h;
}

// The same for decode_png_cv2.
Ihdr checked_header_cv2(Bytes b, const std::string& name, std::int64_t max_pixels) {
  const Ihdr h = read_ihdr(b, name);
  check_dimensions(ImageFormat::PNG, name, h.width, h.height, max_pixels);
  // libpng's row buffers: the previous row as stored and the current one at the widest pixel of the transformations
  // (at most 8 bytes: 16-bit RGBA before stripping, or a palette index expanded to RGB).
  const std::uint64_t libpng_row = std::max<std::uint64_t>(raw_row_bytes(h), 8 * std::uint64_t{h.width} + 64);
  check_work(ImageFormat::PNG, name, static_cast<std::int64_t>(2 * libpng_row + 128), b.size(),
             std::to_string(h.width) + "-pixel rows (libpng's row buffers)");
  check_chunk_lengths(b, name, "IEND");
  return h;
}

PngHeader fast_header(const Ihdr& h) {
  return {h.width, h.height, h.depth, h.color_type, h.interlace};
}

}  // namespace

// The common PNGs take the fast path (png_fast.hpp: same pixels, libpng for anything it does not handle).
Image decode_png(Bytes b, const std::string& name, std::int64_t max_pixels) {
  const Ihdr h = checked_header(b, name, max_pixels);
  if (auto im = decode_png_fast(b, fast_header(h), PngTarget::Pillow, work_limit(b.size()))) return std::move(*im);
  return decode_png_libpng(b, name, max_pixels);
}

Image decode_png_libpng(Bytes b, const std::string& name, std::int64_t max_pixels) {
  const Ihdr h = checked_header(b, name, max_pixels);

  PngGuard g;
  g.src = PngSrc{b.data(), b.size(), 0, {}};
  g.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &g.src, on_error, on_warning);
  if (!g.png) fail(ErrorKind::Internal, ImageFormat::PNG, name, "png_create_read_struct failed");
  g.info = png_create_info_struct(g.png);
  if (!g.info) fail(ErrorKind::Internal, ImageFormat::PNG, name, "png_create_info_struct failed");
  png_set_read_fn(g.png, &g.src, on_read);

  int rowbytes_ok = 0;
  if (!read_info(&g, &h, &rowbytes_ok)) fail(ErrorKind::DecodeError, ImageFormat::PNG, name, g.src.message);
  if (!rowbytes_ok) {
    fail(ErrorKind::UnsupportedFormat, ImageFormat::PNG, name,
         "unsupported bit depth " + std::to_string(h.depth) + " / colour type " + std::to_string(h.color_type));
  }

  const int ch = decoded_channels(h);
  const int w = static_cast<int>(h.width), hh = static_cast<int>(h.height);
  OutputRows out(ImageFormat::PNG, name, w, hh, ch == 1 ? PixelFormat::Gray : PixelFormat::RGB);
  read_rows(g, h, out, name);
  Image im = out.finish();
  const std::size_t stride = out.stride();

  if (h.color_type == PNG_COLOR_TYPE_PALETTE) {
    Palette pal;
    png_colorp plte = nullptr;
    int n = 0;
    if (png_get_PLTE(g.png, g.info, &plte, &n) && plte) {
      for (int i = 0; i < n && i < 256; ++i) {
        pal.rgb[3 * i] = plte[i].red;
        pal.rgb[3 * i + 1] = plte[i].green;
        pal.rgb[3 * i + 2] = plte[i].blue;
      }
    }
    for (int y = 0; y < hh; ++y) expand_palette_row_inplace(im.pixels.data() + y * stride, w, pal);
  }
  return im;
}

// ---------------------------------------------------------------------------------------------------------------
// decode_png_cv2: OpenCV 4.6's PngDecoder (grfmt_png.cpp readHeader + readData) for an 8-bit 1- or 3-channel Mat.

namespace {

// The info struct png_read_end fills (chunks after the image data); destroyed before the read struct it belongs to.
struct PngEndInfo {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngEndInfo() {
    if (info) png_destroy_info_struct(png, &info);
  }
};

// PngDecoder::readData's transformations, in its order. Trivially destructible locals only.
bool read_info_cv2(PngGuard* g, const Ihdr* h, bool gray, int* rowbytes_ok) {
  png_structp png = g->png;
  png_infop info = g->info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_user_limits(png, 0x7FFFFFFF, 0x7FFFFFFF);  // the pixel limit is ours (max_pixels), not libpng's 1e6
  png_read_info(png, info);
  if (h->depth == 16) png_set_strip_16(png);
  png_set_strip_alpha(png);  // OpenCV: always, for a Mat of fewer than 4 channels
  if (h->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if ((h->color_type & PNG_COLOR_MASK_COLOR) == 0 && h->depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (!gray && (h->color_type & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(png);
  // (OpenCV's png_set_bgr for colour files is left out: we return RGB, its channels swapped back.)
  if (gray) png_set_rgb_to_gray(png, 1, 0.299, 0.587);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *rowbytes_ok = png_get_rowbytes(png, info) == static_cast<png_size_t>(h->width) * (gray ? 1 : 3) &&
                 png_get_bit_depth(png, info) == 8;
  return true;
}

// png_read_end (OpenCV reads the chunks after the image data too: an error there fails the decode), then the eXIf
// chunk's orientation from the header or the trailing chunks.
bool read_end_cv2(PngGuard* g, png_infop end_info, int* orientation) {
  if (setjmp(png_jmpbuf(g->png))) return false;
  png_read_end(g->png, end_info);
  png_uint_32 n = 0;
  png_bytep exif = nullptr;
  if (png_get_valid(g->png, g->info, PNG_INFO_eXIf)) {
    png_get_eXIf_1(g->png, g->info, &n, &exif);
  } else if (png_get_valid(g->png, end_info, PNG_INFO_eXIf)) {
    png_get_eXIf_1(g->png, end_info, &n, &exif);
  }
  *orientation = exif && n > 0 ? exif_orientation_cv2({exif, n}) : 0;
  return true;
}

// Every chunk up to IEND must fit in the data: libpng 1.6.39 allocates an eXIf chunk's declared length before it
// reads the chunk (png_handle_eXIf: png_malloc_warn, no chunk-size limit), so a few bytes declaring 1.5 GB would
// allocate it. Such a file ends inside that chunk, which libpng (and so OpenCV) refuses anyway: refuse it first.
// `until`: the chunk type that ends the check (IEND for a reader that goes to the end, IDAT for one that reads only
// the chunks before the image data, as decode_png).
void check_chunk_lengths(Bytes b, const std::string& name, const char* until) {
  std::size_t pos = 8;
  while (b.size() - pos >= 8) {
    const std::uint64_t len = be32(b.data() + pos);
    if (len + 12 > b.size() - pos) {
      fail(ErrorKind::DecodeError, ImageFormat::PNG, name,
           "truncated (chunk '" + std::string(reinterpret_cast<const char*>(b.data() + pos + 4), 4) + "' declares " +
               std::to_string(len) + " bytes, " + std::to_string(b.size() - pos - 8) + " remain)");
    }
    if (std::memcmp(b.data() + pos + 4, until, 4) == 0) return;
    pos += static_cast<std::size_t>(len) + 12;
  }
}

}  // namespace

Image decode_png_cv2(Bytes b, const std::string& name, std::int64_t max_pixels, Cv2Read mode, int* orientation) {
  const Ihdr h = checked_header_cv2(b, name, max_pixels);
  const PngTarget t = mode == Cv2Read::Grayscale ? PngTarget::Cv2Gray : PngTarget::Cv2Color;
  if (auto im = decode_png_fast(b, fast_header(h), t, work_limit(b.size()))) {
    *orientation = 0;  // the fast path refuses files with an eXIf chunk
    return std::move(*im);
  }
  return decode_png_cv2_libpng(b, name, max_pixels, mode, orientation);
}

Image decode_png_cv2_libpng(Bytes b, const std::string& name, std::int64_t max_pixels, Cv2Read mode, int* orientation) {
  const Ihdr h = checked_header_cv2(b, name, max_pixels);
  const bool gray = mode == Cv2Read::Grayscale;

  PngGuard g;
  g.src = PngSrc{b.data(), b.size(), 0, {}};
  g.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &g.src, on_error, on_warning);
  if (!g.png) fail(ErrorKind::Internal, ImageFormat::PNG, name, "png_create_read_struct failed");
  g.info = png_create_info_struct(g.png);
  if (!g.info) fail(ErrorKind::Internal, ImageFormat::PNG, name, "png_create_info_struct failed");
  PngEndInfo end{g.png, png_create_info_struct(g.png)};
  if (!end.info) fail(ErrorKind::Internal, ImageFormat::PNG, name, "png_create_info_struct failed");
  png_set_read_fn(g.png, &g.src, on_read);

  int rowbytes_ok = 0;
  if (!read_info_cv2(&g, &h, gray, &rowbytes_ok)) fail(ErrorKind::DecodeError, ImageFormat::PNG, name, g.src.message);
  if (!rowbytes_ok) {
    fail(ErrorKind::UnsupportedFormat, ImageFormat::PNG, name,
         "unsupported bit depth " + std::to_string(h.depth) + " / colour type " + std::to_string(h.color_type));
  }
  const int w = static_cast<int>(h.width), hh = static_cast<int>(h.height);
  OutputRows out(ImageFormat::PNG, name, w, hh, gray ? PixelFormat::Gray : PixelFormat::RGB);
  read_rows(g, h, out, name);
  if (!read_end_cv2(&g, end.info, orientation)) fail(ErrorKind::DecodeError, ImageFormat::PNG, name, g.src.message);
  return out.finish();
}

// ---------------------------------------------------------------------------------------------------------------
// write_png

namespace {

struct PngWriteGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::FILE* f = nullptr;
  PngSrc err{};
  ~PngWriteGuard() {
    if (png) png_destroy_write_struct(&png, info ? &info : nullptr);
    if (f) std::fclose(f);
  }
};

bool write_all(PngWriteGuard* g, int w, int h, int color_type, png_bytepp rows) {
  if (setjmp(png_jmpbuf(g->png))) return false;
  png_init_io(g->png, g->f);
  png_set_compression_level(g->png, 3);  // plots: favour speed over the last few percent of size
  png_set_IHDR(g->png, g->info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), 8, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(g->png, g->info);
  png_write_image(g->png, rows);
  png_write_end(g->png, nullptr);
  return true;
}

}  // namespace
}  // namespace superpoint_rt::image

namespace superpoint_rt {

void write_png(const std::string& path, const ImageView& v) {
  if (v.type != SampleType::U8 || (v.format != PixelFormat::Gray && v.format != PixelFormat::RGB)) {
    throw Error(ErrorKind::InvalidArgument, "write_png('" + path + "'): only 8-bit gray or RGB images (got " +
                                                std::string(to_string(v.format)) + ")");
  }
  if (!v.data || v.width < 1 || v.height < 1 || v.stride() < v.packed_stride()) {
    throw Error(ErrorKind::InvalidArgument, "write_png('" + path + "'): empty image or row stride too small (" +
                                                std::to_string(v.width) + "x" + std::to_string(v.height) + ")");
  }
  image::PngWriteGuard g;
  g.f = std::fopen(path.c_str(), "wb");
  if (!g.f) {
    throw Error(ErrorKind::Io, "cannot open '" + path + "' for writing: " + std::strerror(errno));
  }
  g.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &g.err, image::on_error, image::on_warning);
  if (g.png) g.info = png_create_info_struct(g.png);
  if (!g.png || !g.info) throw Error(ErrorKind::Internal, "write_png('" + path + "'): libpng initialisation failed");
  std::vector<png_bytep> rows(static_cast<std::size_t>(v.height));
  const auto* base = static_cast<const std::uint8_t*>(v.data);
  for (int y = 0; y < v.height; ++y) rows[y] = const_cast<png_bytep>(base + y * v.stride());  // libpng only reads
  const int ct = v.format == PixelFormat::Gray ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB;
  const bool ok = image::write_all(&g, v.width, v.height, ct, rows.data());
  std::FILE* f = g.f;
  g.f = nullptr;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    throw Error(ErrorKind::Io,
                "cannot write PNG '" + path + "'" + (ok ? std::string() : ": " + std::string(g.err.message)));
  }
}

}  // namespace superpoint_rt
