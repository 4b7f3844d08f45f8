// Encoding pieces of the HTTP server: IEEE half floats, base64, query strings, and the JSON / NPZ bodies of a
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

namespace superpoint_rt::server {

/// float32 -> IEEE 754 binary16 bits with round-to-nearest-even, as numpy's astype(np.float16) and the C
/// _Float16 conversion: overflow (|x| >= 65520) gives +-inf, NaN stays a quiet NaN with its sign, values below half
/// the smallest subnormal (2^-25) flush to a signed zero (exactly 2^-25 ties to even, i.e. zero).
inline std::uint16_t float_to_half(float f) noexcept {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf / NaN (NaN keeps its top mantissa bits and is made quiet)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
  if (ax >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65536: inf
  const std::uint32_t e = ax >> 23;
  if (e < 113) {                          // below 2^-14: a half subnormal = round(value / 2^-24)
    const std::uint32_t shift = 126 - e;  // value = m * 2^(e - 150), m with its implicit bit
    if (shift > 24) return sign;          // < 2^-25: rounds to zero
    const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal: still correct bits
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ffu);
  const std::uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent (up to inf) is correct
  return static_cast<std::uint16_t>(sign | h);
}

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

/// The NPZ body (np.load-able): keypoints float32 (N,2), scores float32 (N,), descriptors float16 (N,256) when
/// present, image_size int64 (2,) as (height, width), scale float32 (2,).
std::vector<std::uint8_t> features_to_npz(const Features& f);

/// Rounds to `decimals` decimal places (half away from zero) in double, for JSON output.
double round_to(double v, int decimals) noexcept;

}  // namespace superpoint_rt::server
