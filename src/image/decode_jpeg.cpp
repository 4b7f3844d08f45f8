// JPEG through libjpeg-turbo, configured as Pillow 9.4 (JpegDecode.c) configures it: library defaults
// (JDCT_ISLOW, fancy upsampling on, no scaling), out_color_space JCS_GRAYSCALE for 1 component (Pillow mode "L",
// returned as the gray plane), JCS_RGB for 3 (mode "RGB"), JCS_CMYK for 4 (mode "CMYK", raw mode "CMYK;I": Pillow
// always assumes Adobe's inverted polarity) followed by Pillow's cmyk2rgb. Other component counts and 12-bit files
// are refused, as Pillow refuses them. EXIF orientation is not applied.
//
// Errors: libjpeg reports fatal errors through error_exit, which must not return; we longjmp back into a small
// function that holds only trivially destructible locals (no C++ object lives across the jump) and turn the
// failure into an Error there. Pillow ignores libjpeg's corrupt-data warnings but treats running out of data as
// "image file is truncated"; with jpeg_mem_src running out of data is the warning JWRN_JPEG_EOF, which we make
// fatal. jpeg_finish_decompress is not called: Pillow also accepts a file whose EOI marker is missing once all
// scanlines are decoded.
#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "image/decode_cv2.hpp"
#include "image/decode_internal.hpp"
#include "image/exif.hpp"
#include "image/ycc_rows.hpp"

namespace superpoint_rt::image {
namespace {

struct JpegErr {
  jpeg_error_mgr pub;  // first member: libjpeg hands us a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool too_many_scans;  // the progress monitor stopped the decode at kMaxJpegScans
};

void on_error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

void on_emit_message(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) on_error_exit(c);  // truncated: an error, as in Pillow
}

void on_output_message(j_common_ptr) {}

// Trivially destructible state shared by the setjmp-protected phases; jpeg_destroy_decompress in the guard.
struct JpegJob {
  jpeg_decompress_struct cinfo;
  JpegErr err;
  jpeg_progress_mgr progress;
  bool created;
  long memory_limit;  // libjpeg's max_memory_to_use: work_limit() of the input
  bool save_app1;     // keep the APP1 segments (EXIF) for decode_jpeg_cv2's orientation
};

// libjpeg-turbo's advice for untrusted progressive files (LJT-01-003), as TurboJPEG's scan limit does it: every
// scan is a pass over the whole coefficient buffer, so a small file of many tiny scans costs minutes. libjpeg calls
// the monitor while it reads the scans (jpeg_start_decompress for multi-scan files); past the limit we stop it
// through the same longjmp as its own errors.
void on_progress(j_common_ptr c) {
  if (!c->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number <= kMaxJpegScans) return;
  auto* e = reinterpret_cast<JpegErr*>(c->err);
  e->too_many_scans = true;
  std::snprintf(e->message, sizeof e->message, "more than %d scans", kMaxJpegScans);
  std::longjmp(e->jump, 1);
}

struct JpegGuard {
  JpegJob job{};
  JpegGuard() {
    job.cinfo.err = jpeg_std_error(&job.err.pub);
    job.err.pub.error_exit = on_error_exit;
    job.err.pub.emit_message = on_emit_message;
    job.err.pub.output_message = on_output_message;
    job.err.message[0] = '\0';
  }
  ~JpegGuard() {
    if (job.created) jpeg_destroy_decompress(&job.cinfo);
  }
  JpegGuard(const JpegGuard&) = delete;
  JpegGuard& operator=(const JpegGuard&) = delete;
};

// Phase 1: header. Only trivially destructible locals (longjmp target).
bool read_header(JpegJob* j, const std::uint8_t* data, std::size_t size) {
  if (setjmp(j->err.jump)) return false;
  jpeg_create_decompress(&j->cinfo);
  j->created = true;
  // libjpeg's whole-image buffers (the coefficients of progressive and multi-scan files) are "virtual arrays": with
  // max_memory_to_use set, jmemnobs refuses them past it (JERR_NO_BACKING_STORE) instead of allocating them.
  j->cinfo.mem->max_memory_to_use = j->memory_limit;
  j->progress.progress_monitor = on_progress;
  j->cinfo.progress = &j->progress;
  jpeg_mem_src(&j->cinfo, data, static_cast<unsigned long>(size));
  if (j->save_app1) jpeg_save_markers(&j->cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&j->cinfo, TRUE);
  return true;
}

// Converts one row of `width` CMYK pixels (as libjpeg outputs them) into a result row.
using CmykRowFn = void (*)(const std::uint8_t* cmyk, std::uint8_t* dst, int width);

void pillow_cmyk_row(const std::uint8_t* cmyk, std::uint8_t* dst, int width) {
  cmyk_to_rgb_row(cmyk, dst, width, true);
}

// Phase 2: pixels, straight into the rows of `out` (allocated as they are decoded); CMYK goes through `cmyk_row`
// (4 * width bytes) and `cmyk_fn`. OutputRows::reach may throw (no C++ object of this frame lives across the setjmp).
bool read_pixels(JpegJob* j, OutputRows* out, std::uint8_t* cmyk_row, CmykRowFn cmyk_fn) {
  if (setjmp(j->err.jump)) return false;
  jpeg_decompress_struct* c = &j->cinfo;
  jpeg_start_decompress(c);
  while (c->output_scanline < c->output_height) {
    if (cmyk_row) {
      JSAMPROW row = cmyk_row;
      const JDIMENSION y = c->output_scanline;
      if (jpeg_read_scanlines(c, &row, 1) != 1) return false;
      cmyk_fn(cmyk_row, out->row(static_cast<int>(y)), static_cast<int>(c->output_width));
    } else {
      JSAMPROW rows[16];
      const JDIMENSION y = c->output_scanline;
      JDIMENSION n = c->output_height - y;
      if (n > 16) n = 16;
      out->reach(static_cast<int>(y + n));
      for (JDIMENSION i = 0; i < n; ++i) rows[i] = out->row(static_cast<int>(y + i));
      if (jpeg_read_scanlines(c, rows, n) == 0) return false;
    }
  }
  return true;
}

[[noreturn]] void jpeg_fail(const JpegJob& j, const std::string& name, const char* fallback) {
  const std::string detail = j.err.message[0] ? j.err.message : fallback;
  if (j.err.too_many_scans) {
    fail(ErrorKind::TooLarge, ImageFormat::JPEG, name,
         "progressive file with " + detail + ", over the limit of " + std::to_string(kMaxJpegScans) +
             " (kMaxJpegScans)");
  }
  if (j.err.pub.msg_code == JERR_NO_BACKING_STORE) {
    // Only a virtual array over max_memory_to_use asks for backing store.
    std::size_t coef = 0;
    for (int ci = 0; ci < j.cinfo.num_components; ++ci) {
      const jpeg_component_info& comp = j.cinfo.comp_info[ci];
      coef += static_cast<std::size_t>(comp.width_in_blocks) * comp.height_in_blocks * sizeof(JBLOCK);
    }
    fail(ErrorKind::TooLarge, ImageFormat::JPEG, name,
         std::to_string(j.cinfo.image_width) + "x" + std::to_string(j.cinfo.image_height) +
             " multi-scan (progressive) file needs about " + std::to_string(coef) +
             " bytes of coefficient buffers, over the decoder's working-memory limit of " +
             std::to_string(j.memory_limit) + " bytes for its size (kDecodeWorkBytes, docs/LIMITS.md)");
  }
  const bool truncated = j.err.pub.msg_code == JWRN_JPEG_EOF;
  fail(ErrorKind::DecodeError, ImageFormat::JPEG, name,
       truncated ? "truncated (" + detail + ")" : "corrupt or unsupported (" + detail + ")");
}

// Reads the header and picks the output colour space; returns the decoded channel count (1 or 3).
int open_jpeg(JpegGuard& g, Bytes b, const std::string& name) {
  g.job.memory_limit = static_cast<long>(work_limit(b.size()));
  if (!read_header(&g.job, b.data(), b.size())) jpeg_fail(g.job, name, "cannot read the header");
  jpeg_decompress_struct& c = g.job.cinfo;
  switch (c.num_components) {
    case 1: c.out_color_space = JCS_GRAYSCALE; return 1;
    case 3: c.out_color_space = JCS_RGB; return 3;
    case 4: c.out_color_space = JCS_CMYK; return 3;
    default:
      fail(ErrorKind::UnsupportedFormat, ImageFormat::JPEG, name,
           "cannot handle " + std::to_string(c.num_components) + "-component images (as Pillow)");
  }
}

}  // namespace

