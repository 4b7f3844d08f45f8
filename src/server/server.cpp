#include "server/server.hpp"

#include <malloc.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <iomanip>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "match/matcher.hpp"
#include "server/codec.hpp"
#include "server/multipart.hpp"
#include "superpoint_rt/match.hpp"
#include "superpoint_rt/params.hpp"
#include "util/text.hpp"

namespace superpoint_rt::server {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// An HTTP failure with its status, a short machine-readable type and a message for people.
struct HttpError {
  int status = 500;
  std::string type;
  std::string message;
};

// The HTTP status of a library error kind, as SPEC §4's error table: 400 for an image that cannot be decoded, whatever
// the reason (corrupt, or bytes of no format the library reads: ErrorKind::UnsupportedFormat too), because 415 is
// HTTP's answer to an unsupported Content-Type, which image_parts() checks before any byte is looked at.
int status_of(ErrorKind k) {
  switch (k) {
    case ErrorKind::InvalidArgument:
    case ErrorKind::TypeMismatch: return 422;
    case ErrorKind::DecodeError:
    case ErrorKind::UnsupportedFormat: return 400;
    case ErrorKind::TooLarge: return 413;
    case ErrorKind::Closed:
    case ErrorKind::Overloaded: return 503;
    case ErrorKind::NotFound:
    case ErrorKind::Io: return 400;
    case ErrorKind::Model:
    case ErrorKind::Internal: return 500;
  }
  return 500;
}

HttpError from_error(const Error& e) {
  return {status_of(e.kind()), to_string(e.kind()), e.what()};
}

json error_json(const HttpError& e) {
  return {{"error", {{"code", e.status}, {"type", e.type}, {"message", e.message}}}};
}

// JSON text of a reply. Messages may quote request bytes (path, method, content type, file names) that are not
// UTF-8; nlohmann's default dump() throws on them (type_error.316), which outside a handler ends the process (found
// by fuzz/fuzz_http.cpp). Invalid sequences become U+FFFD instead.
std::string json_text(const json& body) {
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = json_text(body);
  return r;
}

HttpResponse error_response(const HttpError& e) {
  HttpResponse r = json_response(e.status, error_json(e));
  if (e.status == 503) r.fields.emplace_back("Retry-After", "1");
  return r;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "image/png; charset=x" -> "image/png".
std::string media_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(t.begin());
  return t;
}

// Every route and the methods it answers (the 404 message, the 405 Allow headers and the route table derive from it).
struct Route {
  const char* path;
  const char* allow;
};
constexpr Route kRoutes[] = {{"/v1/keypoints", "POST"}, {"/v1/keypoints/batch", "POST"}, {"/v1/match", "POST"},
                             {"/healthz", "GET, HEAD"}, {"/readyz", "GET, HEAD"},        {"/v1/info", "GET, HEAD"},
                             {"/metrics", "GET, HEAD"}, {"/openapi.json", "GET, HEAD"}};

const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  return nullptr;
}

