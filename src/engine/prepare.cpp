// The prepare stage of a request (engine.hpp): steps 1-4 of SPEC §2 (and §2b's presets) into a pooled Context, one
// function per kind of request:
//   prepare_fused_jpeg  hf JPEG bytes needing one plane: decode and Pillow resize in one pass
//   prepare_decoded     everything else: decode (Pillow's or cv2's reading) or the caller's pixels, the source planes
//   resize_pillow       hf: Pillow's 8-bit BILINEAR per plane, then v / 255 through the exact table
//   resize_float        hloc (cv2 INTER_AREA / INTER_LINEAR on 0..255 floats) and LightGlue (kornia antialias on v/255)
//   luma_input          three planes: HF's luma (grayscale=True) or kornia's rgb_to_grayscale (LightGlue)
// Each request is admitted under the memory budget once its header is known, before its pixels are decoded.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>

#include "engine/request.hpp"
#include "image/decode_cv2.hpp"
#include "image/decode_internal.hpp"
#include "image/resize_float.hpp"
#include "util/file.hpp"

namespace superpoint_rt {

namespace {

// HF image_transforms.rescale: float32(v * float64(1/255)) == v / 255.0f for every u8 (docs/ALGORITHM.md §2.1);
// v * (1/255.f) is NOT the same for 126 values, so the table is built with a division.
const std::array<float, 256>& rescale_lut() {
  static const std::array<float, 256> lut = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return lut;
}

// Channel offsets within one pixel of each layout: which interleaved sample is R, G, B.
std::array<int, 3> rgb_offsets(PixelFormat f, bool bgr) {
  bool swapped = f == PixelFormat::BGR || f == PixelFormat::BGRA;
  // Params::bgr: 3/4-channel views in OpenCV order. An explicit BGR/BGRA format already says so.
  if (bgr && (f == PixelFormat::RGB || f == PixelFormat::RGBA)) swapped = true;
  if (swapped) return {2, 1, 0};
  return {0, 1, 2};
}

void validate_view(const ImageView& v, const std::string& what) {
  if (!v.data) throw Error(ErrorKind::InvalidArgument, what + ": pixel pointer is null");
  if (v.width < 1 || v.height < 1)
    throw Error(ErrorKind::InvalidArgument, what + ": image size " + std::to_string(v.width) + "x" +
                                                std::to_string(v.height) + " is empty (must be at least 1x1)");
  const int ch = channels_of(v.format);
  if (ch == 0) throw Error(ErrorKind::InvalidArgument, what + ": unknown pixel format");
  if (v.row_stride != 0 && v.row_stride < v.packed_stride())
    throw Error(ErrorKind::InvalidArgument, what + ": row stride " + std::to_string(v.row_stride) +
                                                " bytes is smaller than a row (" + std::to_string(v.packed_stride()) +
                                                " bytes)");
}

// Float views must hold [0, 1] in EVERY channel (also the ones the network does not read): a value outside says
// the caller passed 0..255 floats or garbage, which is an error, not something to clamp.
void check_float_view(const ImageView& v, const std::string& what) {
  const std::size_t row_len = static_cast<std::size_t>(v.width) * channels_of(v.format);
  const auto* base = static_cast<const std::uint8_t*>(v.data);
  for (int y = 0; y < v.height; ++y) {
    const auto* row = reinterpret_cast<const float*>(base + static_cast<std::ptrdiff_t>(y) * v.stride());
    for (std::size_t i = 0; i < row_len; ++i)
      if (!(row[i] >= 0.0f && row[i] <= 1.0f))  // also catches NaN
        throw Error(ErrorKind::InvalidArgument,
                    what + ": float pixel value " + std::to_string(row[i]) +
                        " at (x=" + std::to_string(i / static_cast<std::size_t>(channels_of(v.format))) +
                        ", y=" + std::to_string(y) + ") is outside [0, 1]");
  }
}

// Rounds one channel of a (checked) float view to 8 bits: nearbyint(v * 255), half to even, at source resolution.
void quantise_float_channel(const ImageView& v, int offset, std::vector<std::uint8_t>& out) {
  const int ch = channels_of(v.format);
  out.resize(static_cast<std::size_t>(v.width) * v.height);
  const auto* base = static_cast<const std::uint8_t*>(v.data);
  for (int y = 0; y < v.height; ++y) {
    const auto* row = reinterpret_cast<const float*>(base + static_cast<std::ptrdiff_t>(y) * v.stride());
    std::uint8_t* o = out.data() + static_cast<std::size_t>(y) * v.width;
    for (int x = 0; x < v.width; ++x) o[x] = static_cast<std::uint8_t>(std::nearbyint(row[x * ch + offset] * 255.0f));
  }
}

// Step 4 for one plane: input[i] = plane[i] / 255.0f (through the exact table), n values.
void normalise_plane(const std::uint8_t* plane, std::size_t n, std::vector<float>& input) {
  const auto& lut = rescale_lut();
  input.resize(n);
  for (std::size_t i = 0; i < n; ++i) input[i] = lut[plane[i]];
}

// OpenCV's 14-bit fixed-point BGR->gray (image::cv2_gray) over a view: the hloc presets' gray for colour pixel arrays
// (what cv2.cvtColor(img, COLOR_RGB2GRAY) gives).
void cv_gray_of(const std::uint8_t* base, std::ptrdiff_t stride, int ch, const std::array<int, 3>& off, int w, int h,
                std::vector<std::uint8_t>& out) {
  out.resize(static_cast<std::size_t>(w) * h);
  for (int y = 0; y < h; ++y) {
    const std::uint8_t* row = base + static_cast<std::ptrdiff_t>(y) * stride;
    std::uint8_t* o = out.data() + static_cast<std::size_t>(y) * w;
    for (int x = 0; x < w; ++x) {
      const std::uint8_t* px = row + static_cast<std::ptrdiff_t>(x) * ch;
      o[x] = image::cv2_gray(px[off[0]], px[off[1]], px[off[2]]);
    }
  }
}

// The bytes a request holds besides the network, for its memory claim: its encoded bytes, its decoded image
// (`channels` bytes per source pixel; 0 on the fused JPEG path, which never stores it), the 8-bit and float source
// planes of the float views and of the cv2 / kornia resizes (the float plane is 4 bytes per source pixel), and per
// frame pixel: up to three resized 8-bit and float planes, the network input, the score map and the copy of the
// descriptor map (D floats per 8 x 8 cell), the keypoint selection's candidates (kCandidateBytes), plus 1 MiB of
// smaller scratch; and the Features it returns for `keypoints` keypoints (issue 32: a dense request's results are
// its largest part).
std::size_t host_claim(const ResolvedParams& rp, std::int64_t w, std::int64_t h, int channels, std::int64_t fw,
                       std::int64_t fh, int descriptor_dim, std::int64_t keypoints, std::size_t encoded) {
  const std::int64_t src = w * h, frame = fw * fh;
  std::int64_t bytes = src * channels;
  if (rp.interpolation != Interpolation::PilBilinear) bytes += src * (4 + 1);
  bytes += frame * (3 + 3 * 4 + 4 + 4 + kCandidateBytes) + frame / 64 * descriptor_dim * 4;
  bytes += keypoints * features_bytes_per_keypoint(rp.return_descriptors ? descriptor_dim : 0);
  return static_cast<std::size_t>(bytes) + encoded + (std::size_t{1} << 20);
}

// hf JPEG bytes needing one plane: the fused decode + resize (it may still decline: CMYK, see prepare_fused_jpeg).
bool fused_jpeg_applies(bool encoded, std::span<const std::uint8_t> bytes, const ResolvedParams& rp,
                        std::int64_t max_pixels) {
  return encoded && rp.pixels == PixelPath::Hf && rp.interpolation == Interpolation::PilBilinear && max_pixels >= 1 &&
         sniff_format(bytes) == ImageFormat::JPEG;
}

}  // namespace

Engine::Source Engine::source_of(const ImageInput& input) const {
  Source s;
  s.what = input.describe();
  if (const auto* path = std::get_if<ImageInput::Path>(&input.source)) {
    s.file_bytes = read_file(path->path);
    s.encoded = s.file_bytes;
    s.name = &path->path;
  } else if (const auto* bytes = std::get_if<ImageInput::Bytes>(&input.source)) {
    s.encoded = bytes->data;
    s.name = &bytes->name;
  } else if (const auto* v = std::get_if<ImageView>(&input.source)) {
    s.view = *v;
  } else {
    const Image* im = std::get<const Image*>(input.source);
    if (!im) throw Error(ErrorKind::InvalidArgument, "image pointer is null");
    s.view = im->view();
  }
  return s;
}

engine::MemoryBudget::Claim Engine::claim_of(const Source& src, const ResolvedParams& rp) const {
  int w = src.view.width, h = src.view.height, channels = 0;  // the caller's pixels: nothing decoded
  if (src.name) {
    const ImageInfo info = probe_image(src.encoded, *src.name);
    // The input limits first (max_pixels: TooLarge, ValueError / 413), with the decoder's own check and message: an
    // image over a documented limit is refused as such, never as "over the memory budget" (Overloaded, which is for
    // valid work that does not fit now).
    image::check_dimensions(info.format, *src.name, info.width, info.height, options_.max_pixels);
    w = info.width;
    h = info.height;
    // The decoded image: none on the fused JPEG path; when cv2's reading applies the EXIF orientation
    // (exif_orientation), a transposed result needs a second buffer of the result's size while it rotates
    // (docs/LIMITS.md).
    channels = fused_jpeg_applies(src.name != nullptr, src.encoded, rp, options_.max_pixels) ? 0
               : rp.pixels == PixelPath::Hf                                                  ? info.channels
               : rp.pixels == PixelPath::CvGray                                              ? 2
                                                                                             : 6;
  }
  // A transposed (EXIF-rotated) result has the same frame area.
  const auto [fw, fh] = rp.network_frame(w, h, src.what, options_.max_frame_pixels);
  const int dim = weights_config_.descriptor_decoder_dim;
  const std::int64_t keypoints = max_keypoints_of(rp, fw, fh, weights_config_.border_removal_distance);
  return {host_claim(rp, w, h, channels, fw, fh, dim, keypoints, src.file_bytes.size()),
          networks_ ? networks_->workspace_claim(fw, fh) : 0};
}

Engine::Prepared Engine::prepare(Source src, const ResolvedParams& rp, engine::MemoryBudget::Ticket ticket,
                                 bool may_split) {
  Prepared p;
  const auto t0 = Clock::now();
  // Admission first: nothing but the header has been read.
  p.ticket = ticket.held() ? std::move(ticket) : budget_->admit(claim_of(src, rp), src.what);
  if (prepare_fused_jpeg(src, rp, may_split, p)) {
    p.ctx->input_ready();
    return p;
  }
  Decoded d;
  prepare_decoded(src, rp, p, d);
  p.timing.decode = ms_since(t0);
  const auto t1 = Clock::now();
  if (rp.interpolation == Interpolation::PilBilinear)
    resize_pillow(d, p);
  else
    resize_float(rp, d, p);
  if (d.nplanes == 3) luma_input(rp, p);
  p.ctx->input_ready();
  p.timing.preprocess = ms_since(t1);
  return p;
}

bool Engine::prepare_fused_jpeg(const Source& src, const ResolvedParams& rp, bool may_split, Prepared& p) {
  // hf JPEG paths and bytes of a request that needs one plane (not the HF luma of a colour image): decode and resize
  // in one pass (image::decode_jpeg_resized_plane), so the full-size RGB image is never written and re-read. Same
  // bits and errors as decode + steps 2-3 below; the decode time then includes the resize.
  if (!fused_jpeg_applies(src.name != nullptr, src.encoded, rp, options_.max_pixels)) return false;
  const auto t0 = Clock::now();
  if (!p.ctx) p.ctx = contexts_.acquire();
  engine::Context& ctx = *p.ctx;
  const int rgb_channel = rp.grayscale ? -1 : rgb_offsets(PixelFormat::RGB, rp.bgr)[0];
  // Called once the header is read, before any pixel is decoded: the frame (the decode's output) and its plan.
  const auto plan_for = [&](int w, int h) {
    const auto [fw, fh] = rp.network_frame(w, h, src.what, options_.max_frame_pixels);
    p.frame_w = fw;
    p.frame_h = fh;
    return resize_plans_.get(w, h, fw, fh);
  };
  bool taken = false;
  const image::ParallelFor parallel = may_split ? host_parallel(taken) : image::ParallelFor{};
  struct Release {
    std::atomic<bool>& busy;
    bool taken;
    ~Release() {
      if (taken) busy.store(false);
    }
  } release{host_split_busy_, taken};
  if (!image::decode_jpeg_resized_plane(src.encoded, *src.name, options_.max_pixels, rgb_channel, plan_for,
                                        ctx.planes[0], ctx.resize, &p.width, &p.height, parallel, &ctx.resize2))
    return false;
  p.timing.decode = ms_since(t0);
  const auto t1 = Clock::now();
  normalise_plane(ctx.planes[0].data(), static_cast<std::size_t>(p.frame_w) * p.frame_h, ctx.input);
  p.timing.preprocess = ms_since(t1);
  return true;
}

void Engine::prepare_decoded(const Source& src, const ResolvedParams& rp, Prepared& p, Decoded& d) {
  // Step 1: decode (paths and bytes) or take the caller's pixels.
  if (src.name) {
    if (rp.pixels == PixelPath::Hf)
      d.image = decode_image(src.encoded, *src.name, options_.max_pixels);
    else  // hloc / LightGlue: what cv2.imread returns (with IMREAD_IGNORE_ORIENTATION unless exif_orientation)
      d.image =
          image::decode_image_cv2(src.encoded, *src.name, options_.max_pixels,
                                  rp.pixels == PixelPath::CvGray ? image::Cv2Read::Grayscale : image::Cv2Read::Color,
                                  rp.exif_orientation ? image::Cv2Orientation::Apply : image::Cv2Orientation::Ignore);
    d.view = d.image.view();
  } else {
    d.view = src.view;
  }
  const ImageView& view = d.view;
  validate_view(view, src.what);
  if (view.type == SampleType::F32) check_float_view(view, src.what);
  p.width = view.width;
  p.height = view.height;
  const auto [fw, fh] = rp.network_frame(view.width, view.height, src.what, options_.max_frame_pixels);
  p.frame_w = fw;
  p.frame_h = fh;
  if (!p.ctx) p.ctx = contexts_.acquire();
  engine::Context& ctx = *p.ctx;

  // Step 2: the source planes, as 8-bit samples read from the view (pointer, row stride, pixel step).
  // hf: gray images their plane; colour images channel 0 (R), or channel 2 with bgr, or all three for the HF luma.
  // hloc (cv2 gray): the gray plane; a colour pixel array through OpenCV's fixed-point gray. LightGlue (cv2 colour,
  // then luma after the resize): R, G, B; a gray image's plane three times (IMREAD_COLOR replicates it).
  const bool is_gray = view.format == PixelFormat::Gray;
  const int ch = channels_of(view.format);
  const std::array<int, 3> off = rgb_offsets(view.format, rp.bgr);
  const auto* base = static_cast<const std::uint8_t*>(view.data);
  // Float views are rounded to 8 bits per channel first (SampleType::F32), at source resolution.
  auto channel = [&](int offset, std::size_t slot) -> Decoded::Plane {
    if (view.type == SampleType::U8) return {base + offset, view.stride(), ch};
    quantise_float_channel(view, offset, ctx.source[slot]);
    return {ctx.source[slot].data(), view.width, 1};
  };
  auto& src_planes = d.planes;
  if (is_gray) {
    src_planes[0] = channel(0, 0);
    d.nplanes = rp.pixels == PixelPath::CvColorLuma ? 3 : 1;
    src_planes[1] = src_planes[2] = src_planes[0];
  } else if (rp.pixels == PixelPath::CvGray) {
    if (view.type == SampleType::U8) {
      cv_gray_of(base, view.stride(), ch, off, view.width, view.height, ctx.source[0]);
    } else {
      for (std::size_t i = 0; i < 3; ++i) quantise_float_channel(view, off[i], ctx.source[i]);
      std::vector<std::uint8_t> rgb(static_cast<std::size_t>(view.width) * view.height * 3);
      for (std::size_t i = 0; i < rgb.size() / 3; ++i)
        for (std::size_t c = 0; c < 3; ++c) rgb[3 * i + c] = ctx.source[c][i];
      cv_gray_of(rgb.data(), std::ptrdiff_t{view.width} * 3, 3, {0, 1, 2}, view.width, view.height, ctx.source[0]);
    }
    src_planes[0] = {ctx.source[0].data(), view.width, 1};
  } else if (rp.pixels == PixelPath::CvColorLuma || rp.grayscale) {
    d.nplanes = 3;
    for (std::size_t i = 0; i < 3; ++i) src_planes[i] = channel(off[i], i);
  } else {
    src_planes[0] = channel(off[0], 0);
  }
}

void Engine::resize_pillow(const Decoded& d, Prepared& p) {
  // Step 3 (hf): Pillow's 8-bit BILINEAR per plane, then the exact v / 255 table. One plane is the network input
  // itself (no copy); three are combined by luma_input.
  engine::Context& ctx = *p.ctx;
  const std::size_t n = static_cast<std::size_t>(p.frame_w) * p.frame_h;
  const auto& lut = rescale_lut();
  for (int i = 0; i < d.nplanes; ++i) {
    const auto si = static_cast<std::size_t>(i);
    if (i > 0 && d.planes[si].data == d.planes[0].data) {  // a gray image read three times: same plane
      ctx.fplanes[si] = ctx.fplanes[0];
      continue;
    }
    auto& out = d.nplanes == 1 ? ctx.input : ctx.fplanes[si];
    out.resize(n);
    auto& dst = ctx.planes[si];
    dst.resize(n);
    const auto plan = resize_plans_.get(d.view.width, d.view.height, p.frame_w, p.frame_h);
    image::resize_plane(*plan, d.planes[si].data, d.planes[si].stride, d.planes[si].step, dst.data(), ctx.resize);
    for (std::size_t k = 0; k < n; ++k) out[k] = lut[dst[k]];
  }
}

void Engine::resize_float(const ResolvedParams& rp, const Decoded& d, Prepared& p) {
  // Step 3 (hloc, LightGlue): cv2 / kornia work on a float32 plane: hloc resizes the 0..255 values and divides after
  // (ImageDataset), LightGlue divides first (numpy_image_to_torch: float32(image / 255.0), which equals v / 255.0f
  // for every u8).
  engine::Context& ctx = *p.ctx;
  const ImageView& view = d.view;
  const int fw = p.frame_w, fh = p.frame_h;
  const std::size_t n = static_cast<std::size_t>(fw) * fh;
  const bool same_size = fw == view.width && fh == view.height;
  const bool divide_first = rp.interpolation == Interpolation::AntialiasBilinear;
  const auto& lut = rescale_lut();
  for (int i = 0; i < d.nplanes; ++i) {
    const auto si = static_cast<std::size_t>(i);
    if (i > 0 && d.planes[si].data == d.planes[0].data) {  // a gray image read three times: same plane
      ctx.fplanes[si] = ctx.fplanes[0];
      continue;
    }
    auto& out = d.nplanes == 1 ? ctx.input : ctx.fplanes[si];
    out.resize(n);
    auto& fs = ctx.fsource;
    fs.resize(static_cast<std::size_t>(view.width) * view.height);
    for (int y = 0; y < view.height; ++y) {
      const std::uint8_t* row = d.planes[si].data + static_cast<std::ptrdiff_t>(y) * d.planes[si].stride;
      float* o = fs.data() + static_cast<std::size_t>(y) * view.width;
      for (int x = 0; x < view.width; ++x) {
        const std::uint8_t v = row[static_cast<std::ptrdiff_t>(x) * d.planes[si].step];
        o[x] = divide_first ? lut[v] : static_cast<float>(v);
      }
    }
    if (same_size) {
      // Neither tool resizes then (hloc calls cv2.resize only when the size changes or resize_force asks for the
      // same size, which cv2.resize copies; kornia returns its input for an unchanged size).
      out.assign(fs.begin(), fs.end());
    } else if (rp.interpolation == Interpolation::Cv2Area) {
      // hloc resize_image: INTER_AREA, or INTER_LINEAR when either side grows.
      if (fw > view.width || fh > view.height)
        image::cv2_resize_linear(fs.data(), view.width, view.height, view.width, out.data(), fw, fh, fw, ctx.fresize);
      else
        image::cv2_resize_area(fs.data(), view.width, view.height, view.width, out.data(), fw, fh, fw, ctx.fresize);
    } else {
      image::kornia_resize_antialias(fs.data(), view.width, view.height, view.width, out.data(), fw, fh, fw,
                                     ctx.fresize);
    }
    if (!divide_first)
      for (auto& v : out) v = v / 255.0f;  // hloc: image / 255.0 on float32
  }
}

void Engine::luma_input(const ResolvedParams& rp, Prepared& p) {
  // Step 4: the network input from three resized planes.
  engine::Context& ctx = *p.ctx;
  const std::size_t n = static_cast<std::size_t>(p.frame_w) * p.frame_h;
  ctx.input.resize(n);
  const float* r = ctx.fplanes[0].data();
  const float* g = ctx.fplanes[1].data();
  const float* b = ctx.fplanes[2].data();
  if (rp.pixels == PixelPath::CvColorLuma) {
    // kornia rgb_to_grayscale: w_r * r + w_g * g + w_b * b with float32 weights (0.299, 0.587, 0.114), evaluated
    // left to right in float32 (-ffp-contract=off: no FMA).
    for (std::size_t i = 0; i < n; ++i) ctx.input[i] = (0.299f * r[i] + 0.587f * g[i]) + 0.114f * b[i];
    return;
  }
  // HF's original processor skips the conversion when the three channels are equal everywhere.
  const std::size_t bytes = n * sizeof(float);
  if (std::memcmp(r, g, bytes) != 0 || std::memcmp(r, b, bytes) != 0) {
    // ((r*0.2989f) + (g*0.5870f)) + (b*0.1140f): float32, each product and sum rounded (no FMA; the library is
    // compiled with -ffp-contract=off), exactly numpy's float32 arithmetic in the HF processor.
    for (std::size_t i = 0; i < n; ++i) ctx.input[i] = (r[i] * 0.2989f + g[i] * 0.5870f) + b[i] * 0.1140f;
  } else {
    std::memcpy(ctx.input.data(), r, bytes);
  }
}

image::ParallelFor Engine::host_parallel(bool& taken) {
  // A second core for one request's decode: only when the request is alone (the network is idle: its lock is free)
  // and no other request is splitting its decode. image::decode_jpeg_resized_plane's two tasks do about 45% more work
  // together than one thread, for about 25% less wall time: a win on an idle core, a loss on a busy one.
  taken = false;
  if (info_.threads < 2 || host_split_busy_.exchange(true)) return {};
  for (std::mutex& m : network_mu_) {
    if (!m.try_lock()) {
      host_split_busy_.store(false);
      return {};
    }
    m.unlock();
  }
  taken = true;
  // The tasks run on the compute thread's OpenMP team (util/compute_thread.hpp), the threads oneDNN's forward runs on:
  // right after a forward they are still spinning (libgomp's spin-wait) and take the task at once, where a thread of
  // our own would compete with them for the core (measured: 10-12 ms against 7 ms on one thread, instead of about 5
  // ms). The tasks never wait for each other, so a smaller team (nested calls) runs them one after the other,
  // correctly.
  return [this](int n, const std::function<void(int)>& task) {
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
    on_compute([&] {
#pragma omp parallel for num_threads(n) schedule(static, 1)
      for (int i = 0; i < n; ++i) {
        try {
          task(i);
        } catch (...) {  // an exception must not leave an OpenMP region
          errors[static_cast<std::size_t>(i)] = std::current_exception();
        }
      }
    });
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  };
}

}  // namespace superpoint_rt