ImageInfo probe_jpeg(Bytes b, const std::string& name) {
  JpegGuard g;
  const int ch = open_jpeg(g, b, name);
  return {ImageFormat::JPEG, probe_side(g.job.cinfo.image_width), probe_side(g.job.cinfo.image_height), ch};
}

Image decode_jpeg(Bytes b, const std::string& name, std::int64_t max_pixels) {
  JpegGuard g;
  const int ch = open_jpeg(g, b, name);
  const jpeg_decompress_struct& c = g.job.cinfo;
  check_dimensions(ImageFormat::JPEG, name, c.image_width, c.image_height, max_pixels);
  OutputRows out(ImageFormat::JPEG, name, static_cast<int>(c.image_width), static_cast<int>(c.image_height),
                 ch == 1 ? PixelFormat::Gray : PixelFormat::RGB);
  std::vector<std::uint8_t> cmyk;
  if (c.num_components == 4) cmyk.resize(4 * static_cast<std::size_t>(c.image_width));
  if (!read_pixels(&g.job, &out, cmyk.empty() ? nullptr : cmyk.data(), pillow_cmyk_row))
    jpeg_fail(g.job, name, "decoding stopped early");
  return out.finish();
}

namespace {

// OpenCV 4.6's icvCvt_CMYK2BGR_8u_C4C3R (imgcodecs utils.cpp), written as RGB: per channel k - ((255 - v) * k >> 8)
// with C -> R, M -> G, Y -> B.
void cv2_cmyk_rgb_row(const std::uint8_t* cmyk, std::uint8_t* rgb, int width) {
  for (int x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int k = cmyk[3];
    for (int i = 0; i < 3; ++i) rgb[i] = static_cast<std::uint8_t>(k - ((255 - cmyk[i]) * k >> 8));
  }
}

// icvCvt_CMYK2Gray_8u_C4C1R: the same channels, then the 14-bit luma.
void cv2_cmyk_gray_row(const std::uint8_t* cmyk, std::uint8_t* gray, int width) {
  for (int x = 0; x < width; ++x, cmyk += 4) {
    const int k = cmyk[3];
    const auto ch = [&](int i) { return static_cast<unsigned>(k - ((255 - cmyk[i]) * k >> 8)); };
    gray[x] = cv2_gray(ch(0), ch(1), ch(2));
  }
}

}  // namespace