std::string route_list() {
  std::string out;
  for (const Route& r : kRoutes) {
    const std::string allow = r.allow;
    out += (out.empty() ? "" : ", ") + allow.substr(0, allow.find(',')) + " " + r.path;
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Whether `route` answers `method` (HEAD wherever GET: the same answer without its body).
bool allows(const Route& route, const std::string& method) {
  const std::string_view allow = route.allow;
  if (method == "GET" || method == "POST") return allow.find(method) != std::string_view::npos;
  return method == "HEAD" && allow.find("HEAD") != std::string_view::npos;
}

// "30", "0.05", "1.5": a number as a person types it on the command line.
std::string plain_number(double x) {
  std::ostringstream o;
  o << std::setprecision(15) << x;
  return o.str();
}

// The query fields: every per-request parameter of the table (superpoint_rt/params.hpp) except bgr (bodies are
// encoded images, whose channel order the decoder knows), plus format.
bool is_query_param(std::string_view name) {
  return name != "bgr" && find_param(name) != nullptr;
}

// The matcher's fields of /v1/match (superpoint_rt/match.hpp: conf, ratio, distance, mutual).
bool is_match_param(std::string_view name) {
  for (const auto& spec : match_param_specs())
    if (spec.name == name) return true;
  return false;
}

// An extraction field of this endpoint: /v1/match always extracts descriptors (it matches them), so it has no
// return_descriptors field (docs/openapi.json lists the same).
bool is_extraction_param(std::string_view name, bool match) {
  return is_query_param(name) && !(match && name == "return_descriptors");
}

// LightGlue's fields of /v1/match?matcher=lightglue (superpoint_rt/lightglue.hpp: depth_confidence,
// width_confidence, filter_threshold).
bool is_lightglue_param(std::string_view name) {
  for (const auto& spec : lightglue_param_specs())
    if (spec.name == name) return true;
  return false;
}

// /v1/match's `matcher` field: the nearest-neighbour matcher (the default: what /v1/match always did) or LightGlue
// (a server started with --matcher-weights).
constexpr std::string_view kMatcherNames[] = {"nn", "lightglue"};
constexpr const char* kMatcherRange = "nn, lightglue";
constexpr const char* kMatcherHelp =
    "the matcher: nn (hloc's nearest-neighbour matcher, fields conf, ratio, distance, mutual) or lightglue (cvg's "
    "LightGlue, fields depth_confidence, width_confidence, filter_threshold; a server started with "
    "--matcher-weights)";

std::string allowed_query(bool match) {
  std::string s;
  for (const auto& spec : param_specs())
    if (is_extraction_param(spec.name, match)) s.append(s.empty() ? "" : ", ").append(spec.name);
  if (match) {
    s.append(", matcher");
    for (const auto& spec : match_param_specs()) s.append(", ").append(spec.name);
    for (const auto& spec : lightglue_param_specs()) s.append(", ").append(spec.name);
  }
  return s + ", format";
}

constexpr const char* kFormHint =
    "a form-urlencoded body is not an image: send the image bytes with Content-Type image/* or "
    "application/octet-stream (curl: --data-binary @img.jpg -H 'Content-Type: image/jpeg'), or as the multipart "
    "field 'image' (curl -F image=@img.jpg)";

struct RequestOptions {
  Params params;
  ResolvedParams resolved;
  MatchParams match;       // /v1/match only
  bool lightglue = false;  // /v1/match?matcher=lightglue
  LightGlueOptions lg;     // its fields (threads and the deadline are the server's)
  bool npz = false;
};

// Query fields with SPEC's names, defaults and ranges (and, with `match`, the matchers'); anything else is refused
// by name (nothing is ignored), and so is a field of the other matcher than `matcher` names, or matcher=lightglue on
// a server without LightGlue (`lightglue_loaded`). A fixed frame (resize=WxH) over --max-frame-pixels is 413 here,
// before the body is read.
RequestOptions parse_request_options(std::string_view query, std::string_view accept, std::int64_t max_frame_pixels,
                                     bool match, bool lightglue_loaded) {
  RequestOptions o;
  const auto fields = parse_query(query);  // more than kMaxQueryFields: 422
  std::set<std::string> seen;
  for (const auto& [name, value] : fields) {
    if (!seen.insert(name).second)
      throw HttpError{422, "InvalidArgument",
                      "query parameter '" + util::printable(name) + "' is given more than once"};
    if (is_extraction_param(name, match)) {
      set_param_text(o.params, name, value);  // an Error: 422 (its kind says so), the message quotes the value
    } else if (match && is_match_param(name)) {
      set_match_param_text(o.match, name, value);
    } else if (match && is_lightglue_param(name)) {
      set_lightglue_param_text(o.lg, name, value);
    } else if (match && name == "matcher") {
      if (std::find(std::begin(kMatcherNames), std::end(kMatcherNames), value) == std::end(kMatcherNames))
        throw HttpError{422, "InvalidArgument",
                        "matcher: '" + util::printable(value) + "' is not one of " + kMatcherRange};
      o.lightglue = value == "lightglue";
    } else if (name == "format") {
      if (value != "json" && value != "npz")
        throw HttpError{422, "InvalidArgument", "format: '" + util::printable(value) + "' is not json or npz"};
      o.npz = value == "npz";
    } else {
      throw HttpError{
          422, "InvalidArgument",
          "unknown query parameter '" + util::printable(name) + "' (allowed: " + allowed_query(match) + ")"};
    }
  }
  if (!seen.count("format") && accept.find("application/x-npz") != std::string_view::npos) o.npz = true;
  // Each matcher takes its own fields only: one of the other's is refused by name rather than ignored.
  for (const auto& [name, value] : fields) {
    if (o.lightglue && is_match_param(name))
      throw HttpError{422, "InvalidArgument",
                      name +
                          " is a field of the nearest-neighbour matcher (matcher=nn), not of matcher=lightglue "
                          "(its fields: depth_confidence, width_confidence, filter_threshold)"};
    if (!o.lightglue && is_lightglue_param(name))
      throw HttpError{422, "InvalidArgument", name + " is a field of LightGlue: add matcher=lightglue"};
  }
  if (o.lightglue && !lightglue_loaded)
    throw HttpError{422, "InvalidArgument",
                    "matcher: lightglue needs a server started with --matcher-weights PATH (LightGlue's weights, e.g. "
                    "cvg's superpoint_lightglue.pth); this one has none (GET /v1/info: match.lightglue.loaded)"};
  o.match.validate();
  o.resolved = resolve(o.params);  // InvalidArgument: 422; an explicit resize over the network's limit: 413
  if (o.resolved.resize_mode == ResizeMode::Fixed)
    (void)o.resolved.network_frame(1, 1, "the request", max_frame_pixels);
  return o;
}

// One encoded image of a request, viewing bytes owned by the request's body.
struct ImagePart {
  std::span<const std::uint8_t> bytes;
  std::string name;
};

std::span<const std::uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::string field_list(const std::vector<MultipartPart>& fields) {
  std::string out;
  for (const MultipartPart& f : fields) {
    if (!out.empty()) out += ", ";
    out += '\'';
    out += util::printable(f.name);
    out += '\'';
  }
  return out;
}

// The image parts of /v1/keypoints (one) and /v1/keypoints/batch (any number): multipart bodies give their 'image'
// fields (in order), others the raw body. The content type was checked with the header (check_content_type).
std::vector<ImagePart> image_parts(const std::string& body, const std::vector<MultipartPart>* fields, bool batch) {
  std::vector<ImagePart> parts;
  if (!fields) {
    parts.push_back({as_bytes(body), "request body"});
    return parts;
  }
  int i = 0;
  for (const MultipartPart& f : *fields) {
    if (f.name != "image") continue;
    std::string name = f.filename.empty() ? "image" : util::printable(f.filename);
    if (batch) name = "image[" + std::to_string(i) + "] (" + name + ")";
    parts.push_back({as_bytes(f.content), std::move(name)});
    ++i;
  }
  if (parts.empty()) {
    const std::string list = field_list(*fields);
    throw HttpError{
        400, "DecodeError",
        "the multipart body has no field 'image'" + (list.empty() ? std::string() : " (fields: " + list + ")")};
  }
  if (!batch && parts.size() > 1)
    throw HttpError{400, "DecodeError",
                    "the multipart body has " + std::to_string(parts.size()) +
                        " 'image' fields; send several images to /v1/keypoints/batch"};
  return parts;
}

// The two images of /v1/match: the multipart fields 'image0' and 'image1', once each.
std::vector<ImagePart> match_parts(const std::vector<MultipartPart>& fields) {
  std::vector<ImagePart> parts;
  for (const char* field : {"image0", "image1"}) {
    const MultipartPart* found = nullptr;
    int count = 0;
    for (const MultipartPart& f : fields)
      if (f.name == field) {
        found = &f;
        ++count;
      }
    if (count != 1) {
      const std::string list = field_list(fields);
      throw HttpError{400, "DecodeError",
                      "the multipart body has " + std::to_string(count) + " fields '" + field +
                          "' (exactly one each of 'image0' and 'image1'" +
                          (list.empty() ? std::string(")") : "; fields: " + list + ")")};
    }
    parts.push_back(
        {as_bytes(found->content),
         std::string(field) + " (" + (found->filename.empty() ? field : util::printable(found->filename)) + ")"});
  }
  return parts;
}

// The network frame's limit (--max-frame-pixels) from the image's header, before any pixel is decoded or any plan
// made. The engine checks it again on the decoded image (authoritative: the cv2 presets apply the EXIF orientation,
// which the header probe does not, and kornia's rounding of a transposed size may differ by one pixel), so here a
// request is refused only when the frame of either orientation is over the limit.
void check_frame(const ImagePart& part, const ImageInfo& info, const ResolvedParams& rp, std::int64_t limit) {
  try {
    (void)rp.network_frame(info.width, info.height, part.name, limit);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::TooLarge) return;  // too small: the engine's answer, on the pixels it reads
    try {
      (void)rp.network_frame(info.height, info.width, part.name, limit);
    } catch (const Error& t) {
      if (t.kind() == ErrorKind::TooLarge) throw HttpError{413, "TooLarge", std::string(e.what())};
    }
  }
}

// Header checks before any pixel is decoded: empty, unknown magic or corrupt header (400: SPEC's undecodable image;
// the Content-Type was acceptable, so not 415), too many pixels or too large a network frame (413).
void check_image(const ImagePart& part, std::int64_t max_pixels, const ResolvedParams& rp,
                 std::int64_t max_frame_pixels) {
  if (part.bytes.empty())
    throw HttpError{400, "DecodeError",
                    part.name + " is empty: send the encoded image (" + std::string(supported_formats()) + ")"};
  if (sniff_format(part.bytes) == ImageFormat::Unknown)
    throw HttpError{400, "UnsupportedFormat",
                    part.name + " is not a supported image (supported: " + std::string(supported_formats()) + ")"};
  ImageInfo info;
  try {
    info = probe_image(part.bytes, part.name);
  } catch (const Error& e) {
    throw from_error(e);
  }
  const std::int64_t pixels = static_cast<std::int64_t>(info.width) * info.height;
  if (pixels > max_pixels)
    throw HttpError{413, "TooLarge",
                    part.name + " is " + std::to_string(info.width) + "x" + std::to_string(info.height) + " = " +
                        std::to_string(pixels) + " pixels, over the limit of " + std::to_string(max_pixels) +
                        " (--max-pixels)"};
  check_frame(part, info, rp, max_frame_pixels);
}

// --max-body-mb as given (the bytes are the definition; the flag is MiB).
std::string max_body_mb(const ServerConfig& c) {
  return plain_number(static_cast<double>(c.max_body_bytes) / (1024.0 * 1024.0));
}

// The Content-Type an image route reads (checked with the header, before the body): multipart/form-data (its
// boundary included) for all three, or for /v1/keypoints a raw image body.
void check_content_type(const Route& route, std::string_view content_type) {
  const std::string type = media_type(std::string(content_type));
  const std::string path = route.path;
  if (type == "multipart/form-data") {
    try {
      (void)multipart_boundary(content_type);
    } catch (const Error& e) {
      throw from_error(e);
    }
    return;
  }
  const std::string shown = type.empty() ? std::string("no content type") : util::printable(type);
  if (path == "/v1/keypoints/batch")
    throw HttpError{
        415, "UnsupportedFormat",
        "/v1/keypoints/batch needs a multipart/form-data body with one 'image' field per image, not '" + shown + "'"};
  if (path == "/v1/match")
    throw HttpError{
        415, "UnsupportedFormat",
        "/v1/match needs a multipart/form-data body with the fields 'image0' and 'image1', not '" + shown + "'"};
  if (type == "application/x-www-form-urlencoded") throw HttpError{415, "UnsupportedFormat", kFormHint};
  if (!type.empty() && type != "application/octet-stream" && type.rfind("image/", 0) != 0)
    throw HttpError{415, "UnsupportedFormat",
                    "unsupported content type '" + shown +
                        "' (allowed: image/*, application/octet-stream, multipart/form-data with a field 'image')"};
}

// Bytes in MiB for messages, to 0.1 MiB.
std::string mib(std::int64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return o.str();
}

// The image requests that wait for a worker: `workers` threads run them, at most `queue` wait, and one that has not
// started by its deadline expires (its request gets 504) as soon as the deadline passes.
class WorkQueue {
 public:
  struct Job {
    Clock::time_point deadline;
    std::function<void()> run;     // on a worker thread
    std::function<void()> expire;  // instead of run, when the deadline passed first
  };

  WorkQueue(int workers, int queue, Metrics& m) : workers_(workers), queue_(queue), metrics_(m) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
    reaper_ = std::thread([this] { reap(); });
  }
  ~WorkQueue() { stop(); }

  /// False when `workers` jobs run and `queue` wait already.
  bool submit(Job job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || running_ + static_cast<int>(waiting_.size()) >= workers_ + queue_) return false;
      waiting_.push_back(std::move(job));
      metrics_.queue_depth.store(static_cast<int>(waiting_.size()));
    }
    cv_.notify_one();
    reaper_cv_.notify_one();
    return true;
  }

  /// Jobs still waiting are dropped (their requests' connections close); running ones finish first.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      stop_ = true;
      waiting_.clear();
    }
    cv_.notify_all();
    reaper_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    reaper_.join();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty(); });
      if (stop_) return;
      Job job = std::move(waiting_.front());
      waiting_.pop_front();
      metrics_.queue_depth.store(static_cast<int>(waiting_.size()));
      const bool late = Clock::now() >= job.deadline;
      if (!late) {
        ++running_;
        ++metrics_.busy_workers;
      }
      lock.unlock();
      if (late)
        job.expire();
      else
        job.run();
      job = {};  // the request's state goes before the next job
      lock.lock();
      if (!late) {
        --running_;
        --metrics_.busy_workers;
      }
    }
  }

  void reap() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (stop_) return;
      if (waiting_.empty()) {
        reaper_cv_.wait(lock);
        continue;
      }
      const auto first = std::min_element(waiting_.begin(), waiting_.end(), [](const Job& a, const Job& b) {
                           return a.deadline < b.deadline;
                         })->deadline;
      if (Clock::now() < first) {
        reaper_cv_.wait_until(lock, first);
        continue;
      }
      std::vector<Job> expired;
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (it->deadline <= Clock::now()) {
          expired.push_back(std::move(*it));
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
      metrics_.queue_depth.store(static_cast<int>(waiting_.size()));
      lock.unlock();
      for (Job& j : expired) j.expire();
      expired.clear();
      lock.lock();
    }
  }

  const int workers_, queue_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_, reaper_cv_;
  std::deque<Job> waiting_;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::thread reaper_;
};

