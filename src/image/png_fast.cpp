// The fast PNG path (png_fast.hpp). Why it exists: libpng's sequential reader inflates with zlib in 8 KiB pieces and
// unfilters row by row through its transformation machinery; for a 1600x900 RGB photo that was most of a request's
// non-network time. Here the IDAT payload is inflated in one call by libdeflate (2-3x zlib's speed) into the
// whole-image row buffer and unfiltered in place.
//
// The rule that keeps the results libpng's: this path only ever answers for a file that libpng 1.6.39 (Debian's
// build, as decode_png.cpp configures it) decodes without an error, and then with libpng's pixels. Whenever it
// cannot be sure of that it says "not handled" and the caller runs libpng. What libpng does, and so what is checked:
//   - every chunk header: length <= 2^31 - 1 (png_get_uint_31), four ASCII letters (png_check_chunk_name), a length
//     within png_check_chunk_length's limit (PNG_USER_CHUNK_MALLOC_MAX = 8000000, or the IDAT limit from the image
//     size); the chunk must fit in the data;
//   - CRCs: a bad CRC in a critical chunk is an error, in an ancillary one a warning with the chunk dropped. We do
//     not reproduce either: any bad CRC in a chunk libpng reads goes to libpng;
//   - before the first IDAT: IHDR once, PLTE at most once (palette images only here; libpng refuses an empty one
//     or a length not a multiple of 3, and truncates to 2^depth entries), the ancillary chunks whose handlers only
//     warn (listed in ancillary_ok), unknown ancillary chunks (skipped). Unknown critical chunks, IEND, eXIf (its
//     handler mis-skips the stream for a bad byte-order mark), the APNG chunks (Debian's libpng has the APNG patch,
//     which validates fcTL) and the rarer ancillary chunks go to libpng;
//   - the IDAT chunks: libpng reads them as the inflater asks, and stops after the chunk holding the end of the
//     zlib stream (png_read_finish_IDAT checks that chunk's CRC and skips the rest of it; the Pillow path never
//     calls png_read_end). We collect the consecutive IDATs with good CRCs and inflate them: a stream that ends in
//     them, at exactly rows * (1 + row bytes) bytes, with a correct Adler-32, is one libpng reads without a message.
//     Extra data after the stream end (a benign "Extra compressed data" warning in libpng) is accepted as libpng
//     does; a short, long, damaged or unfinished stream goes to libpng (its errors and benign warnings);
//   - the zlib header: libpng inflates with the window the header declares (windowBits 0) and refuses CINFO > 7;
//     zlib then refuses distances past a smaller window, which libdeflate does not check, so only CINFO = 7 (32 KiB,
//     what zlib and every common encoder write for images over 16 KiB) is inflated here; FDICT goes to libpng;
//   - filter types > 4 ("bad adaptive filter value") go to libpng;
//   - decode_png_cv2 also reads the chunks after the image data (png_read_end): here the IDAT run must be followed
//     directly by an IEND of length 0 with a good CRC, and no eXIf chunk may precede (orientation 0).
// The conversions are libpng's transformations as decode_png.cpp sets them (comments there): strip_16 keeps the
// high byte, strip_alpha drops alpha, the palette lookup is Pillow's (ramp past the entries) for decode_png and
// libpng's (black past the entries: png_set_PLTE's zeroed 256-entry copy) for decode_png_cv2's palette_to_rgb,
// gray_to_rgb replicates, rgb_to_gray is png_do_rgb_to_gray's 8-bit no-gamma formula with the coefficients
// png_set_rgb_to_gray(1, 0.299, 0.587) stores. libpng applies gamma in rgb_to_gray when the file declares a gamma
// (gAMA, sRGB, or an iCCP it recognises as sRGB): such files go to libpng in the cv2 Grayscale mode, as does 16-bit
// colour there (rgb_to_gray runs before strip_16).
#include "image/png_fast.hpp"

#include <libdeflate.h>

#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "util/cpu.hpp"

