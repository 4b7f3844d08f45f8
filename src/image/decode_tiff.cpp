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
#include <cstdint>
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

constexpr std::uint16_t kMaxSamples = 8;  // samples per pixel accepted (see open_tiff)

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
  // libtiff's own allocations (strip / tile buffers, tag arrays) under the same working-memory limit as ours.
  TIFFOpenOptionsSetMaxSingleMemAlloc(g.opts, static_cast<tmsize_t>(work_limit(b.size())));
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
  // Pillow's modes have at most 6 samples per pixel (RGB + 3 extra); the conversion reads at most 4. More is no
  // image we decode, and each one widens every row libtiff and we hold.
  if (i.spp > kMaxSamples) {
    fail(ErrorKind::UnsupportedFormat, ImageFormat::TIFF, name,
         "unsupported layout (" + what + "): more than " + std::to_string(kMaxSamples) + " samples per pixel");
  }
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

// The raster is read one band at a time (a strip, or a row of tiles) into `band` buffers, one per plane that is
// used, and converted into the result's rows before the next band is read: memory is one band per plane, never the
// whole raw image (whose size the header alone declares). Rows of `row_bytes`, samples packed MSB-first (libtiff
// normalises FillOrder), 16-bit samples in native byte order (libtiff swabs).
struct Bands {
  bool tiled = false, separate = false;
  std::uint32_t rows = 0;                       // image rows per band (RowsPerStrip or TileLength)
  std::uint32_t tile_w = 0;                     // tiled: TileWidth
  std::size_t row_bytes = 0;                    // one row of one plane
  std::size_t tile_size = 0;                    // tiled: TIFFTileSize
  std::size_t tile_row = 0;                     // tiled: TIFFTileRowSize
  std::vector<std::vector<std::uint8_t>> band;  // per used plane: rows * row_bytes
  std::vector<std::uint8_t> tile;               // tiled: one tile
};

// Sets up the bands (checking their size against the working-memory limit before allocating them).
Bands plan_bands(TiffGuard& g, const TiffInfo& i, int used_planes, std::size_t input_bytes, const std::string& name) {
  TIFF* t = g.tif;
  Bands bd;
  bd.separate = i.planar == PLANARCONFIG_SEPARATE && i.spp > 1;
  const std::uint64_t samples = bd.separate ? 1 : i.spp;
  const std::uint64_t row_bytes = (static_cast<std::uint64_t>(i.width) * samples * i.bps + 7) / 8;
  bd.row_bytes = static_cast<std::size_t>(row_bytes);
  bd.tiled = TIFFIsTiled(t);
  std::uint64_t extra = 0;
  if (bd.tiled) {
    std::uint32_t th = 0;
    TIFFGetField(t, TIFFTAG_TILEWIDTH, &bd.tile_w);
    TIFFGetField(t, TIFFTAG_TILELENGTH, &th);
    const tmsize_t tile_size = TIFFTileSize(t), tile_row = TIFFTileRowSize(t);
    if (bd.tile_w == 0 || th == 0 || tile_size <= 0 || tile_row <= 0) {
      tiff_fail(ErrorKind::DecodeError, g, name, "bad tiles");
    }
    bd.rows = std::min(th, i.height);
    bd.tile_size = static_cast<std::size_t>(tile_size);
    bd.tile_row = static_cast<std::size_t>(tile_row);
    extra = bd.tile_size;
  } else {
    std::uint32_t rps = 0;
    TIFFGetFieldDefaulted(t, TIFFTAG_ROWSPERSTRIP, &rps);
    bd.rows = rps == 0 || rps > i.height ? i.height : rps;
  }
  const std::uint64_t planes = bd.separate ? static_cast<std::uint64_t>(used_planes) : 1;
  const std::uint64_t bytes = planes * bd.rows * row_bytes + extra;
  check_work(ImageFormat::TIFF, name, static_cast<std::int64_t>(std::min<std::uint64_t>(bytes, INT64_MAX)), input_bytes,
             std::string(bd.tiled ? "a row of tiles" : "a strip") + " of " + std::to_string(bd.rows) + " rows of " +
                 std::to_string(i.width) + " pixels x " + std::to_string(samples) + " samples");
  bd.band.resize(static_cast<std::size_t>(planes));
  for (auto& p : bd.band) p.resize(static_cast<std::size_t>(bd.rows) * bd.row_bytes);
  bd.tile.resize(bd.tile_size);
  return bd;
}

