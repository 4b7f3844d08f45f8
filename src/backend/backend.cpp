// Backend registry: device name -> implementation (see backend.hpp).
#include "backend/backend.hpp"

#include "backend/onednn/onednn_backend.hpp"
#include "image/synthetic.hpp"
#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::backend {

std::vector<CalibrationPlane> default_calibration_planes() {
  std::vector<CalibrationPlane> planes;
  for (std::uint32_t seed = 1; seed <= kDefaultCalibrationPlanes; ++seed) {
    const Image im = image::synthetic_image(640, 480, seed);
    CalibrationPlane p{480, 640, std::vector<float>(640 * 480)};
    const int ch = im.format == PixelFormat::RGB ? 3 : 1;
    // Channel 0: what the engine feeds for a colour image by default (engine.cpp, step 2).
    for (std::size_t i = 0; i < p.pixels.size(); ++i) p.pixels[i] = im.pixels[i * ch] / 255.0f;
    planes.push_back(std::move(p));
  }
  return planes;
}

std::unique_ptr<Backend> create_backend(const std::string& device, const model::Weights& weights,
                                        const BackendOptions& options) {
  if (device == "cpu") return onednn::make_onednn_backend(weights, options);
  throw Error(ErrorKind::InvalidArgument, "device \"" + device + "\" is not supported by this build (supported: cpu)");
}

}  // namespace superpoint_rt::backend
