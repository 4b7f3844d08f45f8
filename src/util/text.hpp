// Text from outside the process (a query value, a parameter name) quoted in messages.
#pragma once

#include <string>
#include <string_view>

namespace superpoint_rt::util {

/// `s` as an error message may quote it: control characters (NUL, which would end the message at what(), newlines,
/// escapes) and DEL become \xNN and a backslash becomes "\\", so the message shows every byte the client sent and
/// nothing it could not see. Other bytes (printable ASCII, UTF-8) are kept.
inline std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace superpoint_rt::util
