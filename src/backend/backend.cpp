// Backend registry: device name -> implementation (see backend.hpp).
#include "backend/backend.hpp"

#include "backend/onednn/onednn_backend.hpp"
#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::backend {

std::unique_ptr<Backend> create_backend(const std::string& device, const model::Weights& weights,
                                        const BackendOptions& options) {
  if (device == "cpu") return onednn::make_onednn_backend(weights, options);
  throw Error(ErrorKind::InvalidArgument, "device \"" + device + "\" is not supported by this build (supported: cpu)");
}

}  // namespace superpoint_rt::backend
