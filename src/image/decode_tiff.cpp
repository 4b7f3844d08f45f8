// TIFF through libtiff (first IFD only, as Pillow's Image.open), matching Pillow 9.4's TiffImagePlugin modes
// (OPEN_INFO) followed by convert("RGB"):
//   MinIsBlack / MinIsWhite 1/2/4/8-bit -> gray plane ("1", "L;2", "L;4", "L" and their inverted ";I" forms:
//     MinIsWhite is inverted, 1/2/4-bit scaled by 255/85/17); 16-bit -> gray plane, HIGH byte (Pillow opens
//     "I;16" and convert("RGB") clips at 255; see decode_png.cpp), MinIsWhite 16-bit is NOT inverted (Pillow maps
//     it to plain "I;16"); gray + extra samples ("LA") -> the gray sample.
//   RGB 8/16-bit, contiguous or planar, extra samples dropped -> RGB (16-bit: high byte, as Pillow "RGB;16L/B").
//     Associated alpha ("RGBa") is un-premultiplied first as Pillow's RGBa unpacker does (c * 255 / a).
//   Palette 1/2/4/8-bit -> RGB through the ColorMap's high bytes (Pillow: b // 256), indices past it: gray i.
//   Separated (CMYK) 8-bit -> RGB with Pillow's cmyk2rgb.
//   YCbCr with JPEG compression -> libtiff's JPEGCOLORMODE_RGB conversion (Pillow asks libtiff the same way).
// Other photometric interpretations, sample formats (signed / float) and bit depths are refused (UnsupportedFormat).
//
// libtiff's global error handlers are shared by all threads; we pass per-call handlers through TIFFOpenOptions
// (libtiff >= 4.5) that capture the first message into this call's std::string, so concurrent decodes never
// interfere and nothing is printed.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

#include "image/decode_internal.hpp"

namespace superpoint_rt::image {
namespace {

struct TiffSrc {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos;
  std::string error;
};

tmsize_t on_read(thandle_t h, void* out, tmsize_t n) {
  auto* s = static_cast<TiffSrc*>(h);
  if (n <= 0 || s->pos >= s->size) return 0;
  std::size_t k = static_cast<std::size_t>(n);
  if (k > s->size - s->pos) k = s->size - s->pos;
  std::memcpy(out, s->data + s->pos, k);
  s->pos += k;
  return static_cast<tmsize_t>(k);
}
tmsize_t on_write(thandle_t, void*, tmsize_t) {
  return 0;
}
toff_t on_seek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<TiffSrc*>(h);
  std::uint64_t base = 0;
  if (whence == SEEK_CUR) base = s->pos;
  if (whence == SEEK_END) base = s->size;
  const std::uint64_t target = base + off;
  if (target > s->size) return static_cast<toff_t>(-1);
  s->pos = static_cast<std::size_t>(target);
  return s->pos;
}
int on_close(thandle_t) {
  return 0;
}
toff_t on_size(thandle_t h) {
  return static_cast<TiffSrc*>(h)->size;
}
int on_map(thandle_t, void**, toff_t*) {
  return 0;
}
void on_unmap(thandle_t, void*, toff_t) {}

int on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffSrc*>(user);
  if (s->error.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    s->error = std::string(module ? module : "libtiff") + ": " + buf;
  }
  return 1;  // handled: libtiff must not call the global handler
}
int on_warning(TIFF*, void*, const char*, const char*, va_list) {
  return 1;
}

struct TiffGuard {
  TiffSrc src{};
  TIFFOpenOptions* opts = nullptr;
  TIFF* tif = nullptr;
  ~TiffGuard() {
    if (tif) TIFFClose(tif);
    if (opts) TIFFOpenOptionsFree(opts);
  }
};

enum class Kind { Gray, Rgb, Palette, Cmyk };

struct TiffInfo {
  std::uint32_t width = 0, height = 0;
  std::uint16_t bps = 1, spp = 1, photometric = 0, planar = PLANARCONFIG_CONTIG;
  bool min_is_white = false, associated_alpha = false;
  Kind kind = Kind::Gray;
};

