#include "cli/output.hpp"

#include <cstdio>
#include <vector>

#include "superpoint_rt/superpoint.hpp"
#include "util/file.hpp"
#include "util/npz.hpp"

namespace superpoint_rt::cli {

using util::NpyArray;

void write_features_npz(const std::string& path, const Features& f) {
  const auto n = static_cast<std::int64_t>(f.size());
  std::map<std::string, NpyArray> arrays;
  arrays["keypoints"] = NpyArray::from_float(f.keypoints, {n, 2});
  arrays["scores"] = NpyArray::from_float(f.scores, {n});
  if (f.has_descriptors) arrays["descriptors"] = NpyArray::from_float(f.descriptors, {n, f.descriptor_dim});
  arrays["image_size"] = NpyArray::from_int64({f.image_size[0], f.image_size[1]}, {2});
  arrays["scale"] = NpyArray::from_float({f.scale[0], f.scale[1]}, {2});
  util::write_file_atomic(path, util::npz_bytes(arrays));
}

nlohmann::json features_json(const Features& f, const std::string& image_name) {
  nlohmann::json j;
  j["image"] = image_name;
  j["image_size"] = {f.image_size[0], f.image_size[1]};
  j["scale"] = {f.scale[0], f.scale[1]};
  nlohmann::json kps = nlohmann::json::array();
  for (std::size_t i = 0; i < f.size(); ++i) kps.push_back({f.keypoints[2 * i], f.keypoints[2 * i + 1]});
  j["keypoints"] = std::move(kps);
  j["scores"] = f.scores;
  if (f.has_descriptors) {
    nlohmann::json d = nlohmann::json::array();
    const auto dim = static_cast<std::size_t>(f.descriptor_dim);
    for (std::size_t i = 0; i < f.size(); ++i)
      d.push_back(std::vector<float>(f.descriptors.begin() + static_cast<std::ptrdiff_t>(i * dim),
                                     f.descriptors.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim)));
    j["descriptors"] = std::move(d);
  }
  j["timing_ms"] = {{"decode", f.timing_ms.decode},
                    {"preprocess", f.timing_ms.preprocess},
                    {"forward", f.timing_ms.forward},
                    {"postprocess", f.timing_ms.postprocess}};
  return j;
}

void write_features_json(const std::string& path, const Features& f, const std::string& image_name) {
  const std::string s = features_json(f, image_name).dump(1) + "\n";
  util::write_file_atomic(path, std::vector<std::uint8_t>(s.begin(), s.end()));
}

void write_descriptors_npy(const std::string& path, const Features& f) {
  const auto n = static_cast<std::int64_t>(f.size());
  util::write_file_atomic(path, util::npy_bytes(NpyArray::from_float(f.descriptors, {n, f.descriptor_dim})));
}

std::string precisions_text() {
  std::string out;
  char buf[64];
  for (const PrecisionReport& r : precisions_on_this_cpu()) {
    out += "precision " + r.precision + ": ";
    if (!r.runs) {
      out += "does not run here (" + r.basis + ")\n";
      continue;
    }
    std::snprintf(buf, sizeof buf, "%.2f", r.time_vs_fp32);
    out += "runs; forward time " + (r.time_vs_fp32 > 0 ? std::string(buf) + "x fp32's" : std::string("unknown")) +
           " (" + r.basis + "); quality " + r.quality + "\n";
  }
  return out + "fastest precision here: " + fastest_precision_on_this_cpu() + "\n";
}

}  // namespace superpoint_rt::cli
