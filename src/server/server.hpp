// The HTTP front end of superpoint-rt (`superpoint-rt serve`, docs/SERVING.md).
//
// Threading model (issue 32): the transport (transport.hpp, Boost.Beast on Asio) serves every connection on
// `io_threads` I/O threads; a connection costs no thread. Each request's header is checked there (route, method,
// Content-Type and Content-Encoding, query fields, readiness) before any body byte is read; its body is read with
// its bytes counted as they arrive (--max-body-mb, whatever the framing) and its memory claimed from the model's
// budget. The complete request is checked on the I/O thread too (multipart fields, image headers, the memory its
// answer may need, claimed before anything is computed) and then waits for one of `workers` worker threads (at most
// `queue` wait: 503 + Retry-After beyond that; one not started `timeout_s` after its arrival: 504). A worker runs
// SuperPoint::run: decoding, resizing and post-processing run on that thread while the library serialises only the
// network, so N workers overlap N-1 images' decode/post with one network pass; it writes the answer once into the
// string that is sent, and the request's memory claims are held until its last byte is written.
//
// Lifetime: bind() -> start() (serves /healthz at once, 503 on /readyz and the image routes) -> set_model()
// (ready) -> begin_drain() (requests that arrive later get 503; those already received finish) -> wait_idle() ->
// stop(). All public members are thread-safe except that bind/start/stop are called by one controlling thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/metrics.hpp"
#include "server/transport.hpp"
#include "superpoint_rt/lightglue.hpp"
#include "superpoint_rt/params.hpp"
#include "superpoint_rt/superpoint.hpp"

namespace superpoint_rt::server {

// The server's settings. The defaults here are THE definition of every limit: `serve --help`, GET /v1/info and
// docs/SERVING.md all show describe_limits() of these (tests/server/test_contract.py compares the three). The fields
// without a `serve` flag are fixed there (tests and the fuzz harness set them).
struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                                   // 0: any free port (bind() returns it)
  int workers = 4;                                   // concurrent image requests
  int queue = 64;                                    // requests that may wait for a worker before 503
  double timeout_s = 30;                             // an image that has not started this long after its request
                                                     // arrived gets 504 (a batch's later images and /v1/match's
                                                     // second image included), and matching gives up then (504)
  std::int64_t max_body_bytes = 50LL * 1024 * 1024;  // request bodies over this get 413 when the count passes it
  std::int64_t max_pixels = kDefaultMaxPixels;       // width * height over this is refused (413) before decoding
  std::int64_t max_frame_pixels = largest_preset_frame_pixels();  // a network frame of more pixels: 413 before any
                                                                  // plan or buffer (Options::max_frame_pixels)
  int max_batch_parts = 64;           // images in one /v1/keypoints/batch request; more: 413 before
                                      // any of them is looked at
  std::int64_t memory_budget_mb = 0;  // the model's Options::memory_budget_mb (0: half the machine's
                                      // memory); request bodies, images and answers count against it
  int connections = 1024;             // open connections; more wait in the kernel's accept queue
  // Fixed (no flag).
  std::int64_t max_match_work = std::int64_t{4096} * 4096 * 256;  // /v1/match: keypoints0 x keypoints1 x descriptor
                                                                  // values over this: 413 before matching
  std::int64_t max_lightglue_keypoints = 4096;  // /v1/match?matcher=lightglue: an image with more keypoints gets 413
                                                // before matching (a pass at 1 thread: seconds at this count)
  int io_threads = 2;                           // threads serving every connection
  std::size_t max_request_line_bytes = 8192;    // longer request line: 414
  std::size_t max_header_bytes = 16384;         // request line and header fields together; more: 431
  int idle_timeout_s = 5;                       // a connection with no request for this long is closed
  int header_timeout_s = 10;                    // a request's line and headers must arrive within this: else 408
  int body_timeout_s = 60;                      // its body within this of the header's end: else 408
  int read_timeout_s = 5;                       // each read in the middle of a request: else 408
  int write_timeout_s = 5;                      // an answer whose writing makes no progress this long: dropped
  int linger_s = 5;                             // after a refusal, the rest of the request is read and dropped this
                                                // long, so that the client sees the answer (not a reset)
};

/// One limit of the server as `serve --help`, GET /v1/info ("limits") and docs/SERVING.md show it.
struct LimitDoc {
  std::string key;         // the name in /v1/info "limits"
  nlohmann::json value;    // its value there
  std::string flag;        // the `serve` flag that sets it ("" when fixed)
  std::string flag_value;  // the value as the flag takes it (e.g. MiB for --max-body-mb)
  std::string meaning;     // one line for people
};

/// Every limit of a server with `config`, in a fixed order.
std::vector<LimitDoc> describe_limits(const ServerConfig& config);

/// The OpenAPI 3 document of the HTTP API (docs/openapi.json, embedded at build time), served at /openapi.json.
std::string_view openapi_document() noexcept;

class HttpServer {
 public:
  explicit HttpServer(ServerConfig config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds the listening socket. Returns the port (the chosen one when config.port == 0). Throws Error(Io) naming
  /// the host and port.
  int bind();
  /// Serves on a background thread.
  void start();
  /// Installs LightGlue for /v1/match?matcher=lightglue (`serve --matcher-weights`): before set_model, never after
  /// (requests read it without a lock once the server is ready). Throws Error(InvalidArgument) for weights whose
  /// input dim is not SuperPoint's descriptor dim (256).
  void set_lightglue(std::shared_ptr<const LightGlue> lightglue);
  /// Installs the warmed-up model: /readyz turns 200 and the image routes open.
  void set_model(SuperPoint model);
  /// Graceful shutdown, step 1: /readyz turns 503 and requests whose headers arrive from now on get 503.
  void begin_drain();
  /// Waits until no request is in flight (or `limit` passes). Returns true when idle.
  bool wait_idle(std::chrono::milliseconds limit);
  /// Stops listening and serving, joins the I/O and worker threads, releases the model. Idempotent.
  void stop();

  const Metrics& metrics() const { return metrics_; }

  /// One connection's bytes served without a socket, through the same parser, limits and routes as a socket's
  /// (HttpTransport::serve_bytes; fuzz/fuzz_http.cpp): returns what the server wrote.
  std::string serve_bytes(std::string_view wire);
  /// Marks the server ready without a model (fuzz/fuzz_http.cpp): image requests then pass every check up to
  /// inference and get 503 from the closed model.
  void set_ready_without_model();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Metrics metrics_;
};

}  // namespace superpoint_rt::server
