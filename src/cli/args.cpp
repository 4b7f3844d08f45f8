#include "cli/args.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "batch/batch.hpp"

namespace superpoint_rt::cli {

ArgReader::ArgReader(int argc, char** argv, int first) : args_(argv + first, argv + argc), i_(0) {}

std::string ArgReader::next() {
  std::string a = args_[static_cast<std::size_t>(i_++)];
  has_pending_ = false;
  if (a.rfind("--", 0) == 0) {
    if (auto eq = a.find('='); eq != std::string::npos) {
      pending_ = a.substr(eq + 1);
      has_pending_ = true;
      a.resize(eq);
    }
  }
  return a;
}

std::string ArgReader::value(const std::string& flag) {
  if (has_pending_) {
    has_pending_ = false;
    return pending_;
  }
  if (done()) throw UsageError(flag + " needs a value");
  return args_[static_cast<std::size_t>(i_++)];
}

int ArgReader::int_value(const std::string& flag, long long lo, long long hi, const std::string& range) {
  const std::string v = value(flag);
  long long x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size())
    throw UsageError(flag + ": '" + v + "' is not an integer (allowed: " + range + ")");
  if (x < lo || x > hi) throw UsageError(flag + ": " + v + " is out of range (allowed: " + range + ")");
  return static_cast<int>(x);
}

bool ArgReader::has_value() const {
  return has_pending_;
}

bool parse_model_flag(ArgReader& args, const std::string& flag, Options& o) {
  if (flag == "--weights")
    o.model = args.value(flag);
  else if (flag == "--revision")
    o.revision = args.value(flag);
  else if (flag == "--cache-dir")
    o.cache_dir = args.value(flag);
  else if (flag == "--local-files-only")
    o.local_files_only = true;
  else if (flag == "--threads")
    o.threads = args.int_value(flag, 0, 1024, "0..1024, 0 = all cores");
  else if (flag == "--precision")
    o.precision = args.value(flag);
  else if (flag == "--calibration") {
    // A file, or a folder walked like extract's inputs (the image extensions, in name order).
    batch::ListSpec spec;
    spec.inputs = {args.value(flag)};
    const auto images = batch::list_images(spec);
    if (images.empty()) throw UsageError(flag + ": no images in " + spec.inputs[0]);
    for (const auto& e : images) o.calibration.push_back(ImageInput::file(e.path));
  } else if (flag == "--device")
    o.device = args.value(flag);
  else if (flag == "--max-pixels") {
    const std::string v = args.value(flag);
    long long x = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || p != v.data() + v.size() || x < 1)
      throw UsageError(flag + ": '" + v + "' is not a positive integer");
    o.max_pixels = x;
  } else if (flag == "--max-frame-pixels") {
    const long long lo = Params::kMinNetworkPixels, hi = Params::kMaxNetworkPixels;
    const std::string v = args.value(flag);
    long long x = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    const std::string range = " (allowed: " + std::to_string(lo) + ".." + std::to_string(hi) + ")";
    if (ec != std::errc() || p != v.data() + v.size())
      throw UsageError(flag + ": '" + v + "' is not an integer" + range);
    if (x < lo || x > hi) throw UsageError(flag + ": " + v + " is out of range" + range);
    o.max_frame_pixels = x;
  } else if (flag == "--verbose")
    o.verbose = true;
  else
    return false;
  return true;
}

bool parse_param_flag(ArgReader& args, const std::string& flag, Params& p) {
  // Every parameter of the table (superpoint_rt/params.hpp) as --name-with-dashes VALUE; booleans also as a bare
  // --name (true) and --no-name (false); --no-descriptors is the short form of --no-return-descriptors.
  if (flag.rfind("--", 0) != 0) return false;
  std::string name = flag.substr(2);
  std::replace(name.begin(), name.end(), '-', '_');
  if (name == "no_descriptors") name = "no_return_descriptors";
  bool negated = false;
  const ParamSpec* spec = find_param(name);
  if (!spec && name.rfind("no_", 0) == 0) {
    spec = find_param(name.substr(3));
    negated = spec && spec->type == ParamType::Bool;
    if (!negated) spec = nullptr;
  }
  if (!spec) return false;
  std::string value;
  if (negated)
    value = "false";
  else if (spec->type == ParamType::Bool)
    value = args.has_value() ? args.value(flag) : "true";
  else
    value = args.value(flag);
  try {
    set_param_text(p, spec->name, value);
  } catch (const Error& e) {
    // The table's message names the parameter; say it with the flag the user typed.
    std::string msg = e.what();
    if (msg.rfind(std::string(spec->name), 0) == 0) msg = flag + msg.substr(spec->name.size());
    throw UsageError(msg);
  }
  return true;
}

