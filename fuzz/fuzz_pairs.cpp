// Fuzz harness: the pairs.txt reader (superpoint_rt::parse_pairs, hloc's parse_retrieval rules: lines of Python's
// universal newlines, Python's whitespace including the UTF-8 spaces, the name and pair limits), then unique_pairs
// and names_to_pair on what parsed.
// Properties checked besides the sanitizers: every name is non-empty, within kMaxPairNameBytes, holds no line end and
// occurs in the input; there are no more pairs than lines; unique_pairs keeps no pair twice in either order; a
// pair's group name keeps its length and has no '/' but the separator.
#include <set>
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "superpoint_rt/match.hpp"

using namespace superpoint_rt;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<ImagePair> pairs;
  if (!sprt_fuzz::ok([&] { pairs = parse_pairs(text, "fuzz.txt"); })) return 0;
  std::size_t lines = 1;
  for (char c : text) lines += c == '\n' || c == '\r';  // an upper bound ("\r\n" is one line end)
  FUZZ_CHECK(pairs.size() <= lines, "%zu pairs from %zu lines", pairs.size(), lines);
  for (const auto& [a, b] : pairs)
    for (const std::string* n : {&a, &b}) {
      FUZZ_CHECK(!n->empty() && n->size() <= kMaxPairNameBytes, "name of %zu bytes", n->size());
      FUZZ_CHECK(n->find_first_of("\r\n") == std::string::npos, "a line end in a name");
      FUZZ_CHECK(text.find(*n) != std::string_view::npos, "a name that is not in the input");
      const std::string key = names_to_pair(a, b);
      FUZZ_CHECK(key.size() == a.size() + b.size() + 1, "group name of %zu bytes", key.size());
    }
  const auto unique = unique_pairs(pairs);
  std::set<ImagePair> seen;
  for (const auto& [a, b] : unique) {
    FUZZ_CHECK(seen.insert({a, b}).second, "a pair twice");
    FUZZ_CHECK(a == b || !seen.count({b, a}), "a pair in both orders");
  }
  return 0;
}