[[noreturn]] void tiff_fail(ErrorKind k, const TiffGuard& g, const std::string& name, const std::string& what) {
  fail(k, ImageFormat::TIFF, name, g.src.error.empty() ? what : what + " (" + g.src.error + ")");
}

TiffInfo open_tiff(TiffGuard& g, Bytes b, const std::string& name) {
  g.src = TiffSrc{b.data(), b.size(), 0, {}};
  g.opts = TIFFOpenOptionsAlloc();
  if (!g.opts) fail(ErrorKind::Internal, ImageFormat::TIFF, name, "TIFFOpenOptionsAlloc failed");
  TIFFOpenOptionsSetErrorHandlerExtR(g.opts, on_error, &g.src);
  TIFFOpenOptionsSetWarningHandlerExtR(g.opts, on_warning, &g.src);
  g.tif = TIFFClientOpenExt(name.c_str(), "rm", &g.src, on_read, on_write, on_seek, on_close, on_size, on_map, on_unmap,
                            g.opts);
  if (!g.tif) tiff_fail(ErrorKind::DecodeError, g, name, "cannot read the header");
  TIFF* t = g.tif;
  TiffInfo i;
  if (!TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &i.width) || !TIFFGetField(t, TIFFTAG_IMAGELENGTH, &i.height)) {
    tiff_fail(ErrorKind::DecodeError, g, name, "no image size");
  }
  TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &i.bps);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &i.spp);
  TIFFGetFieldDefaulted(t, TIFFTAG_PLANARCONFIG, &i.planar);
  std::uint16_t sample_format = SAMPLEFORMAT_UINT;
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLEFORMAT, &sample_format);
  if (!TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &i.photometric)) {
    tiff_fail(ErrorKind::UnsupportedFormat, g, name, "no PhotometricInterpretation tag");
  }
  std::uint16_t n_extra = 0;
  std::uint16_t* extra = nullptr;
  if (TIFFGetField(t, TIFFTAG_EXTRASAMPLES, &n_extra, &extra) && n_extra > 0 && extra) {
    i.associated_alpha = extra[0] == EXTRASAMPLE_ASSOCALPHA;
  }
  const std::string what = "photometric " + std::to_string(i.photometric) + ", " + std::to_string(i.spp) + "x" +
                           std::to_string(i.bps) + "-bit samples";
  if (sample_format != SAMPLEFORMAT_UINT) {
    fail(ErrorKind::UnsupportedFormat, ImageFormat::TIFF, name, "unsupported sample format (" + what + ")");
  }
  bool ok = false;
  switch (i.photometric) {
    case PHOTOMETRIC_MINISWHITE:
    case PHOTOMETRIC_MINISBLACK:
      i.kind = Kind::Gray;
      i.min_is_white = i.photometric == PHOTOMETRIC_MINISWHITE;
      ok = i.spp >= 1 && (i.bps == 1 || i.bps == 2 || i.bps == 4 || i.bps == 8 || i.bps == 16);
      break;
    case PHOTOMETRIC_RGB:
      i.kind = Kind::Rgb;
      ok = i.spp >= 3 && (i.bps == 8 || i.bps == 16);
      break;
    case PHOTOMETRIC_PALETTE:
      i.kind = Kind::Palette;
      ok = i.spp == 1 && (i.bps == 1 || i.bps == 2 || i.bps == 4 || i.bps == 8);
      break;
    case PHOTOMETRIC_SEPARATED:
      i.kind = Kind::Cmyk;
      ok = i.spp >= 4 && i.bps == 8;
      break;
    case PHOTOMETRIC_YCBCR: {
      std::uint16_t compression = 0;
      TIFFGetFieldDefaulted(t, TIFFTAG_COMPRESSION, &compression);
      if (compression == COMPRESSION_JPEG && i.spp == 3 && i.bps == 8 && i.planar == PLANARCONFIG_CONTIG) {
        TIFFSetField(t, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
        i.kind = Kind::Rgb;
        ok = true;
      }
      break;
    }
    default: break;
  }
  if (!ok) fail(ErrorKind::UnsupportedFormat, ImageFormat::TIFF, name, "unsupported layout (" + what + ")");
  return i;
}

// One decoded plane: rows of `row_bytes`, samples packed MSB-first (libtiff normalises FillOrder), 16-bit samples
// in native byte order (libtiff swabs).
struct Plane {
  std::vector<std::uint8_t> data;
  std::size_t row_bytes = 0;
};

