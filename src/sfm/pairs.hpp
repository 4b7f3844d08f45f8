// hloc's pair lists (pairs_from_exhaustive.py, pairs_from_retrieval.py, ...): one "name0 name1" per line, read as
// hloc's import_matches reads them ([p.split() for p in f.readlines()]). Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace superpoint_rt::sfm {

/// The largest pair list read (1 GiB: about 20 million pairs of 50-character names).
inline constexpr std::uint64_t kMaxPairsFileBytes = std::uint64_t{1} << 30;

struct NamePair {
  std::string name0, name1;
};

/// The pairs of a pair list's text, in file order. Lines end at '\n', '\r\n' or '\r' (Python's universal newlines);
/// each is split at ASCII whitespace (str.split()); a line with no field is skipped (as hloc's parse_retrieval; its
/// import_matches would stop there), a line with another number of fields than two is an Error(InvalidArgument)
/// naming `source`, the line number and the line.
std::vector<NamePair> parse_pairs(std::string_view text, const std::string& source);

/// parse_pairs of a file. Error(NotFound) / Error(Io) naming the path, Error(TooLarge) above kMaxPairsFileBytes.
std::vector<NamePair> read_pairs(const std::string& path);

}  // namespace superpoint_rt::sfm
