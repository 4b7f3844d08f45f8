// The state of one request between its stages (engine.hpp), shared by engine.cpp and prepare.cpp. Internal.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/context.hpp"
#include "engine/engine.hpp"
#include "engine/memory_budget.hpp"
#include "superpoint_rt/features.hpp"
#include "superpoint_rt/image.hpp"
#include "superpoint_rt/params.hpp"

namespace superpoint_rt {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Bytes per pixel of the score map that keypoint selection may hold (post::nms_select_keypoints): every pixel a
/// candidate (keypoint_threshold 0) of 12 bytes in a vector grown by doubling, the selection's sort buffer of as
/// many, and nms_radius 0's copy of the map (4 bytes).
inline constexpr std::int64_t kCandidateBytes = 2 * 12 + 12 + 4;

/// The most keypoints a request returns for a `fw` x `fh` frame: every pixel of the score map (8 x floor(side / 8))
/// inside the border (keypoint_threshold 0, nms_radius 0 and a flat score map keep them all), or max_keypoints when
/// that is fewer.
inline std::int64_t max_keypoints_of(const ResolvedParams& rp, std::int64_t fw, std::int64_t fh, int border) {
  const std::int64_t w = std::max<std::int64_t>(0, fw / 8 * 8 - 2 * border);
  const std::int64_t h = std::max<std::int64_t>(0, fh / 8 * 8 - 2 * border);
  const std::int64_t all = w * h;
  return rp.max_keypoints >= 0 ? std::min<std::int64_t>(rp.max_keypoints, all) : all;
}

/// Prepared by prepare(), consumed by network() and postprocess().
struct Engine::Prepared {
  std::unique_ptr<engine::Context> ctx;
  engine::MemoryBudget::Ticket ticket;  // the request's claim on the memory budget
  int width = 0, height = 0;            // original image size (after the EXIF rotation when exif_orientation)
  int frame_w = 0, frame_h = 0;         // the network frame ctx->input holds
  Timing timing;
};

/// Step 0: what the request gives.
struct Engine::Source {
  std::string what;                      // ImageInput::describe()
  std::vector<std::uint8_t> file_bytes;  // a path's contents
  std::span<const std::uint8_t> encoded;
  const std::string* name = nullptr;  // the encoded image's name (error messages); null for pixels
  ImageView view;                     // the caller's pixels (when name is null)
};

/// Steps 1-2 of the decoded kinds: the pixels, and up to three 8-bit source planes the resize reads (sample x of row
/// y at data[y * stride + x * step]).
struct Engine::Decoded {
  struct Plane {
    const std::uint8_t* data = nullptr;
    std::ptrdiff_t stride = 0;
    int step = 1;
  };
  Image image;  // decoded from the bytes (empty for the caller's pixels)
  ImageView view;
  std::array<Plane, 3> planes{};
  int nplanes = 1;
};

}  // namespace superpoint_rt
