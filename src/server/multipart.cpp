#include "server/multipart.hpp"

#include <cctype>

#include "superpoint_rt/errors.hpp"
#include "util/text.hpp"

namespace superpoint_rt::server {
namespace {

[[noreturn]] void malformed(const std::string& what) {
  throw Error(ErrorKind::DecodeError, "malformed multipart/form-data body: " + what);
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The parameters of a header value "type; a=b; c=\"d\"" (RFC 9110 §5.6.6): each name (lower case) and its value,
// unquoted (a backslash escapes the next character in a quoted string). The first element is the value before the
// first ';' with an empty name. Throws for an unterminated quoted string.
std::vector<std::pair<std::string, std::string>> parameters(std::string_view v, const char* what) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t i = v.find(';');
  out.emplace_back(std::string(), std::string(trim(v.substr(0, i))));
  while (i != std::string_view::npos && i < v.size()) {
    ++i;  // past ';'
    while (i < v.size() && (v[i] == ' ' || v[i] == '\t')) ++i;
    const std::size_t name_start = i;
    while (i < v.size() && v[i] != '=' && v[i] != ';') ++i;
    std::string name(trim(v.substr(name_start, i - name_start)));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value;
    if (i < v.size() && v[i] == '=') {
      ++i;
      while (i < v.size() && (v[i] == ' ' || v[i] == '\t')) ++i;
      if (i < v.size() && v[i] == '"') {
        ++i;
        bool closed = false;
        while (i < v.size()) {
          const char c = v[i++];
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\' && i < v.size()) {
            value.push_back(v[i++]);
            continue;
          }
          value.push_back(c);
        }
        if (!closed)
          malformed(std::string(what) + ": the quoted value of '" + util::printable(name) + "' is not closed");
        while (i < v.size() && v[i] != ';') ++i;
      } else {
        const std::size_t start = i;
        while (i < v.size() && v[i] != ';') ++i;
        value = std::string(trim(v.substr(start, i - start)));
      }
    }
    if (!name.empty()) out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

// One part's header block (lines without the blank line): its Content-Disposition's name and filename.
void read_part_headers(std::string_view block, MultipartPart& part, std::size_t index) {
  bool disposition = false;
  std::string_view line_rest = block;
  while (!line_rest.empty()) {
    std::size_t eol = line_rest.find("\r\n");
    std::string_view line = line_rest.substr(0, eol);
    line_rest = eol == std::string_view::npos ? std::string_view{} : line_rest.substr(eol + 2);
    // Obsolete line folding (RFC 9112 §5.2): a continuation line belongs to the field before it; none of the fields
    // read here may be folded, so it is refused.
    if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
      malformed("part " + std::to_string(index) + " has a folded header line");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      malformed("part " + std::to_string(index) + " has a header line without a name: '" +
                util::printable(line.substr(0, 80)) + "'");
    if (!iequals(line.substr(0, colon), "content-disposition")) continue;
    if (disposition) malformed("part " + std::to_string(index) + " has two Content-Disposition fields");
    disposition = true;
    const auto params = parameters(line.substr(colon + 1), "Content-Disposition");
    if (!iequals(params[0].second, "form-data"))
      malformed("part " + std::to_string(index) + " has Content-Disposition '" + util::printable(params[0].second) +
                "', not form-data");
    bool named = false;
    for (std::size_t k = 1; k < params.size(); ++k) {
      if (params[k].first == "name") {
        part.name = params[k].second;
        named = true;
      } else if (params[k].first == "filename") {
        part.filename = params[k].second;
      }
    }
    if (!named) malformed("part " + std::to_string(index) + " has no field name (Content-Disposition name=...)");
  }
  if (!disposition) malformed("part " + std::to_string(index) + " has no Content-Disposition header");
}

}  // namespace

std::string multipart_boundary(std::string_view content_type) {
  const auto params = parameters(content_type, "Content-Type");
  for (std::size_t k = 1; k < params.size(); ++k) {
    if (params[k].first != "boundary") continue;
    const std::string& b = params[k].second;
    // RFC 2046 §5.1.1: 1 to 70 characters.
    if (b.empty() || b.size() > 70)
      malformed("the boundary has " + std::to_string(b.size()) + " characters (allowed: 1..70)");
    return b;
  }
  malformed("the Content-Type has no boundary parameter");
}

std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary) {
  if (boundary.empty() || boundary.size() > 70)
    malformed("the boundary has " + std::to_string(boundary.size()) + " characters (allowed: 1..70)");
  const std::string dash = "--" + std::string(boundary);
  const std::string delimiter = "\r\n" + dash;  // a part ends at CRLF "--" boundary
  std::size_t pos = 0;
  if (body.substr(0, dash.size()) != dash) {  // a preamble: the first delimiter follows a CRLF
    const std::size_t first = body.find(delimiter);
    if (first == std::string_view::npos) malformed("no delimiter '--" + util::printable(boundary) + "' in the body");
    pos = first + 2;
  }
  std::vector<MultipartPart> parts;
  for (;;) {
    pos += dash.size();                             // at a delimiter: what follows says whether it closes the body
    if (body.substr(pos, 2) == "--") return parts;  // the close delimiter; the epilogue is ignored
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;  // transport padding
    if (body.substr(pos, 2) != "\r\n")
      malformed("a delimiter is followed by neither CRLF nor '--' (or the body ends there)");
    pos += 2;
    if (parts.size() == kMaxMultipartParts)
      throw Error(ErrorKind::TooLarge, "the multipart body has more than " + std::to_string(kMaxMultipartParts) +
                                           " parts (max_multipart_parts)");
    MultipartPart part;
    // The header block ends at the first blank line, within kMaxPartHeaderBytes (an empty block is the blank line).
    const std::string_view window = body.substr(pos, kMaxPartHeaderBytes);
    std::size_t header_end;
    if (window.substr(0, 2) == "\r\n") {
      header_end = 0;
    } else {
      const std::size_t blank = window.find("\r\n\r\n");
      if (blank == std::string_view::npos)
        malformed("the header block of part " + std::to_string(parts.size()) + " does not end within " +
                  std::to_string(kMaxPartHeaderBytes) + " bytes (max_part_header_bytes)");
      header_end = blank + 2;
    }
    read_part_headers(body.substr(pos, header_end == 0 ? 0 : header_end - 2), part, parts.size());
    const std::size_t content = pos + header_end + 2;
    const std::size_t next = body.find(delimiter, content);
    if (next == std::string_view::npos)
      malformed("part " + std::to_string(parts.size()) + " is not closed by a delimiter (a truncated body?)");
    part.content = body.substr(content, next - content);
    parts.push_back(std::move(part));
    pos = next + 2;
  }
}

}  // namespace superpoint_rt::server