Image decode_jpeg_cv2(Bytes b, const std::string& name, std::int64_t max_pixels, Cv2Read mode, int* orientation) {
  JpegGuard g;
  g.job.save_app1 = true;
  (void)open_jpeg(g, b, name);  // the header, with decode_jpeg's errors (component counts other than 1, 3, 4 refused)
  jpeg_decompress_struct& c = g.job.cinfo;
  // grfmt_jpeg.cpp: EXIF from the first APP1 segment, past its 6-byte identifier, whatever the segment is.
  *orientation = 0;
  for (jpeg_saved_marker_ptr m = c.marker_list; m; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    if (m->data_length > 6) *orientation = exif_orientation_cv2({m->data + 6, m->data_length - 6});
    break;
  }
  check_dimensions(ImageFormat::JPEG, name, c.image_width, c.image_height, max_pixels);
  // JpegDecoder::readData: 4 components as JCS_CMYK converted by OpenCV, otherwise libjpeg's own gray or colour.
  const bool gray = mode == Cv2Read::Grayscale;
  const bool cmyk = c.num_components == 4;
  c.out_color_space = cmyk ? JCS_CMYK : (gray ? JCS_GRAYSCALE : JCS_RGB);
  OutputRows out(ImageFormat::JPEG, name, static_cast<int>(c.image_width), static_cast<int>(c.image_height),
                 gray ? PixelFormat::Gray : PixelFormat::RGB);
  std::vector<std::uint8_t> cmyk_row;
  if (cmyk) cmyk_row.resize(4 * static_cast<std::size_t>(c.image_width));
  if (!read_pixels(&g.job, &out, cmyk ? cmyk_row.data() : nullptr, gray ? cv2_cmyk_gray_row : cv2_cmyk_rgb_row))
    jpeg_fail(g.job, name, "decoding stopped early");
  return out.finish();
}

namespace {

// Phase 2 of the channel decode: RGB scanlines (libjpeg-turbo's own SIMD colour conversion, so the bits are those
// of decode_jpeg), 16 at a time into `rows` (16 * 3 * width bytes), of which one channel is kept.
bool read_channel(JpegJob* j, OutputRows* out, int channel, std::uint8_t* rows) {
  if (setjmp(j->err.jump)) return false;
  jpeg_decompress_struct* c = &j->cinfo;
  jpeg_start_decompress(c);
  const std::size_t width = c->output_width;
  const std::size_t row_bytes = 3 * width;
  while (c->output_scanline < c->output_height) {
    JSAMPROW ptrs[16];
    const JDIMENSION y = c->output_scanline;
    JDIMENSION n = c->output_height - y;
    if (n > 16) n = 16;
    for (JDIMENSION i = 0; i < n; ++i) ptrs[i] = rows + i * row_bytes;
    const JDIMENSION got = jpeg_read_scanlines(c, ptrs, n);
    if (got == 0) return false;
    for (JDIMENSION i = 0; i < got; ++i) {
      const std::uint8_t* src = rows + i * row_bytes + channel;
      std::uint8_t* dst = out->row(static_cast<int>(y + i));
      for (std::size_t x = 0; x < width; ++x) dst[x] = src[3 * x];
    }
  }
  return true;
}

}  // namespace

Image decode_jpeg_channel(Bytes b, const std::string& name, std::int64_t max_pixels, int channel) {
  if (channel < 0 || channel > 2)
    fail(ErrorKind::InvalidArgument, ImageFormat::JPEG, name,
         "channel " + std::to_string(channel) + " must be 0 (R), 1 (G) or 2 (B)");
  {
    JpegGuard g;
    (void)open_jpeg(g, b, name);  // sets JCS_RGB for 3 components, as decode_jpeg
    jpeg_decompress_struct& c = g.job.cinfo;
    if (c.num_components == 3) {
      check_dimensions(ImageFormat::JPEG, name, c.image_width, c.image_height, max_pixels);
      // Same settings and JCS_RGB output as decode_jpeg; only the 16-row RGB buffer is ours. (Outputting JCS_YCbCr
      // and converting one channel with libjpeg's tables is exact too, but slower: bench/bench_host.cpp.)
      OutputRows out(ImageFormat::JPEG, name, static_cast<int>(c.image_width), static_cast<int>(c.image_height),
                     PixelFormat::Gray);
      std::vector<std::uint8_t> rows(16 * 3 * static_cast<std::size_t>(c.image_width));
      if (!read_channel(&g.job, &out, channel, rows.data())) jpeg_fail(g.job, name, "decoding stopped early");
      return out.finish();
    }
  }
  // Gray, CMYK and RGB-coded files: the full decode, then the plane (a gray image is its own R, G and B).
  Image full = decode_jpeg(b, name, max_pixels);
  if (full.format == PixelFormat::Gray) return full;
  Image im;
  im.width = full.width;
  im.height = full.height;
  im.format = PixelFormat::Gray;
  const std::size_t n = static_cast<std::size_t>(full.width) * static_cast<std::size_t>(full.height);
  im.pixels.resize(n);
  for (std::size_t i = 0; i < n; ++i) im.pixels[i] = full.pixels[3 * i + static_cast<std::size_t>(channel)];
  return im;
}

