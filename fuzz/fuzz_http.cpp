// Fuzz harness: the HTTP server's request handling, in process, without a socket. The input is the raw bytes a
// client sends on one connection (request line, headers, body; several pipelined requests are served in turn, as
// on a keep-alive connection). They go through the server's own transport (src/server/transport.cpp: Beast's request
// parser with the server's limits on the request line, the header, Content-Length and chunked bodies, the body's
// memory claim, Expect: 100-continue) into the real routes of src/server/server.cpp (route and method, Content-Type
// and Content-Encoding, the query fields, the multipart parser, the image header probe, the error mapping), by
// HttpServer::serve_bytes, the same code a connection runs. The server is marked ready with no model loaded, so an
// image request runs every check up to its memory estimate and then gets 503 from the closed model: the parsers are
// measured, not the network.
// Properties checked besides the sanitizers: the server writes only whole answers, each with an HTTP/1.x status
// line, a Content-Length and that many body bytes; no answer is 500 (an internal error); an answer that is not the
// last of the exchange keeps the connection open.
#include <algorithm>
#include <cstring>
#include <string>

#include "fuzz_util.hpp"
#include "server/server.hpp"

namespace {

superpoint_rt::server::HttpServer& server() {
  static superpoint_rt::server::HttpServer* s = [] {
    superpoint_rt::server::ServerConfig cfg;
    cfg.port = 0;
    cfg.workers = 1;
    cfg.queue = 1;
    cfg.max_body_bytes = 1 << 20;  // small bodies: the parsers are under test, not the allocator
    cfg.max_pixels = sprt_fuzz::kMaxPixels;
    cfg.max_request_line_bytes = 1024;  // small limits, so that inputs of a few KB reach them
    cfg.max_header_bytes = 2048;
    auto* h = new superpoint_rt::server::HttpServer(cfg);  // never destroyed: libFuzzer exits without running it
    h->set_ready_without_model();
    return h;
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string out = server().serve_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  static const bool verbose = std::getenv("SPRT_FUZZ_VERBOSE") != nullptr;
  std::size_t at = 0;
  while (at < out.size()) {
    const std::string_view rest(out.data() + at, out.size() - at);
    if (verbose) std::fprintf(stderr, "answer -> %.200s\n", std::string(rest.substr(0, 200)).c_str());
    FUZZ_CHECK(rest.rfind("HTTP/1.1 ", 0) == 0 || rest.rfind("HTTP/1.0 ", 0) == 0, "answer starts with '%.20s'",
               std::string(rest.substr(0, 20)).c_str());
    const int status = std::atoi(rest.data() + 9);
    FUZZ_CHECK(status >= 100 && status <= 599, "status %d", status);
    FUZZ_CHECK(status != 500, "HTTP 500: %.400s", std::string(rest.substr(0, 400)).c_str());
    const std::size_t end = rest.find("\r\n\r\n");
    FUZZ_CHECK(end != std::string_view::npos, "an answer without the end of its header");
    if (status == 100) {  // Expect: 100-continue, then the final answer
      at += end + 4;
      continue;
    }
    const std::string_view head = rest.substr(0, end);
    const std::size_t cl = head.find("\r\nContent-Length: ");
    FUZZ_CHECK(cl != std::string_view::npos, "an answer without Content-Length");
    const std::size_t length = std::strtoull(head.data() + cl + 18, nullptr, 10);
    const std::size_t body = at + end + 4;
    std::size_t next = body + length;
    const auto answer_at = [&](std::size_t i) { return i == out.size() || out.compare(i, 5, "HTTP/") == 0; };
    // A HEAD answer has the GET answer's length and no body (no body of ours starts with "HTTP/").
    if (!(next <= out.size() && answer_at(next)) && answer_at(body)) next = body;
    FUZZ_CHECK(next <= out.size() && answer_at(next), "an answer cut short: %zu bytes after its header, %zu announced",
               out.size() - body, length);
    if (next < out.size())
      FUZZ_CHECK(head.find("\r\nConnection: close") == std::string_view::npos, "an answer after Connection: close");
    at = next;
  }
  return 0;
}