enum class RouteKind { Keypoints, Batch, Match, Other };

RouteKind kind_of(const Route& r) {
  const std::string_view p = r.path;
  if (p == "/v1/keypoints") return RouteKind::Keypoints;
  if (p == "/v1/keypoints/batch") return RouteKind::Batch;
  if (p == "/v1/match") return RouteKind::Match;
  return RouteKind::Other;
}

// What one image request holds from its header to its answer's last byte: its options and its memory claims (the
// body's, taken as it arrives; its results' and its answer's, taken before anything is computed).
struct RequestState {
  RouteKind route = RouteKind::Other;
  RequestOptions opt;
  bool multipart = false;
  std::vector<MemoryClaim> body;  // a chunked body's claims grow with it
  std::int64_t body_bytes = 0;
  MemoryClaim features;  // the Features of its images, until the answer is written
  MemoryClaim answer;    // the answer's text, until its last byte is sent
};

// One image request between the I/O thread and its worker.
struct Work {
  HttpRequest req;
  std::shared_ptr<RequestState> st;
  Responder responder;
  std::vector<MultipartPart> fields;  // views into req.body
  std::vector<ImagePart> parts;
  std::vector<std::optional<HttpError>> errors;  // the batch's images refused before they run
  std::size_t answer_bytes = 0;                  // the answer's bound (the string is reserved at it)
};

}  // namespace

struct HttpServer::Impl final : HttpRoutes {
  ServerConfig cfg;
  Metrics& metrics;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::atomic<std::int64_t> last_trim_ms{0};
  SuperPoint model;  // written once before `ready` is set (release), read after it is seen (acquire)
  ModelInfo model_info;
  std::shared_ptr<const LightGlue> lightglue;  // set (or not) before `ready`, as the model
  std::int64_t budget_bytes = 0;
  WorkQueue work;
  HttpTransport transport;  // declared last: stopped and destroyed first (its connections call the members above)

