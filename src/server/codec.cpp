#include "server/codec.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <span>

#include "superpoint_rt/errors.hpp"
#include "util/npz.hpp"

namespace superpoint_rt::server {

std::string base64_encode(const void* data, std::size_t n) {
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  base64_append(out, data, n);
  return out;
}

void base64_append(std::string& out, const void* data, std::size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (const std::size_t rest = n - i; rest > 0) {
    std::uint32_t v = std::uint32_t{p[i]} << 16;
    if (rest == 2) v |= std::uint32_t{p[i + 1]} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
}

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding as urllib.parse.unquote_plus: a malformed escape ("%zz", a trailing "%") is kept literally.
std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    if (out.size() == kMaxQueryFields)
      throw Error(ErrorKind::InvalidArgument,
                  "the query has more than " + std::to_string(kMaxQueryFields) + " fields (max_query_fields)");
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      out.emplace_back(url_decode(part), std::string{});
    else
      out.emplace_back(url_decode(part.substr(0, eq)), url_decode(part.substr(eq + 1)));
  }
  return out;
}

double round_to(double v, int decimals) noexcept {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

namespace {

// A number as nlohmann::json's dump() writes a double: the shortest text that reads back as the same double, with
// ".0" after a whole number, and null for a value JSON cannot hold.
void append_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  const std::string_view t(buf, static_cast<std::size_t>(r.ptr - buf));
  out += t;
  if (t.find_first_of(".e") == std::string_view::npos) out += ".0";
}

void append_integer(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// The most characters append_number writes ("-2.2250738585072014e-308"), and a separator.
constexpr std::size_t kNumberChars = 25 + 1;

// Descriptors are converted to halves in blocks of a multiple of 3 bytes, so that their base64 texts join into the
// base64 of the whole array.
constexpr std::size_t kHalfBlock = 3 * 512;

}  // namespace

std::size_t features_json_bound(std::int64_t keypoints, int descriptor_dim) {
  const auto k = static_cast<std::size_t>(std::max<std::int64_t>(keypoints, 0));
  std::size_t bytes = 1024 + k * (3 * kNumberChars + 4);  // "[x,y]," and "s,"
  if (descriptor_dim > 0) bytes += (2 * static_cast<std::size_t>(descriptor_dim) * k + 2) / 3 * 4 + 128;
  return bytes;
}

void append_features_json(std::string& out, const Features& f, double queue_ms) {
  const std::size_t n = f.size();
  out += "{\"keypoints\":[";
  for (std::size_t i = 0; i < n; ++i) {
    out += i ? ",[" : "[";
    append_number(out, round_to(f.keypoints[2 * i], 3));
    out += ',';
    append_number(out, round_to(f.keypoints[2 * i + 1], 3));
    out += ']';
  }
  out += "],\"scores\":[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    append_number(out, round_to(f.scores[i], 6));
  }
  out += "],\"descriptors\":";
  if (f.has_descriptors) {
    out += "{\"dtype\":\"float16\",\"shape\":[";
    append_integer(out, static_cast<std::int64_t>(n));
    out += ',';
    append_integer(out, f.descriptor_dim);
    out += "],\"data\":\"";
    // x86-64 is little-endian, so the in-memory halves are the wire format (numpy "<f2").
    std::uint16_t half[kHalfBlock];
    for (std::size_t i = 0; i < f.descriptors.size(); i += kHalfBlock) {
      const std::size_t m = std::min(kHalfBlock, f.descriptors.size() - i);
      for (std::size_t j = 0; j < m; ++j) half[j] = util::float_to_half(f.descriptors[i + j]);
      base64_append(out, half, m * sizeof(std::uint16_t));
    }
    out += "\"}";
  } else {
    out += "null";
  }
  out += ",\"image_size\":[";
  append_integer(out, f.image_size[0]);
  out += ',';
  append_integer(out, f.image_size[1]);
  out += "],\"scale\":[";
  append_number(out, f.scale[0]);
  out += ',';
  append_number(out, f.scale[1]);
  out += "],\"timing_ms\":{";
  const std::pair<const char*, double> timing[] = {{"queue", queue_ms},
                                                   {"decode", f.timing_ms.decode},
                                                   {"preprocess", f.timing_ms.preprocess},
                                                   {"forward", f.timing_ms.forward},
                                                   {"postprocess", f.timing_ms.postprocess}};
  for (const auto& [name, ms] : timing) {
    if (name != timing[0].first) out += ',';
    out += '"';
    out += name;
    out += "\":";
    append_number(out, round_to(ms, 3));
  }
  out += "}}";
}

std::size_t matches_json_bound(std::int64_t rows) {
  const auto r = static_cast<std::size_t>(std::max<std::int64_t>(rows, 0));
  return 512 + r * (2 * 11 + 4 + kNumberChars);  // "[i,j]," and "s,"
}