std::string param_flags_help() {
  std::string out;
  for (const auto& s : param_specs()) {
    // Appends only: GCC 12 reports a -Wrestrict false positive for operator+ on short literals here.
    std::string line("  --");
    if (s.name == "return_descriptors") {
      line.append("no-descriptors");
    } else {
      const std::size_t at = line.size();
      line.append(s.name);
      std::replace(line.begin() + static_cast<std::ptrdiff_t>(at), line.end(), '_', '-');
    }
    if (s.type != ParamType::Bool) line.append(" ").append(s.range_text);
    if (line.size() < 44) line.resize(44, ' ');
    out.append(line).append(" ").append(s.help).append("\n");
  }
  return out;
}

int params_main(int argc, char** argv) {
  ArgReader args(argc, argv, 2);
  bool markdown = false;
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "--markdown")
      markdown = true;
    else if (a == "-h" || a == "--help") {
      std::cout << "usage: superpoint-rt params [--markdown]\n"
                   "Prints the per-request parameters (the same names in C++, Python, HTTP and here) and each "
                   "preset's defaults; --markdown prints docs/PARAMETERS.md.\n";
      return 0;
    } else
      throw UsageError("params: unknown argument '" + a + "'");
  }
  if (markdown) {
    std::cout << params_markdown();
    return 0;
  }
  std::cout << "per-request parameters (flags of extract, quickstart; query fields of serve):\n"
            << param_flags_help() << "presets (--preset NAME):\n";
  for (const auto& p : preset_specs()) {
    std::cout << "  " << p.name << ": " << p.summary << "\n   ";
    for (const auto& s : param_specs())
      if (s.name != "preset" && s.per_preset) std::cout << " " << s.name << "=" << param_value_text(p.defaults, s.name);
    std::cout << "\n";
  }
  return 0;
}

bool parse_match_flag(ArgReader& args, const std::string& flag, MatchParams& p) {
  if (flag.rfind("--", 0) != 0) return false;
  std::string name = flag.substr(2);
  const bool negated = name == "no-mutual";
  if (negated) name = "mutual";
  const ParamSpec* spec = nullptr;
  for (const auto& s : match_param_specs())
    if (s.name == name) spec = &s;
  if (!spec) return false;
  const std::string value =
      negated ? "false" : (spec->type == ParamType::Bool && !args.has_value() ? "true" : args.value(flag));
  try {
    set_match_param_text(p, spec->name, value);
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind(std::string(spec->name), 0) == 0) msg = flag + msg.substr(spec->name.size());
    throw UsageError(msg);
  }
  return true;
}

std::string match_flags_help() {
  std::string out;
  for (const auto& s : match_param_specs()) {
    std::string line("  --");
    line.append(s.type == ParamType::Bool ? "[no-]" : "").append(s.name);
    if (s.type != ParamType::Bool) line.append(" ").append(s.range_text);
    if (line.size() < 44) line.resize(44, ' ');
    out.append(line).append(" ").append(s.help).append("\n");
  }
  return out;
}

bool parse_lightglue_flag(ArgReader& args, const std::string& flag, LightGlueOptions& o) {
  if (flag.rfind("--", 0) != 0) return false;
  std::string name = flag.substr(2);
  std::replace(name.begin(), name.end(), '-', '_');
  const ParamSpec* spec = nullptr;
  for (const auto& s : lightglue_param_specs())
    if (s.name == name) spec = &s;
  if (!spec) return false;
  const std::string value = args.value(flag);
  try {
    set_lightglue_param_text(o, spec->name, value);
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind(std::string(spec->name), 0) == 0) msg = flag + msg.substr(spec->name.size());
    throw UsageError(msg);
  }
  return true;
}

std::string lightglue_flags_help() {
  std::string out;
  const LightGlueOptions defaults;
  for (const auto& s : lightglue_param_specs()) {
    std::string line("  --");
    std::string name(s.name);
    std::replace(name.begin(), name.end(), '_', '-');
    line.append(name).append(" X");
    if (line.size() < 44) line.resize(44, ' ');
    std::ostringstream d;
    d << lightglue_param_value(defaults, s.name);
    out.append(line).append(" ").append(s.help).append(" (").append(s.range_text).append("; default ").append(d.str());
    out.append(")\n");
  }
  return out;
}