  static TransportLimits limits_of(const ServerConfig& c) {
    TransportLimits l;
    l.max_request_line_bytes = c.max_request_line_bytes;
    l.max_header_bytes = c.max_header_bytes;
    l.max_body_bytes = static_cast<std::uint64_t>(c.max_body_bytes);
    l.max_connections = c.connections;
    l.io_threads = c.io_threads;
    l.idle_timeout = std::chrono::seconds(c.idle_timeout_s);
    l.header_timeout = std::chrono::seconds(c.header_timeout_s);
    l.body_timeout = std::chrono::seconds(c.body_timeout_s);
    l.read_timeout = std::chrono::seconds(c.read_timeout_s);
    l.write_timeout = std::chrono::seconds(c.write_timeout_s);
    l.linger = std::chrono::seconds(c.linger_s);
    return l;
  }

  Impl(ServerConfig c, Metrics& m)
      : cfg(std::move(c)),
        metrics(m),
        budget_bytes(memory_budget_bytes(cfg.memory_budget_mb)),
        work(cfg.workers, cfg.queue, m),
        transport(limits_of(cfg), *this) {}

  // Once the last request in flight is answered, the heap's free pages go back to the system (glibc's malloc_trim,
  // at most once a second). Requests of mixed sizes leave free holes in malloc's arenas (args.cpp caps them at 4)
  // that glibc keeps mapped, so an idle server's resident size would follow its traffic's history instead of what
  // it holds (bench/soak_server.py --mixed-frames: +8 % in 20 s with nothing live added).
  void trim_when_idle() {
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
    std::int64_t last = last_trim_ms.load();
    if (now - last < 1000 || !last_trim_ms.compare_exchange_strong(last, now)) return;
    malloc_trim(0);
  }

