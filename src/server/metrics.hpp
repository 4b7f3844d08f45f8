// Prometheus metrics of the HTTP server (text exposition format 0.0.4).
//
// Thread-safety: every member may be called from any thread (counters behind one mutex; gauges are atomics).
// Label values are bounded: the endpoint is one of the known routes or "other", so a scan of random URLs cannot
// grow the label set.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace superpoint_rt::server {

class Metrics {
 public:
  /// Latency histogram bucket upper bounds in seconds (+Inf is implied).
  static constexpr std::array<double, 14> kBuckets{0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25,
                                                   0.5,   1.0,  2.5,   5.0,  10.0,  30.0, 60.0};

  /// Maps a request path to its endpoint label: the route itself, or "other".
  static std::string endpoint_label(const std::string& path);

  /// One finished request. `seconds` < 0: the duration is unknown (refused before routing) and only counted.
  void observe_request(const std::string& endpoint, int status, double seconds);
  /// Per-image counters: an image decoded (successfully or not past the decoder), stage times in ms.
  void observe_image(double decode_ms, double preprocess_ms, double forward_ms, double postprocess_ms,
                     std::size_t keypoints);
  void observe_image_error(int status);

  std::atomic<int> queue_depth{0};  // requests waiting for a worker
  std::atomic<int> in_flight{0};    // requests being processed (headers received, response not yet written)
  std::atomic<int> busy_workers{0};
  std::atomic<bool> ready{false};

  /// The exposition text. `workers`, `queue_capacity` are reported as gauges.
  std::string render(int workers, int queue_capacity) const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> counts{};  // non-cumulative per bucket; rendered cumulatively
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // (endpoint, status) -> count
  std::map<std::string, Histogram> latency_;                       // endpoint -> histogram
  std::map<int, std::uint64_t> image_errors_;                      // status -> count
  std::uint64_t images_decoded_ = 0;
  std::uint64_t keypoints_ = 0;
  std::array<double, 4> stage_ms_{};  // decode, preprocess, forward, postprocess
};

}  // namespace superpoint_rt::server
