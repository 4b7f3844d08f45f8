// SPRT_TEST_ASAN is defined when AddressSanitizer instruments the program: GCC says so with __SANITIZE_ADDRESS__,
// clang (the sanitizer tree of scripts/test.sh) only through __has_feature(address_sanitizer).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SPRT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPRT_TEST_ASAN 1
#endif
#endif
