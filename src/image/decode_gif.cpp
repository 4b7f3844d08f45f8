// GIF through giflib 5 (record API, first image only), reproducing what Pillow 9.4's GifImagePlugin shows for
// frame 0 (Image.open(f) without seeking) followed by convert("RGB"):
//   - canvas = logical screen, enlarged to cover the first frame's rectangle if it sticks out (Pillow _seek);
//   - pixels outside the frame rectangle are the frame's transparency index when its graphic control extension
//     has one, else index 0 (Pillow load_prepare: Image.core.fill / core.new);
//   - inside the rectangle the raw indices are written, transparent ones included (frame 0 never skips them);
//   - palette: the local colour table, else the global one; a table that is exactly the identity gray ramp
//     (entry i == (i, i, i)) is "not needed" and the frame opens as mode "L": we return those indices as the gray
//     plane (equal to what convert("RGB") would replicate). Otherwise mode "P": RGB through a 256-entry palette
//     whose entries past the table are Pillow's gray ramp.
// Animated files: only the first frame is read; the rest of the file is not parsed.
// giflib keeps its error state per handle (thread-safe); truncated data is a read error (DecodeError).
#include <gif_lib.h>

#include <algorithm>
#include <cstring>

#include "image/decode_internal.hpp"

namespace superpoint_rt::image {
namespace {

struct GifSrc {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos;
};

int on_read(GifFileType* gif, GifByteType* out, int n) {
  auto* s = static_cast<GifSrc*>(gif->UserData);
  std::size_t k = n < 0 ? 0 : static_cast<std::size_t>(n);
  if (k > s->size - s->pos) k = s->size - s->pos;
  std::memcpy(out, s->data + s->pos, k);
  s->pos += k;
  return static_cast<int>(k);
}

struct GifGuard {
  GifFileType* gif = nullptr;
  GifSrc src{};
  ~GifGuard() {
    if (gif) {
      int err = 0;
      DGifCloseFile(gif, &err);
    }
  }
};

[[noreturn]] void gif_fail(int code, const std::string& name, const char* where) {
  const char* s = GifErrorString(code);
  const bool truncated = code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON;
  fail(ErrorKind::DecodeError, ImageFormat::GIF, name,
       std::string(truncated ? "truncated or corrupt" : "corrupt") + " (" + where + ": " + (s ? s : "giflib error") +
           ")");
}

// Pillow's GifImageFile._is_palette_needed: false when every entry i is (i, i, i).
bool palette_needed(const ColorMapObject* m) {
  for (int i = 0; i < m->ColorCount; ++i) {
    const GifColorType& c = m->Colors[i];
    if (!(c.Red == i && c.Green == i && c.Blue == i)) return true;
  }
  return false;
}

// Header state up to the first image descriptor.
struct FirstFrame {
  int canvas_w = 0, canvas_h = 0;
  int left = 0, top = 0, w = 0, h = 0;
  bool interlace = false;
  int transparency = -1;
  const ColorMapObject* palette = nullptr;  // null: mode "L"
};

FirstFrame open_gif(GifGuard& g, Bytes b, const std::string& name) {
  g.src = GifSrc{b.data(), b.size(), 0};
  int err = 0;
  g.gif = DGifOpen(&g.src, on_read, &err);
  if (!g.gif) gif_fail(err, name, "header");
  GifFileType* gif = g.gif;
  FirstFrame f;
  for (;;) {
    GifRecordType rec = UNDEFINED_RECORD_TYPE;
    if (DGifGetRecordType(gif, &rec) == GIF_ERROR) gif_fail(gif->Error, name, "record");
    if (rec == TERMINATE_RECORD_TYPE) fail(ErrorKind::DecodeError, ImageFormat::GIF, name, "no image in the file");
    if (rec == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) gif_fail(gif->Error, name, "extension");
      // Graphic control extension: [len, flags, delay lo, delay hi, transparent index]. As Pillow, a later GCE
      // without the transparency flag keeps an earlier index.
      if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) f.transparency = ext[4];
      while (ext) {
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) gif_fail(gif->Error, name, "extension");
      }
      continue;
    }
    if (rec == IMAGE_DESC_RECORD_TYPE) {
      if (DGifGetImageDesc(gif) == GIF_ERROR) gif_fail(gif->Error, name, "image descriptor");
      const GifImageDesc& d = gif->Image;
      f.left = d.Left;
      f.top = d.Top;
      f.w = d.Width;
      f.h = d.Height;
      f.interlace = d.Interlace;
      f.canvas_w = std::max(gif->SWidth, d.Left + d.Width);
      f.canvas_h = std::max(gif->SHeight, d.Top + d.Height);
      if (d.ColorMap) {
        f.palette = palette_needed(d.ColorMap) ? d.ColorMap : nullptr;  // local identity ramp: mode "L"
      } else if (gif->SColorMap) {
        f.palette = palette_needed(gif->SColorMap) ? gif->SColorMap : nullptr;
      }
      return f;
    }
    // Pillow skips unknown bytes between blocks; giflib reports them as a wrong record.
    gif_fail(gif->Error, name, "record");
  }
}

}  // namespace

ImageInfo probe_gif(Bytes b, const std::string& name) {
  GifGuard g;
  const FirstFrame f = open_gif(g, b, name);
  return {ImageFormat::GIF, f.canvas_w, f.canvas_h, f.palette ? 3 : 1};
}

Image decode_gif(Bytes b, const std::string& name, std::int64_t max_pixels) {
  GifGuard g;
  const FirstFrame f = open_gif(g, b, name);
  check_dimensions(ImageFormat::GIF, name, f.canvas_w, f.canvas_h, max_pixels);
  const int ch = f.palette ? 3 : 1;
  const std::uint8_t fill = f.transparency >= 0 ? static_cast<std::uint8_t>(f.transparency) : 0;
  // Indices go into the first canvas_w bytes of each row (expanded to RGB in place afterwards). Rows are allocated
  // as the frame's lines arrive (OutputRows): the rows outside the frame are the fill, the frame's the data.
  OutputRows out(ImageFormat::GIF, name, f.canvas_w, f.canvas_h, ch == 1 ? PixelFormat::Gray : PixelFormat::RGB, fill);
  if (f.w > 0 && f.h > 0) {
    static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
    const int passes = f.interlace ? 4 : 1;
    for (int p = 0; p < passes; ++p) {
      const int start = f.interlace ? kStart[p] : 0, step = f.interlace ? kStep[p] : 1;
      for (int y = start; y < f.h; y += step) {
        GifPixelType* row = out.row(f.top + y) + f.left;
        if (DGifGetLine(g.gif, row, f.w) == GIF_ERROR) gif_fail(g.gif->Error, name, "pixel data");
      }
    }
  }
  Image im = out.finish();
  const std::size_t stride = out.stride();
  if (f.palette) {
    Palette pal;
    for (int i = 0; i < f.palette->ColorCount && i < 256; ++i) {
      pal.rgb[3 * i] = f.palette->Colors[i].Red;
      pal.rgb[3 * i + 1] = f.palette->Colors[i].Green;
      pal.rgb[3 * i + 2] = f.palette->Colors[i].Blue;
    }
    for (int y = 0; y < f.canvas_h; ++y) expand_palette_row_inplace(im.pixels.data() + y * stride, f.canvas_w, pal);
  }
  return im;
}

}  // namespace superpoint_rt::image