// Reads the band of rows [y0, y0 + rows) of every used plane.
void read_band(TiffGuard& g, const TiffInfo& i, Bands& bd, std::uint32_t y0, const std::string& name) {
  TIFF* t = g.tif;
  const std::uint32_t rows = std::min(bd.rows, i.height - y0);
  for (std::size_t p = 0; p < bd.band.size(); ++p) {
    std::uint8_t* dst = bd.band[p].data();
    if (bd.tiled) {
      const std::size_t samples = bd.separate ? 1 : i.spp;
      for (std::uint32_t x0 = 0; x0 < i.width; x0 += bd.tile_w) {
        const ttile_t idx = TIFFComputeTile(t, x0, y0, 0, static_cast<tsample_t>(p));
        if (TIFFReadEncodedTile(t, idx, bd.tile.data(), static_cast<tmsize_t>(bd.tile_size)) < 0) {
          tiff_fail(ErrorKind::DecodeError, g, name, "truncated or corrupt tile");
        }
        const std::size_t x_byte = static_cast<std::size_t>(x0) * samples * i.bps / 8;
        const std::size_t n = std::min(bd.tile_row, bd.row_bytes - x_byte);
        for (std::uint32_t y = 0; y < rows; ++y) {
          std::memcpy(dst + y * bd.row_bytes + x_byte, bd.tile.data() + static_cast<std::size_t>(y) * bd.tile_row, n);
        }
      }
    } else {
      const tstrip_t idx = TIFFComputeStrip(t, y0, static_cast<tsample_t>(p));
      const tmsize_t want = static_cast<tmsize_t>(rows * bd.row_bytes);
      if (TIFFReadEncodedStrip(t, idx, dst, want) < want) {
        tiff_fail(ErrorKind::DecodeError, g, name, "truncated or corrupt strip");
      }
    }
  }
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
  return {ImageFormat::TIFF, probe_side(i.width), probe_side(i.height), i.kind == Kind::Gray ? 1 : 3};
}

Image decode_tiff(Bytes b, const std::string& name, std::int64_t max_pixels) {
  TiffGuard g;
  const TiffInfo i = open_tiff(g, b, name);
  check_dimensions(ImageFormat::TIFF, name, i.width, i.height, max_pixels);
  const bool gray = i.kind == Kind::Gray;
  // Planes read: only those the conversion uses (separate planes past them are never read).
  const int used = i.kind == Kind::Gray || i.kind == Kind::Palette ? 1
                   : i.kind == Kind::Cmyk                          ? 4
                   : (i.associated_alpha && i.spp >= 4)            ? 4
                                                                   : 3;
  Bands bd = plan_bands(g, i, used, b.size(), name);
  OutputRows out(ImageFormat::TIFF, name, static_cast<int>(i.width), static_cast<int>(i.height),
                 gray ? PixelFormat::Gray : PixelFormat::RGB);
  const bool separate = bd.separate;
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

  for (std::uint32_t y = 0; y < i.height; ++y) {
    const std::uint32_t y0 = y / bd.rows * bd.rows;
    if (y == y0) read_band(g, i, bd, y0, name);
    const std::size_t band_row = static_cast<std::size_t>(y - y0) * bd.row_bytes;
    // Sample s of pixel x.
    const auto at = [&](std::size_t x, int s) -> unsigned {
      if (separate) return sample_at(bd.band[static_cast<std::size_t>(s)].data() + band_row, x, bps);
      return sample_at(bd.band[0].data() + band_row, x * i.spp + static_cast<std::size_t>(s), bps);
    };
    std::uint8_t* o = out.row(static_cast<int>(y));
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
  return out.finish();
}

}  // namespace superpoint_rt::image