  Clock::time_point deadline_of(Clock::time_point arrived) const {
    return arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.timeout_s));
  }

  // ---- the transport's questions (I/O threads) ---------------------------------------------------------------

  void on_begin() override { ++metrics.in_flight; }

  void on_end(const std::string& path, int status, double seconds, bool begun) override {
    if (status > 0) metrics.observe_request(Metrics::endpoint_label(path), status, seconds);
    if (begun && --metrics.in_flight == 0) trim_when_idle();
  }

  HttpResponse refusal(int status, const std::string& type, const std::string& message) override {
    return error_response({status, type, message});
  }

  std::optional<HttpResponse> on_header(HttpRequest& req) override {
    try {
      const Route* route = find_route(req.path);
      if (route == nullptr)
        throw HttpError{404, "NotFound",
                        "no route " + util::printable(req.method) + " " + util::printable(req.path) +
                            " (routes: " + route_list() + ")"};
      if (!allows(*route, req.method)) {
        HttpResponse r = error_response({405, "MethodNotAllowed",
                                         "method " + util::printable(req.method) + " is not allowed on " + route->path +
                                             " (allowed: " + route->allow + ")"});
        r.fields.emplace_back("Allow", route->allow);
        return r;
      }
      // Beast frames only chunked bodies; any other transfer coding would leave the body to be read as the next
      // request (RFC 9112 §6.1: 501).
      if (const std::string_view te = req.header("Transfer-Encoding"); !te.empty() && !iequals(te, "chunked"))
        throw HttpError{501, "NotImplemented",
                        "Transfer-Encoding '" + util::printable(te) +
                            "' is not supported: send the body with Content-Length, or chunked"};
      const RouteKind kind = kind_of(*route);
      if (kind == RouteKind::Other) return get_route(*route);
      // No request body is ever decompressed (issue 32: a 3 MB gzip body inflated to 3 GiB): a body in any
      // Content-Encoding but identity is refused before it is read.
      if (const std::string_view ce = req.header("Content-Encoding"); !ce.empty() && !iequals(ce, "identity"))
        throw HttpError{415, "UnsupportedFormat",
                        "Content-Encoding '" + util::printable(ce) +
                            "': request bodies are never decompressed; send the image bytes as they are (images "
                            "are compressed already)"};
      if (draining.load())
        throw HttpError{503, "ShuttingDown", "the server is shutting down; retry on another replica"};
      if (!ready.load(std::memory_order_acquire))
        throw HttpError{503, "NotReady", "the model is still loading; retry when /readyz returns 200"};
      auto st = std::make_shared<RequestState>();
      st->route = kind;
      st->opt = parse_request_options(req.query, req.header("Accept"), cfg.max_frame_pixels, kind == RouteKind::Match,
                                      lightglue != nullptr);
      if (st->opt.npz && kind != RouteKind::Keypoints)
        throw HttpError{
            422, "InvalidArgument",
            std::string("format: npz is available on /v1/keypoints only; ") + route->path + " answers JSON"};
      check_content_type(*route, req.header("Content-Type"));
      st->multipart = media_type(std::string(req.header("Content-Type"))) == "multipart/form-data";
      req.admit_body = [this, s = st.get()](std::uint64_t bytes) { return admit_body(*s, bytes); };
      req.hold = std::move(st);
      return std::nullopt;
    } catch (...) {  // nothing may leave an I/O thread's handler
      return answer_error(std::current_exception());
    }
  }

  // A body grows to `bytes`: the difference is claimed from the budget now (503 when it does not fit).
  bool admit_body(RequestState& st, std::uint64_t bytes) {
    if (static_cast<std::int64_t>(bytes) <= st.body_bytes) return true;
    try {
      MemoryClaim c = model.claim_memory(static_cast<std::int64_t>(bytes) - st.body_bytes, "the request body");
      if (!c.held()) return false;
      st.body.push_back(std::move(c));
      st.body_bytes = static_cast<std::int64_t>(bytes);
      return true;
    } catch (const Error&) {
      return false;  // the model closed, or a body the budget can never hold: 503 either way
    }
  }

  void on_request(HttpRequest&& req, Responder responder) override {
    auto w = std::make_shared<Work>();
    w->st = std::static_pointer_cast<RequestState>(req.hold);
    w->req = std::move(req);
    w->responder = std::move(responder);
    const Clock::time_point arrived = w->req.complete;
    try {
      if (!w->st) throw HttpError{500, "Internal", "internal error: a request without its state"};
      check(*w);
      WorkQueue::Job job{deadline_of(arrived), [this, w] { execute(*w); },
                         [this, w] {
                           respond(*w, error_response({504, "Timeout",
                                                       "the request waited longer than " + plain_number(cfg.timeout_s) +
                                                           " s for a worker (--timeout-s)"}));
                         }};
      if (!work.submit(std::move(job)))
        throw HttpError{503, "Overloaded",
                        "all " + std::to_string(cfg.workers) + " workers are busy and " + std::to_string(cfg.queue) +
                            " requests are waiting (--queue); retry later"};
    } catch (...) {  // nothing may leave an I/O thread's handler
      respond(*w, answer_error(std::current_exception()));
    }
  }

  // ---- the checks of a complete request (I/O thread): its images' headers, then its memory --------------------

  void check(Work& w) {
    RequestState& st = *w.st;
    if (st.multipart) {
      try {
        w.fields = parse_multipart(w.req.body, multipart_boundary(w.req.header("Content-Type")));
      } catch (const Error& e) {
        throw from_error(e);
      }
    }
    const ResolvedParams& rp = st.opt.resolved;
    const auto checked = [&](const ImagePart& part) {
      try {
        check_image(part, cfg.max_pixels, rp, cfg.max_frame_pixels);
      } catch (const HttpError& e) {
        metrics.observe_image_error(e.status);
        throw;
      }
    };
    if (st.route == RouteKind::Keypoints) {
      w.parts = image_parts(w.req.body, st.multipart ? &w.fields : nullptr, false);
      checked(w.parts[0]);
      const MemoryEstimate e = estimate(w.parts[0], st.opt.params);
      const std::int64_t answer =
          static_cast<std::int64_t>(st.opt.npz ? features_npz_bound(e.max_keypoints, e.descriptor_dim)
                                               : features_json_bound(e.max_keypoints, e.descriptor_dim));
      claim(st, features_bytes(e), answer, e.host_bytes + e.workspace_bytes, w.parts[0].name);
      return;
    }
    if (st.route == RouteKind::Batch) {
      w.parts = image_parts(w.req.body, &w.fields, true);
      // Counted before any part is probed or decoded: a batch holds one worker for all its images.
      if (w.parts.size() > static_cast<std::size_t>(cfg.max_batch_parts))
        throw HttpError{413, "TooLarge",
                        "the batch has " + std::to_string(w.parts.size()) + " 'image' fields, over the limit of " +
                            std::to_string(cfg.max_batch_parts) + " (--max-batch-parts)"};
      w.errors.resize(w.parts.size());
      std::int64_t answer = 64, features = 0, engine = 0;
      for (std::size_t i = 0; i < w.parts.size(); ++i) {
        // An error entry quotes the part's name (already made printable) up to twice, JSON-escaped (2x).
        answer += kErrorEntryBytes + 4 * static_cast<std::int64_t>(w.parts[i].name.size());
        try {
          checked(w.parts[i]);
          const MemoryEstimate e = estimate(w.parts[i], st.opt.params);
          answer += static_cast<std::int64_t>(features_json_bound(e.max_keypoints, e.descriptor_dim));
          features = std::max(features, features_bytes(e));  // one image's results at a time
          engine = std::max(engine, e.host_bytes + e.workspace_bytes);
        } catch (const HttpError& e) {
          w.errors[i] = e;
        }
      }
      claim(st, features, answer, engine, "the batch");
      w.answer_bytes = static_cast<std::size_t>(answer);
      return;
    }
    // /v1/match: both images' results and the whole answer before the first image runs; the matcher's memory once
    // the keypoints are known (execute).
    w.parts = match_parts(w.fields);
    for (const ImagePart& part : w.parts) checked(part);
    const MemoryEstimate e0 = estimate(w.parts[0], st.opt.params), e1 = estimate(w.parts[1], st.opt.params);
    const std::int64_t answer = static_cast<std::int64_t>(features_json_bound(e0.max_keypoints, e0.descriptor_dim) +
                                                          features_json_bound(e1.max_keypoints, e1.descriptor_dim) +
                                                          matches_json_bound(e0.max_keypoints) + 64);
    claim(st, features_bytes(e0) + features_bytes(e1), answer,
          std::max(e0.host_bytes + e0.workspace_bytes, e1.host_bytes + e1.workspace_bytes), "the match");
    w.answer_bytes = static_cast<std::size_t>(answer);
  }

  // An error entry of a batch answer, at most, besides the part's name its message quotes.
  static constexpr std::int64_t kErrorEntryBytes = 4096;

  // What the image's request would claim in the engine, from its header (nothing is decoded).
  MemoryEstimate estimate(const ImagePart& part, const Params& params) {
    try {
      return model.estimate_memory(ImageInput::bytes(part.bytes, part.name), params);
    } catch (const Error& e) {
      metrics.observe_image_error(status_of(e.kind()));
      throw from_error(e);
    }
  }

  static std::int64_t features_bytes(const MemoryEstimate& e) {
    return e.max_keypoints * features_bytes_per_keypoint(e.descriptor_dim);
  }

  // Claims what the request's results (`features`) and its answer (`answer`) may hold, beside its body, before
  // anything is computed: 413 when that and the largest of its images' own claims in the engine (`engine`) could
  // never fit the budget together, 503 when they do not fit now.
  void claim(RequestState& st, std::int64_t features, std::int64_t answer, std::int64_t engine,
             const std::string& what) {
    const std::int64_t total = st.body_bytes + features + answer + engine;
    if (total > budget_bytes)
      throw HttpError{413, "TooLarge",
                      what + " may need up to " + mib(total) + " (body " + mib(st.body_bytes) + ", results " +
                          mib(features) + ", answer " + mib(answer) + ", decoding and the network " + mib(engine) +
                          "; keypoints counted at their most, max_keypoints or every pixel of the frame), over the "
                          "memory budget of " +
                          mib(budget_bytes) + " (--memory-budget-mb): ask for fewer keypoints or a smaller frame"};
    const auto take = [&](std::int64_t bytes, const char* part) {
      MemoryClaim c = model.claim_memory(bytes, what + "'s " + part);
      if (!c.held())
        throw HttpError{503, "Overloaded",
                        what + "'s " + part + " (" + mib(bytes) + ") does not fit the memory budget of " +
                            mib(budget_bytes) +
                            " now (--memory-budget-mb; requests in flight hold the rest); "
                            "retry later"};
      return c;
    };
    st.features = take(features, "results");
    st.answer = take(answer, "answer");
  }

  // ---- the work (a worker thread) -----------------------------------------------------------------------------

  // Runs one checked image; errors become an HttpError.
  Features run_one(const ImagePart& part, const Params& params) {
    try {
      Features f = model.run(ImageInput::bytes(part.bytes, part.name), params);
      metrics.observe_image(f.timing_ms.decode, f.timing_ms.preprocess, f.timing_ms.forward, f.timing_ms.postprocess,
                            f.size());
      return f;
    } catch (const Error& e) {
      HttpError h = from_error(e);
      metrics.observe_image_error(h.status);
      throw h;
    }
  }

  static HttpResponse answer_error(std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const HttpError& e) {
      return error_response(e);
    } catch (const matching::detail::DeadlinePassed&) {
      return error_response({504, "Timeout", "matching did not finish within --timeout-s of the request's arrival"});
    } catch (const LightGlueCancelled& e) {
      return error_response({504, "Timeout",
                             "matching (LightGlue) did not finish within --timeout-s of the request's arrival: " +
                                 std::string(e.what())});
    } catch (const Error& e) {
      return error_response(from_error(e));
    } catch (const std::bad_alloc&) {
      return error_response({503, "OutOfMemory", "the server ran out of memory for this request; retry later"});
    } catch (const std::exception& e) {
      return error_response({500, "Internal", std::string("internal error: ") + e.what()});
    } catch (...) {
      return error_response({500, "Internal", "internal error: unknown exception"});
    }
  }

  // Sends the answer; the request's body and its results' claim go first, its answer's claim with the last byte.
  void respond(Work& w, HttpResponse&& r) {
    std::string().swap(w.req.body);
    w.fields.clear();
    w.parts.clear();
    if (w.st) {
      w.st->body.clear();
      w.st->features.reset();
      r.hold = w.st;
    }
    w.responder.send(std::move(r));
  }

  void execute(Work& w) {
    HttpResponse r;
    try {
      r = run(w);
    } catch (...) {
      r = answer_error(std::current_exception());
    }
    respond(w, std::move(r));
  }

  HttpResponse run(Work& w) {
    const RequestState& st = *w.st;
    const Params& params = st.opt.params;
    const Clock::time_point arrived = w.req.complete, deadline = deadline_of(arrived);
    const double queue_ms = std::chrono::duration<double, std::milli>(Clock::now() - arrived).count();
    HttpResponse r;
    if (st.route == RouteKind::Keypoints) {
      const Features f = run_one(w.parts[0], params);
      const int dim = f.has_descriptors ? f.descriptor_dim : 0;
      const auto n = static_cast<std::int64_t>(f.size());
      if (st.opt.npz) {
        r.content_type = "application/x-npz";
        write_features_npz(r.body, f);
      } else {
        r.body.reserve(features_json_bound(n, dim));
        append_features_json(r.body, f, queue_ms);
      }
      return r;
    }
    if (st.route == RouteKind::Batch) {
      r.body.reserve(w.answer_bytes);  // untouched pages cost nothing: the text never moves
      r.body += "{\"results\":[";
      for (std::size_t i = 0; i < w.parts.size(); ++i) {
        if (i) r.body += ',';
        // --timeout-s holds per image: one that would start after the deadline gets 504 instead (for the first,
        // the queue already checked), so a batch ends within --timeout-s plus one image and the SIGTERM grace holds.
        if (!w.errors[i] && i > 0 && Clock::now() >= deadline) {
          w.errors[i] = HttpError{504, "Timeout",
                                  w.parts[i].name + " did not start within " + plain_number(cfg.timeout_s) +
                                      " s of the request's arrival (--timeout-s): the batch's earlier images took "
                                      "the time; send fewer or smaller images per batch"};
          metrics.observe_image_error(504);
        }
        if (w.errors[i]) {
          r.body += json_text(error_json(*w.errors[i]));
          continue;
        }
        try {
          append_features_json(r.body, run_one(w.parts[i], params), queue_ms);
        } catch (const HttpError& e) {
          r.body += json_text(error_json(e));
        }
      }
      r.body += "]}";
      return r;
    }
    // /v1/match: --timeout-s bounds the second image's start and the matching itself.
    MatchOptions options = resolve(st.opt.match);
    // One thread: the request runs on its worker, like a request's decode and post-processing; the server's
    // --workers bound the cores that matching takes.
    options.threads = 1;
    const Features f0 = run_one(w.parts[0], params);
    if (Clock::now() >= deadline)
      throw HttpError{504, "Timeout",
                      w.parts[1].name + " did not start within " + plain_number(cfg.timeout_s) +
                          " s of the request's arrival (--timeout-s)"};
    const Features f1 = run_one(w.parts[1], params);
    if (st.opt.lightglue) {
      append_match_head(r, w, f0, f1, queue_ms);
      run_lightglue(r.body, f0, f1, st.opt.lg, deadline);
      r.body += '}';
      return r;
    }
    const DescriptorsView a = DescriptorsView::of(f0), b = DescriptorsView::of(f1);
    matching::detail::check_views(a, b);
    const std::int64_t work_size =
        static_cast<std::int64_t>(a.n) * static_cast<std::int64_t>(b.n) * static_cast<std::int64_t>(a.dim);
    if (work_size > cfg.max_match_work)
      throw HttpError{413, "TooLarge",
                      "matching " + std::to_string(a.n) + " x " + std::to_string(b.n) + " keypoints of " +
                          std::to_string(a.dim) + " values is " + std::to_string(work_size) +
                          " multiply-adds, over the limit of " + std::to_string(cfg.max_match_work) +
                          " (max_match_work): ask for fewer keypoints (max_keypoints)"};
    // The matcher's memory, now that the keypoints are known.
    const auto need = static_cast<std::int64_t>(matching::detail::Matcher::memory_bound(a.n, b.n, a.dim, 1));
    if (need > budget_bytes)
      throw HttpError{413, "TooLarge",
                      "matching " + std::to_string(a.n) + " x " + std::to_string(b.n) + " keypoints needs up to " +
                          mib(need) + ", over the memory budget of " + mib(budget_bytes) + " (--memory-budget-mb)"};
    const MemoryClaim matcher = model.claim_memory(need, "matching");
    if (!matcher.held())
      throw HttpError{503, "Overloaded",
                      "matching (" + mib(need) + ") does not fit the memory budget of " + mib(budget_bytes) +
                          " now (--memory-budget-mb); retry later"};
    const Clock::time_point t0 = Clock::now();
    matching::detail::Matcher m(1);
    m.set_deadline(deadline);
    const Matches matches = m.match(a, b, options);
    const double match_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    append_match_head(r, w, f0, f1, queue_ms);
    append_matches_json(r.body, matches, options, st.opt.match.conf, match_ms);
    r.body += '}';
    return r;
  }

  // A /v1/match answer's start: both images' results (the answer's memory was claimed at its bound in check()).
  static void append_match_head(HttpResponse& r, const Work& w, const Features& f0, const Features& f1,
                                double queue_ms) {
    r.body.reserve(w.answer_bytes);
    r.body += "{\"image0\":";
    append_features_json(r.body, f0, queue_ms);
    r.body += ",\"image1\":";
    append_features_json(r.body, f1, queue_ms);
    r.body += ',';
  }

  // /v1/match?matcher=lightglue on the two results, bounded as the nearest-neighbour path: the keypoints per image
  // (max_lightglue_keypoints: 413), LightGlue's working set (LightGlue::memory_bound, claimed from the budget: 413
  // when it never fits, 503 when not now), and --timeout-s (checked before every layer: LightGlueCancelled, 504).
  // Appends the matcher's members of the answer.
  void run_lightglue(std::string& out, const Features& f0, const Features& f1, LightGlueOptions o,
                     Clock::time_point deadline) {
    const std::size_t n0 = f0.size(), n1 = f1.size();
    for (const auto& [n, which] : {std::pair{n0, "image0"}, std::pair{n1, "image1"}})
      if (static_cast<std::int64_t>(n) > cfg.max_lightglue_keypoints)
        throw HttpError{413, "TooLarge",
                        std::string(which) + " has " + std::to_string(n) + " keypoints, over LightGlue's limit of " +
                            std::to_string(cfg.max_lightglue_keypoints) +
                            " per image (max_lightglue_keypoints): ask for fewer (max_keypoints)"};
    // One thread, as the nearest-neighbour matcher: it then runs on this worker, beside the others.
    o.threads = 1;
    const auto need = static_cast<std::int64_t>(lightglue->memory_bound(n0, n1, o.threads));
    if (need > budget_bytes)
      throw HttpError{413, "TooLarge",
                      "LightGlue on " + std::to_string(n0) + " x " + std::to_string(n1) + " keypoints needs up to " +
                          mib(need) + ", over the memory budget of " + mib(budget_bytes) + " (--memory-budget-mb)"};
    const MemoryClaim claim = model.claim_memory(need, "matching (LightGlue)");
    if (!claim.held())
      throw HttpError{503, "Overloaded",
                      "matching (LightGlue, " + mib(need) + ") does not fit the memory budget of " + mib(budget_bytes) +
                          " now (--memory-budget-mb); retry later"};
    o.cancel = [deadline] { return Clock::now() >= deadline; };
    // cvg's inputs as SuperPointOutput.to_lightglue() gives them: keypoints in the original image's pixels and its
    // size [W, H] (Features::image_size is (height, width)).
    const auto features = [](const Features& f) {
      return LightGlueFeatures{f.keypoints.data(),
                               f.descriptors.data(),
                               f.size(),
                               f.descriptor_dim,
                               static_cast<float>(f.image_size[1]),
                               static_cast<float>(f.image_size[0])};
    };
    const Clock::time_point t0 = Clock::now();
    const LightGlueMatches m = lightglue->match(features(f0), features(f1), o);
    const double match_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    append_lightglue_matches_json(out, m, o, match_ms);
  }

  // ---- the GET routes (answered on the I/O thread, with the header) ------------------------------------------

  HttpResponse get_route(const Route& route) {
    const std::string_view p = route.path;
    if (p == "/healthz") return json_response(200, {{"status", "ok"}});
    if (p == "/readyz") {
      if (draining.load()) return error_response({503, "ShuttingDown", "the server is shutting down"});
      if (!ready.load(std::memory_order_acquire)) return error_response({503, "NotReady", "the model is loading"});
      return json_response(200, {{"status", "ready"}});
    }
    if (p == "/v1/info") return json_response(200, info_json());
    HttpResponse r;
    if (p == "/metrics") {
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = metrics.render(cfg.workers, cfg.queue);
      return r;
    }
    r.body = std::string(openapi_document());  // /openapi.json
    return r;
  }

  json info_json() const {
    json j;
    j["version"] = version();
    j["ready"] = ready.load(std::memory_order_acquire);
    if (j["ready"].get<bool>()) {
      j["model"] = model_info.model;
      j["revision"] = model_info.revision;
      j["weights_dir"] = model_info.weights_dir;
      j["source"] = model_info.source;
      j["backend"] = model_info.backend;
      j["device"] = model_info.device;
      j["precision"] = model_info.precision;
      if (!model_info.calibration.empty()) j["calibration"] = model_info.calibration;
      j["threads"] = model_info.threads;
      j["cpu_features"] = model_info.cpu_features;
      j["cpu_units"] = model_info.cpu_units;
      j["fastest_precision"] = model_info.fastest_precision;
      j["precisions"] = precisions_json(model_info.precisions);
    }
    j["limits"] = json::object();
    for (const LimitDoc& l : describe_limits(cfg)) j["limits"][l.key] = l.value;
    // The query fields from the parameter table: type, allowed values, the hf default and every preset's.
    j["params"] = json::object();
    const ResolvedParams hf = resolve(Params{});
    for (const auto& spec : param_specs()) {
      if (!is_query_param(spec.name)) continue;
      const std::string name(spec.name);
      json d{{"type", to_string(spec.type)}, {"allowed", std::string(spec.range_text)}};
      auto typed = [&](const std::string& text) -> json {
        if (spec.type == ParamType::Int) return std::stoll(text);
        if (spec.type == ParamType::Float) return std::stod(text);
        if (spec.type == ParamType::Bool) return text == "true";
        return text;
      };
      if (spec.type == ParamType::Int || spec.type == ParamType::Float) {
        d["min"] = spec.min;
        d["max"] = spec.max;
      }
      if (!spec.choices.empty()) {
        d["choices"] = json::array();
        for (const std::string_view c : spec.choices) d["choices"].push_back(std::string(c));
      }
      d["default"] = typed(param_value_text(hf, name));
      if (spec.per_preset) {
        d["presets"] = json::object();
        for (const auto& p : preset_specs())
          d["presets"][std::string(p.name)] = typed(param_value_text(p.defaults, name));
      }
      j["params"][name] = d;
    }
    // /v1/match: the matcher's query fields and hloc's confs, from the same table (superpoint_rt/match.hpp).
    json mp = json::object();
    for (const auto& spec : match_param_specs()) {
      json d{{"type", to_string(spec.type)}, {"allowed", std::string(spec.range_text)}};
      if (spec.type == ParamType::Float) {
        d["min"] = spec.min;
        d["max"] = spec.max;
      }
      if (spec.name == "conf") d["default"] = MatchParams{}.conf;
      mp[std::string(spec.name)] = d;
    }
    json matcher{{"type", "string"},
                 {"allowed", kMatcherRange},
                 {"choices", json::array()},
                 {"default", "nn"},
                 {"help", kMatcherHelp}};
    for (const std::string_view m : kMatcherNames) matcher["choices"].push_back(std::string(m));
    mp["matcher"] = matcher;
    json confs = json::object();
    for (const auto& c : match_confs())
      confs[std::string(c.name)] = {{"ratio", c.options.ratio_threshold},
                                    {"distance", c.options.distance_threshold},
                                    {"mutual", c.options.mutual_check}};
    // matcher=lightglue: whether the server has LightGlue (serve --matcher-weights), its weights and its fields
    // (superpoint_rt/lightglue.hpp's table, defaults from LightGlueOptions).
    json lg{{"loaded", lightglue != nullptr}, {"max_keypoints", cfg.max_lightglue_keypoints}};
    if (lightglue) {
      lg["weights"] = lightglue->source();
      lg["layout"] = lightglue->layout();
      lg["input_dim"] = lightglue->input_dim();
      lg["layers"] = lightglue->num_layers();
    }
    json lp = json::object();
    const LightGlueOptions lg_defaults;
    for (const auto& spec : lightglue_param_specs())
      lp[std::string(spec.name)] = {{"type", to_string(spec.type)},
                                    {"allowed", std::string(spec.range_text)},
                                    {"min", spec.min},
                                    {"max", spec.max},
                                    {"default", lightglue_param_value(lg_defaults, spec.name)}};
    lg["params"] = lp;
    j["match"] = {{"params", mp}, {"confs", confs}, {"lightglue", lg}};
    return j;
  }
};

