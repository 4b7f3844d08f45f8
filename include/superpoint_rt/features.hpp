// superpoint-rt: per-request parameters and the extracted features.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace superpoint_rt {

/// Per-request parameters (SPEC §2, §2b). The names, types, ranges and per-preset defaults live in one table
/// (superpoint_rt/params.hpp: param_specs(), preset_specs()); the CLI flags, the HTTP query fields, the Python keyword
/// arguments and docs/PARAMETERS.md are derived from it.
///
/// `preset` selects a whole request path: "hf" (default; Hugging Face's processor and model, SPEC §2),
/// "hloc:superpoint_aachen", "hloc:superpoint_max", "hloc:superpoint_inloc" (hloc's extract_features confs) and
/// "lightglue" (LightGlue's SuperPoint.extract). An unset (std::nullopt) field takes the preset's default; a set field
/// overrides it. resolve() gives the effective values.
struct Params {
  std::string preset = "hf";
  std::optional<int> max_keypoints;          // -1..kMaxKeypointsMax; -1 = every point above the threshold
  std::optional<float> keypoint_threshold;   // [0, 1]; keep score > threshold (strict)
  std::optional<int> nms_radius;             // 0..32 network-frame pixels; 0 = no suppression
  bool return_descriptors = true;            // false: the descriptor head does not run at all
  bool bgr = false;                          // 3/4-channel views are in OpenCV (B, G, R) order
  std::optional<bool> grayscale;             // hf: HF luma 0.2989 R + 0.5870 G + 0.1140 B instead of the R channel
  std::optional<std::string> resize;         // network frame: "WxH" (fixed, e.g. "640x480") or "none" (native size)
  std::optional<int> resize_max;             // >0: the long side becomes this (aspect kept); 0 = off
  std::optional<bool> resize_force;          // resize_max also when the image is smaller (enlarge)
  std::optional<std::string> interpolation;  // "pil_bilinear", "cv2_area", "antialias_bilinear"
  std::optional<bool> exif_orientation;      // cv2 presets: rotate/flip files by their EXIF orientation tag

  static constexpr int kMaxKeypointsMin = -1;
  static constexpr int kMaxKeypointsMax = 307200;
  static constexpr int kNmsRadiusMax = 32;
  /// The network frame: each side in [kMinNetworkSide, kMaxNetworkSide] and at most kMaxNetworkPixels pixels
  /// (a 4096x4096 frame needs about 8.6 GB of activations at fp32). kMinNetworkSide is one cell of the network's
  /// 8 x 8 grid (its three 2 x 2 poolings): the smallest frame PyTorch's SuperPoint (hloc, LightGlue) runs on; a frame
  /// under 16 on a side has no pixel inside the 4-pixel border, so it gives no keypoint. Options::max_frame_pixels
  /// lowers the pixel limit for a model (the server's --max-frame-pixels).
  static constexpr int kMinNetworkSide = 8;
  static constexpr int kMaxNetworkSide = 8192;
  static constexpr std::int64_t kMaxNetworkPixels = std::int64_t{4096} * 4096;
  /// The smallest frame, kMinNetworkSide squared: the lowest Options::max_frame_pixels.
  static constexpr std::int64_t kMinNetworkPixels = std::int64_t{kMinNetworkSide} * kMinNetworkSide;

  /// Throws Error(InvalidArgument) naming the parameter, its value and the allowed range (NaN included), an unknown
  /// preset or interpolation, or a contradiction (an explicit fixed `resize` together with `resize_max`), and
  /// Error(TooLarge) for an explicit `resize` frame of more than kMaxNetworkPixels pixels.
  void validate() const;
};

