// util/half.hpp against an independent reference (common/half_reference.hpp: the compiler's _Float16 conversions,
// or the F16C instructions), over every half and many random floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "common/half_reference.hpp"
#include "util/half.hpp"

namespace {

using superpoint_rt::util::float_to_half;
using superpoint_rt::util::half_to_float;

using sprt_test::reference_float;
using sprt_test::reference_half;

bool is_nan_half(std::uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

TEST(Half, EveryHalfConvertsExactlyAndBack) {
  for (std::uint32_t i = 0; i <= 0xffffu; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float f = half_to_float(h);
    if (is_nan_half(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << i;
      // The payload is kept (numpy's astype(float32) does); a signalling NaN comes back quiet.
      ASSERT_EQ(std::bit_cast<std::uint32_t>(f) & 0x7fffffu, (h & 0x3ffu) << 13) << std::hex << i;
      ASSERT_EQ(float_to_half(f), h | 0x200u) << std::hex << i;
      continue;
    }
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), std::bit_cast<std::uint32_t>(reference_float(h))) << std::hex << i;
    ASSERT_EQ(float_to_half(f), h) << std::hex << i;
  }
}

TEST(Half, RandomFloatsRoundLikeTheCompiler) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<std::uint32_t> bits;
  // Exponents near the half range are where rounding happens: draw most values there, the rest anywhere.
  std::uniform_int_distribution<std::uint32_t> exp(100, 145);
  for (int i = 0; i < 2000000; ++i) {
    std::uint32_t b = bits(rng);
    if (i % 4 != 0) b = (b & 0x807fffffu) | (exp(rng) << 23);
    const float f = std::bit_cast<float>(b);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan_half(float_to_half(f))) << std::hex << b;
      ASSERT_EQ(float_to_half(f) & 0x8000u, (b >> 16) & 0x8000u) << std::hex << b;
      continue;
    }
    ASSERT_EQ(float_to_half(f), reference_half(f)) << "float bits 0x" << std::hex << b << " = " << f;
  }
}

TEST(Half, Boundaries) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(float_to_half(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // ties to even: inf
  EXPECT_EQ(float_to_half(inf), 0x7c00);
  EXPECT_EQ(float_to_half(-inf), 0xfc00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);             // exactly half of it: ties to even, zero
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);             // above the tie
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1023.5f, -24)), 0x0400);          // largest subnormal + half a unit: carries up
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even mantissa stays
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd mantissa rounds up
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0xfc00), -inf);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
}

}  // namespace