namespace {

std::string fmt_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

}  // namespace

Progress::Progress(bool enabled, std::string items, std::string rate_unit)
    : enabled_(enabled), tty_(::isatty(2) == 1), items_(std::move(items)), rate_unit_(std::move(rate_unit)) {}

void Progress::update(std::size_t done, std::size_t total, double seconds) {
  if (!enabled_ || total == 0) return;
  const bool last = done == total;
  if (!tty_ && !last && seconds - last_print_ < 10.0) return;
  last_print_ = seconds;
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const double eta = rate > 0 ? static_cast<double>(total - done) / rate : -1;
  char line[200];
  if (tty_) {
    const int width = 30, fill = static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total));
    std::string bar(static_cast<std::size_t>(fill), '#');
    bar.resize(static_cast<std::size_t>(width), '.');
    std::snprintf(line, sizeof line, "\r[%s] %zu/%zu %s  %.2f %s  ETA %s ", bar.c_str(), done, total, items_.c_str(),
                  rate, rate_unit_.c_str(), fmt_duration(eta).c_str());
    std::cerr << line << (last ? "\n" : "") << std::flush;
  } else {
    std::snprintf(line, sizeof line, "progress: %zu/%zu %s  %.2f %s  ETA %s\n", done, total, items_.c_str(), rate,
                  rate_unit_.c_str(), fmt_duration(eta).c_str());
    std::cerr << line << std::flush;
  }
}

void check_params(const Params& params) {
  try {
    params.validate();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

Options default_cli_options() {
  Options o;
  if (const char* w = std::getenv("SUPERPOINT_RT_WEIGHTS"); w && *w) o.model = w;
  o.warmup = WarmupSpec::none();
  return o;
}

void write_keypoint_plot(const std::string& path, const Image& image, const Features& f) {
  // Work on an RGB copy so that keypoints are coloured on gray images too.
  Image rgb;
  rgb.width = image.width;
  rgb.height = image.height;
  rgb.format = PixelFormat::RGB;
  const std::size_t n = static_cast<std::size_t>(image.width) * image.height;
  rgb.pixels.resize(n * 3);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      rgb.pixels[3 * i + c] = image.format == PixelFormat::Gray ? image.pixels[i] : image.pixels[3 * i + c];
  // Disc radius grows with the image so that points stay visible on large photos.
  const int r = std::max(2, std::min(image.width, image.height) / 240);
  auto put = [&](int x, int y, std::uint8_t R, std::uint8_t G, std::uint8_t B) {
    if (x < 0 || y < 0 || x >= rgb.width || y >= rgb.height) return;
    std::uint8_t* p = &rgb.pixels[(static_cast<std::size_t>(y) * rgb.width + x) * 3];
    p[0] = R;
    p[1] = G;
    p[2] = B;
  };
  for (std::size_t k = 0; k < f.size(); ++k) {
    const int cx = static_cast<int>(std::lround(f.keypoints[2 * k]));
    const int cy = static_cast<int>(std::lround(f.keypoints[2 * k + 1]));
    for (int dy = -r - 1; dy <= r + 1; ++dy)
      for (int dx = -r - 1; dx <= r + 1; ++dx) {
        const int d2 = dx * dx + dy * dy;
        if (d2 <= r * r)
          put(cx + dx, cy + dy, 0, 255, 0);
        else if (d2 <= (r + 1) * (r + 1))
          put(cx + dx, cy + dy, 0, 0, 0);
      }
  }
  write_png(path, rgb.view());
}

// WHY: a long-running server or extraction must keep a flat resident size. With glibc's defaults each worker or
// connection thread may get its own malloc arena (up to 8 per core), and the dynamic mmap threshold moves every
// request's large buffers (body, decoded image, planes, descriptors, response: a few MB) into those arenas after the
// first free; each arena then keeps its own high-water mark. In a 10,000-request load run the server's RSS rose in
// ~2.5 MB steps as new threads took requests (bench/load_server.sh, docs/SERVING.md); extracting a folder of 10
// photos of 0.75 MP peaked at 379 MB instead of 334 MB (issue 19). A few arenas and a fixed 256 KiB mmap threshold
// (large blocks go back to the kernel on free, for a few hundred page faults per request against a 100+ ms
// forward) keep it flat. The environment (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_) still wins when set.
void bound_heap_growth() {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 4);
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 256 * 1024);
}

}  // namespace superpoint_rt::cli