namespace {

// The start of a band of scanlines inside `buf` (which has 64 spare bytes), placed 8 bytes past a 64-byte boundary.
// WHY: with 32-byte aligned output rows, libjpeg-turbo's SIMD colour conversion takes its aligned-store path, which
// (as far as we can tell from perf: the resize's first load of every band row then stalled, ~0.6 ms per 1600x900
// image) does not leave the rows in cache; with misaligned rows they are read back from cache (fused decode + resize
// of berlin01: 8.0 ms instead of 8.25 ms, thread CPU). The bits are the same either way.
std::uint8_t* cache_resident_rows(std::uint8_t* buf) {
  const auto a = reinterpret_cast<std::uintptr_t>(buf);
  return buf + ((64 - a % 64) % 64) + 8;
}

// Scanlines decoded per band. WHY 64, not libjpeg's 16-row iMCU: alternating libjpeg and the resize every 16 rows
// cost ~0.3 ms more on a 1600x900 file (each evicts the other's working set); 64 rows of a 1600-wide RGB image
// (300 KiB) still sit in L2.
constexpr JDIMENSION kBandRows = 64;

// State of the band decoder behind decode_jpeg_resized_plane (trivially destructible: it lives across setjmp).
struct BandSource {
  JpegJob* job;
  std::uint8_t* band;     // kBandRows rows of row_bytes
  std::size_t row_bytes;  // output_components * output_width
  int offset;             // the plane's byte within a pixel
  JDIMENSION band_first;  // first scanline held in band
  JDIMENSION band_count;  // scanlines held in band (0 before the first read)
};

bool start_decompress(JpegJob* j) {
  if (setjmp(j->err.jump)) return false;
  jpeg_start_decompress(&j->cinfo);
  return true;
}

// Decodes the next (up to) kBandRows scanlines into the band. Only trivially destructible locals (longjmp target); the
// setjmp lives in this frame, so an error never unwinds through the resize code that called us.
bool read_band(BandSource* s) {
  JpegJob* j = s->job;
  if (setjmp(j->err.jump)) return false;
  jpeg_decompress_struct* c = &j->cinfo;
  const JDIMENSION y = c->output_scanline;
  if (y >= c->output_height) return false;
  JDIMENSION n = c->output_height - y;
  if (n > kBandRows) n = kBandRows;
  JSAMPROW ptrs[kBandRows];
  for (JDIMENSION i = 0; i < n; ++i) ptrs[i] = s->band + i * s->row_bytes;
  JDIMENSION got = 0;
  while (got < n) {
    const JDIMENSION k = jpeg_read_scanlines(c, ptrs + got, n - got);
    if (k == 0) return false;
    got += k;
  }
  s->band_first = y;
  s->band_count = got;
  return true;
}

// ResizeRowFn: row y (decoding, and so skipping, the scanlines before it).
const std::uint8_t* band_row(void* ctx, int y) {
  auto* s = static_cast<BandSource*>(ctx);
  const auto yy = static_cast<JDIMENSION>(y);
  if (y < 0 || yy < s->band_first) return nullptr;  // rows are requested in increasing order only
  while (yy >= s->band_first + s->band_count) {
    if (!read_band(s)) return nullptr;
  }
  return s->band + (yy - s->band_first) * s->row_bytes + static_cast<std::size_t>(s->offset);
}

// ---- Raw path: R or B straight from the component rows (ycc_rows.hpp) --------------------------------------------

constexpr int kRawSlots = 3;  // iMCU rows kept: a luma row needs chroma rows of the previous and the next one

// State of the raw decoder (trivially destructible: it lives across setjmp). Component rows of iMCU row i sit in
// slot i % kRawSlots.
struct RawSource {
  JpegJob* job;
  int chroma;                        // component 1 (Cb, for B) or 2 (Cr, for R)
  int hfac, vfac;                    // luma / chroma sampling ratios (1 or 2)
  int luma_rows, chroma_rows;        // rows per iMCU row
  int chroma_height, chroma_width;   // libjpeg's downsampled_height / _width of the chroma
  std::size_t stride[3];             // bytes per row of each component buffer
  std::uint8_t* slot[kRawSlots][3];  // component rows of the iMCU rows in the ring
  int decoded;                       // iMCU rows read so far
  std::int16_t* sums;                // ycc_channel_row scratch
  std::uint8_t* row;                 // the channel row handed to the resize
};

// Reads the next iMCU row into its slot. Only trivially destructible locals (longjmp target).
bool read_imcu(RawSource* s) {
  JpegJob* j = s->job;
  if (setjmp(j->err.jump)) return false;
  jpeg_decompress_struct* c = &j->cinfo;
  if (c->output_scanline >= c->output_height) return false;
  JSAMPROW ptrs[3][16];
  JSAMPARRAY planes[3];
  const int slot = s->decoded % kRawSlots;
  for (int ci = 0; ci < 3; ++ci) {
    const int rows = ci == 0 ? s->luma_rows : s->chroma_rows;
    for (int i = 0; i < rows; ++i) ptrs[ci][i] = s->slot[slot][ci] + static_cast<std::size_t>(i) * s->stride[ci];
    planes[ci] = ptrs[ci];
  }
  if (jpeg_read_raw_data(c, planes, static_cast<JDIMENSION>(s->luma_rows)) == 0) return false;
  ++s->decoded;
  return true;
}

const std::uint8_t* component_row(const RawSource* s, int ci, int y) {
  const int rows = ci == 0 ? s->luma_rows : s->chroma_rows;
  return s->slot[(y / rows) % kRawSlots][ci] + static_cast<std::size_t>(y % rows) * s->stride[ci];
}

// ResizeRowFn: the channel row y.
const std::uint8_t* raw_row(void* ctx, int y) {
  auto* s = static_cast<RawSource*>(ctx);
  const int cy = y / s->vfac;
  const int odd = s->vfac == 2 ? y % 2 : 0;
  int far = s->vfac == 2 ? (odd ? cy + 1 : cy - 1) : cy;
  far = far < 0 ? 0 : (far >= s->chroma_height ? s->chroma_height - 1 : far);  // jdmainct.c edge rows
  const int need = std::max(y / s->luma_rows, std::max(cy, far) / s->chroma_rows);
  const int oldest = std::min(y / s->luma_rows, std::min(cy, far) / s->chroma_rows);
  if (oldest < s->decoded - kRawSlots) return nullptr;  // rows are requested in increasing order only
  while (s->decoded <= need) {
    if (!read_imcu(s)) return nullptr;
  }
  const jpeg_decompress_struct& c = s->job->cinfo;
  YccRow r{component_row(s, 0, y),
           component_row(s, s->chroma, cy),
           component_row(s, s->chroma, far),
           static_cast<int>(c.image_width),
           s->chroma_width,
           s->hfac,
           s->vfac,
           odd,
           s->chroma == 2};
  detail::ycc_channel_row_avx2(r, s->sums, s->row);
  return s->row;
}

bool start_raw(JpegJob* j) {
  if (setjmp(j->err.jump)) return false;
  j->cinfo.raw_data_out = TRUE;
  jpeg_start_decompress(&j->cinfo);
  return true;
}

// Whether the raw path reproduces libjpeg's pipeline for this file: YCbCr with full-resolution luma, chroma at 1x1
// and luma at 1 or 2 in each direction (4:4:4, 4:2:2, 4:4:0, 4:2:0) and big enough for the fancy filters (libjpeg
// falls back to box upsampling below 3 chroma columns). Everything else takes the RGB scanline path.
bool raw_path_applies(const jpeg_decompress_struct& c, int rgb_channel) {
  if (c.num_components != 3 || c.jpeg_color_space != JCS_YCbCr || (rgb_channel != 0 && rgb_channel != 2)) return false;
  if (c.image_width < 8 || c.image_height < 8 || c.CCIR601_sampling || !c.do_fancy_upsampling) return false;
  const jpeg_component_info* ci = c.comp_info;
  for (int k = 1; k < 3; ++k)
    if (ci[k].h_samp_factor != 1 || ci[k].v_samp_factor != 1) return false;
  const int h = ci[0].h_samp_factor, v = ci[0].v_samp_factor;
  return (h == 1 || h == 2) && (v == 1 || v == 2) && c.max_h_samp_factor == h && c.max_v_samp_factor == v;
}

// ---- One decompressor feeding the resize -----------------------------------------------------------------------

// The row source of one decompressor, raw (RawSource) or scanline band (BandSource), with its buffers.
struct PlaneFeed {
  bool raw = false;
  RawSource rs{};
  BandSource bs{};
  std::vector<std::uint8_t> rows;
  std::vector<std::int16_t> sums;
  int step = 1;  // the resize's pixel_step for fn()'s rows
  ResizeRowFn fn() const { return raw ? raw_row : band_row; }
  void* ctx() { return raw ? static_cast<void*>(&rs) : static_cast<void*>(&bs); }
};

// Sets up `f` for the opened job (header read) and starts libjpeg: the raw path when allow_raw and it applies, else
// the scanline band. False on a libjpeg error (the job holds it).
bool start_feed(PlaneFeed& f, JpegJob* job, int rgb_channel, int ch, bool allow_raw) {
  const jpeg_decompress_struct& c = job->cinfo;
  const int w = static_cast<int>(c.image_width), h = static_cast<int>(c.image_height);
  f.raw = allow_raw && raw_path_applies(c, rgb_channel);
  if (f.raw) {
    RawSource& src = f.rs;
    src.job = job;
    src.chroma = rgb_channel == 0 ? 2 : 1;
    src.hfac = c.comp_info[0].h_samp_factor;
    src.vfac = c.comp_info[0].v_samp_factor;
    src.luma_rows = 8 * src.vfac;
    src.chroma_rows = 8;
    // libjpeg's downsampled sizes: ceil(image size / factor).
    src.chroma_width = (w + src.hfac - 1) / src.hfac;
    src.chroma_height = (h + src.vfac - 1) / src.vfac;
    std::size_t slot_bytes = 0;
    for (int ci = 0; ci < 3; ++ci) {
      src.stride[ci] = 8 * static_cast<std::size_t>(c.comp_info[ci].width_in_blocks) + 64;
      slot_bytes += static_cast<std::size_t>(ci == 0 ? src.luma_rows : src.chroma_rows) * src.stride[ci];
    }
    f.rows.resize(kRawSlots * slot_bytes + static_cast<std::size_t>(w));
    f.sums.resize(static_cast<std::size_t>(ycc_scratch_size(w, src.chroma_width)));
    std::uint8_t* p = f.rows.data();
    for (auto& slot : src.slot)
      for (int ci = 0; ci < 3; ++ci) {
        slot[ci] = p;
        p += static_cast<std::size_t>(ci == 0 ? src.luma_rows : src.chroma_rows) * src.stride[ci];
      }
    src.row = p;
    src.sums = f.sums.data();
    f.step = 1;
    return start_raw(job);
  }
  const std::size_t row_bytes = static_cast<std::size_t>(ch) * c.image_width;
  f.rows.resize(kBandRows * row_bytes + 64);
  f.bs = BandSource{job, cache_resident_rows(f.rows.data()), row_bytes, ch == 3 ? rgb_channel : 0, 0, 0};
  f.step = ch;
  return start_decompress(job);
}

// Decodes the scanlines the resize did not read: Pillow decodes the whole file before resizing, so a file truncated
// (or corrupt) below the resize's last input row must fail the same way.
bool drain_feed(PlaneFeed& f) {
  const jpeg_decompress_struct& c = (f.raw ? f.rs.job : f.bs.job)->cinfo;
  while (c.output_scanline < c.output_height) {
    if (!(f.raw ? read_imcu(&f.rs) : read_band(&f.bs))) return false;
  }
  return true;
}

// jpeg_skip_scanlines (libjpeg-turbo jdapistd.c): whole iMCU rows are only entropy-decoded (no IDCT, upsampling or
// colour conversion); the rows of a partial iMCU row and, with fancy upsampling, the context row before the target
// are decoded and dropped, so the scanlines after the skip are those of a full decode. Scanline mode only (not
// raw_data_out). Only trivially destructible locals (longjmp target).
bool skip_scanlines(JpegJob* j, JDIMENSION n) {
  if (setjmp(j->err.jump)) return false;
  if (n > 0) jpeg_skip_scanlines(&j->cinfo, n);
  return true;
}

// ---- Two threads -----------------------------------------------------------------------------------------------
//
// The top part (task 0) decodes from row 0 as the serial path does (raw path when it applies) and computes output
// rows [0, split); the bottom part (task 1) opens a second decompressor on the same bytes, skips to the first input
// row of output row `split` and computes output rows [split, out_h), then decodes the rest of the file. Each output
// row is computed by one part from its own input rows (slice_resize_plan), so the result is the serial one whatever
// the split. The bottom part entropy-decodes the whole file (the skip) and the top part fully decodes the rows above
// the split, so every scanline is decoded by one of them and truncated / corrupt files fail as in the serial path.
//
// Choosing the split: the skip still costs the Huffman decoding of the rows above the split (most of a JPEG decode:
// on berlin01 3.8 of 6.1 ms), so the bottom part takes fewer rows (about a quarter to a third). Their costs are
// balanced with the model below, in two steps so that the actual distribution of the compressed bytes over the rows is
// used (a sky at the top costs less Huffman decoding than detail at the bottom): the top part first takes output rows
// [0, first) with `first` below every possible balance point; the bottom part skips to there, reads how many compressed
// bytes remain, picks the split (>= first) and publishes it; the top part, once done with [0, first), takes [first,
// split) too, reading the few input rows the two resizes share from a copy (TapSource). Neither part ever waits for the
// other (a ParallelFor that runs the tasks one after the other is correct, only slower): when the top part finishes [0,
// first) before the bottom part has decided, it claims split = first itself, and the bottom part takes that.

// Costs on this project's reference machine (Debian 12 libjpeg-turbo 2.1.5, AVX2; thread CPU time of the 28 shared
// JPEGs and of gray and 4:4:4 re-encodings of two of them), in ns. Only their ratios matter. Huffman decoding
// (jpeg_skip_scanlines over all rows): about 6.7 per compressed byte plus 0.4 per pixel. The rest, per input pixel:
// the IDCT, 0.58 per block per 64 pixels (1.5 for 4:2:0, 3 for 4:4:4, 1 for gray), then per path the row work
// (raw: ycc_channel_row; RGB band: libjpeg's upsampling and colour conversion; gray band: none) and the resize,
// whose cost per input pixel grows with the output's share of the input pixels (a per-output-pixel term).
constexpr double kHuffmanNsPerByte = 6.7;
constexpr double kHuffmanNsPerPixel = 0.4;
constexpr double kIdctNsPerBlockPer64Pixels = 0.58;
// What the bottom part costs beyond the model (its second decompressor, the rows its two skips decode and drop):
// with the model alone it took a median 4% more thread CPU time than the top part over the shared JPEGs.
constexpr double kBottomOverhead = 1.04;
struct PathCost {
  double per_input_pixel, per_output_pixel;
};
constexpr PathCost kRawCost{0.58, 3.0};
constexpr PathCost kRgbBandCost{1.07, 2.7};
constexpr PathCost kGrayBandCost{0.62, 1.0};

// Ns per input pixel past the Huffman decoding for a path (the model above).
double pixel_ns(const jpeg_decompress_struct& c, const ResizePlan& plan, const PathCost& path) {
  double blocks = 0;  // blocks per 64 pixels
  for (int ci = 0; ci < c.num_components; ++ci)
    blocks += static_cast<double>(c.comp_info[ci].h_samp_factor) * c.comp_info[ci].v_samp_factor /
              (static_cast<double>(c.max_h_samp_factor) * c.max_v_samp_factor);
  const double out_share = static_cast<double>(plan.out_w) * plan.out_h / (static_cast<double>(plan.in_w) * plan.in_h);
  return kIdctNsPerBlockPer64Pixels * blocks + path.per_input_pixel + path.per_output_pixel * out_share;
}

// Files below this many pixels stay on one thread: the second decompressor's setup and the hand-over cost more than
// the ~25% the split saves on a small image.
constexpr std::int64_t kParallelMinPixels = 300000;

// Input rows of the top part's first resize that its second resize reads again: rows [first, first + count), one
// channel (step 1), copied as the first resize reads them. In the second resize (second = true) the kept rows are
// served from the copy and the live rows de-interleaved into `row`.
struct TapSource {
  ResizeRowFn fn;
  void* ctx;
  int step;  // pixel step of fn's rows
  int width;
  int keep_first, keep_count;
  std::uint8_t* keep;  // keep_count rows of width bytes
  std::uint8_t* row;   // width bytes
  bool second;
};

void copy_channel(const std::uint8_t* s, int step, int width, std::uint8_t* out) {
  if (step == 1) {
    std::memcpy(out, s, static_cast<std::size_t>(width));
    return;
  }
  for (int x = 0; x < width; ++x) out[x] = s[static_cast<std::ptrdiff_t>(x) * step];
}

const std::uint8_t* tap_row(void* ctx, int y) {
  auto* t = static_cast<TapSource*>(ctx);
  const int kept = y - t->keep_first;
  if (t->second && kept < t->keep_count) {
    return kept < 0 ? nullptr : t->keep + static_cast<std::size_t>(kept) * static_cast<std::size_t>(t->width);
  }
  const std::uint8_t* s = t->fn(t->ctx, y);
  if (!s) return nullptr;
  if (t->second) {
    copy_channel(s, t->step, t->width, t->row);
    return t->row;
  }
  if (kept >= 0 && kept < t->keep_count)
    copy_channel(s, t->step, t->width, t->keep + static_cast<std::size_t>(kept) * static_cast<std::size_t>(t->width));
  return s;
}

// The first output row whose input rows start at or below input row `row` (clamped to [lo, hi]).
int output_row_at(const ResizePlan& plan, double row, int lo, int hi) {
  int o = lo;
  while (o < hi && plan.vert.bounds[2 * o] < row) ++o;
  return o;
}

struct TwoParts {
  JpegGuard& top_guard;  // opened (header read), not started
  Bytes bytes;
  const std::string& name;
  int rgb_channel, ch;
  const ResizePlan& plan;
  std::uint8_t* dst;
  ResizeScratch& top_scratch;
  ResizeScratch& bottom_scratch;
  detail::JpegSplitHooks hooks;
  detail::JpegSplitInfo* info;