namespace superpoint_rt::image {
namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

constexpr std::uint32_t tag(const char (&s)[5]) {
  return (std::uint32_t{static_cast<std::uint8_t>(s[0])} << 24) |
         (std::uint32_t{static_cast<std::uint8_t>(s[1])} << 16) |
         (std::uint32_t{static_cast<std::uint8_t>(s[2])} << 8) | std::uint32_t{static_cast<std::uint8_t>(s[3])};
}

// png_check_chunk_name: every byte a letter.
bool letters(std::uint32_t t) {
  for (int i = 0; i < 4; ++i) {
    const unsigned c = (t >> (8 * i)) & 0xFF;
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return false;
  }
  return true;
}

bool critical(std::uint32_t t) {
  return ((t >> 24) & 0x20) == 0;
}

// Ancillary chunks whose libpng 1.6.39 handlers report every problem as a warning or benign error (warnings here:
// libpng's release default) and that change nothing in the transformations decode_png sets. The gamma-bearing ones
// are flagged for the cv2 Grayscale mode.
bool ancillary_ok(std::uint32_t t, bool* gamma) {
  switch (t) {
    case tag("gAMA"):
    case tag("sRGB"):
    case tag("iCCP"): *gamma = true; return true;
    case tag("cHRM"):
    case tag("sBIT"):
    case tag("bKGD"):
    case tag("tRNS"):
    case tag("pHYs"):
    case tag("tIME"):
    case tag("tEXt"):
    case tag("zTXt"):
    case tag("iTXt"): return true;
    // Handled by libpng with checks we do not mirror, or APNG (Debian's patched libpng validates fcTL).
    case tag("eXIf"):
    case tag("hIST"):
    case tag("sPLT"):
    case tag("oFFs"):
    case tag("pCAL"):
    case tag("sCAL"):
    case tag("acTL"):
    case tag("fcTL"):
    case tag("fdAT"): return false;
    default: return true;  // unknown ancillary: png_handle_unknown skips it
  }
}

// libpng's PNG_USER_CHUNK_MALLOC_MAX default (pnglibconf.h), the length limit of every chunk but IDAT.
constexpr std::uint64_t kChunkMallocMax = 8000000;

// png_check_chunk_length's IDAT limit for a non-interlaced image.
std::uint64_t idat_limit(const PngHeader& h, int channels) {
  constexpr std::uint64_t kMax31 = 0x7FFFFFFF;
  std::uint64_t row_factor = std::uint64_t{h.width} * static_cast<std::uint64_t>(channels) * (h.depth > 8 ? 2 : 1) + 1;
  std::uint64_t limit = kMax31;
  if (h.height <= 0xFFFFFFFFull / row_factor) limit = std::uint64_t{h.height} * row_factor;
  row_factor = row_factor > 32566 ? 32566 : row_factor;
  limit += 6 + 5 * (limit / row_factor + 1);
  if (limit > kMax31) limit = kMax31;
  return limit > kChunkMallocMax ? limit : kChunkMallocMax;
}

struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const noexcept { libdeflate_free_decompressor(d); }
};

// One decompressor per thread (about 10 KB of tables), kept between calls.
libdeflate_decompressor* decompressor() {
  thread_local std::unique_ptr<libdeflate_decompressor, DecompressorFree> d(libdeflate_alloc_decompressor());
  return d.get();
}

// ---- unfiltering

inline std::uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = p > a ? p - a : a - p, pb = p > b ? p - b : b - p, pc = p > c ? p - c : c - p;
  if (pa <= pb && pa <= pc) return static_cast<std::uint8_t>(a);
  return static_cast<std::uint8_t>(pb <= pc ? b : c);
}