namespace {

// "matches": [[i, j], ...], "scores": [...] of the rows with matches0[i] >= 0, and the "match" object `match`.
void append_pairs_json(std::string& out, std::span<const std::int32_t> matches0, std::span<const float> scores0,
                       const nlohmann::json& match) {
  out += "\"matches\":[";
  bool first = true;
  for (std::size_t i = 0; i < matches0.size(); ++i) {
    if (matches0[i] < 0) continue;
    out += first ? "[" : ",[";
    first = false;
    append_integer(out, static_cast<std::int64_t>(i));
    out += ',';
    append_integer(out, matches0[i]);
    out += ']';
  }
  out += "],\"scores\":[";
  first = true;
  for (std::size_t i = 0; i < matches0.size(); ++i) {
    if (matches0[i] < 0) continue;
    if (!first) out += ',';
    first = false;
    append_number(out, round_to(scores0[i], 6));
  }
  out += "],\"match\":";
  out += match.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void append_timing_json(std::string& out, double match_ms) {
  out += ",\"timing_ms\":{\"match\":";
  append_number(out, round_to(match_ms, 3));
  out += '}';
}

}  // namespace

void append_matches_json(std::string& out, const Matches& m, const MatchOptions& options, const std::string& conf,
                         double match_ms) {
  append_pairs_json(out, m.matches0, m.scores0,
                    {{"conf", conf},
                     {"ratio", options.ratio_threshold},
                     {"distance", options.distance_threshold},
                     {"mutual", options.mutual_check}});
  append_timing_json(out, match_ms);
}

void append_lightglue_matches_json(std::string& out, const LightGlueMatches& m, const LightGlueOptions& options,
                                   double match_ms) {
  nlohmann::json match{{"matcher", "lightglue"}};
  for (const auto& spec : lightglue_param_specs())
    match[std::string(spec.name)] = lightglue_param_value(options, spec.name);
  append_pairs_json(out, m.matches0, m.scores0, match);
  out += ",\"stop\":";
  append_integer(out, m.stop);
  append_timing_json(out, match_ms);
}

std::size_t features_npz_bound(std::int64_t keypoints, int descriptor_dim) {
  const auto k = static_cast<std::size_t>(std::max<std::int64_t>(keypoints, 0));
  return 5 * util::NpzWriter::kMemberOverhead + 22 + 16 + 8 +
         k * (8 + 4 + 2 * static_cast<std::size_t>(descriptor_dim));
}

void write_features_npz(std::string& out, const Features& f) {
  const auto n = static_cast<std::int64_t>(f.size());
  out.reserve(features_npz_bound(n, f.has_descriptors ? f.descriptor_dim : 0));
  util::NpzWriter w(out);
  const auto copy = [](const std::vector<float>& v) {
    return [p = &v](std::uint8_t* dst) {
      if (!p->empty()) std::memcpy(dst, p->data(), p->size() * sizeof(float));
    };
  };
  // The members in np.savez's (sorted) order, as npz_bytes writes them.
  if (f.has_descriptors)
    w.add("descriptors", "f2", {n, f.descriptor_dim}, f.descriptors.size() * sizeof(std::uint16_t),
          [&f](std::uint8_t* dst) {
            for (std::size_t i = 0; i < f.descriptors.size(); ++i) {
              const std::uint16_t h = util::float_to_half(f.descriptors[i]);
              std::memcpy(dst + 2 * i, &h, 2);  // little-endian, as numpy's "<f2"
            }
          });
  const std::int64_t size[2] = {f.image_size[0], f.image_size[1]};
  w.add("image_size", "i8", {2}, sizeof size, [&size](std::uint8_t* dst) { std::memcpy(dst, size, sizeof size); });
  w.add("keypoints", "f4", {n, 2}, f.keypoints.size() * sizeof(float), copy(f.keypoints));
  const float scale[2] = {f.scale[0], f.scale[1]};
  w.add("scale", "f4", {2}, sizeof scale, [&scale](std::uint8_t* dst) { std::memcpy(dst, scale, sizeof scale); });
  w.add("scores", "f4", {n}, f.scores.size() * sizeof(float), copy(f.scores));
  w.finish();
}

nlohmann::json precisions_json(const std::vector<PrecisionReport>& reports) {
  nlohmann::json a = nlohmann::json::array();
  for (const PrecisionReport& r : reports)
    a.push_back({{"precision", r.precision},
                 {"runs", r.runs},
                 {"time_vs_fp32", r.time_vs_fp32 > 0 ? nlohmann::json(r.time_vs_fp32) : nlohmann::json(nullptr)},
                 {"measured", r.measured},
                 {"basis", r.basis},
                 {"quality", r.quality}});
  return a;
}

}  // namespace superpoint_rt::server
