// superpoint_rt._core._decode_cv2: a private binding of image::decode_image_cv2 (src/image/decode_cv2.hpp) for the
// tests that compare it with cv2.imdecode (tests/image/test_decode_cv2.py). Not part of the public API.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

// An internal header (the module builds with include/ only; decode_cv2.hpp itself needs nothing from src/).
#include "../../src/image/decode_cv2.hpp"

namespace py = pybind11;

void register_internal_cv2(py::module_& m);

void register_internal_cv2(py::module_& m) {
  m.def(
      "_decode_cv2",
      [](const py::bytes& data, bool color, std::int64_t max_pixels, bool apply_orientation) {
        char* p = nullptr;
        Py_ssize_t n = 0;
        if (PyBytes_AsStringAndSize(data.ptr(), &p, &n) != 0) throw py::error_already_set();
        superpoint_rt::Image im;
        {
          py::gil_scoped_release release;  // `data` stays alive (an argument) while the GIL is released
          im = superpoint_rt::image::decode_image_cv2(
              std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(p), static_cast<std::size_t>(n)),
              "<memory>", max_pixels,
              color ? superpoint_rt::image::Cv2Read::Color : superpoint_rt::image::Cv2Read::Grayscale,
              apply_orientation ? superpoint_rt::image::Cv2Orientation::Apply
                                : superpoint_rt::image::Cv2Orientation::Ignore);
        }
        std::vector<py::ssize_t> shape{im.height, im.width};
        if (im.format == superpoint_rt::PixelFormat::RGB) shape.push_back(3);
        py::array_t<std::uint8_t> out(shape);
        std::memcpy(out.mutable_data(), im.pixels.data(), im.pixels.size());
        return out;
      },
      py::arg("data"), py::arg("color"), py::arg("max_pixels") = superpoint_rt::kDefaultMaxPixels,
      py::arg("apply_orientation") = true,
      "What OpenCV 4.6 cv2.imdecode(data, IMREAD_COLOR if color else IMREAD_GRAYSCALE, plus "
      "IMREAD_IGNORE_ORIENTATION unless apply_orientation) returns, as HxW uint8 or HxWx3 RGB uint8 (internal: tests "
      "only)");
}