// The reference loops: byte i is read from `in` before out[i] is written, and out[i - bpp] (the left neighbour) is
// the value already written, so `out` may be `in` or lie before it.
bool unfilter_scalar(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t n,
                     int bpp) {
  const std::size_t k = static_cast<std::size_t>(bpp);
  switch (filter) {
    case 0:
      if (out != in) std::memmove(out, in, n);
      return true;
    case 1:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(in[i] + (i >= k ? out[i - k] : 0));
      return true;
    case 2:
      if (!prior) return unfilter_scalar(0, in, prior, out, n, bpp);
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(in[i] + prior[i]);
      return true;
    case 3:
      for (std::size_t i = 0; i < n; ++i) {
        const unsigned left = i >= k ? out[i - k] : 0, up = prior ? prior[i] : 0;
        out[i] = static_cast<std::uint8_t>(in[i] + ((left + up) >> 1));
      }
      return true;
    case 4:
      for (std::size_t i = 0; i < n; ++i) {
        const int left = i >= k ? out[i - k] : 0, up = prior ? prior[i] : 0;
        const int ul = prior && i >= k ? prior[i - k] : 0;
        out[i] = static_cast<std::uint8_t>(in[i] + paeth(left, up, ul));
      }
      return true;
    default: return false;
  }
}

// Up with 32-byte blocks (each block is loaded before it is stored, which keeps the `out` <= `in` aliasing safe).
void unfilter_up(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    std::uint8_t a[32], b[32];
    std::memcpy(a, in + i, 32);
    std::memcpy(b, prior + i, 32);
    for (int j = 0; j < 32; ++j) a[j] = static_cast<std::uint8_t>(a[j] + b[j]);
    std::memcpy(out + i, a, 32);
  }
  for (; i < n; ++i) out[i] = static_cast<std::uint8_t>(in[i] + prior[i]);
}

bool use_avx2() {
  static const bool yes = util::best_isa() != util::Isa::Scalar;
  return yes;
}

// ---- conversions (one unfiltered row -> one output row)

struct Convert {
  int samples = 1;                             // samples per pixel in the file
  int bytes = 1;                               // bytes per sample (2 for 16-bit: the high byte comes first)
  int out_ch = 1;                              // 1 (gray) or 3 (RGB)
  bool replicate = false;                      // gray source to RGB (cv2 Color)
  bool to_gray = false;                        // RGB source to gray (cv2 Grayscale, 8-bit only)
  const std::uint8_t* palette = nullptr;       // 256 RGB entries (palette images)
  const std::uint8_t* gray_palette = nullptr;  // 256 gray values (palette images, cv2 Grayscale)
};

// png_set_rgb_to_gray(png, 1, 0.299, 0.587): png_fixed gives 29900 / 58700, png_set_rgb_to_gray_fixed stores
// 29900 * 32768 / 100000 = 9797 and 58700 * 32768 / 100000 = 19234 (truncated), blue 32768 - both = 13737.
constexpr unsigned kRc = 9797, kGc = 19234, kBc = 32768 - 9797 - 19234;

// png_do_rgb_to_gray, 8-bit, no gamma tables: equal channels pass unchanged, else (rc r + gc g + bc b) >> 15.
inline std::uint8_t libpng_gray(unsigned r, unsigned g, unsigned b) {
  if (r == g && r == b) return static_cast<std::uint8_t>(r);
  return static_cast<std::uint8_t>((kRc * r + kGc * g + kBc * b) >> 15);
}

void convert_row(const Convert& c, const std::uint8_t* src, std::uint8_t* dst, std::size_t w) {
  if (c.gray_palette) {
    for (std::size_t i = 0; i < w; ++i) dst[i] = c.gray_palette[src[i]];
    return;
  }
  if (c.palette) {
    for (std::size_t i = 0; i < w; ++i) std::memcpy(dst + 3 * i, c.palette + 3 * src[i], 3);
    return;
  }
  const std::size_t step = static_cast<std::size_t>(c.samples) * static_cast<std::size_t>(c.bytes);
  const std::size_t sb = static_cast<std::size_t>(c.bytes);
  if (c.to_gray) {  // 8-bit RGB / RGBA
    for (std::size_t i = 0; i < w; ++i) dst[i] = libpng_gray(src[i * step], src[i * step + 1], src[i * step + 2]);
    return;
  }
  if (c.replicate) {
    for (std::size_t i = 0; i < w; ++i) dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[i * step];
    return;
  }
  if (c.out_ch == 1) {
    for (std::size_t i = 0; i < w; ++i) dst[i] = src[i * step];
    return;
  }
  for (std::size_t i = 0; i < w; ++i) {
    dst[3 * i] = src[i * step];
    dst[3 * i + 1] = src[i * step + sb];
    dst[3 * i + 2] = src[i * step + 2 * sb];
  }
}

}  // namespace

