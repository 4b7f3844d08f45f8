// superpoint_rt._core._resize_float: a private binding of the float32 plane resizes (src/image/resize_float.hpp) for
// the tests that compare them with cv2.resize and a torch reference of kornia's resize
// (tests/resize/test_resize_float.py). Not part of the public API.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <limits>
#include <string>

// An internal header (the module builds with include/ only; resize_float.hpp itself needs nothing from src/).
#include "../../src/image/resize_float.hpp"

namespace py = pybind11;

void register_internal_resize(py::module_& m);

void register_internal_resize(py::module_& m) {
  m.def(
      "_resize_float",
      [](const py::array_t<float, py::array::c_style | py::array::forcecast>& src, int dw, int dh,
         const std::string& kind) {
        namespace im = superpoint_rt::image;
        if (src.ndim() != 2) throw py::value_error("_resize_float takes a 2-D float32 array");
        if (src.shape(0) > std::numeric_limits<int>::max() || src.shape(1) > std::numeric_limits<int>::max())
          throw py::value_error("_resize_float: array shape is over the size limit");
        const int sh = static_cast<int>(src.shape(0)), sw = static_cast<int>(src.shape(1));
        using Fn =
            void (*)(const float*, int, int, std::ptrdiff_t, float*, int, int, std::ptrdiff_t, im::FloatResizeScratch&);
        Fn fn = nullptr;
        if (kind == "cv2_area")
          fn = im::cv2_resize_area;
        else if (kind == "cv2_area_reference")
          fn = im::cv2_resize_area_reference;
        else if (kind == "cv2_linear")
          fn = im::cv2_resize_linear;
        else if (kind == "kornia_antialias")
          fn = im::kornia_resize_antialias;
        else
          throw py::value_error("_resize_float: unknown kind '" + kind +
                                "' (cv2_area, cv2_area_reference, cv2_linear, kornia_antialias)");
        py::array_t<float> out({dh > 0 ? dh : 0, dw > 0 ? dw : 0});
        const float* s = src.data();
        float* d = out.mutable_data();
        {
          py::gil_scoped_release release;  // `src` and `out` stay alive (held here) while the GIL is released
          im::FloatResizeScratch scratch;
          fn(s, sw, sh, sw, d, dw, dh, dw, scratch);
        }
        return out;
      },
      py::arg("src"), py::arg("dw"), py::arg("dh"), py::arg("kind"),
      "Resizes a (H, W) float32 plane to (dh, dw) with image::cv2_resize_area / cv2_resize_area_reference / "
      "cv2_resize_linear / kornia_resize_antialias (internal, for tests).");
  m.def(
      "_resize_float_sizes",
      [](int w, int h, int n) {
        return py::make_tuple(superpoint_rt::image::hloc_resize_size(w, h, n),
                              superpoint_rt::image::kornia_long_side_size(w, h, n));
      },
      py::arg("w"), py::arg("h"), py::arg("n"),
      "(hloc_resize_size(w, h, n), kornia_long_side_size(w, h, n)), each (out_w, out_h) (internal, for tests).");
}
