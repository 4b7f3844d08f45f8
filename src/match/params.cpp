// The matcher's parameters (superpoint_rt/match.hpp): hloc's nearest-neighbour configurations and the one table of
// conf / ratio / distance / mutual that the CLI, the HTTP query fields, the Python keywords and the docs derive from.
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/match.hpp"

namespace superpoint_rt {
namespace {

// hloc/match_features.py confs: "NN-superpoint" {do_mutual_check: True, distance_threshold: 0.7}, "NN-ratio"
// {do_mutual_check: True, ratio_threshold: 0.8}, "NN-mutual" {do_mutual_check: True}.
const std::array<MatchConf, 3> kConfs{{
    {"NN-mutual", "matches-NN-mutual", {0.0, 0.0, true, 0}},
    {"NN-ratio", "matches-NN-mutual-ratio.8", {0.8, 0.0, true, 0}},
    {"NN-superpoint", "matches-NN-mutual-dist.7", {0.0, 0.7, true, 0}},
}};

constexpr std::array<std::string_view, 3> kConfNames{"NN-mutual", "NN-ratio", "NN-superpoint"};

constexpr double kRatioMax = 1.0;     // a ratio of distances of a best to a second best: above 1 every match passes
constexpr double kDistanceMax = 2.0;  // the Euclidean distance of two unit vectors is at most 2

const std::array<ParamSpec, 4> kSpecs{{
    {"conf", ParamType::String, 0, 0, kConfNames, "NN-mutual, NN-ratio, NN-superpoint",
     "hloc's match_features configuration: NN-mutual (mutual nearest neighbours), NN-ratio (and the ratio test at "
     "0.8), NN-superpoint (and distance <= 0.7)",
     false},
    {"ratio",
     ParamType::Float,
     0,
     kRatioMax,
     {},
     "0..1, 0 = off",
     "ratio test: keep a match when its distance is at most ratio x the second-best distance (default: the conf's)",
     false},
    {"distance",
     ParamType::Float,
     0,
     kDistanceMax,
     {},
     "0..2, 0 = off",
     "keep a match when the Euclidean distance of the two unit descriptors is at most this (default: the conf's)",
     false},
    {"mutual",
     ParamType::Bool,
     0,
     1,
     {},
     "true, false",
     "keep i -> j only when i is also j's nearest neighbour (default: the conf's, true for all three)",
     false},
}};

[[noreturn]] void invalid(const std::string& m) {
  throw Error(ErrorKind::InvalidArgument, m);
}

std::string number_text(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

void check_threshold(std::string_view name, double x, double max) {
  if (!(x >= 0 && x <= max))
    invalid(std::string(name) + ": " + number_text(x) + " is out of range (allowed: 0.." + number_text(max) +
            ", 0 = off)");
}

const ParamSpec& spec_of(std::string_view name) {
  for (const auto& s : kSpecs)
    if (s.name == name) return s;
  invalid("unknown matcher parameter '" + std::string(name) + "' (allowed: conf, ratio, distance, mutual)");
}

}  // namespace

std::span<const MatchConf> match_confs() noexcept {
  return kConfs;
}

const MatchConf* find_match_conf(std::string_view name) noexcept {
  for (const auto& c : kConfs)
    if (c.name == name) return &c;
  return nullptr;
}

std::span<const ParamSpec> match_param_specs() noexcept {
  return kSpecs;
}

void MatchParams::validate() const {
  if (!find_match_conf(conf)) invalid("conf: '" + conf + "' is not one of " + std::string(kSpecs[0].range_text));
  if (ratio) check_threshold("ratio", *ratio, kRatioMax);
  if (distance) check_threshold("distance", *distance, kDistanceMax);
}

void MatchOptions::validate() const {
  check_threshold("ratio", ratio_threshold, kRatioMax);
  check_threshold("distance", distance_threshold, kDistanceMax);
  if (threads < 0) invalid("threads: " + std::to_string(threads) + " is out of range (allowed: >= 0, 0 = all cores)");
}

MatchOptions resolve(const MatchParams& p) {
  p.validate();
  MatchOptions o = find_match_conf(p.conf)->options;
  if (p.ratio) o.ratio_threshold = *p.ratio;
  if (p.distance) o.distance_threshold = *p.distance;
  if (p.mutual) o.mutual_check = *p.mutual;
  return o;
}

void set_match_param(MatchParams& p, std::string_view name, const ParamValue& v) {
  const ParamSpec& spec = spec_of(name);
  const std::string n(spec.name);
  auto mismatch = [&](const char* want) {
    throw Error(ErrorKind::TypeMismatch, n + " must be " + want + " (allowed: " + std::string(spec.range_text) + ")");
  };
  if (n == "conf") {
    const auto* s = std::get_if<std::string>(&v);
    if (!s) mismatch("a string");
    if (!find_match_conf(*s)) invalid("conf: '" + *s + "' is not one of " + std::string(spec.range_text));
    p.conf = *s;
  } else if (n == "mutual") {
    const auto* b = std::get_if<bool>(&v);
    if (!b) mismatch("a bool");
    p.mutual = *b;
  } else {
    double x = 0;
    if (const auto* i = std::get_if<std::int64_t>(&v))
      x = static_cast<double>(*i);
    else if (const auto* d = std::get_if<double>(&v))
      x = *d;
    else
      mismatch("a number");
    check_threshold(spec.name, x, spec.max);
    (n == "ratio" ? p.ratio : p.distance) = x;
  }
}

void set_match_param_text(MatchParams& p, std::string_view name, std::string_view value) {
  const ParamSpec& spec = spec_of(name);
  const std::string n(spec.name), text(value);
  switch (spec.type) {
    case ParamType::Float: {
      // Decimal only (std::from_chars: no locale, no hex floats, no leading space or '+').
      double x = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        invalid(n + ": '" + text + "' is not a number (allowed: " + std::string(spec.range_text) + ")");
      return set_match_param(p, n, ParamValue{x});
    }
    case ParamType::Bool: {
      // As the request parameters' booleans: true / false in any letter case, 1, 0.
      std::string l;
      for (char c : text) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (l != "true" && l != "1" && l != "false" && l != "0")
        throw Error(ErrorKind::TypeMismatch, n + ": '" + text + "' is not a boolean (allowed: true, false, 1, 0)");
      return set_match_param(p, n, ParamValue{l == "true" || l == "1"});
    }
    default: return set_match_param(p, n, ParamValue{text});
  }
}

}  // namespace superpoint_rt
