// Per-request parameters from the binding's keyword arguments, shared by the _core and _batchcore modules.
#pragma once

#include "superpoint_rt/features.hpp"

namespace superpoint_rt::python {

/// Builds and validates Params (the Python layer validated already; this keeps the C++ contract for direct users).
inline Params make_params(int max_keypoints, float keypoint_threshold, int nms_radius, bool return_descriptors,
                          bool bgr, bool grayscale) {
  Params p;
  p.max_keypoints = max_keypoints;
  p.keypoint_threshold = keypoint_threshold;
  p.nms_radius = nms_radius;
  p.return_descriptors = return_descriptors;
  p.bgr = bgr;
  p.grayscale = grayscale;
  p.validate();
  return p;
}

}  // namespace superpoint_rt::python
