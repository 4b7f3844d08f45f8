// superpoint_rt._batchcore: batch extraction to hloc feature files (src/batch/) for superpoint_rt.extract_folder.
//
// A second extension module compiled into the same shared object as _core (python/CMakeLists.txt globs src/*.cpp);
// python/superpoint_rt/_batch.py loads it from _core's file with importlib's ExtensionFileLoader, which looks up
// PyInit__batchcore. Keeping it separate leaves module.cpp (the SuperPoint binding) untouched; superpoint_rt::Error
// is translated to Python exceptions by the translator _core registers (pybind11 translators are shared).
//
// Thread-safety: the GIL is released while an extraction runs; src/batch/ serialises its HDF5 calls, so several
// Extractors may run in parallel threads (one model each).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <string>
#include <vector>

// The library's internal batch header (src/ is not on this target's include path; python/CMakeLists.txt stays as it
// is).
#include "../../src/batch/batch.hpp"
#include "params.hpp"

namespace py = pybind11;
namespace sp = superpoint_rt;

namespace {

/// One loaded model that runs any number of batch extractions (a Dask worker keeps one).
class Extractor {
 public:
  Extractor(const std::string& model, const std::string& revision, const std::string& cache_dir, bool local_files_only,
            int threads, std::int64_t max_pixels, bool verbose) {
    sp::Options o;
    o.model = model;
    o.revision = revision;
    o.cache_dir = cache_dir;
    o.local_files_only = local_files_only;
    o.threads = threads;
    o.max_pixels = max_pixels;
    o.verbose = verbose;
    o.warmup = sp::WarmupSpec::minimal();  // a batch runs each size once; no point preparing others
    py::gil_scoped_release release;
    model_ = sp::SuperPoint::from_pretrained(o);
  }

  /// Returns the report as JSON text.
  std::string extract(const std::vector<std::string>& inputs, const std::string& output, const std::string& image_list,
                      const std::string& image_root, const std::vector<std::string>& globs, const std::string& shard,
                      bool as_half, bool skip_existing, bool overwrite, const std::string& report, int workers,
                      const py::dict& given, bool progress) {
    // A feature file is what this binding makes (the CLI can also write per-image files instead).
    if (output.empty()) throw sp::Error(sp::ErrorKind::InvalidArgument, "extract_folder: output is required");
    const sp::Params params = sp::python::params_from_dict(given);
    sp::batch::RunConfig c;
    c.output = output;
    c.as_half = as_half;
    c.skip_existing = skip_existing;
    c.overwrite = overwrite;
    c.report = report;
    c.workers = workers;
    c.spelling = sp::batch::kPythonSpelling;
    if (progress)
      c.on_progress = [](std::size_t done, std::size_t total, double s) {
        std::fprintf(stderr, "progress: %zu/%zu images  %.2f img/s\n", done, total,
                     s > 0 ? static_cast<double>(done) / s : 0.0);
      };
    py::gil_scoped_release release;
    const sp::batch::ListSpec list{inputs, image_list, image_root, globs};
    const auto images = sp::batch::prepare(list, shard, c);  // the option checks shared with the CLI
    return sp::batch::run(model_, images, params, c).json();
  }

  void close() { model_.close(); }

 private:
  sp::SuperPoint model_;
};

}  // namespace

PYBIND11_MODULE(_batchcore, m) {
  m.doc() = "superpoint_rt._batchcore: batch extraction to hloc feature files (use superpoint_rt.extract_folder)";
  py::class_<Extractor>(m, "Extractor")
      .def(py::init<const std::string&, const std::string&, const std::string&, bool, int, std::int64_t, bool>(),
           py::arg("model"), py::arg("revision"), py::arg("cache_dir"), py::arg("local_files_only"), py::arg("threads"),
           py::arg("max_pixels"), py::arg("verbose"))
      .def("extract", &Extractor::extract, py::arg("inputs"), py::arg("output"), py::arg("image_list"),
           py::arg("image_root"), py::arg("globs"), py::arg("shard"), py::arg("as_half"), py::arg("skip_existing"),
           py::arg("overwrite"), py::arg("report"), py::arg("workers"), py::arg("params"), py::arg("progress"))
      .def("close", &Extractor::close);
  m.def(
      "merge",
      [](const std::vector<std::string>& inputs, const std::string& output, bool overwrite) {
        py::gil_scoped_release release;
        return sp::batch::merge_h5(inputs, output, overwrite, false);
      },
      py::arg("inputs"), py::arg("output"), py::arg("overwrite"));
  m.def("list_names", &sp::batch::list_h5_names, py::arg("path"));
}
