// superpoint_rt._core: the pybind11 binding of the C++ engine (include/superpoint_rt/superpoint.hpp).
//
// The Python layer (python/superpoint_rt/*.py) turns every user input into one of three things this module accepts:
// a path (str), encoded bytes (any object with the buffer protocol: bytes, bytearray, memoryview) or a numpy array
// (uint8 or float32, shape (H, W) or (H, W, C) with C = 1, 3, 4). It also checks the parameters' types and ranges,
// so the messages name Python types; the C++ engine checks them again (Params::validate).
//
// GIL: every input is turned into a C++ view WHILE the GIL is held (the Python objects that own the memory are kept
// in a list that outlives the call), then the GIL is released for the C++ work (run, run_each, warmup,
// from_pretrained, close) so other Python threads make progress, and re-acquired to build the outputs.
//
// Outputs do not copy the C++ buffers: each Features is moved into a heap object owned by a capsule, and the
// keypoints / scores / descriptors arrays point into its std::vectors with that capsule as their base object.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "params.hpp"
#include "superpoint_rt/superpoint.hpp"

namespace py = pybind11;
namespace sp = superpoint_rt;
using sp::python::make_params;

namespace {

// Keeps the Python objects that own the memory of the views alive (and their buffer exports open) until the C++
// call has returned. Destroyed with the GIL held.
struct Keepalive {
  std::vector<py::object> objects;
  std::vector<std::unique_ptr<py::buffer_info>> buffers;
};

// Whether the engine can read an array with dims (H, W[, C]) and element size `item` in place (ImageView): rows may
// be padded only through a positive row stride of at least one packed row; within a row the pixels must be
// interleaved and packed. Float samples are read as float, so the data pointer and the row stride must be multiples
// of 4 (numpy allows unaligned arrays, e.g. np.frombuffer(buf, np.float32, offset=1)).
bool view_compatible(const py::array& a, py::ssize_t item) {
  const py::ssize_t ch = a.ndim() == 3 ? a.shape(2) : 1;
  if (a.ndim() == 3 && a.shape(2) > 1 && a.strides(2) != item) return false;
  if (a.shape(1) > 1 && a.strides(1) != item * ch) return false;
  if (a.shape(0) > 1 && a.strides(0) < item * ch * a.shape(1)) return false;
  if (reinterpret_cast<std::uintptr_t>(a.data()) % static_cast<std::uintptr_t>(item) != 0) return false;
  if (a.shape(0) > 1 && a.strides(0) % item != 0) return false;
  return true;
}

// Turns one normalised Python input (str path, numpy array, or an object with the buffer protocol) into an
// ImageInput whose memory `keep` owns.
sp::ImageInput to_input(const py::handle& obj, Keepalive& keep) {
  if (py::isinstance<py::str>(obj)) return sp::ImageInput::file(obj.cast<std::string>());
  if (py::isinstance<py::array>(obj)) {
    py::array a = py::reinterpret_borrow<py::array>(obj);
    const bool u8 = a.dtype().kind() == 'u' && a.itemsize() == 1;
    const bool f32 = a.dtype().kind() == 'f' && a.itemsize() == 4;
    if (!u8 && !f32)
      throw py::type_error("image array dtype " + py::str(a.dtype()).cast<std::string>() +
                           " is not supported by _core (uint8 or float32)");
    if (a.ndim() != 2 && a.ndim() != 3)
      throw py::value_error("image array has " + std::to_string(a.ndim()) +
                            " dimensions (expected (H, W) or (H, W, C))");
    const py::ssize_t ch = a.ndim() == 3 ? a.shape(2) : 1;
    if (ch != 1 && ch != 3 && ch != 4)
      throw py::value_error("image array has " + std::to_string(ch) + " channels (expected 1, 3 or 4)");
    if (a.shape(0) < 1 || a.shape(1) < 1)
      throw py::value_error("image array shape (" + std::to_string(a.shape(0)) + ", " + std::to_string(a.shape(1)) +
                            ") is empty (must be at least 1x1)");
    if (a.shape(0) > INT32_MAX || a.shape(1) > INT32_MAX)
      throw py::value_error("image array is too large (" + std::to_string(a.shape(0)) + " x " +
                            std::to_string(a.shape(1)) + " pixels)");
    const py::ssize_t item = a.itemsize();
    // A float32 array in the other byte order ('>f4' here) holds the same values in swapped bytes.
    const bool native = a.dtype().byteorder() != (std::endian::native == std::endian::little ? '>' : '<');
    if (!native || !view_compatible(a, item)) {
      // e.g. a transposed, channel-sliced, unaligned or byte-swapped view: one packed, aligned, native copy (fresh
      // numpy memory is aligned; py::array::ensure would return an unaligned C-contiguous array as it is).
      py::array copy(u8 ? py::dtype::of<std::uint8_t>() : py::dtype::of<float>(),
                     std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
      copy.attr("__setitem__")(py::ellipsis(), a);
      a = std::move(copy);
    }
    sp::ImageView v;
    v.data = a.data();
    v.width = static_cast<int>(a.shape(1));
    v.height = static_cast<int>(a.shape(0));
    v.format = ch == 1 ? sp::PixelFormat::Gray : (ch == 3 ? sp::PixelFormat::RGB : sp::PixelFormat::RGBA);
    v.type = u8 ? sp::SampleType::U8 : sp::SampleType::F32;
    v.row_stride = a.shape(0) > 1 ? a.strides(0) : 0;
    keep.objects.push_back(std::move(a));
    return sp::ImageInput::pixels(v);
  }
  if (PyObject_CheckBuffer(obj.ptr())) {
    // Encoded bytes are read as one run of size * itemsize bytes from the buffer's pointer, which is only those bytes
    // when the buffer is C-contiguous: a strided or reversed view (memoryview(data)[::2], [::-1]) has other bytes
    // there, or none (a reversed view points at its LAST element). Such buffers are refused here, whatever their
    // ndim; the Python layer (_inputs.to_engine) copies them first.
    auto info = std::make_unique<py::buffer_info>(py::reinterpret_borrow<py::buffer>(obj).request());
    if (!PyBuffer_IsContiguous(info->view(), 'C'))
      throw py::value_error("encoded image buffer (" +
                            py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>() +
                            ") is not C-contiguous: pass bytes(...) or a contiguous buffer");
    const auto* p = static_cast<const std::uint8_t*>(info->ptr);
    const auto n = static_cast<std::size_t>(info->size * info->itemsize);
    keep.objects.push_back(py::reinterpret_borrow<py::object>(obj));
    keep.buffers.push_back(std::move(info));
    return sp::ImageInput::bytes({p, n}, "<bytes>");
  }
  throw py::type_error("unsupported image object of type " +
                       py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
}

// (keypoints (N,2), scores (N,), descriptors (N,D) or None, image_size (h, w), scale (sx, sy), timing dict), with
// the arrays pointing into the moved Features (no copy).
py::tuple to_python(sp::Features&& features) {
  auto* owned = new sp::Features(std::move(features));
  py::capsule base(owned, [](void* p) { delete static_cast<sp::Features*>(p); });
  const auto n = static_cast<py::ssize_t>(owned->scores.size());
  const py::ssize_t f4 = sizeof(float);
  py::array kp(py::dtype::of<float>(), {n, py::ssize_t{2}}, {2 * f4, f4}, owned->keypoints.data(), base);
  py::array sc(py::dtype::of<float>(), {n}, {f4}, owned->scores.data(), base);
  py::object desc = py::none();
  if (owned->has_descriptors) {
    const auto d = static_cast<py::ssize_t>(owned->descriptor_dim);
    desc = py::array(py::dtype::of<float>(), {n, d}, {d * f4, f4}, owned->descriptors.data(), base);
  }
  py::dict timing;
  timing["decode"] = owned->timing_ms.decode;
  timing["preprocess"] = owned->timing_ms.preprocess;
  timing["forward"] = owned->timing_ms.forward;
  timing["postprocess"] = owned->timing_ms.postprocess;
  return py::make_tuple(kp, sc, desc, py::make_tuple(owned->image_size[0], owned->image_size[1]),
                        py::make_tuple(owned->scale[0], owned->scale[1]), timing,
                        py::make_tuple(owned->network_size[0], owned->network_size[1]));
}

sp::WarmupSpec make_spec(std::vector<std::pair<int, int>> sizes, std::vector<int> nms_radii,
                         std::vector<std::string> decoders, int num_workers,
                         std::vector<std::pair<int, int>> network_sizes) {
  sp::WarmupSpec s;
  s.sizes = std::move(sizes);
  s.network_sizes = std::move(network_sizes);
  s.nms_radii = std::move(nms_radii);
  s.decoders = std::move(decoders);
  s.num_workers = num_workers;
  return s;
}

// PrecisionReport -> the dicts of model.config["precisions"] and superpoint_rt.precisions().
py::list precision_list(const std::vector<sp::PrecisionReport>& reports) {
  py::list out;
  for (const sp::PrecisionReport& r : reports) {
    py::dict p;
    p["precision"] = r.precision;
    p["runs"] = r.runs;
    p["time_vs_fp32"] = r.time_vs_fp32 > 0 ? py::object(py::float_(r.time_vs_fp32)) : py::object(py::none());
    p["measured"] = r.measured;
    p["basis"] = r.basis;
    p["quality"] = r.quality;
    out.append(p);
  }
  return out;
}

py::dict to_dict(const std::map<std::string, double>& m) {
  py::dict d;
  for (const auto& [k, v] : m) d[py::str(k)] = v;
  return d;
}

// The Python-visible model: a handle on the shared C++ model. Safe to share between threads (the C++ model is).
class Model {
 public:
  explicit Model(sp::SuperPoint m) : model_(std::move(m)) {}

  py::tuple run_one(const py::handle& image, const py::dict& given) const {
    const sp::Params params = sp::python::params_from_dict(given);
    Keepalive keep;
    const sp::ImageInput input = to_input(image, keep);
    sp::Features f;
    {
      py::gil_scoped_release release;
      f = model_.run(input, params);
    }
    return to_python(std::move(f));
  }

  py::list run_list(const py::sequence& images, const py::dict& given, int num_workers) const {
    const sp::Params params = sp::python::params_from_dict(given);
    Keepalive keep;
    std::vector<sp::ImageInput> inputs;
    inputs.reserve(images.size());
    for (const auto& im : images) inputs.push_back(to_input(im, keep));
    std::vector<std::variant<sp::Features, sp::Error>> results;
    {
      py::gil_scoped_release release;
      results = model_.run_each(inputs, params, num_workers);
    }
    // The first failing image (in input order) raises, naming its position; the C++ message names the input.
    for (std::size_t i = 0; i < results.size(); ++i)
      if (auto* e = std::get_if<sp::Error>(&results[i]))
        throw sp::Error(e->kind(), "image " + std::to_string(i) + ": " + e->what());
    py::list out;
    for (auto& r : results) out.append(to_python(std::move(std::get<sp::Features>(r))));
    return out;
  }

  py::dict warmup(std::vector<std::pair<int, int>> sizes, std::vector<int> nms_radii, std::vector<std::string> decoders,
                  int num_workers, std::vector<std::pair<int, int>> network_sizes) const {
    const sp::WarmupSpec spec =
        make_spec(std::move(sizes), std::move(nms_radii), std::move(decoders), num_workers, std::move(network_sizes));
    std::map<std::string, double> steps;
    {
      py::gil_scoped_release release;
      steps = model_.warmup(spec);
    }
    return to_dict(steps);
  }

  void close() {
    py::gil_scoped_release release;  // waits for calls in flight on other threads
    model_.close();
  }

  bool closed() const noexcept { return model_.closed(); }

  py::dict info() const {
    const sp::ModelInfo& i = model_.info();
    py::dict d;
    d["model"] = i.model;
    d["revision"] = i.revision;
    d["weights_dir"] = i.weights_dir;
    d["source"] = i.source;
    d["backend"] = i.backend;
    d["device"] = i.device;
    d["precision"] = i.precision;
    d["calibration"] = i.calibration.empty() ? py::object(py::none()) : py::object(py::str(i.calibration));
    d["threads"] = i.threads;
    d["cpu_features"] = i.cpu_features;
    d["cpu_units"] = i.cpu_units;
    d["fastest_precision"] = i.fastest_precision;
    d["precisions"] = precision_list(i.precisions);
    d["plan"] = i.plan;
    d["warmup_s"] = to_dict(i.warmup_s);
    return d;
  }

  // For each of `n` C++ run() calls on one image, timed inside C++ (no Python in the loop): (wall seconds of the
  // call, milliseconds of its stage timers decode + preprocess + forward + postprocess). The baseline of the
  // Python-overhead measurement (bench/bench_first_call.py --overhead): wall - stages is the C++ call's own untimed
  // part, which the same difference measured around a Python call also contains.
  std::vector<std::pair<double, double>> time_cpp_calls(const py::handle& image, int n, int max_keypoints,
                                                        float keypoint_threshold, int nms_radius,
                                                        bool return_descriptors, bool bgr, bool grayscale) const {
    const sp::Params params =
        make_params(max_keypoints, keypoint_threshold, nms_radius, return_descriptors, bgr, grayscale);
    Keepalive keep;
    const sp::ImageInput input = to_input(image, keep);
    std::vector<std::pair<double, double>> out;
    out.reserve(static_cast<std::size_t>(n > 0 ? n : 0));
    py::gil_scoped_release release;
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      sp::Features f = model_.run(input, params);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const sp::Timing& t = f.timing_ms;
      out.emplace_back(wall, t.decode + t.preprocess + t.forward + t.postprocess);
    }
    return out;
  }

 private:
  sp::SuperPoint model_;
};

Model load(const std::string& model, const std::string& revision, const std::string& cache_dir, bool local_files_only,
           const std::string& device, int threads, const std::string& precision, std::int64_t max_pixels,
           std::vector<std::pair<int, int>> sizes, std::vector<int> nms_radii, std::vector<std::string> decoders,
           int num_workers, bool verbose, const py::list& calibration, std::vector<std::pair<int, int>> network_sizes,
           std::int64_t max_frame_pixels) {
  sp::Options o;
  o.model = model;
  o.revision = revision;
  o.cache_dir = cache_dir;
  o.local_files_only = local_files_only;
  o.device = device;
  o.threads = threads;
  o.precision = precision;
  o.max_pixels = max_pixels;
  o.max_frame_pixels = max_frame_pixels;
  o.warmup =
      make_spec(std::move(sizes), std::move(nms_radii), std::move(decoders), num_workers, std::move(network_sizes));
  o.verbose = verbose;
  // Calibration images: any single-image input (paths, bytes, arrays); `keep` holds their memory until the load
  // has read them.
  Keepalive keep;
  for (const py::handle item : calibration) o.calibration.push_back(to_input(item, keep));
  py::gil_scoped_release release;
  return Model(sp::SuperPoint::from_pretrained(o));
}

// Decodes a file (str path) or encoded bytes with the engine's decoders (Pillow-equal pixels): (H, W) uint8 for gray
// files, (H, W, 3) RGB otherwise; the array owns the decoded Image through a capsule (no copy).
py::array decode(const py::handle& src, std::int64_t max_pixels) {
  Keepalive keep;
  const sp::ImageInput input = to_input(src, keep);
  auto image = std::make_unique<sp::Image>();
  {
    py::gil_scoped_release release;
    if (const auto* p = std::get_if<sp::ImageInput::Path>(&input.source))
      *image = sp::decode_file(p->path, max_pixels);
    else if (const auto* b = std::get_if<sp::ImageInput::Bytes>(&input.source))
      *image = sp::decode_image(b->data, b->name, max_pixels);
    else
      throw sp::Error(sp::ErrorKind::TypeMismatch, "decode() takes a path or encoded bytes");
  }
  const py::ssize_t h = image->height, w = image->width, c = sp::channels_of(image->format);
  sp::Image* owned = image.release();
  py::capsule base(owned, [](void* p) { delete static_cast<sp::Image*>(p); });
  if (c == 1) return py::array(py::dtype::of<std::uint8_t>(), {h, w}, {w, py::ssize_t{1}}, owned->pixels.data(), base);
  return py::array(py::dtype::of<std::uint8_t>(), {h, w, c}, {w * c, c, py::ssize_t{1}}, owned->pixels.data(), base);
}

// Writes a (H, W) or (H, W, 3) uint8 array as PNG.
void write_png(const std::string& path, const py::handle& obj) {
  Keepalive keep;
  const sp::ImageInput input = to_input(obj, keep);
  const auto* v = std::get_if<sp::ImageView>(&input.source);
  if (!v || v->type != sp::SampleType::U8 || v->format == sp::PixelFormat::RGBA)
    throw py::type_error("write_png takes a uint8 array of shape (H, W) or (H, W, 3)");
  py::gil_scoped_release release;
  sp::write_png(path, *v);
}

py::dict spec_dict(const sp::WarmupSpec& s) {
  py::dict d;
  d["sizes"] = s.sizes;
  d["nms_radii"] = s.nms_radii;
  d["decoders"] = s.decoders;
  d["num_workers"] = s.num_workers;
  d["network_sizes"] = s.network_sizes;
  return d;
}

}  // namespace

void register_internal_cv2(py::module_& m);     // internal_cv2.cpp
void register_internal_resize(py::module_& m);  // internal_resize.cpp
void register_match(py::module_& m);            // match.cpp
void register_lightglue(py::module_& m);        // lightglue.cpp

PYBIND11_MODULE(_core, m) {
  m.doc() = "superpoint_rt._core: the C++ engine behind superpoint_rt.SuperPoint (use that class, not this module)";
  m.attr("__version__") = sp::version();
  register_internal_cv2(m);
  register_internal_resize(m);
  register_match(m);
  register_lightglue(m);

  // errors.hpp maps the kinds onto Python's built-in exceptions, so callers catch what they expect.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const sp::Error& e) {
      switch (e.kind()) {
        case sp::ErrorKind::InvalidArgument:
        case sp::ErrorKind::DecodeError:
        case sp::ErrorKind::UnsupportedFormat:
        case sp::ErrorKind::TooLarge: PyErr_SetString(PyExc_ValueError, e.what()); return;
        case sp::ErrorKind::TypeMismatch: PyErr_SetString(PyExc_TypeError, e.what()); return;
        case sp::ErrorKind::NotFound: PyErr_SetString(PyExc_FileNotFoundError, e.what()); return;
        default: PyErr_SetString(PyExc_RuntimeError, e.what()); return;
      }
    }
  });

  py::class_<Model>(m, "Model")
      .def("run_one", &Model::run_one, py::arg("image"), py::arg("params"))
      .def("run_list", &Model::run_list, py::arg("images"), py::arg("params"), py::arg("num_workers"))
      .def("warmup", &Model::warmup, py::arg("sizes"), py::arg("nms_radii"), py::arg("decoders"),
           py::arg("num_workers"), py::arg("network_sizes") = std::vector<std::pair<int, int>>{})
      .def("close", &Model::close)
      .def_property_readonly("closed", &Model::closed)
      .def("info", &Model::info)
      .def("time_cpp_calls", &Model::time_cpp_calls, py::arg("image"), py::arg("n"), py::arg("max_keypoints"),
           py::arg("keypoint_threshold"), py::arg("nms_radius"), py::arg("return_descriptors"), py::arg("bgr"),
           py::arg("grayscale"));

  m.def("load", &load, py::arg("model"), py::arg("revision"), py::arg("cache_dir"), py::arg("local_files_only"),
        py::arg("device"), py::arg("threads"), py::arg("precision"), py::arg("max_pixels"), py::arg("sizes"),
        py::arg("nms_radii"), py::arg("decoders"), py::arg("num_workers"), py::arg("verbose"),
        py::arg("calibration") = py::list(), py::arg("network_sizes") = std::vector<std::pair<int, int>>{},
        py::arg("max_frame_pixels") = sp::Params::kMaxNetworkPixels);
  m.def(
      "precisions", [] { return precision_list(sp::precisions_on_this_cpu()); },
      "fp32, bf16 and int8 on this CPU (after the SUPERPOINT_RT_ISA cap): whether each runs here, its forward time "
      "against fp32's, the basis of that figure and its quality; no model is loaded.");
  m.def(
      "fastest_precision", [] { return sp::fastest_precision_on_this_cpu(); },
      "The precision that runs fastest on this CPU (\"fp32\", \"bf16\" or \"int8\").");
  m.def("decode", &decode, py::arg("src"), py::arg("max_pixels") = sp::kDefaultMaxPixels);
  m.def("write_png", &write_png, py::arg("path"), py::arg("image"));
  m.def("default_warmup", [] { return spec_dict(sp::WarmupSpec::defaults()); });
  m.def("minimal_warmup", [] { return spec_dict(sp::WarmupSpec::minimal()); });
  m.def("all_warmup", [] { return spec_dict(sp::WarmupSpec::all()); });
  m.attr("PARAM_SPECS") = sp::python::param_specs_list();
  m.attr("PRESETS") = sp::python::preset_defaults_dict();
  m.attr("MAX_KEYPOINTS_MAX") = sp::Params::kMaxKeypointsMax;
  m.attr("NMS_RADIUS_MAX") = sp::Params::kNmsRadiusMax;
  m.attr("DEFAULT_MAX_PIXELS") = sp::kDefaultMaxPixels;
  m.attr("MAX_NETWORK_PIXELS") = sp::Params::kMaxNetworkPixels;
  m.attr("MIN_FRAME_PIXELS") = sp::Params::kMinNetworkPixels;
  m.attr("SUPPORTED_FORMATS") = sp::supported_formats();
}