std::vector<LimitDoc> describe_limits(const ServerConfig& c) {
  return {
      {"max_body_bytes", c.max_body_bytes, "--max-body-mb", max_body_mb(c),
       "request bodies over this many MiB get 413 as soon as that many bytes arrived (Content-Length or chunked; "
       "never decompressed)"},
      {"max_pixels", c.max_pixels, "--max-pixels", std::to_string(c.max_pixels),
       "an image of more pixels (width x height, from its header) gets 413 before any pixel is decoded"},
      {"max_frame_pixels", c.max_frame_pixels, "--max-frame-pixels", std::to_string(c.max_frame_pixels),
       "a network frame (what resize / resize_max give for the image) of more pixels gets 413 before any plan or "
       "buffer is made; default: the largest preset frame"},
      {"max_batch_parts", c.max_batch_parts, "--max-batch-parts", std::to_string(c.max_batch_parts),
       "a batch of more images gets 413 before any of them is decoded"},
      {"max_match_work", c.max_match_work, "", std::to_string(c.max_match_work),
       "/v1/match: keypoints0 x keypoints1 x descriptor values over this get 413 before matching"},
      {"max_lightglue_keypoints", c.max_lightglue_keypoints, "", std::to_string(c.max_lightglue_keypoints),
       "/v1/match?matcher=lightglue: an image with more keypoints gets 413 before matching"},
      // The decoders' own bounds (include/superpoint_rt/image.hpp, docs/LIMITS.md): fixed, answered with 413.
      {"max_jpeg_scans", kMaxJpegScans, "", std::to_string(kMaxJpegScans),
       "a progressive JPEG with more scans gets 413 (each scan is a pass over all its coefficients)"},
      {"decode_work_bytes", kDecodeWorkBytes, "", std::to_string(kDecodeWorkBytes),
       "a decoder's working memory for an image of up to 1 MiB; needing more gets 413"},
      {"decode_work_bytes_per_input_byte", kDecodeWorkBytesPerInputByte, "",
       std::to_string(kDecodeWorkBytesPerInputByte), "more working memory allowed per input byte past the first MiB"},
      {"memory_budget_bytes", memory_budget_bytes(c.memory_budget_mb), "--memory-budget-mb",
       std::to_string(c.memory_budget_mb),
       "MiB for request bodies, network plans, pooled buffers, images, results and answers in flight (0 = half the "
       "machine's memory); a request that could never fit gets 413, one that does not fit now 503"},
      {"workers", c.workers, "--workers", std::to_string(c.workers), "image requests processed at once"},
      {"queue", c.queue, "--queue", std::to_string(c.queue),
       "requests that may wait for a worker; more get 503 + Retry-After"},
      {"timeout_s", c.timeout_s, "--timeout-s", plain_number(c.timeout_s),
       "an image not started this many seconds after its request arrived gets 504 (each image of a batch, "
       "/v1/match's second), and matching still running then gives up with 504"},
      {"connections", c.connections, "--connections", std::to_string(c.connections),
       "open connections (each costs its buffers, not a thread); more wait in the accept queue"},
      {"io_threads", c.io_threads, "", std::to_string(c.io_threads), "threads serving every connection"},
      {"max_request_line_bytes", static_cast<std::int64_t>(c.max_request_line_bytes), "",
       std::to_string(c.max_request_line_bytes), "a longer request line gets 414"},
      {"max_header_bytes", static_cast<std::int64_t>(c.max_header_bytes), "", std::to_string(c.max_header_bytes),
       "the request line and header fields together; more get 431"},
      {"max_query_fields", static_cast<std::int64_t>(kMaxQueryFields), "", std::to_string(kMaxQueryFields),
       "a query of more fields gets 422"},
      {"max_multipart_parts", static_cast<std::int64_t>(kMaxMultipartParts), "", std::to_string(kMaxMultipartParts),
       "a multipart body of more parts gets 413"},
      {"max_part_header_bytes", static_cast<std::int64_t>(kMaxPartHeaderBytes), "", std::to_string(kMaxPartHeaderBytes),
       "a multipart part's header block over this gets 400"},
      {"idle_timeout_s", c.idle_timeout_s, "", std::to_string(c.idle_timeout_s),
       "a connection with no request for this many seconds is closed"},
      {"header_timeout_s", c.header_timeout_s, "", std::to_string(c.header_timeout_s),
       "a request line and headers not complete this many seconds after their first byte get 408"},
      {"body_timeout_s", c.body_timeout_s, "", std::to_string(c.body_timeout_s),
       "a body not complete this many seconds after its header gets 408"},
      {"read_timeout_s", c.read_timeout_s, "", std::to_string(c.read_timeout_s),
       "a client that sends nothing for this many seconds in the middle of a request gets 408"},
      {"write_timeout_s", c.write_timeout_s, "", std::to_string(c.write_timeout_s),
       "a client that reads none of its answer for this many seconds is dropped"},
      {"linger_s", c.linger_s, "", std::to_string(c.linger_s),
       "after a refusal, what the client still sends is read and dropped for up to this many seconds"},
  };
}

