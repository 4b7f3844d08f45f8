// superpoint-rt: per-request parameters and the extracted features.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace superpoint_rt {

/// Per-request parameters (SPEC §2). Same names, defaults and ranges in every interface.
struct Params {
  int max_keypoints = 1024;           // -1..307200; -1 = every point above the threshold
  float keypoint_threshold = 0.005f;  // [0, 1]; keep score > threshold (strict)
  int nms_radius = 4;                 // 0..32 network-frame pixels; 0 = no suppression
  bool return_descriptors = true;     // false: the descriptor head does not run at all
  bool bgr = false;                   // 3/4-channel views are in OpenCV (B, G, R) order: the network reads channel 2
  bool grayscale = false;             // HF luma 0.2989 R + 0.5870 G + 0.1140 B instead of the R channel

  static constexpr int kMaxKeypointsMin = -1;
  static constexpr int kMaxKeypointsMax = 307200;
  static constexpr int kNmsRadiusMax = 32;

  /// Throws Error(InvalidArgument) naming the parameter, its value and the allowed range (NaN included).
  void validate() const;
};

/// Wall-clock milliseconds of each stage of one request.
struct Timing {
  double decode = 0;       // file / bytes -> pixels (0 for pixel views)
  double preprocess = 0;   // channel pick, resize, normalise
  double forward = 0;      // the network
  double postprocess = 0;  // scores, NMS, top-k, descriptor sampling
};

/// The output of one request. Keypoints, scores and descriptors are in the same order: descending score, ties in
/// raster order (y, then x) of the network frame.
struct Features {
  /// N x 2 floats, row-major [x, y], in pixels of the ORIGINAL image: the integer network-frame position p mapped as
  /// (p / 640) * W (float32, as the HF post-processing computes it before truncation), likewise y with 480 and H.
  std::vector<float> keypoints;
  /// N scores in (0, 1], descending.
  std::vector<float> scores;
  /// N x 256 floats, row-major, unit L2 rows; empty when descriptors were not requested.
  std::vector<float> descriptors;
  int descriptor_dim = 256;
  bool has_descriptors = false;
  /// (height, width) of the original image.
  std::array<int, 2> image_size{0, 0};
  /// (sx, sy) = (W / 640, H / 480) as float32.
  std::array<float, 2> scale{1.f, 1.f};
  Timing timing_ms;

  std::size_t size() const noexcept { return scores.size(); }
};

}  // namespace superpoint_rt