  JpegGuard bottom_guard;
  int first = 0;               // output rows the top part takes before the split is decided
  std::atomic<int> split{-1};  // the bottom part's first output row, -1 while undecided
  std::atomic<bool> top_raw{false};
  std::atomic<bool> bottom_decided{false};
  double top_ns = 0, bottom_ns = 0;  // per pixel past the Huffman decoding (the model above)

  TwoParts(JpegGuard& g, Bytes b, const std::string& n, int channel, int channels, const ResizePlan& p, std::uint8_t* d,
           ResizeScratch& s0, ResizeScratch& s1, const detail::JpegSplitHooks& h, detail::JpegSplitInfo* i)
      : top_guard(g),
        bytes(b),
        name(n),
        rgb_channel(channel),
        ch(channels),
        plan(p),
        dst(d),
        top_scratch(s0),
        bottom_scratch(s1),
        hooks(h),
        info(i) {
    const jpeg_decompress_struct& c = g.job.cinfo;
    const bool raw = raw_path_applies(c, rgb_channel);
    bottom_ns = pixel_ns(c, plan, ch == 1 ? kGrayBandCost : kRgbBandCost);
    top_ns = raw ? pixel_ns(c, plan, kRawCost) : bottom_ns;
    // With no compressed bytes below it (the model's extreme), the balance point is the input row where the top
    // part's work past Huffman decoding equals the bottom part's whole work; every real balance point is below it.
    const double lowest =
        0.9 * plan.in_h * (kHuffmanNsPerPixel + bottom_ns) / (top_ns + kHuffmanNsPerPixel + bottom_ns);
    first = hooks.first_rows > 0 ? std::min(hooks.first_rows, plan.out_h - 1)
                                 : output_row_at(plan, lowest, 1, plan.out_h - 1);
  }

