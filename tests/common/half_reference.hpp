// The independent reference for util/half.hpp (tests/util/test_half.cpp, tests/server/test_codec.cpp): IEEE 754
// binary16 conversions by the compiler's _Float16 (GCC: libgcc __truncsfhf2 / __extendhfsf2, round to nearest even)
// or, where the compiler has no _Float16 on x86-64 (clang before 15: the sanitizer tree), by the F16C instructions
// (VCVTPS2PH with round-to-nearest-even, VCVTPH2PS), which every x86 CPU with AVX2 has.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__clang__) && __clang_major__ < 15
#include <immintrin.h>
#define SPRT_TEST_HALF_BY_F16C 1
#endif

namespace sprt_test {

#if defined(SPRT_TEST_HALF_BY_F16C)
// (The _mm_ forms: clang's _cvtss_sh is a macro with a compound literal, which -Wpedantic refuses.)
__attribute__((target("f16c"))) inline std::uint16_t reference_half(float f) {
  return static_cast<std::uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) inline float reference_float(std::uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
#else
inline std::uint16_t reference_half(float f) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
}
inline float reference_float(std::uint16_t h) {
  return static_cast<float>(std::bit_cast<_Float16>(h));
}
#endif

}  // namespace sprt_test
