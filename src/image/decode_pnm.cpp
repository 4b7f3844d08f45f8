// Netpbm P1-P6, a port of Pillow 9.4's PpmImagePlugin (header tokenizer, PpmPlainDecoder, PpmDecoder):
//   header: magic, width, height (and maxval except for P1/P4), whitespace-separated, '#' comments to the end of
//     the line anywhere in the header, tokens at most 10 characters, 0 < maxval < 65536; one whitespace byte ends
//     the last token and the raster starts right after it.
//   P1 / P4 (bitmap, "1"): 1 = black -> 0, 0 = white -> 255; gray plane. P4 rows are padded to whole bytes.
//   P2 / P5 (gray): maxval 255 -> the bytes; other maxval < 256 -> round(v / maxval * 255) (Python round: half to
//     even; binary values above maxval clip to 255); maxval > 255 -> Pillow mode "I" holding
//     round(v / maxval * 65535) (maxval 65535: the value itself), of which we return the HIGH byte (Pillow's
//     convert("RGB") would clip at 255, see decode_png.cpp).
//   P3 / P6 (RGB): maxval 255 -> the bytes; otherwise round(v / maxval * 255), 2 big-endian bytes per sample when
//     maxval > 255.
//   Plain (ASCII) formats: a value above maxval or a non-numeric token is an error; comments may appear in the data.
// Too little pixel data is a DecodeError (Pillow: "image file is truncated" / "not enough image data").
#include <algorithm>
#include <cmath>
#include <cstring>

#include "image/decode_internal.hpp"