bool png_unfilter_row_reference(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out,
                                std::size_t n, int bpp) noexcept {
  return unfilter_scalar(filter, in, prior, out, n, bpp);
}

bool png_unfilter_row(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t n,
                      int bpp) noexcept {
  if (filter == 2 && prior) {
    unfilter_up(in, prior, out, n);
    return true;
  }
  if (prior && (bpp == 3 || bpp == 4) && (filter == 1 || filter == 3 || filter == 4) && use_avx2()) {
    detail::png_unfilter_row_avx2(filter, in, prior, out, n, bpp);
    return true;
  }
  return unfilter_scalar(filter, in, prior, out, n, bpp);
}

bool png_unpaeth_two_rows(const std::uint8_t* prior, std::uint8_t* row0, std::uint8_t* row1, std::size_t n,
                          int bpp) noexcept {
  if (!(bpp == 3 || bpp == 4) || n == 0 || !use_avx2()) return false;
  detail::png_unpaeth_two_rows_avx2(prior, row0, row1, n, bpp);
  return true;
}

const char* png_unfilter_kernel_name() noexcept {
  return use_avx2() ? "avx2" : "scalar";
}

std::optional<Image> decode_png_fast(Bytes b, const PngHeader& h, PngTarget target, std::int64_t work_limit_bytes) {
  // ---- IHDR (read_ihdr checked its length and type): what we decode, and its CRC.
  if (h.interlace != 0 || b.size() < 33 || b[26] != 0 || b[27] != 0) return std::nullopt;
  int samples = 0;
  switch (h.color_type) {
    case 0: samples = 1; break;
    case 2: samples = 3; break;
    case 3: samples = 1; break;
    case 4: samples = 2; break;
    case 6: samples = 4; break;
    default: return std::nullopt;
  }
  if (h.depth != 8 && !(h.depth == 16 && h.color_type != 3)) return std::nullopt;
  if (h.width < 1 || h.height < 1 || h.width > 0x7FFFFFFF || h.height > 0x7FFFFFFF) return std::nullopt;
  if (libdeflate_crc32(0, b.data() + 12, 17) != be32(b.data() + 29)) return std::nullopt;
  const bool cv2 = target != PngTarget::Pillow;
  const bool color_src = (h.color_type & 2) != 0;
  if (target == PngTarget::Cv2Gray && color_src && h.depth == 16) return std::nullopt;

  // ---- the chunks before the first IDAT
  std::size_t pos = 33;
  const std::uint8_t* plte = nullptr;
  std::size_t plte_entries = 0;
  bool gamma = false;
  for (;;) {
    if (b.size() - pos < 12) return std::nullopt;
    const std::uint64_t len = be32(b.data() + pos);
    const std::uint32_t t = be32(b.data() + pos + 4);
    if (len > 0x7FFFFFFF || !letters(t) || len > b.size() - pos - 12) return std::nullopt;
    if (t == tag("IDAT")) break;
    if (len > kChunkMallocMax) return std::nullopt;
    if (libdeflate_crc32(0, b.data() + pos + 4, static_cast<std::size_t>(len) + 4) != be32(b.data() + pos + 8 + len))
      return std::nullopt;
    if (t == tag("PLTE")) {
      if (h.color_type != 3 || plte || len == 0 || len % 3 != 0 || len > 768) return std::nullopt;
      plte = b.data() + pos + 8;
      plte_entries = static_cast<std::size_t>(len / 3);  // <= 256 = 2^8: nothing to truncate at depth 8
    } else if (critical(t) || !ancillary_ok(t, &gamma)) {
      return std::nullopt;  // IHDR again, IEND, unknown critical; ancillary chunks we do not mirror
    }
    pos += static_cast<std::size_t>(len) + 12;
  }
  if (h.color_type == 3 && !plte) return std::nullopt;  // "Missing PLTE before IDAT"
  if (target == PngTarget::Cv2Gray && color_src && gamma) return std::nullopt;

  // ---- the IDAT run: consecutive IDATs with good CRCs and lengths within libpng's limit
  const std::uint64_t limit = idat_limit(h, samples);
  struct Piece {
    const std::uint8_t* p;
    std::size_t n;
  };
  std::vector<Piece> pieces;
  std::size_t total = 0;
  bool iend_next = false;  // the run is followed by a well-formed IEND (what decode_png_cv2's png_read_end needs)
  while (b.size() - pos >= 12) {
    const std::uint64_t len = be32(b.data() + pos);
    const std::uint32_t t = be32(b.data() + pos + 4);
    if (len > b.size() - pos - 12) break;
    const bool crc_ok =
        libdeflate_crc32(0, b.data() + pos + 4, static_cast<std::size_t>(len) + 4) == be32(b.data() + pos + 8 + len);
    if (t != tag("IDAT")) {
      iend_next = t == tag("IEND") && len == 0 && crc_ok;
      break;
    }
    if (len > limit || !crc_ok) break;
    if (len > 0) pieces.push_back({b.data() + pos + 8, static_cast<std::size_t>(len)});
    total += static_cast<std::size_t>(len);
    pos += static_cast<std::size_t>(len) + 12;
  }
  if (cv2 && !iend_next) return std::nullopt;
  if (total < 2) return std::nullopt;

  // ---- the zlib header (see the top of this file) and the size of the rows
  const std::uint8_t cmf = pieces[0].p[0];
  const std::uint8_t flg = pieces[0].n >= 2 ? pieces[0].p[1] : pieces[1].p[0];  // total >= 2: a second piece exists
  if (cmf != 0x78 || (flg & 0x20) != 0 || ((cmf << 8) | flg) % 31 != 0) return std::nullopt;
  const std::size_t bpp = static_cast<std::size_t>(samples) * static_cast<std::size_t>(h.depth / 8);
  const std::size_t rs = static_cast<std::size_t>(h.width) * bpp;  // row bytes without the filter byte
  const std::size_t rows = h.height;
  if (rs + 1 > ~std::uint64_t{0} / rows) return std::nullopt;  // only with a caller's absurd max_pixels
  const std::uint64_t raw_size = std::uint64_t{rows} * (rs + 1);
  constexpr std::size_t kPad = 64;  // the unfilter kernels read a few bytes past a row
  // A deflate stream expands at most 1032:1 (one 258-byte match per two bits); a file that cannot hold its rows
  // would fail in libpng, and must not make us allocate them first.
  if (raw_size > 1032 * std::uint64_t{total} + 1024) return std::nullopt;
  if (raw_size + kPad > static_cast<std::uint64_t>(work_limit_bytes)) return std::nullopt;

  // Output: which conversion, and whether the rows can be compacted in place in the inflate buffer.
  const int out_ch = target == PngTarget::Cv2Gray    ? 1
                     : target == PngTarget::Cv2Color ? 3
                                                     : (color_src || h.color_type == 3 ? 3 : 1);
  const bool in_place = h.depth == 8 && ((out_ch == 3 && h.color_type == 2) || (out_ch == 1 && h.color_type == 0));
  Convert conv;
  conv.samples = samples;
  conv.bytes = h.depth / 8;
  conv.out_ch = out_ch;
  conv.replicate = out_ch == 3 && !color_src && h.color_type != 3;
  conv.to_gray = out_ch == 1 && color_src && h.color_type != 3;
  Palette pillow_pal;                 // Pillow: the ramp past the file's entries
  std::uint8_t libpng_pal[768] = {};  // libpng: zeros past the file's entries
  std::uint8_t gray_pal[256] = {};
  if (h.color_type == 3) {
    if (cv2) {
      std::memcpy(libpng_pal, plte, 3 * plte_entries);
      if (out_ch == 1) {
        for (int i = 0; i < 256; ++i)
          gray_pal[i] = libpng_gray(libpng_pal[3 * i], libpng_pal[3 * i + 1], libpng_pal[3 * i + 2]);
        conv.gray_palette = gray_pal;
      } else {
        conv.palette = libpng_pal;
      }
    } else {
      std::memcpy(pillow_pal.rgb.data(), plte, 3 * plte_entries);
      conv.palette = pillow_pal.rgb.data();
    }
  }

  try {
    // ---- inflate the whole stream at once
    std::vector<std::uint8_t> joined;
    const std::uint8_t* z = pieces[0].p;
    if (pieces.size() > 1) {
      joined.resize(total);
      std::size_t at = 0;
      for (const Piece& p : pieces) {
        std::memcpy(joined.data() + at, p.p, p.n);
        at += p.n;
      }
      z = joined.data();
    }
    std::vector<std::uint8_t> raw(static_cast<std::size_t>(raw_size) + kPad);
    libdeflate_decompressor* d = decompressor();
    if (!d) return std::nullopt;
    std::size_t used = 0;
    // actual_out = nullptr: anything but exactly raw_size bytes is a failure (short or too much image data).
    if (libdeflate_zlib_decompress_ex(d, z, total, raw.data(), static_cast<std::size_t>(raw_size), &used, nullptr) !=
        LIBDEFLATE_SUCCESS)
      return std::nullopt;
    std::vector<std::uint8_t>().swap(joined);

    // ---- unfilter (+ convert)
    // Every row is unfiltered in place (its prior, the row before, stays as stored-and-unfiltered), and row y - 1 is
    // emitted once row y is done: moved to its packed place y * rs (the image is then the buffer itself), or
    // converted into the result. Two Paeth rows in a row (the usual case of photos) go through the paired kernel.
    const std::size_t w = h.width;
    const std::size_t os = w * static_cast<std::size_t>(out_ch);
    Image im;
    im.width = static_cast<int>(h.width);
    im.height = static_cast<int>(h.height);
    im.format = out_ch == 1 ? PixelFormat::Gray : PixelFormat::RGB;
    if (!in_place) im.pixels.resize(rows * os);
    std::uint8_t* base = raw.data();
    const auto row_at = [&](std::size_t y) { return base + y * (rs + 1) + 1; };
    const auto emit = [&](std::size_t y) {
      if (in_place)
        std::memmove(base + y * rs, row_at(y), rs);  // below every row still in place
      else
        convert_row(conv, row_at(y), im.pixels.data() + y * os, w);
    };
    const int k = static_cast<int>(bpp);
    for (std::size_t y = 0; y < rows;) {
      const int f = row_at(y)[-1];
      if (f == 4 && y > 0 && y + 1 < rows && row_at(y + 1)[-1] == 4 &&
          png_unpaeth_two_rows(row_at(y - 1), row_at(y), row_at(y + 1), rs, k)) {
        emit(y - 1);
        emit(y);
        y += 2;
        continue;
      }
      if (!png_unfilter_row(f, row_at(y), y ? row_at(y - 1) : nullptr, row_at(y), rs, k)) return std::nullopt;
      if (y > 0) emit(y - 1);
      ++y;
    }
    emit(rows - 1);
    if (in_place) {
      raw.resize(rows * rs);
      im.pixels = std::move(raw);
    }
    return im;
  } catch (const std::bad_alloc&) {
    return std::nullopt;  // libpng needs only its row buffers
  }
}

}  // namespace superpoint_rt::image