  bool top() {
    PlaneFeed f;
    if (!start_feed(f, &top_guard.job, rgb_channel, ch, true)) return false;
    top_raw = f.raw;
    const ResizePlan head = slice_resize_plan(plan, 0, first);
    const int w = plan.in_w;
    TapSource t{f.fn(), f.ctx(), f.step, w, plan.vert.bounds[2 * first], 0, nullptr, nullptr, false};
    t.keep_count = std::max(0, head.ybox_last - t.keep_first);
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(t.keep_count + 1) * static_cast<std::size_t>(w));
    t.keep = keep.data();
    t.row = keep.data() + static_cast<std::size_t>(t.keep_count) * static_cast<std::size_t>(w);
    if (!resize_plane_rows(head, tap_row, &t, f.step, dst, top_scratch)) return false;
    int decided = -1;
    if (split.compare_exchange_strong(decided, first) || decided == first) return true;
    const ResizePlan rest = slice_resize_plan(plan, first, decided);
    t.second = true;
    return resize_plane_rows(rest, tap_row, &t, 1, dst + static_cast<std::ptrdiff_t>(first) * plan.out_w, top_scratch);
  }

  bool bottom() {
    (void)open_jpeg(bottom_guard, bytes, name);  // the same header as the top part's, so it cannot fail differently
    JpegJob* job = &bottom_guard.job;
    const jpeg_decompress_struct& c = job->cinfo;
    PlaneFeed f;
    if (!start_feed(f, job, rgb_channel, ch, false)) return false;
    // The first skip ends on an iMCU row boundary: libjpeg-turbo 2.1.5's jpeg_skip_scanlines, called again after a
    // skip that ended inside an iMCU row without reading a scanline in between, takes that iMCU row as decoded when
    // it was not (without context rows: increment_simple_rowgroup_ctr leaves buffer_full FALSE, and the next skip
    // then skips the rest of the row without its Huffman decoding), so the rows after it come from the wrong data.
    const int imcu_rows = c.max_v_samp_factor * c.min_DCT_scaled_size;  // jdapistd.c lines_per_iMCU_row
    const auto lowest = static_cast<JDIMENSION>(plan.vert.bounds[2 * first] / imcu_rows * imcu_rows);
    if (!skip_scanlines(job, lowest)) return false;
    int want = hooks.split_row;
    if (want < 0) {
      // Balance (the model above) with the compressed bytes still unread spread evenly over the rows left:
      // top part: rows [0, s) past Huffman; bottom part: rows [s, h) fully plus their bytes.
      const double h = plan.in_h, w = plan.in_w;
      const double per_row =
          kBottomOverhead * (w * (kHuffmanNsPerPixel + bottom_ns) +
                             kHuffmanNsPerByte * static_cast<double>(c.src->bytes_in_buffer) / (h - lowest));
      want = output_row_at(plan, h * per_row / (w * top_ns + per_row), first, plan.out_h - 1);
    }
    want = std::clamp(want, first, plan.out_h - 1);
    int decided = -1;
    const int at = split.compare_exchange_strong(decided, want) ? want : decided;
    bottom_decided = at == want && decided == -1;
    const auto start = static_cast<JDIMENSION>(plan.vert.bounds[2 * at]);
    if (!skip_scanlines(job, start - c.output_scanline)) return false;
    f.bs.band_first = c.output_scanline;
    f.bs.band_count = 0;
    const ResizePlan tail = slice_resize_plan(plan, at, plan.out_h);
    if (!resize_plane_rows(tail, band_row, &f.bs, f.step, dst + static_cast<std::ptrdiff_t>(at) * plan.out_w,
                           bottom_scratch))
      return false;
    return drain_feed(f);
  }

