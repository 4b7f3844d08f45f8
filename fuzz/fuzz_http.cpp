// Fuzz harness: the HTTP server's request handling, in process, without a socket. The input is the raw bytes a
// client sends on one connection (request line, headers, body; several pipelined requests are served in turn, as
// on a keep-alive connection); they go through cpp-httplib's own parser (request line, headers, query string,
// Content-Length / chunked bodies, multipart) into the real routes and hooks of src/server/server.cpp: the query
// parameters, the content type, the multipart fields, the image header probe and the error mapping.
//
// How it reaches them without touching src/server/: this file compiles server.cpp itself, so the server's internal
// types are visible; httplib::Server::process_request (protected, the function a connection thread runs per
// request) is called on an in-memory httplib::Stream; HttpServer::impl_ is reached with the explicit-instantiation
// rule (access is not checked on the template arguments of an explicit instantiation). The server is marked ready
// with no model loaded, so an image request runs every check up to inference and then gets 503 from the closed
// model handle: the parsers are measured, not the network.
// Properties checked besides the sanitizers: every request that was read is answered with an HTTP/1.1 status line,
// and no image route answers 500 (an internal error) for any input.
#include "server/server.cpp"  // NOLINT(bugprone-suspicious-include): see above

#include <algorithm>
#include <cstring>

#include "fuzz_util.hpp"

namespace {

using superpoint_rt::server::HttpServer;

// HttpServer::impl_ and httplib::Server::process_request.
struct ImplTag {
  friend auto stolen_impl(ImplTag);
};
template <auto Member>
struct StealImpl {
  friend auto stolen_impl(ImplTag) { return Member; }
};
template struct StealImpl<&HttpServer::impl_>;

struct ProcessRequest : httplib::Server {
  static constexpr auto ptr = &ProcessRequest::process_request;
};

// One connection's bytes in memory: reads come from the input, writes are collected.
class MemoryStream : public httplib::Stream {
 public:
  MemoryStream(const char* p, std::size_t n) : p_(p), n_(n) {}
  bool is_readable() const override { return pos_ < n_; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, std::size_t size) override {
    const std::size_t k = std::min(size, n_ - pos_);
    std::memcpy(ptr, p_ + pos_, k);
    pos_ += k;
    return static_cast<ssize_t>(k);
  }
  ssize_t write(const char* ptr, std::size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8000;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

  std::size_t consumed() const { return pos_; }
  std::string& output() { return out_; }

 private:
  const char* p_;
  std::size_t n_, pos_ = 0;
  std::string out_;
};

HttpServer& server() {
  static HttpServer* s = [] {
    superpoint_rt::server::ServerConfig cfg;
    cfg.port = 0;
    cfg.workers = 1;
    cfg.queue = 1;
    cfg.max_body_bytes = 1 << 20;  // small bodies: the parsers are under test, not the allocator
    cfg.max_pixels = sprt_fuzz::kMaxPixels;
    auto* h = new HttpServer(cfg);  // never destroyed: libFuzzer exits without running it
    (*h.*stolen_impl(ImplTag{}))->ready.store(true);
    return h;
  }();
  return *s;
}

constexpr int kMaxRequests = 8;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  HttpServer& s = server();
  auto& http = (s.*stolen_impl(ImplTag{}))->http;
  MemoryStream stream(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < kMaxRequests && stream.is_readable(); ++i) {
    const std::size_t before = stream.consumed(), written = stream.output().size();
    bool closed = false;
    const bool served = (http.*ProcessRequest::ptr)(stream, false, closed, nullptr);
    const std::string response = stream.output().substr(written);
    static const bool verbose = std::getenv("SPRT_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "request %d -> %.200s\n", i, response.c_str());
    if (!response.empty()) {
      FUZZ_CHECK(response.rfind("HTTP/1.1 ", 0) == 0, "response starts with '%.20s'", response.c_str());
      const int status = std::atoi(response.c_str() + 9);
      FUZZ_CHECK(status >= 100 && status <= 599, "status %d", status);
      FUZZ_CHECK(status != 500, "HTTP 500 for request %d: %.400s", i, response.c_str());
    }
    if (!served || closed || stream.consumed() == before) break;
  }
  return 0;
}
