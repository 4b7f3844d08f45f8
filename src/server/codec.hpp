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
#include "superpoint_rt/lightglue.hpp"
#include "superpoint_rt/match.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/half.hpp"

namespace superpoint_rt::server {

/// Standard base64 (RFC 4648, '+' '/', '=' padding), as Python's base64.b64encode.
std::string base64_encode(const void* data, std::size_t n);
/// base64_encode(data, n) appended to `out`.
void base64_append(std::string& out, const void* data, std::size_t n);

/// Query fields of one request, at most (the request line's own limit bounds their bytes).
inline constexpr std::size_t kMaxQueryFields = 64;

/// Splits the query part of a request target ("a=1&b=x%20y") into (name, value) pairs in order, percent-decoding
/// both and turning '+' into a space (application/x-www-form-urlencoded, as Python's urllib.parse.urlencode
/// writes). Empty segments ("a=1&&b=2") are skipped; a name without '=' has an empty value. More than
/// kMaxQueryFields fields: Error(InvalidArgument) naming the limit (HTTP 422). Fuzzed by fuzz/fuzz_query.cpp.
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query);

// The answers of the image routes are written as text straight into the string that is sent (issue 32: no tree of
// JSON values, no second copy). Each *_bound is an upper bound of what the writer appends for that many keypoints
// (or matches), so a server can claim an answer's memory before it computes anything.

/// Appends the JSON object of one result: {"keypoints": [[x, y], ...] rounded to 3 decimals, "scores": rounded to 6,
/// "descriptors": {"dtype": "float16", "shape": [N, 256], "data": base64 of the little-endian halves} or null,
/// "image_size": [h, w], "scale": [sx, sy], "timing_ms": {...}}. `queue_ms` is the time spent waiting for a worker.
void append_features_json(std::string& out, const Features& f, double queue_ms);
std::size_t features_json_bound(std::int64_t keypoints, int descriptor_dim);

/// Appends the matcher's members of a /v1/match answer (without braces): "matches": [[i, j], ...] (i in image0, j in
/// image1, increasing i), "scores": [...] (hloc's matching scores, rounded to 6 decimals), "match": {"conf", "ratio",
/// "distance", "mutual"} (the effective matcher; 0 = off), "timing_ms": {"match": ms}.
void append_matches_json(std::string& out, const Matches& m, const MatchOptions& options, const std::string& conf,
                         double match_ms);
/// The same for LightGlue (/v1/match?matcher=lightglue): "matches" and "scores" (cvg's matching_scores0 of each
/// match, 6 decimals), "match": {"matcher": "lightglue", "depth_confidence", "width_confidence", "filter_threshold"},
/// "stop" (the layers that ran, cvg's stop), "timing_ms": {"match": ms}.
void append_lightglue_matches_json(std::string& out, const LightGlueMatches& m, const LightGlueOptions& options,
                                   double match_ms);
/// Bound of append_matches_json (conf: a matcher configuration's name) and of append_lightglue_matches_json for
/// `rows` keypoints of image 0.
std::size_t matches_json_bound(std::int64_t rows);

/// Writes the NPZ body (np.load-able) into the empty `out`: keypoints float32 (N,2), scores float32 (N,),
/// descriptors float16 (N,256) when present, image_size int64 (2,) as (height, width), scale float32 (2,).
void write_features_npz(std::string& out, const Features& f);
std::size_t features_npz_bound(std::int64_t keypoints, int descriptor_dim);

/// The precisions on this CPU as /v1/info and `superpoint-rt bench --json` give them: [{"precision", "runs",
/// "time_vs_fp32" (null when unknown), "measured", "basis", "quality"}, ...] (PrecisionReport's fields).
nlohmann::json precisions_json(const std::vector<PrecisionReport>& reports = precisions_on_this_cpu());

/// Rounds to `decimals` decimal places (half away from zero) in double, for JSON output.
double round_to(double v, int decimals) noexcept;

}  // namespace superpoint_rt::server