/// How the network frame is chosen from the image size.
enum class ResizeMode {
  Fixed,  // resize to fixed_width x fixed_height (hf: 640x480, aspect not kept)
  Max,    // long side to resize_max when larger (or always with force), aspect kept
  None,   // the image's own size
};
enum class Interpolation {
  PilBilinear,        // Pillow Image.resize(BILINEAR) on the 8-bit plane (hf)
  Cv2Area,            // cv2.resize INTER_AREA on float32 (INTER_LINEAR when enlarging), as hloc's resize_image
  AntialiasBilinear,  // kornia resize(antialias=True): Gaussian pre-filter + bilinear, align_corners=False (LightGlue)
};
/// How the pixels are read (the decode and channel rule of each preset).
enum class PixelPath {
  Hf,           // Pillow decode, R channel (or HF luma with grayscale) of the 8-bit image, resized in 8 bits
  CvGray,       // cv2.imread(IMREAD_GRAYSCALE [+ IMREAD_IGNORE_ORIENTATION]), float32 resize, / 255
  CvColorLuma,  // cv2.imread(IMREAD_COLOR) / 255, float resize per channel, 0.299 R + 0.587 G + 0.114 B
};
/// Keypoint order and coordinates.
enum class OutputConvention {
  Hf,    // sorted by score (ties in raster order); (p / frame) * size in float32 (HF post_process_keypoint_detection)
  Hloc,  // raster order unless max_keypoints cut (then by score); (p + 0.5) * (size / frame) - 0.5 (hloc)
  LightGlue,  // as Hloc for the order; (p + 0.5) / (frame / size) - 0.5 (LightGlue Extractor.extract)
};

/// The effective values of a Params (preset defaults + overrides), as the engine runs them.
struct ResolvedParams {
  std::string preset;
  int max_keypoints = 1024;
  float keypoint_threshold = 0.005f;
  int nms_radius = 4;
  bool return_descriptors = true;
  bool bgr = false;
  bool grayscale = false;
  ResizeMode resize_mode = ResizeMode::Fixed;
  int fixed_width = 640, fixed_height = 480;
  int resize_max = 0;
  bool resize_force = false;
  Interpolation interpolation = Interpolation::PilBilinear;
  PixelPath pixels = PixelPath::Hf;
  /// Files and encoded bytes on the cv2 paths: apply the EXIF orientation (cv2.imread without
  /// IMREAD_IGNORE_ORIENTATION: LightGlue's load_image, hloc before #373) or not (hloc's read_image since 2024-11).
  /// Always false on the hf path (Pillow's decode never applies it). Pixel arrays carry no EXIF: no effect.
  bool exif_orientation = false;
  OutputConvention output = OutputConvention::Hf;

  /// The network frame (width, height) for an image of w x h pixels (`what` names the image in messages). Throws
  /// Error(TooLarge) when a side is over kMaxNetworkSide or the frame has more than `max_frame_pixels` pixels
  /// (Options::max_frame_pixels; at most kMaxNetworkPixels), Error(InvalidArgument) when a side is under
  /// kMinNetworkSide; the message names the image, its size, the parameter that chose the frame (resize,
  /// resize_max) and the limit.
  std::pair<int, int> network_frame(int w, int h, const std::string& what,
                                    std::int64_t max_frame_pixels = Params::kMaxNetworkPixels) const;
};

/// preset defaults + explicit fields, validated (throws as Params::validate).
ResolvedParams resolve(const Params& params);

/// Wall-clock milliseconds of each stage of one request.
struct Timing {
  double decode = 0;       // file / bytes -> pixels (0 for pixel views)
  double preprocess = 0;   // channel pick, resize, normalise
  double forward = 0;      // the network
  double postprocess = 0;  // scores, NMS, top-k, descriptor sampling
};

/// The output of one request. Keypoints, scores and descriptors are in the same order: hf: descending score, ties in
/// raster order (y, then x) of the network frame; hloc / lightglue presets: raster order, or descending score when
/// max_keypoints cut the list (their torch.topk).
struct Features {
  /// N x 2 floats, row-major [x, y], in pixels of the ORIGINAL image (after the EXIF rotation when the request's
  /// exif_orientation applies it). hf: the integer network-frame position p mapped as (p / frame_w) * W (float32, as
  /// the HF post-processing computes it before truncation); hloc: (p + 0.5) * (W / frame_w) - 0.5; lightglue: (p + 0.5)
  /// / (frame_w / W) - 0.5; likewise y.
  std::vector<float> keypoints;
  /// N scores in (0, 1].
  std::vector<float> scores;
  /// N x 256 floats, row-major, unit L2 rows; empty when descriptors were not requested.
  std::vector<float> descriptors;
  int descriptor_dim = 256;
  bool has_descriptors = false;
  /// (height, width) of the original image (after the EXIF rotation when the request's exif_orientation applies it).
  std::array<int, 2> image_size{0, 0};
  /// (height, width) of the network frame the image was resized to.
  std::array<int, 2> network_size{0, 0};
  /// (sx, sy) = (W / frame_w, H / frame_h) as float32.
  std::array<float, 2> scale{1.f, 1.f};
  Timing timing_ms;

  std::size_t size() const noexcept { return scores.size(); }
};

}  // namespace superpoint_rt
