#include "server/codec.hpp"

#include <cmath>
#include <map>

#include "util/npz.hpp"

namespace superpoint_rt::server {

std::string base64_encode(const void* data, std::size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
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
  return out;
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

nlohmann::json features_to_json(const Features& f, double queue_ms) {
  const std::size_t n = f.size();
  nlohmann::json kps = nlohmann::json::array();
  for (std::size_t i = 0; i < n; ++i)
    kps.push_back({round_to(f.keypoints[2 * i], 3), round_to(f.keypoints[2 * i + 1], 3)});
  nlohmann::json scores = nlohmann::json::array();
  for (std::size_t i = 0; i < n; ++i) scores.push_back(round_to(f.scores[i], 6));
  nlohmann::json j;
  j["keypoints"] = std::move(kps);
  j["scores"] = std::move(scores);
  if (f.has_descriptors) {
    std::vector<std::uint16_t> half(f.descriptors.size());
    for (std::size_t i = 0; i < half.size(); ++i) half[i] = util::float_to_half(f.descriptors[i]);
    // x86-64 is little-endian, so the in-memory halves are the wire format (numpy "<f2").
    j["descriptors"] = {{"dtype", "float16"},
                        {"shape", {n, f.descriptor_dim}},
                        {"data", base64_encode(half.data(), half.size() * sizeof(std::uint16_t))}};
  } else {
    j["descriptors"] = nullptr;
  }
  j["image_size"] = {f.image_size[0], f.image_size[1]};
  j["scale"] = {f.scale[0], f.scale[1]};
  j["timing_ms"] = {{"queue", round_to(queue_ms, 3)},
                    {"decode", round_to(f.timing_ms.decode, 3)},
                    {"preprocess", round_to(f.timing_ms.preprocess, 3)},
                    {"forward", round_to(f.timing_ms.forward, 3)},
                    {"postprocess", round_to(f.timing_ms.postprocess, 3)}};
  return j;
}

nlohmann::json matches_to_json(const Matches& m, const MatchOptions& options, const std::string& conf,
                               double match_ms) {
  nlohmann::json pairs = nlohmann::json::array(), scores = nlohmann::json::array();
  for (std::size_t i = 0; i < m.matches0.size(); ++i) {
    if (m.matches0[i] < 0) continue;
    pairs.push_back({i, m.matches0[i]});
    scores.push_back(round_to(m.scores0[i], 6));
  }
  nlohmann::json j;
  j["matches"] = std::move(pairs);
  j["scores"] = std::move(scores);
  j["match"] = {{"conf", conf},
                {"ratio", options.ratio_threshold},
                {"distance", options.distance_threshold},
                {"mutual", options.mutual_check}};
  j["timing_ms"] = {{"match", round_to(match_ms, 3)}};
  return j;
}

std::vector<std::uint8_t> features_to_npz(const Features& f) {
  using util::NpyArray;
  const auto n = static_cast<std::int64_t>(f.size());
  std::map<std::string, NpyArray> arrays;
  arrays["keypoints"] = NpyArray::from_float(f.keypoints, {n, 2});
  arrays["scores"] = NpyArray::from_float(f.scores, {n});
  if (f.has_descriptors) {
    std::vector<std::uint16_t> half(f.descriptors.size());
    for (std::size_t i = 0; i < half.size(); ++i) half[i] = util::float_to_half(f.descriptors[i]);
    arrays["descriptors"] =
        NpyArray::from_bytes("f2", half.data(), half.size() * sizeof(std::uint16_t), {n, f.descriptor_dim});
  }
  arrays["image_size"] = NpyArray::from_int64({f.image_size[0], f.image_size[1]}, {2});
  arrays["scale"] = NpyArray::from_float({f.scale[0], f.scale[1]}, {2});
  return util::npz_bytes(arrays);
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
