// Writing Features to files: .npz (numpy.load-able), .json, descriptors .npy.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "superpoint_rt/features.hpp"

namespace superpoint_rt::cli {

/// keypoints float32 (N,2), scores float32 (N,), descriptors float32 (N,256) when present, image_size int64 (2,)
/// as (height, width), scale float32 (2,). The reference's field names (../shared/golden).
void write_features_npz(const std::string& path, const Features& f);

/// {"image", "image_size": [h, w], "scale": [sx, sy], "keypoints": [[x, y], ...], "scores": [...],
///  "descriptors": [[...256], ...] (when present), "timing_ms": {...}}; floats printed in full (round-trip) precision.
nlohmann::json features_json(const Features& f, const std::string& image_name);
void write_features_json(const std::string& path, const Features& f, const std::string& image_name);

/// The precisions on this CPU, one line each, then the fastest ("fastest precision here: int8"), as `info` and
/// `bench` print them above their output.
std::string precisions_text();

/// descriptors as float32 (N, 256) .npy.
void write_descriptors_npy(const std::string& path, const Features& f);

}  // namespace superpoint_rt::cli
