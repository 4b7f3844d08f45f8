// The state of one request between its stages (engine.hpp), shared by engine.cpp and prepare.cpp. Internal.
#pragma once

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

namespace superpoint_rt {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
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
