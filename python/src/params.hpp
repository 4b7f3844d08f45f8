// Per-request parameters from the binding's keyword arguments, shared by the _core and _batchcore modules.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/params.hpp"

namespace superpoint_rt::python {

/// Params from the explicit parameters {name: value} (the Python layer type-checked them against the same table;
/// set_param and validate keep the C++ contract, and check the combination, e.g. resize with resize_max).
inline Params params_from_dict(const pybind11::dict& given) {
  namespace py = pybind11;
  Params p;
  for (const auto& [k, v] : given) {
    const std::string name = py::str(k);
    ParamValue value;
    if (py::isinstance<py::bool_>(v))
      value = v.cast<bool>();
    else if (py::isinstance<py::int_>(v))
      value = v.cast<std::int64_t>();
    else if (py::isinstance<py::float_>(v))
      value = v.cast<double>();
    else if (py::isinstance<py::str>(v))
      value = v.cast<std::string>();
    else
      throw Error(ErrorKind::TypeMismatch,
                  name + ": unsupported value of type " + std::string(py::str(py::type::of(v).attr("__name__"))));
    set_param(p, name, value);
  }
  p.validate();
  return p;
}

/// Builds and validates Params from the six SPEC §2 parameters (the batch binding's positional form).
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

/// The table as Python sees it: [{name, type, min, max, choices, range, help}], and {preset: {name: default}}.
inline pybind11::list param_specs_list() {
  namespace py = pybind11;
  py::list out;
  for (const auto& s : param_specs()) {
    py::dict d;
    d["name"] = std::string(s.name);
    d["type"] = std::string(to_string(s.type));
    d["min"] = s.min;
    d["max"] = s.max;
    py::list choices;
    for (const auto& c : s.choices) choices.append(std::string(c));
    d["choices"] = choices;
    d["range"] = std::string(s.range_text);
    d["help"] = std::string(s.help);
    out.append(d);
  }
  return out;
}

inline pybind11::dict preset_defaults_dict() {
  namespace py = pybind11;
  py::dict out;
  for (const auto& p : preset_specs()) {
    py::dict d;
    const ResolvedParams& r = p.defaults;
    d["max_keypoints"] = r.max_keypoints;
    d["keypoint_threshold"] = static_cast<double>(r.keypoint_threshold);
    d["nms_radius"] = r.nms_radius;
    d["return_descriptors"] = r.return_descriptors;
    d["bgr"] = r.bgr;
    d["grayscale"] = r.grayscale;
    d["resize"] = param_value_text(r, "resize");
    d["resize_max"] = r.resize_max;
    d["resize_force"] = r.resize_force;
    d["interpolation"] = param_value_text(r, "interpolation");
    out[py::str(std::string(p.name))] = d;
  }
  return out;
}

}  // namespace superpoint_rt::python