namespace superpoint_rt::image {
namespace {

bool is_ws(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

struct PnmHeader {
  int kind = 0;  // 1..6
  std::int64_t width = 0, height = 0;
  unsigned maxval = 1;
  std::size_t data = 0;  // offset of the raster
};

[[noreturn]] void pnm_fail(ErrorKind k, const std::string& name, const std::string& what) {
  fail(k, ImageFormat::PNM, name, what);
}

// Pillow PpmImageFile._read_token, then int().
std::int64_t read_token(Bytes b, std::size_t& pos, const std::string& name) {
  std::string tok;
  while (tok.size() <= 10) {
    if (pos >= b.size()) break;
    const std::uint8_t c = b[pos++];
    if (is_ws(c)) {
      if (tok.empty()) continue;
      break;
    }
    if (c == '#') {
      while (pos < b.size()) {
        const std::uint8_t d = b[pos++];
        if (d == '\r' || d == '\n') break;
      }
      continue;
    }
    tok.push_back(static_cast<char>(c));
  }
  if (tok.empty()) pnm_fail(ErrorKind::DecodeError, name, "truncated header (reached the end while reading it)");
  if (tok.size() > 10) pnm_fail(ErrorKind::DecodeError, name, "header token too long");
  std::int64_t v = 0;
  for (char c : tok) {
    if (c < '0' || c > '9') pnm_fail(ErrorKind::DecodeError, name, "corrupt header (token '" + tok + "')");
    v = v * 10 + (c - '0');
  }
  return v;
}

PnmHeader read_header(Bytes b, const std::string& name) {
  PnmHeader h;
  h.kind = b[1] - '0';
  std::size_t pos = 3;  // "Pn" and the whitespace that ends the magic
  h.width = read_token(b, pos, name);
  h.height = read_token(b, pos, name);
  if (h.kind != 1 && h.kind != 4) {
    const std::int64_t m = read_token(b, pos, name);
    if (m <= 0 || m >= 65536) {
      pnm_fail(ErrorKind::DecodeError, name, "maxval must be in 1..65535 (got " + std::to_string(m) + ")");
    }
    h.maxval = static_cast<unsigned>(m);
  }
  h.data = pos;
  return h;
}

// Python round(v / maxval * out_max) in double (half to even), as Pillow's PPM decoders compute it.
unsigned scale_value(unsigned v, unsigned maxval, unsigned out_max) {
  const double x = static_cast<double>(v) / static_cast<double>(maxval) * static_cast<double>(out_max);
  const double r = std::nearbyint(x);
  return r > out_max ? out_max : static_cast<unsigned>(r);
}

// Plain-format tokens (Pillow PpmPlainDecoder): comments from '#' to the next CR/LF are removed first.
struct PlainReader {
  Bytes b;
  std::size_t pos;
  const std::string& name;
  void skip() {
    while (pos < b.size()) {
      if (is_ws(b[pos])) {
        ++pos;
      } else if (b[pos] == '#') {
        while (pos < b.size() && b[pos] != '\n' && b[pos] != '\r') ++pos;
      } else {
        break;
      }
    }
  }
  // Next bitmap digit, -1 at the end.
  int bit() {
    skip();
    if (pos >= b.size()) return -1;
    const std::uint8_t c = b[pos++];
    if (c != '0' && c != '1') pnm_fail(ErrorKind::DecodeError, name, "invalid token in P1 data");
    return c - '0';
  }
  // Next number, -1 at the end.
  std::int64_t number() {
    skip();
    if (pos >= b.size()) return -1;
    std::int64_t v = 0;
    std::size_t len = 0;
    while (pos < b.size() && !is_ws(b[pos]) && b[pos] != '#') {
      const std::uint8_t c = b[pos++];
      if (++len > 10) pnm_fail(ErrorKind::DecodeError, name, "token too long in data");
      if (c < '0' || c > '9') pnm_fail(ErrorKind::DecodeError, name, "non-numeric token in data");
      v = v * 10 + (c - '0');
    }
    return v;
  }
};

}  // namespace

ImageInfo probe_pnm(Bytes b, const std::string& name) {
  const PnmHeader h = read_header(b, name);
  return {ImageFormat::PNM, probe_side(static_cast<std::uint64_t>(h.width)),
          probe_side(static_cast<std::uint64_t>(h.height)), (h.kind == 3 || h.kind == 6) ? 3 : 1};
}

Image decode_pnm(Bytes b, const std::string& name, std::int64_t max_pixels) {
  const PnmHeader h = read_header(b, name);
  check_dimensions(ImageFormat::PNM, name, h.width, h.height, max_pixels);
  const bool rgb = h.kind == 3 || h.kind == 6;
  // The raster must be there before its memory is allocated: the binary formats store it as is, and every plain
  // sample is at least one character (P1: "0"/"1", which may touch) or two (P2/P3: a digit and a separator; the
  // last may end the file). Too few bytes is the truncation Pillow reports, found without allocating.
  {
    const std::uint64_t samples =
        static_cast<std::uint64_t>(h.width) * static_cast<std::uint64_t>(h.height) * (rgb ? 3 : 1);
    const std::uint64_t have = h.data < b.size() ? b.size() - h.data : 0;
    std::uint64_t need = 0;
    switch (h.kind) {
      case 1: need = samples; break;
      case 2:
      case 3: need = 2 * samples - 1; break;
      case 4: need = (static_cast<std::uint64_t>(h.width) + 7) / 8 * static_cast<std::uint64_t>(h.height); break;
      default: need = samples * (h.maxval < 256 ? 1 : 2); break;
    }
    if (have < need) pnm_fail(ErrorKind::DecodeError, name, "truncated pixel data");
  }
  Image im = make_image(ImageFormat::PNM, name, static_cast<int>(h.width), static_cast<int>(h.height),
                        rgb ? PixelFormat::RGB : PixelFormat::Gray);
  std::uint8_t* out = im.pixels.data();
  const std::size_t n = im.pixels.size();
  const std::size_t w = static_cast<std::size_t>(h.width);
  // Pillow mode "I" (gray, maxval > 255): 16-bit values, of which we keep the high byte.
  const bool mode_i = !rgb && h.maxval > 255;
  const unsigned out_max = mode_i ? 65535 : 255;
  const auto truncated = [&]() { pnm_fail(ErrorKind::DecodeError, name, "truncated pixel data"); };

  if (h.kind == 1) {
    PlainReader r{b, h.data, name};
    for (std::size_t i = 0; i < n; ++i) {
      const int v = r.bit();
      if (v < 0) truncated();
      out[i] = v ? 0 : 255;
    }
  } else if (h.kind == 2 || h.kind == 3) {
    PlainReader r{b, h.data, name};
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t v = r.number();
      if (v < 0) truncated();
      if (v > h.maxval) pnm_fail(ErrorKind::DecodeError, name, "sample value " + std::to_string(v) + " > maxval");
      const unsigned s = scale_value(static_cast<unsigned>(v), h.maxval, out_max);
      out[i] = static_cast<std::uint8_t>(mode_i ? s >> 8 : s);
    }
  } else if (h.kind == 4) {
    const std::size_t stride = (w + 7) / 8;
    if (h.data > b.size() || (b.size() - h.data) / stride < static_cast<std::size_t>(h.height)) truncated();
    for (std::size_t y = 0; y < static_cast<std::size_t>(h.height); ++y) {
      const std::uint8_t* s = b.data() + h.data + y * stride;
      for (std::size_t x = 0; x < w; ++x) out[y * w + x] = ((s[x >> 3] >> (7 - (x & 7))) & 1) ? 0 : 255;
    }
  } else {
    const std::size_t bytes_per_sample = h.maxval < 256 ? 1 : 2;
    if (h.data > b.size() || (b.size() - h.data) / bytes_per_sample < n) truncated();
    const std::uint8_t* s = b.data() + h.data;
    if (h.maxval == 255) {
      std::memcpy(out, s, n);
    } else if (mode_i && h.maxval == 65535) {
      for (std::size_t i = 0; i < n; ++i) out[i] = s[2 * i];  // raw "I;16B": the high byte
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const unsigned v = bytes_per_sample == 1 ? s[i] : (unsigned{s[2 * i]} << 8) | s[2 * i + 1];
        const unsigned sv = scale_value(v, h.maxval, out_max);
        out[i] = static_cast<std::uint8_t>(mode_i ? sv >> 8 : sv);
      }
    }
  }
  return im;
}

}  // namespace superpoint_rt::image
