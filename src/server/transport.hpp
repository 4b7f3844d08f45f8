// The HTTP/1.1 transport of `superpoint-rt serve` (issue 32): connections, request parsing and response writing on
// Boost.Beast over an asynchronous Asio io_context, with every byte a client sends bounded as it arrives. The routes
// (server.cpp) see plain structs; this header includes nothing of Beast or Asio (transport.cpp is the one translation
// unit that does).
//
// Threading: `io_threads` threads run every connection; a connection costs no thread, only its buffers, so slow
// clients cannot take the server's threads. A connection reads one request at a time: the request line and headers
// (at most max_request_line_bytes, 414; max_header_bytes in all, 431; within header_timeout of their first byte,
// 408), then HttpRoutes::on_header decides on the I/O thread whether to answer at once (the body is then not read:
// the connection closes after the answer, and what the client still sends is read and dropped for up to linger) or
// to read the body (at most max_body_bytes whether sent with Content-Length or chunked, 413 at the limit; within
// body_timeout of the header's end, 408; each read within read_timeout, 408). The complete request goes to
// HttpRoutes::on_request, again on the I/O thread, which answers through its Responder from any thread, now or later;
// nothing more is read from that connection until the answer is written (each write must make progress within
// write_timeout, else the connection is dropped). At most max_connections connections are open; more wait in the
// kernel's accept queue. Request bodies are never decompressed (server.cpp refuses a Content-Encoding).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace superpoint_rt::server {

struct TransportLimits {
  std::size_t max_request_line_bytes = 8192;
  std::size_t max_header_bytes = 16384;  // the request line and every header field together
  std::uint64_t max_body_bytes = 50ULL << 20;
  int max_connections = 1024;
  int io_threads = 2;
  std::chrono::milliseconds idle_timeout{5000};     // no byte of a next request: closed silently
  std::chrono::milliseconds header_timeout{10000};  // from a request's first byte to its header's end
  std::chrono::milliseconds body_timeout{60000};    // from the header's end to the body's end
  std::chrono::milliseconds read_timeout{5000};     // each read in the middle of a request
  std::chrono::milliseconds write_timeout{5000};    // each write of an answer must make progress
  std::chrono::milliseconds linger{5000};           // reading and dropping the rest of a refused request
};

/// A request as the routes see it. Field names as sent; header(name) compares them case-insensitively.
struct HttpRequest {
  std::string method;  // the method token as sent ("GET", "TRACE", "FOO")
  std::string target;  // the request target as sent
  std::string path;    // target before '?'
  std::string query;   // target after '?' (raw, "" when none)
  unsigned version = 11;
  std::vector<std::pair<std::string, std::string>> fields;
  std::optional<std::uint64_t> content_length;  // the declared body size; none: chunked or no body
  bool chunked = false;
  std::string body;                                  // complete in on_request; empty in on_header
  std::chrono::steady_clock::time_point arrived{};   // when the header was complete
  std::chrono::steady_clock::time_point complete{};  // when the body was (in on_request): the request "arrived" for
                                                     // --timeout-s, as a slow upload is no worker's time
  /// Set by on_header: what the request holds (e.g. its memory claims), kept until its answer is written.
  std::shared_ptr<void> hold;
  /// Set by on_header: asked before the body may grow to `bytes` (declared bodies once, chunked ones as they grow);
  /// false refuses the request with 503 (Retry-After). Unset: the body needs no permission.
  std::function<bool(std::uint64_t bytes)> admit_body;

  /// The first field `name` (any letter case), or "" when absent.
  std::string_view header(std::string_view name) const;
  bool has_body() const { return chunked || content_length.value_or(0) > 0; }
};

struct HttpResponse {
  int status = 200;  // 0: no answer, the connection is dropped
  std::string content_type = "application/json";
  std::string body;                                         // moved onto the wire as it is: built once, never copied
  std::vector<std::pair<std::string, std::string>> fields;  // e.g. Allow, Retry-After
  bool close = false;                                       // close the connection after this answer
  std::shared_ptr<void> hold;  // released once the last byte is written (or the connection is gone)
};

/// Answers one request, once, from any thread. Destroying an unused Responder drops the connection.
class Responder {
 public:
  using Send = std::function<void(HttpResponse&&)>;
  Responder() = default;
  explicit Responder(Send send) : send_(std::move(send)) {}
  Responder(Responder&&) noexcept = default;
  Responder& operator=(Responder&& o) noexcept {
    if (this != &o) {
      drop();
      send_ = std::move(o.send_);
    }
    return *this;
  }
  ~Responder() { drop(); }
  void send(HttpResponse&& r) {
    if (send_) std::exchange(send_, nullptr)(std::move(r));
  }

 private:
  void drop() {
    if (!send_) return;
    HttpResponse none;
    none.status = 0;
    send(std::move(none));
  }
  Send send_;
};

/// What the transport asks of the routes (server.cpp). Called on I/O threads: none may block.
class HttpRoutes {
 public:
  virtual ~HttpRoutes() = default;
  /// A request's header is complete; its body is not read yet. An answer refuses the request at once (the body is
  /// then never read); none reads the body (with request.admit_body's permission) and calls on_request.
  virtual std::optional<HttpResponse> on_header(HttpRequest& request) = 0;
  /// The complete request: answer through `responder`, now or later.
  virtual void on_request(HttpRequest&& request, Responder responder) = 0;
  /// The answer to a request the transport refuses itself (malformed 400, limits 413 / 414 / 431, 408, 503 when
  /// admit_body refuses), in the routes' error format. The connection closes after it.
  virtual HttpResponse refusal(int status, const std::string& type, const std::string& message) = 0;
  /// Accounting: a request's header arrived (`begun`: on_header was called), then its answer was written (status),
  /// or the connection ended first (status 0). `seconds`: from the header's end to the last byte written.
  virtual void on_begin() = 0;
  virtual void on_end(const std::string& path, int status, double seconds, bool begun) = 0;
};

class HttpTransport {
 public:
  HttpTransport(TransportLimits limits, HttpRoutes& routes);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  /// Binds and listens (backlog 1024). Returns the port (the chosen one for port 0). Throws Error(Io).
  int bind(const std::string& host, int port);
  /// Starts the I/O threads.
  void start();
  /// Stops accepting and serving, closes every connection, joins the I/O threads. Idempotent.
  void stop();

  /// One connection's bytes served without a socket (fuzz/fuzz_http.cpp, tests): the requests in `wire` in turn,
  /// through the same parser, limits and routes as a socket's; returns what the server wrote. An answer that does
  /// not come within `wait` ends the exchange as if the client had gone.
  static std::string serve_bytes(std::string_view wire, const TransportLimits& limits, HttpRoutes& routes,
                                 std::chrono::milliseconds wait = std::chrono::seconds(60));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A blocking HTTP/1.1 client on one keep-alive connection (`superpoint-rt bench`'s throughput worker posts to a
/// server of its own). Not thread-safe: one per thread.
class HttpClient {
 public:
  /// Connects to host:port; each read and write waits at most `timeout`. Throws Error(Io).
  HttpClient(const std::string& host, int port, std::chrono::seconds timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  /// POSTs `body` to `target`; returns the answer's status and body. Throws Error(Io) when there is no answer.
  std::pair<int, std::string> post(const std::string& target, std::string_view body, const std::string& content_type);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace superpoint_rt::server
