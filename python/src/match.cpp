// The matching part of superpoint_rt._core (superpoint_rt/match.hpp): hloc's nearest-neighbour matcher in memory and
// over files, the pair lists, and the matcher's parameter table. The Python layer is python/superpoint_rt/_match.py.
//
// GIL: released for the matching and the file work; the descriptor arrays are kept referenced by the caller's frame
// for the call (they are the function's arguments).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/match.hpp"

namespace py = pybind11;
namespace sp = superpoint_rt;

namespace {

using Floats = py::array_t<float, py::array::c_style | py::array::forcecast>;

// {name: value} of the parameters the Python layer checked -> MatchOptions (the C++ checks again).
sp::MatchOptions options_from(const py::dict& given, int threads) {
  sp::MatchParams p;
  for (const auto& [k, v] : given) {
    const std::string name = py::str(k);
    sp::ParamValue value;
    if (py::isinstance<py::bool_>(v))
      value = v.cast<bool>();
    else if (py::isinstance<py::int_>(v))
      value = v.cast<std::int64_t>();
    else if (py::isinstance<py::float_>(v))
      value = v.cast<double>();
    else if (py::isinstance<py::str>(v))
      value = v.cast<std::string>();
    else
      throw sp::Error(sp::ErrorKind::TypeMismatch,
                      name + ": unsupported value of type " + std::string(py::str(py::type::of(v).attr("__name__"))));
    sp::set_match_param(p, name, value);
  }
  sp::MatchOptions o = sp::resolve(p);
  o.threads = threads;
  return o;
}

sp::DescriptorsView view_of(const Floats& a, const char* which) {
  if (a.ndim() != 2)
    throw sp::Error(sp::ErrorKind::InvalidArgument,
                    std::string(which) + " must be a 2-D array (N, D), not " + std::to_string(a.ndim()) + "-D");
  return {a.data(), static_cast<std::size_t>(a.shape(0)), static_cast<int>(a.shape(1)), false};
}

// (matches0 int32 (N0,), scores0 float32 (N0,)).
py::tuple match_arrays(const Floats& a, const Floats& b, const py::dict& given, int threads) {
  const sp::MatchOptions o = options_from(given, threads);
  const sp::DescriptorsView va = view_of(a, "descriptors0"), vb = view_of(b, "descriptors1");
  sp::Matches m;
  {
    py::gil_scoped_release release;
    m = sp::match(va, vb, o);
  }
  py::array_t<std::int32_t> m0(static_cast<py::ssize_t>(m.matches0.size()));
  py::array_t<float> s0(static_cast<py::ssize_t>(m.scores0.size()));
  std::copy(m.matches0.begin(), m.matches0.end(), m0.mutable_data());
  std::copy(m.scores0.begin(), m.scores0.end(), s0.mutable_data());
  return py::make_tuple(m0, s0);
}

std::string match_files(const std::string& features, const std::string& pairs, const std::string& output,
                        const std::string& features_ref, const py::dict& given, int threads, bool overwrite,
                        std::size_t cache_mb, bool progress) {
  sp::MatchFilesConfig c;
  c.features = features;
  c.features_ref = features_ref;
  c.pairs = pairs;
  c.output = output;
  c.options = options_from(given, threads);
  c.overwrite = overwrite;
  c.cache_mb = cache_mb;
  if (progress)
    c.on_progress = [](std::size_t done, std::size_t total, double s) {
      if (done == total || done % 100 == 0)
        std::fprintf(stderr, "progress: %zu/%zu pairs  %.2f pairs/s\n", done, total,
                     s > 0 ? static_cast<double>(done) / s : 0.0);
    };
  py::gil_scoped_release release;
  return sp::match_files(c).json();
}

py::list specs_list() {
  py::list out;
  for (const auto& s : sp::match_param_specs()) {
    py::dict d;
    d["name"] = std::string(s.name);
    d["type"] = std::string(sp::to_string(s.type));
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

py::dict confs_dict() {
  py::dict out;
  for (const auto& c : sp::match_confs()) {
    py::dict d;
    d["output"] = std::string(c.output);
    d["ratio"] = c.options.ratio_threshold;
    d["distance"] = c.options.distance_threshold;
    d["mutual"] = c.options.mutual_check;
    out[py::str(std::string(c.name))] = d;
  }
  return out;
}

}  // namespace

void register_match(py::module_& m) {
  m.def("match_arrays", &match_arrays, py::arg("descriptors0"), py::arg("descriptors1"), py::arg("params"),
        py::arg("threads"));
  m.def("match_files", &match_files, py::arg("features"), py::arg("pairs"), py::arg("output"), py::arg("features_ref"),
        py::arg("params"), py::arg("threads"), py::arg("overwrite"), py::arg("cache_mb"), py::arg("progress"));
  // std::span parameters are taken as lists (pybind11 converts std::vector).
  using Names = std::vector<std::string>;
  using Pairs = std::vector<sp::ImagePair>;
  m.def(
      "pairs_exhaustive", [](const Names& names) { return sp::pairs_exhaustive(names); }, py::arg("names"));
  m.def(
      "pairs_sequential",
      [](const Names& names, int window, bool quadratic, int loop_stride) {
        return sp::pairs_sequential(names, window, quadratic, loop_stride);
      },
      py::arg("names"), py::arg("window"), py::arg("quadratic"), py::arg("loop_stride"));
  m.def(
      "unique_pairs", [](const Pairs& pairs) { return sp::unique_pairs(pairs); }, py::arg("pairs"));
  m.def(
      "read_pairs", [](const std::string& path) { return sp::read_pairs(path); }, py::arg("path"));
  m.def(
      "write_pairs", [](const std::string& path, const Pairs& pairs) { sp::write_pairs(path, pairs); }, py::arg("path"),
      py::arg("pairs"));
  m.def("feature_names", &sp::feature_names, py::arg("path"));
  m.def(
      "read_matches",
      [](const std::string& path, const std::string& name0, const std::string& name1) {
        const sp::PairMatches pm = sp::read_matches(path, name0, name1);
        py::array_t<std::int64_t> pairs({static_cast<py::ssize_t>(pm.pairs.size()), py::ssize_t{2}});
        auto p = pairs.mutable_unchecked<2>();
        for (std::size_t i = 0; i < pm.pairs.size(); ++i) {
          p(static_cast<py::ssize_t>(i), 0) = pm.pairs[i][0];
          p(static_cast<py::ssize_t>(i), 1) = pm.pairs[i][1];
        }
        py::array_t<float> scores(static_cast<py::ssize_t>(pm.scores.size()));
        std::copy(pm.scores.begin(), pm.scores.end(), scores.mutable_data());
        return py::make_tuple(pairs, scores);
      },
      py::arg("path"), py::arg("name0"), py::arg("name1"));
  m.def("names_to_pair", &sp::names_to_pair, py::arg("name0"), py::arg("name1"), py::arg("separator") = "/");
  m.attr("MATCH_PARAM_SPECS") = specs_list();
  m.attr("MATCH_CONFS") = confs_dict();
  m.attr("MAX_MATCH_KEYPOINTS") = sp::kMaxMatchKeypoints;
}
