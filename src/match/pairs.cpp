// Pair lists (superpoint_rt/match.hpp): hloc's pairs_from_exhaustive, a sequential/video list with hloc's quadratic
// overlap and key-frame loop closure, hloc's find_unique_new_pairs, and the pairs.txt format (parse_retrieval /
// the lines pairs_from_*.py write).
#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>

#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/match.hpp"
#include "util/file.hpp"

namespace superpoint_rt {
namespace {

[[noreturn]] void invalid(const std::string& m) {
  throw Error(ErrorKind::InvalidArgument, m);
}

// The length of the whitespace character at p (0: none) by Python's str.split(), which hloc's parse_retrieval uses:
// ASCII \t \n \v \f \r, the separators \x1c-\x1f, space, and the Unicode White_Space characters (here in UTF-8).
std::size_t whitespace_at(const unsigned char* p, const unsigned char* end) {
  const unsigned char c = p[0];
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  const std::size_t left = static_cast<std::size_t>(end - p);
  if (c == 0xc2 && left >= 2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;  // U+0085, U+00A0
  if (left < 3) return 0;
  if (c == 0xe1 && p[1] == 0x9a && p[2] == 0x80) return 3;  // U+1680
  if (c == 0xe2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
    return 3;                                               // U+2000-200A, U+2028, U+2029, U+202F
  if (c == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) return 3;  // U+205F
  if (c == 0xe3 && p[1] == 0x80 && p[2] == 0x80) return 3;  // U+3000
  return 0;
}

bool has_whitespace(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size(); ++i)
    if (whitespace_at(p + i, p + s.size())) return true;
  return false;
}

// A key of the ordered pair (a, b) that no other pair shares: a's length, then both names. (Joining the names with
// a separator let ("a\0b", "c") and ("a", "b\0c") collide, issue 32: names may hold any byte.)
std::string key_of(std::string_view a, std::string_view b) {
  std::string k = std::to_string(a.size());
  k.reserve(k.size() + 1 + a.size() + b.size());
  k.push_back(':');
  k.append(a).append(b);
  return k;
}

// Pair lists are bounded as a pairs file is (kMaxPairs, parse_pairs): a list over it is refused by name before it
// is stored (issue 32: `pairs --exhaustive` on 20,000 names ended in bad_alloc).
void check_pair_count(std::size_t count, const std::string& what) {
  if (count > kMaxPairs)
    invalid(what + " gives " + std::to_string(count) + " pairs, over the limit of " + std::to_string(kMaxPairs) +
            " pairs of a pair list (kMaxPairs)");
}

}  // namespace

std::vector<ImagePair> pairs_exhaustive(std::span<const std::string> names) {
  const std::size_t n = names.size();
  // n (n - 1) / 2 without overflow: n is at most the size of a span of strings.
  check_pair_count(n < 2 ? 0 : (n % 2 == 0 ? n / 2 * (n - 1) : (n - 1) / 2 * n),
                   "exhaustive pairs of " + std::to_string(n) + " names");
  std::vector<ImagePair> out;
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j) out.emplace_back(names[i], names[j]);
  return out;
}

std::vector<ImagePair> pairs_sequential(std::span<const std::string> names, int window, bool quadratic,
                                        int loop_stride) {
  if (window < 1) invalid("sequential: window " + std::to_string(window) + " is out of range (allowed: >= 1)");
  if (loop_stride < 0)
    invalid("sequential: loop stride " + std::to_string(loop_stride) + " is out of range (allowed: >= 0, 0 = off)");
  const std::size_t n = names.size(), w = static_cast<std::size_t>(window);
  const std::string what = "sequential pairs of " + std::to_string(n) + " names (window " + std::to_string(window) +
                           (quadratic ? ", quadratic" : "") +
                           (loop_stride > 0 ? ", loop stride " + std::to_string(loop_stride) : "") + ")";
  if (loop_stride > 0) {
    // The key frames' pairs alone, less every pair the window and the quadratic overlap could share with them: over
    // the limit here means over it in the end, refused before anything is stored.
    const std::size_t m = (n + static_cast<std::size_t>(loop_stride) - 1) / static_cast<std::size_t>(loop_stride);
    const std::size_t loop = m < 2 ? 0 : (m % 2 == 0 ? m / 2 * (m - 1) : (m - 1) / 2 * m);
    const std::size_t shared = n * (std::min<std::size_t>(w, n) + 64);
    if (loop > shared) check_pair_count(loop - shared, what);
  }
  std::vector<std::pair<std::size_t, std::size_t>> idx;
  std::set<std::pair<std::size_t, std::size_t>> seen;
  auto add = [&](std::size_t i, std::size_t j) {
    if (seen.emplace(i, j).second) idx.emplace_back(i, j);
    check_pair_count(idx.size(), what);
  };
  for (std::size_t i = 0; i + 1 < n; ++i) {
    for (std::size_t j = i + 1; j <= i + w && j < n; ++j) add(i, j);
    // hloc's pairs_from_sequential (quadratic_overlap): for k = j - i in 1..window, (i, i + 2^k) when 2^k > window
    // and i + 2^k < n.
    if (quadratic)
      for (std::size_t k = 1; k <= w && k < 63; ++k) {
        const std::size_t q = std::size_t{1} << k;
        if (q >= n - i) break;
        if (q > w) add(i, i + q);
      }
  }
  if (loop_stride > 0) {
    // Loop closure against a stride: the key frames 0, s, 2s, ... are matched with each other, so that a sequence
    // that comes back to a place it saw has pairs there (hloc's version retrieves them with global descriptors).
    const auto s = static_cast<std::size_t>(loop_stride);
    for (std::size_t i = 0; i < n; i += s)
      for (std::size_t j = i + s; j < n; j += s) add(i, j);
  }
  std::vector<ImagePair> out;
  out.reserve(idx.size());
  for (const auto& [i, j] : idx) out.emplace_back(names[i], names[j]);
  return out;
}

std::vector<ImagePair> unique_pairs(std::span<const ImagePair> pairs) {
  std::unordered_set<std::string> seen;
  std::vector<ImagePair> out;
  for (const auto& [a, b] : pairs) {
    if (seen.count(key_of(b, a)) || !seen.insert(key_of(a, b)).second) continue;
    out.emplace_back(a, b);
  }
  return out;
}

std::vector<ImagePair> parse_pairs(std::string_view text, const std::string& what) {
  std::vector<ImagePair> out;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  std::size_t line = 0;
  while (p < end) {
    ++line;
    // Lines end at '\n', "\r\n" or '\r': hloc opens the file in text mode (Python's universal newlines).
    const unsigned char* eol = p;
    while (eol < end && *eol != '\n' && *eol != '\r') ++eol;
    std::string_view tokens[2];
    int count = 0;
    for (const unsigned char* q = p; q < eol;) {
      if (const std::size_t ws = whitespace_at(q, eol)) {
        q += ws;
        continue;
      }
      const unsigned char* start = q;
      while (q < eol && !whitespace_at(q, eol)) ++q;
      const auto len = static_cast<std::size_t>(q - start);
      if (len > kMaxPairNameBytes)
        invalid(what + ": line " + std::to_string(line) + ": a name of " + std::to_string(len) + " bytes (at most " +
                std::to_string(kMaxPairNameBytes) + ")");
      if (count == 2)
        invalid(what + ": line " + std::to_string(line) + ": more than two names (the format is 'name0 name1')");
      tokens[count++] = {reinterpret_cast<const char*>(start), len};
    }
    // hloc: empty lines are skipped; any other line must split into exactly two names (one is an error there too).
    if (eol == p) {
    } else if (count != 2) {
      invalid(what + ": line " + std::to_string(line) + (count == 0 ? ": only whitespace" : ": one name") +
              " (the format is 'name0 name1')");
    } else {
      if (out.size() == kMaxPairs)
        invalid(what + ": more than " + std::to_string(kMaxPairs) + " pairs (the limit of a pairs file)");
      out.emplace_back(std::string(tokens[0]), std::string(tokens[1]));
    }
    p = eol + (eol == end ? 0 : eol[0] == '\r' && eol + 1 < end && eol[1] == '\n' ? 2 : 1);
  }
  return out;
}

std::vector<ImagePair> read_pairs(const std::string& path) {
  // The text is kept whole while it is parsed: bounded by the largest file of kMaxPairs pairs of short names.
  constexpr std::uint64_t kMaxBytes = std::uint64_t{4} << 30;
  return parse_pairs(util::read_text_file(path, kMaxBytes), path);
}

void write_pairs(const std::string& path, std::span<const ImagePair> pairs) {
  std::string text;
  for (const auto& [a, b] : pairs) {
    for (const std::string* n : {&a, &b})
      if (n->empty() || has_whitespace(*n))
        invalid("pairs: the name '" + *n + "' " + (n->empty() ? "is empty" : "holds whitespace") +
                ", which a pairs file cannot hold (" + path + ")");
    if (!text.empty()) text.push_back('\n');
    text.append(a).push_back(' ');
    text.append(b);
  }
  util::write_file_atomic(path, text);
}

std::string names_to_pair(std::string_view name0, std::string_view name1, std::string_view separator) {
  std::string out;
  out.reserve(name0.size() + name1.size() + separator.size());
  for (char c : name0) out.push_back(c == '/' ? '-' : c);
  out.append(separator);
  for (char c : name1) out.push_back(c == '/' ? '-' : c);
  return out;
}

}  // namespace superpoint_rt
