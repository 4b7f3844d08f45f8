// The HTTP front end of superpoint-rt (`superpoint-rt serve`, docs/SERVING.md).
//
// Threading model: cpp-httplib accepts connections on its own thread and serves each connection (keep-alive
// included) on one thread of a pool of `connections` threads; that thread reads the body, checks it (content type,
// size, image header) and then waits for one of `workers` worker slots. Holding a slot, it runs
// SuperPoint::run on the request: decoding, resizing and post-processing run on that thread while the library
// serialises only the network, so N workers overlap N-1 images' decode/post with one network pass. At most `queue`
// requests wait for a slot (503 + Retry-After beyond that); a request that waits longer than `timeout_s` gets 504.
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
#include <thread>

#include "server/metrics.hpp"
#include "superpoint_rt/superpoint.hpp"

namespace superpoint_rt::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                                   // 0: any free port (bind() returns it)
  int workers = 4;                                   // concurrent image requests
  int queue = 64;                                    // requests that may wait for a worker before 503
  double timeout_s = 30;                             // longest wait for a worker before 504
  std::int64_t max_body_bytes = 50LL * 1024 * 1024;  // request bodies over this are refused (413) unread
  std::int64_t max_pixels = kDefaultMaxPixels;       // width * height over this is refused (413) before decoding
  int connections = 0;                               // HTTP connection threads; 0 = workers + queue + 16
  double max_body_mb = 50;                           // as given on the command line (for messages / info)
};

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
