// Shared pieces of the fuzz harnesses (fuzz/fuzz_<name>.cpp).
//
// Contract the harnesses check: the library never aborts on bad input; every failure is a superpoint_rt::Error. Any
// other exception that escapes a parser (std::bad_alloc, std::length_error, nlohmann::json errors, ...) leaves
// LLVMFuzzerTestOneInput uncaught and is reported as a crash, like a sanitizer finding or a failed FUZZ_CHECK.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

#include "superpoint_rt/errors.hpp"

namespace sprt_fuzz {

/// The pixel limit of the image harnesses: 512 x 512. One execution then stays in the milliseconds, so the fuzzer
/// measures the parsers rather than big allocations; larger declared sizes take the TooLarge path, which is one of
/// the paths under test.
inline constexpr std::int64_t kMaxPixels = std::int64_t{1} << 18;

/// Runs `f`; returns true when it returned, false when it threw superpoint_rt::Error (the one allowed failure).
template <class F>
bool ok(F&& f) {
  try {
    f();
    return true;
  } catch (const superpoint_rt::Error& e) {
    // SPRT_FUZZ_VERBOSE=1 prints each error: to see what a seed or a reproduced input reaches.
    static const bool verbose = std::getenv("SPRT_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "Error(%s): %s\n", superpoint_rt::to_string(e.kind()), e.what());
    return false;
  }
}

/// Splits `data` at the first `separator`: {before, after}, or {data, {}} with found = false.
struct Split {
  std::span<const std::uint8_t> before, after;
  bool found = false;
};
inline Split split_at(std::span<const std::uint8_t> data, std::string_view separator) {
  const std::string_view s(reinterpret_cast<const char*>(data.data()), data.size());
  const std::size_t at = s.find(separator);
  if (at == std::string_view::npos) return {data, {}, false};
  return {data.first(at), data.subspan(at + separator.size()), true};
}

}  // namespace sprt_fuzz

/// A property of the code under test that must hold for every input (not an input check): prints what failed and
/// aborts, which libFuzzer and the replay report as a crash with the input that caused it.
#define FUZZ_CHECK(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                   \
      std::fprintf(stderr, "\n");                                                          \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
