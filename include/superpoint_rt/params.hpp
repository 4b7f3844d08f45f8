// superpoint-rt: the one table of per-request parameters and presets (SPEC §2, §2b).
//
// Every interface derives its parameters from here: the CLI flags (--name with '-' for '_'), the HTTP query fields
// and the Python keyword arguments use the same names, ranges and per-preset defaults, and docs/PARAMETERS.md is
// generated from it (`superpoint-rt params --markdown`; a test checks the file is current).
//
// Thread-safety: everything here is immutable or re-entrant.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "superpoint_rt/features.hpp"
#include "superpoint_rt/image.hpp"

namespace superpoint_rt {

enum class ParamType { Int, Float, Bool, String };
const char* to_string(ParamType t) noexcept;

/// One per-request parameter.
struct ParamSpec {
  std::string_view name;  // snake_case: Python keyword, HTTP query field; CLI flag "--" + name with '-' for '_'
  ParamType type;
  double min = 0, max = 0;                      // Int / Float: inclusive range
  std::span<const std::string_view> choices{};  // String: the allowed values (empty: see range_text)
  std::string_view range_text;                  // the allowed values as messages and help print them
  std::string_view help;
  bool per_preset = true;  // its default depends on the preset (false: same everywhere)
};

/// Every parameter, in documentation order.
std::span<const ParamSpec> param_specs() noexcept;
/// The spec of `name`, or nullptr.
const ParamSpec* find_param(std::string_view name) noexcept;

/// One preset: its name, what it reproduces, and its defaults.
struct PresetSpec {
  std::string_view name;
  std::string_view summary;
  ResolvedParams defaults;
};
/// Every preset, "hf" first.
std::span<const PresetSpec> preset_specs();
/// The preset `name`, or nullptr.
const PresetSpec* find_preset(std::string_view name);
/// "hf, hloc:superpoint_aachen, ..." for messages and help.
std::string preset_names();
/// The most network-frame pixels a preset's own resize rule gives: 1600 x 1600 = 2,560,000 (hloc:superpoint_max and
/// _inloc, a square image). The server's default --max-frame-pixels: every preset request with its defaults fits.
std::int64_t largest_preset_frame_pixels();

/// A typed parameter value (the language bindings): Int as int64, Float as double, Bool, String.
using ParamValue = std::variant<bool, std::int64_t, double, std::string>;

/// Sets one parameter (or "preset") from a typed value. Throws Error(TypeMismatch) when the value's type is not the
/// parameter's (an Int takes only int64; a Float takes int64 or double), Error(InvalidArgument) out of range or an
/// unknown name, with the same messages as the text form.
void set_param(Params& p, std::string_view name, const ParamValue& value);

/// Sets one parameter (or "preset") from its text form, as typed on a command line or in a query string: integers
/// in decimal, floats in decimal notation (std::from_chars: "0.005", "5e-3"; no hex floats, no leading space or '+',
/// independent of the C locale), booleans true/false/1/0 (any letter case), strings as listed. Throws
/// Error(InvalidArgument) naming the parameter, the value (control characters shown as \xNN) and the allowed range,
/// or an unknown name (with the list), and Error(TypeMismatch) for a boolean that is not one of those words.
void set_param_text(Params& p, std::string_view name, std::string_view value);

/// The effective value of parameter `name` in `r` as text ("1024", "0.005", "true", "640x480", "cv2_area").
std::string param_value_text(const ResolvedParams& r, std::string_view name);

/// The image as `params.preset` reads a file: Pillow's decode for hf (decode_file), what cv2.imread returns for the
/// others (gray for hloc, RGB for lightglue; the EXIF orientation applied when params' exif_orientation says so).
/// Keypoints of a request refer to these pixels (for plotting them); running the model on this Image gives the same
/// result as on the file.
Image decode_file_as(const std::string& path, const Params& params, std::int64_t max_pixels = kDefaultMaxPixels);

/// docs/PARAMETERS.md: the parameters with each preset's defaults, as Markdown.
std::string params_markdown();

}  // namespace superpoint_rt
