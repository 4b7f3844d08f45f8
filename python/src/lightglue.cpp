// The LightGlue part of superpoint_rt._core (superpoint_rt/lightglue.hpp): the matcher object and its call on two
// images' keypoints and descriptors. The Python layer is python/superpoint_rt/_lightglue.py.
//
// GIL: released for loading and matching; the arrays are the call's arguments, kept alive by the caller's frame.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/lightglue.hpp"

namespace py = pybind11;
namespace sp = superpoint_rt;

namespace {

using Floats = py::array_t<float, py::array::c_style | py::array::forcecast>;

sp::LightGlueFeatures features_of(const Floats& kpts, const Floats& desc, double width, double height,
                                  const char* which) {
  const std::string w(which);
  if (kpts.ndim() != 2 || kpts.shape(1) != 2)
    throw sp::Error(sp::ErrorKind::InvalidArgument, w + ": keypoints must be (N, 2)");
  if (desc.ndim() != 2 || desc.shape(0) != kpts.shape(0))
    throw sp::Error(sp::ErrorKind::InvalidArgument,
                    w + ": descriptors must be (N, D) with N = " + std::to_string(kpts.shape(0)) + " (the keypoints)");
  return {kpts.data(),
          desc.data(),
          static_cast<std::size_t>(kpts.shape(0)),
          static_cast<int>(desc.shape(1)),
          static_cast<float>(width),
          static_cast<float>(height)};
}

py::dict to_dict(const sp::LightGlueMatches& r) {
  auto ints = [](const std::vector<std::int32_t>& v) {
    py::array_t<std::int32_t> a(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  };
  auto floats = [](const std::vector<float>& v) {
    py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  };
  py::dict d;
  d["matches0"] = ints(r.matches0);
  d["matches1"] = ints(r.matches1);
  d["matching_scores0"] = floats(r.scores0);
  d["matching_scores1"] = floats(r.scores1);
  d["prune0"] = ints(r.prune0);
  d["prune1"] = ints(r.prune1);
  d["stop"] = r.stop;
  return d;
}

// lightglue_param_specs() with LightGlueOptions' defaults: the Python keywords' defaults and ranges.
py::list params_list() {
  py::list out;
  const sp::LightGlueOptions defaults;
  for (const auto& s : sp::lightglue_param_specs()) {
    py::dict d;
    d["name"] = std::string(s.name);
    d["min"] = s.min;
    d["max"] = s.max;
    d["default"] = sp::lightglue_param_value(defaults, s.name);
    d["range"] = std::string(s.range_text);
    d["help"] = std::string(s.help);
    out.append(d);
  }
  return out;
}

}  // namespace

void register_lightglue(py::module_& m) {
  m.def("lightglue_params", &params_list);
  py::class_<sp::LightGlue>(m, "LightGlueMatcher")
      .def(py::init([](const std::string& weights, const std::string& revision, const std::string& cache_dir,
                       bool local_files_only) {
             py::gil_scoped_release nogil;
             return sp::LightGlue(weights, {revision, cache_dir, local_files_only});
           }),
           py::arg("weights"), py::arg("revision") = "", py::arg("cache_dir") = "", py::arg("local_files_only") = false)
      .def(
          "match",
          [](const sp::LightGlue& lg, const Floats& k0, const Floats& d0, double w0, double h0, const Floats& k1,
             const Floats& d1, double w1, double h1, double depth, double width, double filter, int threads) {
            const sp::LightGlueFeatures a = features_of(k0, d0, w0, h0, "image0"),
                                        b = features_of(k1, d1, w1, h1, "image1");
            sp::LightGlueMatches r;
            {
              py::gil_scoped_release nogil;
              sp::LightGlueOptions o;
              o.depth_confidence = depth;
              o.width_confidence = width;
              o.filter_threshold = filter;
              o.threads = threads;
              r = lg.match(a, b, o);
            }
            return to_dict(r);
          },
          py::arg("keypoints0"), py::arg("descriptors0"), py::arg("width0"), py::arg("height0"), py::arg("keypoints1"),
          py::arg("descriptors1"), py::arg("width1"), py::arg("height1"), py::arg("depth_confidence"),
          py::arg("width_confidence"), py::arg("filter_threshold"), py::arg("threads"))
      .def_property_readonly("input_dim", &sp::LightGlue::input_dim)
      .def_property_readonly("descriptor_dim", &sp::LightGlue::descriptor_dim)
      .def_property_readonly("num_layers", &sp::LightGlue::num_layers)
      .def_property_readonly("num_heads", &sp::LightGlue::num_heads)
      .def_property_readonly("source", &sp::LightGlue::source)
      .def_property_readonly("layout", &sp::LightGlue::layout);
}
