// The parameter table and the presets (superpoint_rt/params.hpp): the one place that says each per-request
// parameter's name, type, range, help text and per-preset default. Params::validate, resolve(), the CLI, the HTTP
// server, the Python binding and docs/PARAMETERS.md all read it.
#include "superpoint_rt/params.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "image/resize_float.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/text.hpp"

namespace superpoint_rt {

namespace {

constexpr std::array<std::string_view, 5> kPresetNames{"hf", "hloc:superpoint_aachen", "hloc:superpoint_max",
                                                       "hloc:superpoint_inloc", "lightglue"};
constexpr std::array<std::string_view, 3> kInterpolations{"pil_bilinear", "cv2_area", "antialias_bilinear"};

const std::array<ParamSpec, 12> kParams{{
    {"preset", ParamType::String, 0, 0, kPresetNames,
     "hf, hloc:superpoint_aachen, hloc:superpoint_max, hloc:superpoint_inloc, lightglue",
     "the request path to reproduce (see the presets table)", false},
    {"max_keypoints",
     ParamType::Int,
     Params::kMaxKeypointsMin,
     Params::kMaxKeypointsMax,
     {},
     "-1..307200, -1 = all",
     "keep at most this many keypoints, the best by score"},
    {"keypoint_threshold", ParamType::Float, 0, 1, {}, "0..1", "keep scores strictly above this"},
    {"nms_radius",
     ParamType::Int,
     0,
     Params::kNmsRadiusMax,
     {},
     "0..32",
     "non-maximum suppression radius in network-frame pixels (0 = none)"},
    {"return_descriptors",
     ParamType::Bool,
     0,
     1,
     {},
     "true, false",
     "return the 256-d descriptors; false (CLI --no-descriptors) skips the descriptor head entirely",
     false},
    {"bgr", ParamType::Bool, 0, 1, {}, "true, false", "3/4-channel pixel arrays are in OpenCV (B, G, R) order", false},
    {"grayscale",
     ParamType::Bool,
     0,
     1,
     {},
     "true, false",
     "hf: HF luma (0.2989 R + 0.5870 G + 0.1140 B) instead of the R channel; the other presets always read gray"},
    {"resize",
     ParamType::String,
     0,
     0,
     {},
     "WxH (each side 8..8192) or none",
     "fixed network frame (aspect not kept), or none for the image's own size"},
    {"resize_max",
     ParamType::Int,
     0,
     Params::kMaxNetworkSide,
     {},
     "0 = off, or 8..8192",
     "resize so that the long side is this, keeping the aspect (only when larger, unless resize_force)"},
    {"resize_force", ParamType::Bool, 0, 1, {}, "true, false", "resize_max also enlarges smaller images"},
    {"interpolation", ParamType::String, 0, 0, kInterpolations, "pil_bilinear, cv2_area, antialias_bilinear",
     "pil_bilinear: Pillow 8-bit bilinear (hf); cv2_area: cv2.resize INTER_AREA on float32, INTER_LINEAR when "
     "enlarging (hloc); antialias_bilinear: kornia resize(antialias=True) (LightGlue)"},
    {"exif_orientation",
     ParamType::Bool,
     0,
     1,
     {},
     "true, false",
     "files: rotate/flip by the EXIF orientation tag as cv2.imread does (LightGlue's load_image, hloc before #373); "
     "false: the stored pixels, as hloc's read_image (IMREAD_IGNORE_ORIENTATION) since 2024-11. hf: always false "
     "(Pillow)"},
}};

ResolvedParams hf_defaults() {
  ResolvedParams r;
  r.preset = "hf";
  return r;  // the struct's defaults are SPEC §2's
}

ResolvedParams hloc_defaults(std::string name, int nms_radius, int resize_max, bool force) {
  ResolvedParams r;
  r.preset = std::move(name);
  r.max_keypoints = 4096;
  r.keypoint_threshold = 0.005f;
  r.nms_radius = nms_radius;
  r.grayscale = true;
  r.resize_mode = ResizeMode::Max;
  r.resize_max = resize_max;
  r.resize_force = force;
  r.interpolation = Interpolation::Cv2Area;
  r.pixels = PixelPath::CvGray;
  r.exif_orientation = false;  // read_image: cv2.imread(path, mode | IMREAD_IGNORE_ORIENTATION) since hloc #373
  r.output = OutputConvention::Hloc;
  return r;
}

ResolvedParams lightglue_defaults() {
  ResolvedParams r;
  r.preset = "lightglue";
  r.max_keypoints = 2048;          // LightGlue's README (its default, None, is -1 here)
  r.keypoint_threshold = 0.0005f;  // SuperPoint.default_conf detection_threshold
  r.nms_radius = 4;
  r.grayscale = true;
  r.resize_mode = ResizeMode::Max;  // Extractor.preprocess_conf resize=1024, side="long": always
  r.resize_max = 1024;
  r.resize_force = true;
  r.interpolation = Interpolation::AntialiasBilinear;
  r.pixels = PixelPath::CvColorLuma;
  r.exif_orientation = true;  // load_image -> read_image: cv2.imread(path, IMREAD_COLOR), which applies EXIF
  r.output = OutputConvention::LightGlue;
  return r;
}

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorKind::InvalidArgument, msg);
}