std::vector<Plane> read_planes(TiffGuard& g, const TiffInfo& i, const std::string& name) {
  TIFF* t = g.tif;
  const bool separate = i.planar == PLANARCONFIG_SEPARATE && i.spp > 1;
  const int nplanes = separate ? i.spp : 1;
  const std::size_t samples = separate ? 1 : i.spp;
  std::vector<Plane> planes(static_cast<std::size_t>(nplanes));
  const std::size_t row_bytes = (static_cast<std::size_t>(i.width) * samples * i.bps + 7) / 8;
  for (auto& p : planes) {
    p.row_bytes = row_bytes;
    p.data.assign(row_bytes * i.height, 0);
  }
  if (TIFFIsTiled(t)) {
    std::uint32_t tw = 0, th = 0;
    TIFFGetField(t, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(t, TIFFTAG_TILELENGTH, &th);
    const tmsize_t tile_size = TIFFTileSize(t), tile_row = TIFFTileRowSize(t);
    if (tw == 0 || th == 0 || tile_size <= 0 || tile_row <= 0) tiff_fail(ErrorKind::DecodeError, g, name, "bad tiles");
    std::vector<std::uint8_t> tile(static_cast<std::size_t>(tile_size));
    for (int p = 0; p < nplanes; ++p) {
      for (std::uint32_t y0 = 0; y0 < i.height; y0 += th) {
        for (std::uint32_t x0 = 0; x0 < i.width; x0 += tw) {
          const ttile_t idx = TIFFComputeTile(t, x0, y0, 0, static_cast<tsample_t>(p));
          if (TIFFReadEncodedTile(t, idx, tile.data(), tile_size) < 0) {
            tiff_fail(ErrorKind::DecodeError, g, name, "truncated or corrupt tile");
          }
          const std::size_t x_byte = static_cast<std::size_t>(x0) * samples * i.bps / 8;
          const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(tile_row), row_bytes - x_byte);
          for (std::uint32_t y = y0; y < std::min(i.height, y0 + th); ++y) {
            std::memcpy(planes[p].data.data() + y * row_bytes + x_byte,
                        tile.data() + static_cast<std::size_t>(y - y0) * tile_row, n);
          }
        }
      }
    }
  } else {
    std::uint32_t rps = 0;
    TIFFGetFieldDefaulted(t, TIFFTAG_ROWSPERSTRIP, &rps);
    if (rps == 0 || rps > i.height) rps = i.height;
    for (int p = 0; p < nplanes; ++p) {
      for (std::uint32_t y0 = 0; y0 < i.height; y0 += rps) {
        const tstrip_t idx = TIFFComputeStrip(t, y0, static_cast<tsample_t>(p));
        const std::uint32_t rows = std::min(rps, i.height - y0);
        const tmsize_t want = static_cast<tmsize_t>(rows * row_bytes);
        if (TIFFReadEncodedStrip(t, idx, planes[p].data.data() + y0 * row_bytes, want) < want) {
          tiff_fail(ErrorKind::DecodeError, g, name, "truncated or corrupt strip");
        }
      }
    }
  }
  return planes;
}

// Sample s of pixel x in one row: 1/2/4/8-bit as is, 16-bit as the full value.
unsigned sample_at(const std::uint8_t* row, std::size_t index, int bps) {
  switch (bps) {
    case 8: return row[index];
    case 16: {
      std::uint16_t v;
      std::memcpy(&v, row + 2 * index, 2);
      return v;
    }
    default: {
      const std::size_t bit = index * static_cast<std::size_t>(bps);
      return (row[bit >> 3] >> (8 - bps - (bit & 7))) & ((1u << bps) - 1);
    }
  }
}

}  // namespace

ImageInfo probe_tiff(Bytes b, const std::string& name) {
  TiffGuard g;
  const TiffInfo i = open_tiff(g, b, name);
  return {ImageFormat::TIFF, static_cast<int>(std::min<std::uint32_t>(i.width, 0x7FFFFFFF)),
          static_cast<int>(std::min<std::uint32_t>(i.height, 0x7FFFFFFF)), i.kind == Kind::Gray ? 1 : 3};
}

