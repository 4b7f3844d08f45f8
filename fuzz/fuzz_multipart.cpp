// Fuzz harness: the HTTP server's multipart/form-data parser (src/server/multipart.hpp). The input is a Content-Type
// value (up to the first '\n') and a body.
// Properties checked besides the sanitizers: every part's content is a view inside the body; there are at most
// kMaxMultipartParts parts; and writing the parts again with the same boundary (as a browser would) parses to the same
// names, file names and contents (when no content holds the delimiter, which makes the body ambiguous by design).
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "server/multipart.hpp"

using namespace superpoint_rt::server;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = in.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::string_view content_type = in.substr(0, nl), body = in.substr(nl + 1);
  std::string boundary;
  std::vector<MultipartPart> parts;
  if (!sprt_fuzz::ok([&] { boundary = multipart_boundary(content_type); })) return 0;
  if (!sprt_fuzz::ok([&] { parts = parse_multipart(body, boundary); })) return 0;
  FUZZ_CHECK(parts.size() <= kMaxMultipartParts, "%zu parts", parts.size());
  std::string again;
  bool plain = true;  // names and file names that need no escaping
  for (const MultipartPart& p : parts) {
    FUZZ_CHECK(p.content.data() >= body.data() && p.content.data() + p.content.size() <= body.data() + body.size(),
               "a part's content outside the body");
    plain = plain && p.name.find_first_of("\"\\\r\n") == std::string::npos &&
            p.filename.find_first_of("\"\\\r\n") == std::string::npos;
    again += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + p.name + "\"";
    if (!p.filename.empty()) again += "; filename=\"" + p.filename + "\"";
    again += "\r\n\r\n";
    again += p.content;
    again += "\r\n";
  }
  again += "--" + boundary + "--\r\n";
  if (!plain) return 0;
  std::vector<MultipartPart> reparsed;
  FUZZ_CHECK(sprt_fuzz::ok([&] { reparsed = parse_multipart(again, boundary); }), "its own writing does not parse");
  FUZZ_CHECK(reparsed.size() == parts.size(), "%zu parts written, %zu read back", parts.size(), reparsed.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    FUZZ_CHECK(reparsed[i].name == parts[i].name, "part %zu's name changed", i);
    FUZZ_CHECK(reparsed[i].filename == parts[i].filename, "part %zu's file name changed", i);
    FUZZ_CHECK(reparsed[i].content == parts[i].content, "part %zu's content changed", i);
  }
  return 0;
}