// The shortest text that reads back as the same float ("0.005", not 0.00499999989).
std::string float_text(float x) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

// "640x480" -> (640, 480); false when the text is not two positive decimal integers joined by 'x'.
bool parse_wxh(std::string_view v, int& w, int& h) {
  const auto x = v.find('x');
  if (x == std::string_view::npos) return false;
  const auto num = [](std::string_view s, int& out) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc() && p == s.data() + s.size();
  };
  return num(v.substr(0, x), w) && num(v.substr(x + 1), h);
}

std::string size_text(int w, int h) {
  return std::to_string(w) + "x" + std::to_string(h);
}

// The frame `context` (the image and the parameter that chose the frame) gives, against the limits of Params and
// `max_frame_pixels`: InvalidArgument under the minimum side, TooLarge over a limit.
void check_frame(int w, int h, const std::string& context, std::int64_t max_frame_pixels) {
  const std::string frame = context + " gives the network frame " + size_text(w, h);
  if (w < Params::kMinNetworkSide || h < Params::kMinNetworkSide)
    throw Error(ErrorKind::InvalidArgument, frame + ", under the minimum of " +
                                                std::to_string(Params::kMinNetworkSide) +
                                                " pixels a side (one 8 x 8 cell of the network)");
  if (w > Params::kMaxNetworkSide || h > Params::kMaxNetworkSide)
    throw Error(ErrorKind::TooLarge, frame + ", over the limit of " + std::to_string(Params::kMaxNetworkSide) +
                                         " pixels a side (set a smaller resize or resize_max)");
  const std::int64_t pixels = std::int64_t{w} * h;
  // The limit is the model's max_frame_pixels (the server's --max-frame-pixels), or the network's own.
  const std::string limit = max_frame_pixels < Params::kMaxNetworkPixels ? "max_frame_pixels" : "the network's limit";
  if (pixels > max_frame_pixels)
    throw Error(ErrorKind::TooLarge, frame + " = " + std::to_string(pixels) + " pixels, over the limit of " +
                                         std::to_string(max_frame_pixels) + " (" + limit +
                                         "; set a smaller resize or resize_max)");
}

}  // namespace

const char* to_string(ParamType t) noexcept {
  switch (t) {
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::Bool: return "bool";
    case ParamType::String: return "string";
  }
  return "?";
}

std::span<const ParamSpec> param_specs() noexcept {
  return kParams;
}

const ParamSpec* find_param(std::string_view name) noexcept {
  for (const auto& s : kParams)
    if (s.name == name) return &s;
  return nullptr;
}

std::span<const PresetSpec> preset_specs() {
  static const std::array<PresetSpec, 5> presets{{
      {kPresetNames[0], "Hugging Face SuperPointImageProcessor + SuperPointForKeypointDetection (SPEC §2)",
       hf_defaults()},
      {kPresetNames[1], "hloc extract_features confs['superpoint_aachen'] (feats-superpoint-n4096-r1024)",
       hloc_defaults(std::string(kPresetNames[1]), 3, 1024, false)},
      {kPresetNames[2], "hloc extract_features confs['superpoint_max'] (feats-superpoint-n4096-rmax1600)",
       hloc_defaults(std::string(kPresetNames[2]), 3, 1600, true)},
      {kPresetNames[3], "hloc extract_features confs['superpoint_inloc'] (feats-superpoint-n4096-r1600)",
       hloc_defaults(std::string(kPresetNames[3]), 4, 1600, false)},
      {kPresetNames[4], "LightGlue SuperPoint(max_num_keypoints=2048).extract(load_image(path))", lightglue_defaults()},
  }};
  return presets;
}