HttpServer::HttpServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config), metrics_)) {}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::bind() {
  return impl_->transport.bind(impl_->cfg.host, impl_->cfg.port);
}

void HttpServer::start() {
  impl_->transport.start();
}

void HttpServer::set_lightglue(std::shared_ptr<const LightGlue> lightglue) {
  // SuperPoint's descriptors: what the weights must take (hloc's superpoint+lightglue conf).
  const int dim = find_lightglue_conf("superpoint+lightglue")->input_dim;
  if (lightglue && lightglue->input_dim() != dim)
    throw Error(ErrorKind::InvalidArgument, "--matcher-weights " + lightglue->source() + " take descriptors of dim " +
                                                std::to_string(lightglue->input_dim()) + ", SuperPoint's have " +
                                                std::to_string(dim) + " (superpoint+lightglue weights are needed)");
  impl_->lightglue = std::move(lightglue);
}

void HttpServer::set_model(SuperPoint model) {
  Impl& s = *impl_;
  s.model_info = model.info();
  s.model = std::move(model);
  s.ready.store(true, std::memory_order_release);
  metrics_.ready.store(true);
}

void HttpServer::set_ready_without_model() {
  impl_->ready.store(true, std::memory_order_release);
}

std::string HttpServer::serve_bytes(std::string_view wire) {
  return HttpTransport::serve_bytes(wire, Impl::limits_of(impl_->cfg), *impl_);
}

void HttpServer::begin_drain() {
  impl_->draining.store(true);
  metrics_.ready.store(false);
}

bool HttpServer::wait_idle(std::chrono::milliseconds limit) {
  // Polling keeps the accounting (which decrements in_flight on I/O threads) free of any lock.
  const auto deadline = Clock::now() + limit;
  while (metrics_.in_flight.load() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  s.transport.stop();
  s.work.stop();
  if (s.ready.load()) s.model.close();
}

}  // namespace superpoint_rt::server
