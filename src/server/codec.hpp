// Encoding pieces of the HTTP server: base64, query strings, and the JSON / NPZ bodies of a
// /v1/keypoints response. Pure functions of their arguments: thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "superpoint_rt/features.hpp"
#include "superpoint_rt/match.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/half.hpp"

namespace superpoint_rt::server {

/// Standard base64 (RFC 4648, '+' '/', '=' padding), as Python's base64.b64encode.
std::string base64_encode(const void* data, std::size_t n);

/// Splits the query part of a request target ("a=1&b=x%20y") into (name, value) pairs in order, percent-decoding
/// both and turning '+' into a space (application/x-www-form-urlencoded, as Python's urllib.parse.urlencode
/// writes). Empty segments ("a=1&&b=2") are skipped; a name without '=' has an empty value.
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query);

/// The JSON body of one result: {"keypoints": [[x, y], ...] rounded to 3 decimals, "scores": rounded to 6,
/// "descriptors": {"dtype": "float16", "shape": [N, 256], "data": base64 of the little-endian halves} or null,
/// "image_size": [h, w], "scale": [sx, sy], "timing_ms": {...}}. `queue_ms` is the time spent waiting for a worker.
nlohmann::json features_to_json(const Features& f, double queue_ms);

/// The matcher's part of a /v1/match answer: {"matches": [[i, j], ...] (i in image0, j in image1, increasing i),
/// "scores": [...] (hloc's matching scores, rounded to 6 decimals), "match": {"conf", "ratio", "distance", "mutual"}
/// (the effective matcher; 0 = off), "timing_ms": {"match": ms}}.
nlohmann::json matches_to_json(const Matches& m, const MatchOptions& options, const std::string& conf, double match_ms);

/// The NPZ body (np.load-able): keypoints float32 (N,2), scores float32 (N,), descriptors float16 (N,256) when
/// present, image_size int64 (2,) as (height, width), scale float32 (2,).
std::vector<std::uint8_t> features_to_npz(const Features& f);

/// The precisions on this CPU as /v1/info and `superpoint-rt bench --json` give them: [{"precision", "runs",
/// "time_vs_fp32" (null when unknown), "measured", "basis", "quality"}, ...] (PrecisionReport's fields).
nlohmann::json precisions_json(const std::vector<PrecisionReport>& reports = precisions_on_this_cpu());

/// Rounds to `decimals` decimal places (half away from zero) in double, for JSON output.
double round_to(double v, int decimals) noexcept;

}  // namespace superpoint_rt::server