const PresetSpec* find_preset(std::string_view name) {
  for (const auto& p : preset_specs())
    if (p.name == name) return &p;
  return nullptr;
}

std::string preset_names() {
  std::string s;
  for (const auto& n : kPresetNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

void Params::validate() const {
  (void)resolve(*this);
}

ResolvedParams resolve(const Params& p) {
  const PresetSpec* preset = find_preset(p.preset);
  if (!preset) invalid("preset = '" + util::printable(p.preset) + "' is not one of " + preset_names());
  ResolvedParams r = preset->defaults;
  if (p.max_keypoints) {
    if (*p.max_keypoints < Params::kMaxKeypointsMin || *p.max_keypoints > Params::kMaxKeypointsMax)
      invalid("max_keypoints = " + std::to_string(*p.max_keypoints) +
              " is out of range [-1, 307200] (-1 = all keypoints)");
    r.max_keypoints = *p.max_keypoints;
  }
  if (p.keypoint_threshold) {
    if (!(*p.keypoint_threshold >= 0.0f && *p.keypoint_threshold <= 1.0f))  // NaN fails both comparisons
      invalid("keypoint_threshold = " + float_text(*p.keypoint_threshold) + " is out of range [0, 1]");
    r.keypoint_threshold = *p.keypoint_threshold;
  }
  if (p.nms_radius) {
    if (*p.nms_radius < 0 || *p.nms_radius > Params::kNmsRadiusMax)
      invalid("nms_radius = " + std::to_string(*p.nms_radius) + " is out of range [0, 32]");
    r.nms_radius = *p.nms_radius;
  }
  r.return_descriptors = p.return_descriptors;
  r.bgr = p.bgr;
  if (p.grayscale) {
    if (r.pixels != PixelPath::Hf && !*p.grayscale)
      invalid("grayscale = false is not available with preset '" + r.preset + "' (it always reads gray pixels)");
    if (r.pixels == PixelPath::Hf) r.grayscale = *p.grayscale;
  }
  if (p.interpolation) {
    const std::string& v = *p.interpolation;
    if (v == "pil_bilinear")
      r.interpolation = Interpolation::PilBilinear;
    else if (v == "cv2_area")
      r.interpolation = Interpolation::Cv2Area;
    else if (v == "antialias_bilinear")
      r.interpolation = Interpolation::AntialiasBilinear;
    else
      invalid("interpolation = '" + util::printable(v) + "' is not one of pil_bilinear, cv2_area, antialias_bilinear");
  }
  bool fixed_explicit = false;
  if (p.resize) {
    const std::string& v = *p.resize;
    int w = 0, h = 0;
    if (v == "none") {
      r.resize_mode = ResizeMode::None;
    } else if (parse_wxh(v, w, h)) {
      // Sides outside the parameter's range are a bad value (InvalidArgument, as the schema of the HTTP API says);
      // a frame of more pixels than the network allows is TooLarge (docs/LIMITS.md).
      if (w < Params::kMinNetworkSide || h < Params::kMinNetworkSide || w > Params::kMaxNetworkSide ||
          h > Params::kMaxNetworkSide)
        invalid("resize = '" + v + "' is out of range (allowed: " + std::string(find_param("resize")->range_text) +
                ")");
      check_frame(w, h, "resize = '" + v + "'", Params::kMaxNetworkPixels);
      r.resize_mode = ResizeMode::Fixed;
      r.fixed_width = w;
      r.fixed_height = h;
      fixed_explicit = true;
    } else {
      invalid("resize = '" + util::printable(v) + "' is not WxH (e.g. 640x480) or none");
    }
    r.resize_max = 0;
  }
  if (p.resize_max) {
    const int m = *p.resize_max;
    if (m != 0 && (m < Params::kMinNetworkSide || m > Params::kMaxNetworkSide))
      invalid("resize_max = " + std::to_string(m) +
              " is out of range (allowed: " + std::string(find_param("resize_max")->range_text) + ")");
    if (m > 0 && fixed_explicit)
      invalid("resize = '" + *p.resize + "' and resize_max = " + std::to_string(m) +
              " contradict each other (a fixed frame, or the long side to resize_max: give one)");
    r.resize_max = m;
    if (m > 0)
      r.resize_mode = ResizeMode::Max;
    else if (r.resize_mode == ResizeMode::Max)
      r.resize_mode = ResizeMode::None;
  }
  if (p.resize_force) r.resize_force = *p.resize_force;
  if (r.resize_mode != ResizeMode::Max) r.resize_max = 0;
  if (p.exif_orientation) {
    if (r.pixels == PixelPath::Hf && *p.exif_orientation)
      invalid("exif_orientation = true is not available with preset '" + r.preset +
              "' (Hugging Face's processor reads Pillow's pixels, which never apply the EXIF orientation)");
    r.exif_orientation = *p.exif_orientation;
  }
  return r;
}

std::pair<int, int> ResolvedParams::network_frame(int w, int h, const std::string& what,
                                                  std::int64_t max_frame_pixels) const {
  int fw = w, fh = h;
  std::string rule;  // the parameter that chose the frame, for the messages
  if (resize_mode == ResizeMode::Fixed) {
    fw = fixed_width;
    fh = fixed_height;
    rule = "resize = " + size_text(fw, fh);
  } else if (resize_mode == ResizeMode::Max && (resize_force || std::max(w, h) > resize_max)) {
    // LightGlue (kornia resize, side="long") truncates, hloc (ImageDataset) rounds half to even. Any image size is
    // taken (a 17000 x 300 panorama gives 1024 x 18, as in both tools); a side that rounds to 0 is refused below.
    const auto [w2, h2] = interpolation == Interpolation::AntialiasBilinear
                              ? image::kornia_long_side_size(w, h, resize_max)
                              : image::hloc_resize_size(w, h, resize_max);
    fw = w2;
    fh = h2;
    rule = "resize_max = " + std::to_string(resize_max) + (resize_force ? " with resize_force" : "");
  } else {
    rule = resize_mode == ResizeMode::None
               ? std::string("resize = none (the image's own size)")
               : "resize_max = " + std::to_string(resize_max) + " (not larger: the image's own size)";
  }
  // A fixed frame does not depend on the image: its size would only confuse the message.
  const std::string image = resize_mode == ResizeMode::Fixed ? what : what + " (" + size_text(w, h) + ")";
  check_frame(fw, fh, image + ": " + rule, max_frame_pixels);
  return {fw, fh};
}

std::int64_t largest_preset_frame_pixels() {
  std::int64_t most = 0;
  for (const PresetSpec& p : preset_specs()) {
    const ResolvedParams& r = p.defaults;
    if (r.resize_mode == ResizeMode::Fixed) most = std::max(most, std::int64_t{r.fixed_width} * r.fixed_height);
    if (r.resize_mode == ResizeMode::Max) most = std::max(most, std::int64_t{r.resize_max} * r.resize_max);
  }
  return most;
}

namespace {

const ParamSpec& spec_of(const std::string& name) {
  const ParamSpec* spec = find_param(name);
  if (!spec) {
    std::string all;
    for (const auto& s : kParams) all += (all.empty() ? "" : ", ") + std::string(s.name);
    invalid("unknown parameter '" + util::printable(name) + "' (allowed: " + all + ")");
  }
  return *spec;
}

// The one place that stores a checked value into its Params field.
void store(Params& p, const ParamSpec& spec, const ParamValue& v) {
  const std::string_view n = spec.name;
  if (n == "max_keypoints")
    p.max_keypoints = static_cast<int>(std::get<std::int64_t>(v));
  else if (n == "nms_radius")
    p.nms_radius = static_cast<int>(std::get<std::int64_t>(v));
  else if (n == "resize_max")
    p.resize_max = static_cast<int>(std::get<std::int64_t>(v));
  else if (n == "keypoint_threshold")
    p.keypoint_threshold = static_cast<float>(std::get<double>(v));
  else if (n == "return_descriptors")
    p.return_descriptors = std::get<bool>(v);
  else if (n == "bgr")
    p.bgr = std::get<bool>(v);
  else if (n == "grayscale")
    p.grayscale = std::get<bool>(v);
  else if (n == "resize_force")
    p.resize_force = std::get<bool>(v);
  else if (n == "exif_orientation")
    p.exif_orientation = std::get<bool>(v);
  else if (n == "preset")
    p.preset = std::get<std::string>(v);
  else if (n == "interpolation")
    p.interpolation = std::get<std::string>(v);
  else if (n == "resize")
    p.resize = std::get<std::string>(v);
}

// The power of ten of the first significant digit of a decimal number that std::from_chars read whole ("0.0012" ->
// -3, "12e5" -> 6, "-1e-400" -> -400), saturating: tells a value under double's range from one over it.
long long leading_exponent(std::string_view s) {
  std::size_t i = s.empty() || s.front() != '-' ? 0 : 1;
  long long position = 0;  // the exponent of the digit at i
  bool fraction = false, found = false;
  long long first = 0;
  for (; i < s.size() && s[i] != 'e' && s[i] != 'E'; ++i) {
    if (s[i] == '.') {
      fraction = true;
      continue;
    }
    if (fraction) --position;
    if (!found && s[i] != '0') {
      found = true;
      first = fraction ? position : 0;
    }
    if (!fraction && found) ++first;
  }
  if (!found) return 0;
  if (first > 0) --first;  // n digits from the first significant one before the point: exponent n - 1
  long long e = 0;
  if (i < s.size()) {
    const char* b = s.data() + i + 1;
    const char* end = s.data() + s.size();
    const bool negative = b < end && *b == '-';
    if (b < end && (*b == '+' || *b == '-')) ++b;
    if (std::from_chars(b, end, e).ec != std::errc()) e = std::numeric_limits<long long>::max() / 2;
    if (negative) e = -e;
  }
  return first + e;
}

void check_range(const ParamSpec& spec, double x, const std::string& shown) {
  // A float parameter is checked after rounding to float (what the engine uses): 1 + 1e-12 is 1.
  const double y = spec.type == ParamType::Float ? static_cast<double>(static_cast<float>(x)) : x;
  if (!(y >= spec.min && y <= spec.max))  // NaN fails too
    invalid(std::string(spec.name) + ": " + shown + " is out of range (allowed: " + std::string(spec.range_text) + ")");
}

void check_choice(const ParamSpec& spec, const std::string& value) {
  if (spec.choices.empty()) return;  // checked in context by resolve() (resize: WxH or none)
  for (const auto& c : spec.choices)
    if (c == value) return;
  invalid(std::string(spec.name) + ": '" + util::printable(value) + "' is not one of " + std::string(spec.range_text));
}

}  // namespace

void set_param(Params& p, std::string_view name_v, const ParamValue& v) {
  const ParamSpec& spec = spec_of(std::string(name_v));
  const std::string name(spec.name);
  auto mismatch = [&](const char* got) {
    throw Error(ErrorKind::TypeMismatch, name + " must be " +
                                             (spec.type == ParamType::Int     ? "an int"
                                              : spec.type == ParamType::Float ? "a number"
                                              : spec.type == ParamType::Bool  ? "a bool"
                                                                              : "a string") +
                                             " (allowed: " + std::string(spec.range_text) + "), got " + got);
  };
  switch (spec.type) {
    case ParamType::Int:
      if (!std::holds_alternative<std::int64_t>(v))
        mismatch(std::holds_alternative<bool>(v) ? "a bool" : "another type");
      check_range(spec, static_cast<double>(std::get<std::int64_t>(v)), std::to_string(std::get<std::int64_t>(v)));
      return store(p, spec, v);
    case ParamType::Float: {
      double x = 0;
      if (const auto* i = std::get_if<std::int64_t>(&v))
        x = static_cast<double>(*i);
      else if (const auto* d = std::get_if<double>(&v))
        x = *d;
      else
        mismatch(std::holds_alternative<bool>(v) ? "a bool" : "a string");
      check_range(spec, x, float_text(static_cast<float>(x)));
      return store(p, spec, ParamValue{x});
    }
    case ParamType::Bool:
      if (!std::holds_alternative<bool>(v)) mismatch("another type");
      return store(p, spec, v);
    case ParamType::String:
      if (!std::holds_alternative<std::string>(v)) mismatch("another type");
      check_choice(spec, std::get<std::string>(v));
      return store(p, spec, v);
  }
}

void set_param_text(Params& p, std::string_view name_v, std::string_view v) {
  const ParamSpec& spec = spec_of(std::string(name_v));
  const std::string name(spec.name);
  const std::string value(v);
  const std::string shown = util::printable(value);  // a query value may hold any byte, NUL included
  const std::string allowed = " (allowed: " + std::string(spec.range_text) + ")";
  const char* const first = value.data();
  const char* const last = first + value.size();
  switch (spec.type) {
    case ParamType::Int: {
      long long x = 0;
      const auto [end, ec] = std::from_chars(first, last, x);
      if (value.empty() || ec != std::errc() || end != last)
        invalid(name + ": '" + shown + "' is not an integer" + allowed);
      return set_param(p, name, ParamValue{static_cast<std::int64_t>(x)});
    }
    case ParamType::Float: {
      // std::from_chars: decimal only ("0.005", "5e-3"; no hex float such as 0x1p-3, no leading space or '+'), and
      // independent of the C locale (strtof reads "0,005" under a locale whose decimal point is a comma).
      double d = 0;
      const auto [end, ec] = std::from_chars(first, last, d, std::chars_format::general);
      const bool beyond_double = ec == std::errc::result_out_of_range && end == last;
      if (value.empty() || end != last || (ec != std::errc() && !beyond_double))
        invalid(name + ": '" + shown + "' is not a decimal number" + allowed);
      if (beyond_double) {  // as Python's float(): under double's range it is 0, over it infinite (refused below)
        d = leading_exponent(value) < 0 ? 0.0 : std::numeric_limits<double>::infinity();
        if (value.front() == '-') d = -d;
      }
      // The range holds for the value as written, as the HTTP API's schema (maximum 1) says: 1.0000001 is over 1
      // although its nearest float is 1.
      if (!(d >= spec.min && d <= spec.max)) invalid(name + ": " + shown + " is out of range" + allowed);
      // The float the engine uses: the nearest to the text (as strtof); under float's range, its nearest float
      // through double (0 or a subnormal).
      float x = 0;
      if (std::from_chars(first, last, x, std::chars_format::general).ec != std::errc()) x = static_cast<float>(d);
      return set_param(p, name, ParamValue{static_cast<double>(x)});
    }
    case ParamType::Bool: {
      std::string l;
      for (char c : value) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (l != "true" && l != "1" && l != "false" && l != "0")
        throw Error(ErrorKind::TypeMismatch, name + ": '" + shown + "' is not a boolean (allowed: true, false, 1, 0)");
      return set_param(p, name, ParamValue{l == "true" || l == "1"});
    }
    case ParamType::String: return set_param(p, name, ParamValue{value});
  }
}

std::string param_value_text(const ResolvedParams& r, std::string_view name) {
  if (name == "preset") return r.preset;
  if (name == "max_keypoints") return std::to_string(r.max_keypoints);
  if (name == "keypoint_threshold") return float_text(r.keypoint_threshold);
  if (name == "nms_radius") return std::to_string(r.nms_radius);
  if (name == "return_descriptors") return r.return_descriptors ? "true" : "false";
  if (name == "bgr") return r.bgr ? "true" : "false";
  if (name == "grayscale") return r.grayscale ? "true" : "false";
  if (name == "resize")
    return r.resize_mode == ResizeMode::Fixed ? std::to_string(r.fixed_width) + "x" + std::to_string(r.fixed_height)
                                              : std::string("none");
  if (name == "resize_max") return std::to_string(r.resize_max);
  if (name == "resize_force") return r.resize_force ? "true" : "false";
  if (name == "interpolation") return std::string(kInterpolations[static_cast<std::size_t>(r.interpolation)]);
  if (name == "exif_orientation") return r.exif_orientation ? "true" : "false";
  return "";
}

std::string params_markdown() {
  std::ostringstream o;
  o << "# Per-request parameters\n\n"
    << "Generated from the C++ table (`include/superpoint_rt/params.hpp`) by `superpoint-rt params --markdown`; a "
       "test checks that this file is current. The same names work everywhere: Python keyword arguments "
       "(`model(img, max_keypoints=2048)`), HTTP query fields (`?max_keypoints=2048`), CLI flags "
       "(`--max-keypoints 2048`) and C++ `Params` fields. A preset sets the defaults of a whole request path; "
       "parameters given explicitly override them.\n\n"
    << "## Presets\n\n| preset | reproduces |\n|---|---|\n";
  for (const auto& p : preset_specs()) o << "| `" << p.name << "` | " << p.summary << " |\n";
  o << "\n## Parameters\n\n| parameter | type | allowed | meaning |\n|---|---|---|---|\n";
  for (const auto& s : kParams)
    o << "| `" << s.name << "` | " << to_string(s.type) << " | " << s.range_text << " | " << s.help << " |\n";
  o << "\n## Defaults per preset\n\n| parameter |";
  for (const auto& p : preset_specs()) o << " `" << p.name << "` |";
  o << "\n|---|";
  for (std::size_t i = 0; i < preset_specs().size(); ++i) o << "---|";
  o << "\n";
  for (const auto& s : kParams) {
    if (s.name == "preset") continue;
    o << "| `" << s.name << "` |";
    for (const auto& p : preset_specs()) o << " " << param_value_text(p.defaults, s.name) << " |";
    o << "\n";
  }
  return o.str();
}

}  // namespace superpoint_rt