  void run(const ParallelFor& parallel) {
    bool ok[2] = {false, false};
    std::exception_ptr ex[2];
    parallel(2, [&](int i) {
      try {
        ok[i] = i == 0 ? top() : bottom();
      } catch (...) {
        ex[i] = std::current_exception();
      }
    });
    if (info) {
      info->parallel = true;
      info->first_rows = first;
      info->split_row = split.load();
      info->top_raw = top_raw;
      info->bottom_decided = bottom_decided;
    }
    // The top part's failure first: it is the one the serial path meets first (the same libjpeg error, as the
    // bottom part's skip meets the same bytes).
    if (ex[0]) std::rethrow_exception(ex[0]);
    if (!ok[0]) jpeg_fail(top_guard.job, name, "decoding stopped early");
    if (ex[1]) std::rethrow_exception(ex[1]);
    if (!ok[1]) jpeg_fail(bottom_guard.job, name, "decoding stopped early");
  }
};

// Whether the two-thread path may take this file: one interleaved baseline scan (a progressive or multi-scan file
// is entropy-decoded whole in jpeg_start_decompress, so a second decompressor would redo all of it), not CMYK, a
// vertical resize pass to split, and enough pixels to pay for the second decompressor.
bool parallel_applies(const jpeg_decompress_struct& c, const ResizePlan& plan, std::int64_t min_pixels) {
  if (c.progressive_mode || c.comps_in_scan != c.num_components || c.num_components == 4) return false;
  if (!plan.need_v || plan.out_h < 2) return false;
  return static_cast<std::int64_t>(c.image_width) * static_cast<std::int64_t>(c.image_height) >= min_pixels;
}

}  // namespace

