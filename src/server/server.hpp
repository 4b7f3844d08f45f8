// The HTTP front end of superpoint-rt (`superpoint-rt serve`, docs/SERVING.md).
//
// Threading model: cpp-httplib accepts connections on its own thread and serves each connection (keep-alive
// included) on one thread of a pool of `connections` threads; that thread reads the body, checks it (content type,
// size, image header) and then waits for one of `workers` worker slots. Holding a slot, it runs
// SuperPoint::run on the request: decoding, resizing and post-processing run on that thread while the library
// serialises only the network, so N workers overlap N-1 images' decode/post with one network pass. At most `queue`
// requests wait for a slot (503 + Retry-After beyond that); an image that has not started `timeout_s` after its
// request arrived gets 504 (the whole request, or that entry of a batch, so a batch ends within timeout_s + one image).
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
#include "superpoint_rt/params.hpp"
#include "superpoint_rt/superpoint.hpp"

namespace superpoint_rt::server {

// The server's settings. The defaults here are THE definition of every limit: `serve --help`, GET /v1/info and
// docs/SERVING.md all show describe_limits() of these (tests/server/test_contract.py compares the three).
struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                                   // 0: any free port (bind() returns it)
  int workers = 4;                                   // concurrent image requests
  int queue = 64;                                    // requests that may wait for a worker before 503
  double timeout_s = 30;                             // an image that has not started this long after its request
                                                     // arrived gets 504 (a batch's later images included)
  std::int64_t max_body_bytes = 50LL * 1024 * 1024;  // request bodies over this are refused (413) unread
  std::int64_t max_pixels = kDefaultMaxPixels;       // width * height over this is refused (413) before decoding
  std::int64_t max_frame_pixels = largest_preset_frame_pixels();  // a network frame of more pixels: 413 before any
                                                                  // plan or buffer (Options::max_frame_pixels)
  int max_batch_parts = 64;  // images in one /v1/keypoints/batch request; more: 413 before
                             // any of them is looked at
  int connections = 0;       // HTTP connection threads; 0 = workers + queue + 16
  int idle_timeout_s = 5;    // a keep-alive connection idle this long is closed
  int read_timeout_s = 5;    // a client that sends nothing for this long mid-request is
                             // dropped (each read; a slow but steady sender is served)
};

/// The connection threads `config` asks for (`connections`, or its default when 0).
int resolved_connections(const ServerConfig& config);

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
  /// Installs the warmed-up model: /readyz turns 200 and the image routes open.
  void set_model(SuperPoint model);
  /// Graceful shutdown, step 1: /readyz turns 503 and requests whose headers arrive from now on get 503.
  void begin_drain();
  /// Waits until no request is in flight (or `limit` passes). Returns true when idle.
  bool wait_idle(std::chrono::milliseconds limit);
  /// Stops listening, waits for the connection threads, releases the model. Idempotent.
  void stop();

  const Metrics& metrics() const { return metrics_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Metrics metrics_;
};

}  // namespace superpoint_rt::server
