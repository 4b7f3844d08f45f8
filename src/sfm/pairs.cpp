// hloc pair lists (pairs.hpp).
#include "sfm/pairs.hpp"

#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"

namespace superpoint_rt::sfm {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f';  // '\n' and '\r' end the line first
}

}  // namespace

std::vector<NamePair> parse_pairs(std::string_view text, const std::string& source) {
  std::vector<NamePair> out;
  std::size_t line_no = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    ++line_no;
    std::size_t end = text.find_first_of("\r\n", at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + (end + 1 < text.size() && text[end] == '\r' && text[end + 1] == '\n' ? 2 : 1);
    std::string_view fields[3];
    std::size_t n = 0;
    for (std::size_t i = 0; i < line.size() && n < 3;) {
      while (i < line.size() && is_space(line[i])) ++i;
      const std::size_t start = i;
      while (i < line.size() && !is_space(line[i])) ++i;
      if (i > start) fields[n++] = line.substr(start, i - start);
    }
    if (n == 0) continue;
    if (n != 2) {
      const std::string shown(line.substr(0, 200));
      throw Error(ErrorKind::InvalidArgument, source + ":" + std::to_string(line_no) + ": '" + shown +
                                                  (line.size() > 200 ? "...'" : "'") +
                                                  " is not a pair (expected two image names: name0 name1)");
    }
    out.push_back({std::string(fields[0]), std::string(fields[1])});
  }
  return out;
}

std::vector<NamePair> read_pairs(const std::string& path) {
  return parse_pairs(util::read_text_file(path, kMaxPairsFileBytes), path);
}

}  // namespace superpoint_rt::sfm
