// superpoint_rt._sfmcore: the COLMAP database export (superpoint_rt/colmap.hpp) for superpoint_rt.colmap_database.
//
// A further extension module compiled into _core's shared object, loaded by python/superpoint_rt/_sfm.py as
// _batchcore is (see batch.cpp); superpoint_rt::Error becomes a Python exception through _core's translator.
// The GIL is released while the database is written.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "superpoint_rt/colmap.hpp"

namespace py = pybind11;
namespace sp = superpoint_rt;

PYBIND11_MODULE(_sfmcore, m) {
  m.doc() = "superpoint_rt._sfmcore: COLMAP databases from hloc files (use superpoint_rt.colmap_database)";
  m.def(
      "colmap_database",
      [](const std::string& database, const std::string& features, const std::string& matches, const std::string& pairs,
         const std::string& images, bool single_camera, std::optional<double> min_match_score, bool overwrite) {
        sp::ColmapOptions o;
        o.database = database;
        o.features = features;
        o.matches = matches;
        o.pairs = pairs;
        o.images = images;
        o.single_camera = single_camera;
        if (min_match_score) o.min_match_score = static_cast<float>(*min_match_score);
        o.overwrite = overwrite;
        py::gil_scoped_release release;
        return sp::write_colmap_database(o).json(database);
      },
      py::arg("database"), py::arg("features"), py::arg("matches"), py::arg("pairs"), py::arg("images"),
      py::arg("single_camera"), py::arg("min_match_score"), py::arg("overwrite"));
}