namespace detail {

bool decode_jpeg_resized_plane_hooked(Bytes b, const std::string& name, std::int64_t max_pixels, int rgb_channel,
                                      const PlanFor& plan_for, std::vector<std::uint8_t>& dst, ResizeScratch& scratch,
                                      int* width, int* height, const ParallelFor& parallel, ResizeScratch* scratch2,
                                      const JpegSplitHooks& hooks, JpegSplitInfo* info) {
  if (info) *info = JpegSplitInfo{};
  if (!resize_rows_available()) return false;
  JpegGuard g;
  const int ch = open_jpeg(g, b, name);  // JCS_GRAYSCALE / JCS_RGB / JCS_CMYK, as decode_jpeg
  jpeg_decompress_struct& c = g.job.cinfo;
  if (c.num_components == 4 || (ch == 3 && (rgb_channel < 0 || rgb_channel > 2))) return false;
  check_dimensions(ImageFormat::JPEG, name, c.image_width, c.image_height, max_pixels);
  const int w = static_cast<int>(c.image_width), h = static_cast<int>(c.image_height);
  const std::shared_ptr<const ResizePlan> plan = plan_for(w, h);
  if (!plan || plan->in_w != w || plan->in_h != h)
    fail(ErrorKind::InvalidArgument, ImageFormat::JPEG, name, "the resize plan does not match the image size");
  dst.resize(static_cast<std::size_t>(plan->out_w) * static_cast<std::size_t>(plan->out_h));
  *width = w;
  *height = h;
  if (parallel && parallel_applies(c, *plan, hooks.min_pixels >= 0 ? hooks.min_pixels : kParallelMinPixels)) {
    ResizeScratch own;
    TwoParts parts(g, b, name, rgb_channel, ch, *plan, dst.data(), scratch, scratch2 ? *scratch2 : own, hooks, info);
    parts.run(parallel);
    return true;
  }
  // One thread: decode from the top, each row straight into the resize.
  PlaneFeed f;
  if (!start_feed(f, &g.job, rgb_channel, ch, true)) jpeg_fail(g.job, name, "decoding stopped early");
  if (!resize_plane_rows(*plan, f.fn(), f.ctx(), f.step, dst.data(), scratch))
    jpeg_fail(g.job, name, "decoding stopped early");
  if (!drain_feed(f)) jpeg_fail(g.job, name, "decoding stopped early");
  return true;
}

}  // namespace detail

bool decode_jpeg_resized_plane(Bytes b, const std::string& name, std::int64_t max_pixels, int rgb_channel,
                               const PlanFor& plan_for, std::vector<std::uint8_t>& dst, ResizeScratch& scratch,
                               int* width, int* height, const ParallelFor& parallel, ResizeScratch* scratch2) {
  return detail::decode_jpeg_resized_plane_hooked(b, name, max_pixels, rgb_channel, plan_for, dst, scratch, width,
                                                  height, parallel, scratch2, {}, nullptr);
}

}  // namespace superpoint_rt::image
