#include "server/metrics.hpp"

#include <charconv>
#include <sstream>

namespace superpoint_rt::server {

std::string Metrics::endpoint_label(const std::string& path) {
  static const char* const kRoutes[] = {
      "/v1/keypoints", "/v1/keypoints/batch", "/v1/match", "/v1/info", "/healthz", "/readyz", "/metrics"};
  for (const char* r : kRoutes)
    if (path == r) return r;
  return "other";
}

void Metrics::observe_request(const std::string& endpoint, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
  if (seconds < 0) return;
  Histogram& h = latency_[endpoint];
  std::size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  if (b < kBuckets.size()) ++h.counts[b];
  ++h.count;
  h.sum += seconds;
}

void Metrics::observe_image(double decode_ms, double preprocess_ms, double forward_ms, double postprocess_ms,
                            std::size_t keypoints) {
  std::lock_guard<std::mutex> lock(mu_);
  ++images_decoded_;
  keypoints_ += keypoints;
  stage_ms_[0] += decode_ms;
  stage_ms_[1] += preprocess_ms;
  stage_ms_[2] += forward_ms;
  stage_ms_[3] += postprocess_ms;
}

void Metrics::observe_image_error(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++image_errors_[status];
}

namespace {

// Prometheus floats: the shortest decimal that round-trips (0.005, not 0.0050000000000000001).
std::string num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string Metrics::render(int workers, int queue_capacity) const {
  std::ostringstream o;
  std::lock_guard<std::mutex> lock(mu_);
  o << "# HELP superpoint_rt_http_requests_total HTTP requests by endpoint and status code.\n"
    << "# TYPE superpoint_rt_http_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    o << "superpoint_rt_http_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n
      << "\n";
  o << "# HELP superpoint_rt_http_request_duration_seconds Time from request headers to response, by endpoint.\n"
    << "# TYPE superpoint_rt_http_request_duration_seconds histogram\n";
  for (const auto& [ep, h] : latency_) {
    std::uint64_t cum = 0;
    for (std::size_t b = 0; b < kBuckets.size(); ++b) {
      cum += h.counts[b];
      o << "superpoint_rt_http_request_duration_seconds_bucket{endpoint=\"" << ep << "\",le=\"" << num(kBuckets[b])
        << "\"} " << cum << "\n";
    }
    o << "superpoint_rt_http_request_duration_seconds_bucket{endpoint=\"" << ep << "\",le=\"+Inf\"} " << h.count << "\n"
      << "superpoint_rt_http_request_duration_seconds_sum{endpoint=\"" << ep << "\"} " << num(h.sum) << "\n"
      << "superpoint_rt_http_request_duration_seconds_count{endpoint=\"" << ep << "\"} " << h.count << "\n";
  }
  o << "# HELP superpoint_rt_queue_depth Requests waiting for a worker.\n"
    << "# TYPE superpoint_rt_queue_depth gauge\n"
    << "superpoint_rt_queue_depth " << queue_depth.load() << "\n"
    << "# HELP superpoint_rt_queue_capacity Requests that may wait for a worker before 503.\n"
    << "# TYPE superpoint_rt_queue_capacity gauge\n"
    << "superpoint_rt_queue_capacity " << queue_capacity << "\n"
    << "# HELP superpoint_rt_in_flight_requests Requests received and not yet answered.\n"
    << "# TYPE superpoint_rt_in_flight_requests gauge\n"
    << "superpoint_rt_in_flight_requests " << in_flight.load() << "\n"
    << "# HELP superpoint_rt_busy_workers Workers processing an image request.\n"
    << "# TYPE superpoint_rt_busy_workers gauge\n"
    << "superpoint_rt_busy_workers " << busy_workers.load() << "\n"
    << "# HELP superpoint_rt_workers Configured workers (--workers).\n"
    << "# TYPE superpoint_rt_workers gauge\n"
    << "superpoint_rt_workers " << workers << "\n"
    << "# HELP superpoint_rt_ready 1 once the weights are loaded and warmed up.\n"
    << "# TYPE superpoint_rt_ready gauge\n"
    << "superpoint_rt_ready " << (ready.load() ? 1 : 0) << "\n"
    << "# HELP superpoint_rt_images_decoded_total Images decoded and processed.\n"
    << "# TYPE superpoint_rt_images_decoded_total counter\n"
    << "superpoint_rt_images_decoded_total " << images_decoded_ << "\n"
    << "# HELP superpoint_rt_image_errors_total Images refused, by HTTP status.\n"
    << "# TYPE superpoint_rt_image_errors_total counter\n";
  for (const auto& [status, n] : image_errors_)
    o << "superpoint_rt_image_errors_total{status=\"" << status << "\"} " << n << "\n";
  o << "# HELP superpoint_rt_keypoints_total Keypoints returned.\n"
    << "# TYPE superpoint_rt_keypoints_total counter\n"
    << "superpoint_rt_keypoints_total " << keypoints_ << "\n"
    << "# HELP superpoint_rt_stage_seconds_total Time spent per stage of the request path.\n"
    << "# TYPE superpoint_rt_stage_seconds_total counter\n";
  static const char* const kStages[] = {"decode", "preprocess", "forward", "postprocess"};
  for (std::size_t s = 0; s < 4; ++s)
    o << "superpoint_rt_stage_seconds_total{stage=\"" << kStages[s] << "\"} " << num(stage_ms_[s] / 1000.0) << "\n";
  return o.str();
}

}  // namespace superpoint_rt::server
