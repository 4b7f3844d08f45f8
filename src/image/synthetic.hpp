// Deterministic synthetic test images: filled rectangles, discs, lines and a checkerboard over a noise background,
// so that SuperPoint finds several hundred corners. Used by the warm-up (it runs real request paths on them) and
// by the CLI when the user gives no image.
#pragma once

#include <cstdint>

#include "superpoint_rt/image.hpp"

namespace superpoint_rt::image {

/// An RGB image of width x height; the same seed gives the same pixels on every machine.
Image synthetic_image(int width, int height, std::uint32_t seed = 1);

}  // namespace superpoint_rt::image
