// IEEE 754 binary16 ("half", numpy's float16, safetensors' F16) <-> float32: the one conversion used by the HDF5
// feature files (batch/), the server's descriptors (server/codec), NPZ reading (util/npz) and F16 weights
// (model/weights). Inline: the callers convert whole descriptor arrays in loops. Pure functions: thread-safe.
#pragma once

#include <bit>
#include <cstdint>

namespace superpoint_rt::util {

/// float32 -> binary16 bits with round-to-nearest-even, as numpy's astype(np.float16) and the C _Float16
/// conversion: overflow (|x| >= 65520) gives +-inf, NaN stays a quiet NaN with its sign and top payload bits, values
/// below half the smallest subnormal (2^-25) flush to a signed zero (exactly 2^-25 ties to even, i.e. zero).
inline std::uint16_t float_to_half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
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

/// binary16 bits -> float32, exact (every half is a float). A NaN keeps its sign and payload (as numpy's
/// astype(np.float32)), so float_to_half(half_to_float(h)) == h for every h but the signalling NaNs, which come back
/// quiet.
inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return std::bit_cast<float>(sign);  // signed zero
  // Subnormal: man * 2^-24; normalise the mantissa so that its leading 1 becomes the implicit bit.
  const int lead = std::countl_zero(man) - 21;  // shifts that bring bit 10 up: man < 2^10, so 1..10
  const std::uint32_t m = (man << lead) & 0x3ffu;
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(113 - lead) << 23) | (m << 13));
}

}  // namespace superpoint_rt::util
