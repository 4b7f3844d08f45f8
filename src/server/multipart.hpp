// multipart/form-data request bodies (RFC 7578 on RFC 2046 §5.1) for the HTTP server's image routes: the server's
// own parser, bounded before it stores anything (issue 32 replaced cpp-httplib's).
//
// The parts are views into the body: nothing is copied, and a part's bytes are exactly those between its header
// block and the CRLF before the next delimiter. Limits (each refusal an Error naming the limit; HTTP status in
// brackets): at most kMaxMultipartParts parts [413 TooLarge], a part's header block at most kMaxPartHeaderBytes
// [400 DecodeError], a boundary of 1..70 characters (RFC 2046) [400]. A body without the closing delimiter, a
// delimiter not followed by CRLF or "--", a part without a Content-Disposition of form-data with a name: 400.
// Pure functions of their arguments: thread-safe. Fuzzed by fuzz/fuzz_multipart.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace superpoint_rt::server {

/// Parts in one multipart body, at most (the batch route's own --max-batch-parts is checked after).
inline constexpr std::size_t kMaxMultipartParts = 1024;
/// Bytes of one part's header block (its header lines and the blank line that ends them), at most.
inline constexpr std::size_t kMaxPartHeaderBytes = 8192;

struct MultipartPart {
  std::string name;          // the Content-Disposition name parameter (form field)
  std::string filename;      // its filename parameter, "" when absent
  std::string_view content;  // the part's bytes, a view into the body
};

/// The boundary of a Content-Type value "multipart/form-data; boundary=..." (the parameter, unquoted). Throws
/// Error(DecodeError) when it is missing, empty, longer than 70 characters or not closed (a quoted one).
std::string multipart_boundary(std::string_view content_type);

/// The parts of `body`, in order. Throws Error(DecodeError) for a malformed body, Error(TooLarge) for more than
/// kMaxMultipartParts parts.
std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary);

}  // namespace superpoint_rt::server