Image decode_tiff(Bytes b, const std::string& name, std::int64_t max_pixels) {
  TiffGuard g;
  const TiffInfo i = open_tiff(g, b, name);
  check_dimensions(ImageFormat::TIFF, name, i.width, i.height, max_pixels);
  const std::vector<Plane> planes = read_planes(g, i, name);
  const bool gray = i.kind == Kind::Gray;
  Image im = make_image(ImageFormat::TIFF, name, static_cast<int>(i.width), static_cast<int>(i.height),
                        gray ? PixelFormat::Gray : PixelFormat::RGB);
  const bool separate = planes.size() > 1;
  const std::size_t w = i.width;
  const int bps = i.bps;

  Palette pal;
  if (i.kind == Kind::Palette) {
    std::uint16_t *r = nullptr, *gr = nullptr, *bl = nullptr;
    if (!TIFFGetField(g.tif, TIFFTAG_COLORMAP, &r, &gr, &bl) || !r || !gr || !bl) {
      tiff_fail(ErrorKind::DecodeError, g, name, "palette image without ColorMap");
    }
    const std::size_t n = std::min<std::size_t>(std::size_t{1} << bps, 256);
    for (std::size_t k = 0; k < n; ++k) {
      pal.rgb[3 * k] = static_cast<std::uint8_t>(r[k] / 256);
      pal.rgb[3 * k + 1] = static_cast<std::uint8_t>(gr[k] / 256);
      pal.rgb[3 * k + 2] = static_cast<std::uint8_t>(bl[k] / 256);
    }
  }
  // Gray scaling of 1/2/4-bit samples to 8 bits.
  const unsigned scale = bps == 1 ? 255 : bps == 2 ? 85 : bps == 4 ? 17 : 1;
  std::vector<std::uint8_t> cmyk(i.kind == Kind::Cmyk ? 4 * w : 0);

  for (std::size_t y = 0; y < i.height; ++y) {
    // Sample s of pixel x.
    const auto at = [&](std::size_t x, int s) -> unsigned {
      if (separate) return sample_at(planes[s].data.data() + y * planes[s].row_bytes, x, bps);
      return sample_at(planes[0].data.data() + y * planes[0].row_bytes, x * i.spp + s, bps);
    };
    std::uint8_t* o = im.pixels.data() + y * w * (gray ? 1 : 3);
    switch (i.kind) {
      case Kind::Gray:
        for (std::size_t x = 0; x < w; ++x) {
          unsigned v = at(x, 0);
          if (bps == 16) {
            v >>= 8;  // no MinIsWhite inversion at 16 bits (Pillow "I;16")
          } else {
            v *= scale;
            if (i.min_is_white) v = 255 - v;
          }
          o[x] = static_cast<std::uint8_t>(v);
        }
        break;
      case Kind::Rgb:
        for (std::size_t x = 0; x < w; ++x) {
          unsigned c[3] = {at(x, 0), at(x, 1), at(x, 2)};
          if (bps == 16) {
            for (auto& v : c) v >>= 8;
          } else if (i.associated_alpha && i.spp >= 4) {
            const unsigned a = at(x, 3);
            for (auto& v : c) v = a == 0 ? 0 : std::min(255u, v * 255 / a);  // Pillow unpackRGBa
          }
          for (int k = 0; k < 3; ++k) o[3 * x + k] = static_cast<std::uint8_t>(c[k]);
        }
        break;
      case Kind::Palette:
        for (std::size_t x = 0; x < w; ++x) {
          const unsigned v = at(x, 0);
          o[3 * x] = pal.rgb[3 * v];
          o[3 * x + 1] = pal.rgb[3 * v + 1];
          o[3 * x + 2] = pal.rgb[3 * v + 2];
        }
        break;
      case Kind::Cmyk:
        for (std::size_t x = 0; x < w; ++x) {
          for (int k = 0; k < 4; ++k) cmyk[4 * x + k] = static_cast<std::uint8_t>(at(x, k));
        }
        cmyk_to_rgb_row(cmyk.data(), o, static_cast<int>(w), false);
        break;
    }
  }
  return im;
}

}  // namespace superpoint_rt::image
