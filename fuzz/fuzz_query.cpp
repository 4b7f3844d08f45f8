// Fuzz harness: the HTTP server's query-string parser (parse_query, src/server/codec.hpp). The input is a query
// string (what follows '?' in a request target).
// Properties checked besides the sanitizers: at most kMaxQueryFields fields; no field from an empty segment; and the
// fields written again with every byte percent-encoded parse to the same names and values.
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "server/codec.hpp"

using namespace superpoint_rt::server;

namespace {

std::string encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += '%';
    out += kHex[u >> 4];
    out += kHex[u & 15];
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view query(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> fields;
  if (!sprt_fuzz::ok([&] { fields = parse_query(query); })) return 0;
  FUZZ_CHECK(fields.size() <= kMaxQueryFields, "%zu fields", fields.size());
  std::string again;
  for (const auto& [name, value] : fields) {
    FUZZ_CHECK(name.size() + value.size() <= query.size(), "a field longer than the query");
    if (!again.empty()) again += '&';
    again += encode(name);
    again += '=';
    again += encode(value);
  }
  std::vector<std::pair<std::string, std::string>> reparsed;
  FUZZ_CHECK(sprt_fuzz::ok([&] { reparsed = parse_query(again); }), "its own writing does not parse");
  // A field with an empty name and value ("=") is a segment of its own: it survives the round trip as "=".
  FUZZ_CHECK(reparsed == fields, "%zu fields written, %zu read back differently", fields.size(), reparsed.size());
  return 0;
}
