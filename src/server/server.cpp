#include "server/server.hpp"
#include "superpoint_rt/match.hpp"
#include "superpoint_rt/params.hpp"

#include <malloc.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/codec.hpp"
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

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void send_error(httplib::Response& res, const HttpError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, error_json(e));
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

// The methods cpp-httplib dispatches to handlers; it answers any other method (TRACE, CONNECT, or a token it does not
// know) with a bare 400, which install_hooks() turns into 405 + Allow as RFC 9110 §15.5.6 asks.
bool dispatched_method(const std::string& m) {
  return m == "GET" || m == "HEAD" || m == "POST" || m == "PUT" || m == "DELETE" || m == "OPTIONS" || m == "PATCH";
}

// An RFC 9110 method token (tchar+), so that a garbled request line stays a 400.
bool method_token(const std::string& m) {
  if (m.empty() || m.size() > 32) return false;
  return std::all_of(m.begin(), m.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
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

std::string allowed_query(bool match) {
  std::string s;
  for (const auto& spec : param_specs())
    if (is_extraction_param(spec.name, match)) s.append(s.empty() ? "" : ", ").append(spec.name);
  if (match)
    for (const auto& spec : match_param_specs()) s.append(", ").append(spec.name);
  return s + ", format";
}

constexpr const char* kFormHint =
    "a form-urlencoded body is not an image: send the image bytes with Content-Type image/* or "
    "application/octet-stream (curl: --data-binary @img.jpg -H 'Content-Type: image/jpeg'), or as the multipart "
    "field 'image' (curl -F image=@img.jpg)";

struct RequestOptions {
  Params params;
  ResolvedParams resolved;
  MatchParams match;  // /v1/match only
  bool npz = false;
};

// Query fields with SPEC's names, defaults and ranges (and, with `match`, the matcher's); anything else is refused
// by name (nothing is ignored). A fixed frame (resize=WxH) over --max-frame-pixels is 413 here, before the body is
// looked at.
RequestOptions parse_request_options(const httplib::Request& req, std::int64_t max_frame_pixels, bool match = false) {
  RequestOptions o;
  const std::size_t q = req.target.find('?');
  const auto fields =
      parse_query(q == std::string::npos ? std::string_view{} : std::string_view(req.target).substr(q + 1));
  std::set<std::string> seen;
  for (const auto& [name, value] : fields) {
    if (!seen.insert(name).second)
      throw HttpError{422, "InvalidArgument",
                      "query parameter '" + util::printable(name) + "' is given more than once"};
    if (is_extraction_param(name, match)) {
      set_param_text(o.params, name, value);  // an Error: 422 (its kind says so), the message quotes the value
    } else if (match && is_match_param(name)) {
      set_match_param_text(o.match, name, value);
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
  if (!seen.count("format") && req.get_header_value("Accept").find("application/x-npz") != std::string::npos)
    o.npz = true;
  o.match.validate();
  o.resolved = resolve(o.params);  // InvalidArgument: 422; an explicit resize over the network's limit: 413
  if (o.resolved.resize_mode == ResizeMode::Fixed)
    (void)o.resolved.network_frame(1, 1, "the request", max_frame_pixels);
  return o;
}

// One encoded image of a request, viewing bytes owned by the httplib::Request.
struct ImagePart {
  std::span<const std::uint8_t> bytes;
  std::string name;
};

std::span<const std::uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Checks the body's content type; multipart bodies give their 'image' fields (in order), others the raw body.
std::vector<ImagePart> image_parts(const httplib::Request& req, bool batch) {
  const std::string type = media_type(req.get_header_value("Content-Type"));
  std::vector<ImagePart> parts;
  if (type == "multipart/form-data") {
    // std::multimap keeps equal keys in insertion order, so repeated 'image' fields stay in request order.
    const auto [first, last] = req.files.equal_range("image");
    int i = 0;
    for (auto it = first; it != last; ++it, ++i) {
      std::string name = it->second.filename.empty() ? "image" : it->second.filename;
      if (batch) name = "image[" + std::to_string(i) + "] (" + name + ")";
      parts.push_back({as_bytes(it->second.content), std::move(name)});
    }
    if (parts.empty()) {
      std::string fields;
      for (const auto& [k, v] : req.files) fields += (fields.empty() ? "" : ", ") + ("'" + k + "'");
      throw HttpError{400, "DecodeError",
                      "the multipart body has no field 'image'" + (fields.empty() ? "" : " (fields: " + fields + ")")};
    }
    if (!batch && parts.size() > 1)
      throw HttpError{400, "DecodeError",
                      "the multipart body has " + std::to_string(parts.size()) +
                          " 'image' fields; send several images to /v1/keypoints/batch"};
    return parts;
  }
  if (batch)
    throw HttpError{415, "UnsupportedFormat",
                    "/v1/keypoints/batch needs a multipart/form-data body with one 'image' field per image, not '" +
                        (type.empty() ? std::string("no content type") : type) + "'"};
  if (type == "application/x-www-form-urlencoded") throw HttpError{415, "UnsupportedFormat", kFormHint};
  if (!type.empty() && type != "application/octet-stream" && type.rfind("image/", 0) != 0)
    throw HttpError{415, "UnsupportedFormat",
                    "unsupported content type '" + type +
                        "' (allowed: image/*, application/octet-stream, multipart/form-data with a field 'image')"};
  parts.push_back({as_bytes(req.body), "request body"});
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

// The two images of /v1/match: the multipart fields 'image0' and 'image1', once each.
std::vector<ImagePart> match_parts(const httplib::Request& req) {
  const std::string type = media_type(req.get_header_value("Content-Type"));
  if (type != "multipart/form-data")
    throw HttpError{415, "UnsupportedFormat",
                    "/v1/match needs a multipart/form-data body with the fields 'image0' and 'image1', not '" +
                        (type.empty() ? std::string("no content type") : type) + "'"};
  std::vector<ImagePart> parts;
  for (const char* field : {"image0", "image1"}) {
    const auto [first, last] = req.files.equal_range(field);
    const auto count = std::distance(first, last);
    if (count != 1) {
      std::string fields;
      for (const auto& [k, v] : req.files) fields += (fields.empty() ? "" : ", ") + ("'" + k + "'");
      throw HttpError{400, "DecodeError",
                      "the multipart body has " + std::to_string(count) + " fields '" + field +
                          "' (exactly one each of 'image0' and 'image1'" +
                          (fields.empty() ? std::string(")") : "; fields: " + fields + ")")};
    }
    parts.push_back(
        {as_bytes(first->second.content),
         std::string(field) + " (" + (first->second.filename.empty() ? field : first->second.filename) + ")"});
  }
  return parts;
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

// Per connection thread: when the current request's headers arrived and whether it counts as in flight.
struct RequestState {
  Clock::time_point start{};
  bool pending = false;  // in_flight was incremented for this request
  bool admitted = true;  // its headers arrived before the drain began
};
thread_local RequestState t_request;

}  // namespace

// The bounded wait for a worker slot.
class Admission {
 public:
  Admission(int workers, int queue, Metrics& m) : workers_(workers), queue_(queue), metrics_(m) {}
  enum class Result { Ok, Full, TimedOut };

  Result acquire(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (running_ < workers_ && waiting_ == 0) {
      ++running_;
      return Result::Ok;
    }
    if (waiting_ >= queue_) return Result::Full;
    ++waiting_;
    metrics_.queue_depth.store(waiting_);
    const bool ok = cv_.wait_until(lock, deadline, [&] { return running_ < workers_; });
    --waiting_;
    metrics_.queue_depth.store(waiting_);
    if (!ok) return Result::TimedOut;
    ++running_;
    return Result::Ok;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    cv_.notify_one();
  }

 private:
  const int workers_, queue_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0, waiting_ = 0;
};

// Holds a worker slot for a scope.
class Slot {
 public:
  Slot(Admission& a, Metrics& m) : a_(a), m_(m) { ++m_.busy_workers; }
  ~Slot() {
    --m_.busy_workers;
    a_.release();
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  Admission& a_;
  Metrics& m_;
};

// httplib keeps the listening socket protected; this subclass raises the accept backlog (Debian's build listens
// with a backlog of 5, which makes bursts of new connections wait for SYN retransmits).
class ListeningServer : public httplib::Server {
 public:
  void raise_backlog(int backlog) {
    const int fd = svr_sock_;
    if (fd >= 0) ::listen(fd, backlog);
  }
};

struct HttpServer::Impl {
  ServerConfig cfg;
  Metrics& metrics;
  ListeningServer http;
  Admission admission;
  std::thread listener;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::atomic<std::int64_t> last_trim_ms{0};

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
  SuperPoint model;  // written once before `ready` is set (release), read after it is seen (acquire)
  ModelInfo model_info;

  Impl(ServerConfig c, Metrics& m) : cfg(std::move(c)), metrics(m), admission(cfg.workers, cfg.queue, m) {}

  // 503 while loading, and for requests that arrived after the drain began.
  void check_available() const {
    if (!t_request.admitted)
      throw HttpError{503, "ShuttingDown", "the server is shutting down; retry on another replica"};
    if (!ready.load(std::memory_order_acquire))
      throw HttpError{503, "NotReady", "the model is still loading; retry when /readyz returns 200"};
  }

  Clock::time_point deadline_of(Clock::time_point arrived) const {
    return arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.timeout_s));
  }

  Slot admit(Clock::time_point arrived) {
    switch (admission.acquire(deadline_of(arrived))) {
      case Admission::Result::Ok: return Slot(admission, metrics);
      case Admission::Result::Full:
        throw HttpError{503, "Overloaded",
                        "all " + std::to_string(cfg.workers) + " workers are busy and " + std::to_string(cfg.queue) +
                            " requests are waiting (--queue); retry later"};
      case Admission::Result::TimedOut:
        throw HttpError{
            504, "Timeout",
            "the request waited longer than " + plain_number(cfg.timeout_s) + " s for a worker (--timeout-s)"};
    }
    throw HttpError{500, "Internal", "unreachable"};
  }

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

  template <class F>
  void guarded(httplib::Response& res, F&& body) {
    try {
      body();
    } catch (const HttpError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, from_error(e));
    } catch (const std::bad_alloc&) {
      send_error(res, {503, "OutOfMemory", "the server ran out of memory for this request; retry later"});
    } catch (const std::exception& e) {
      send_error(res, {500, "Internal", std::string("internal error: ") + e.what()});
    }
  }

  void handle_keypoints(const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const Clock::time_point arrived = Clock::now();
      check_available();
      const RequestOptions opt = parse_request_options(req, cfg.max_frame_pixels);
      const std::vector<ImagePart> parts = image_parts(req, false);
      try {
        check_image(parts[0], cfg.max_pixels, opt.resolved, cfg.max_frame_pixels);
      } catch (const HttpError& e) {
        metrics.observe_image_error(e.status);
        throw;
      }
      Features f;
      double queue_ms = 0;
      {
        Slot slot = admit(arrived);
        queue_ms = std::chrono::duration<double, std::milli>(Clock::now() - arrived).count();
        f = run_one(parts[0], opt.params);
      }
      res.status = 200;
      if (opt.npz) {
        const std::vector<std::uint8_t> npz = features_to_npz(f);
        res.set_content(reinterpret_cast<const char*>(npz.data()), npz.size(), "application/x-npz");
      } else {
        res.set_content(json_text(features_to_json(f, queue_ms)), "application/json");
      }
    });
  }

  void handle_batch(const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const Clock::time_point arrived = Clock::now();
      check_available();
      const RequestOptions opt = parse_request_options(req, cfg.max_frame_pixels);
      if (opt.npz)
        throw HttpError{422, "InvalidArgument",
                        "format: npz is available on /v1/keypoints only; /v1/keypoints/batch answers JSON"};
      const std::vector<ImagePart> parts = image_parts(req, true);
      // Counted before any part is probed or decoded: a batch holds one worker for all its images.
      if (parts.size() > static_cast<std::size_t>(cfg.max_batch_parts))
        throw HttpError{413, "TooLarge",
                        "the batch has " + std::to_string(parts.size()) + " 'image' fields, over the limit of " +
                            std::to_string(cfg.max_batch_parts) + " (--max-batch-parts)"};
      std::vector<std::optional<HttpError>> errors(parts.size());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        try {
          check_image(parts[i], cfg.max_pixels, opt.resolved, cfg.max_frame_pixels);
        } catch (const HttpError& e) {
          metrics.observe_image_error(e.status);
          errors[i] = e;
        }
      }
      json results = json::array();
      {
        Slot slot = admit(arrived);
        const double queue_ms = std::chrono::duration<double, std::milli>(Clock::now() - arrived).count();
        const Clock::time_point deadline = deadline_of(arrived);
        for (std::size_t i = 0; i < parts.size(); ++i) {
          // --timeout-s holds per image: one that would start after the deadline gets 504 instead (for the first,
          // admit() already checked), so a batch ends within --timeout-s plus one image and the SIGTERM grace holds.
          if (!errors[i] && i > 0 && Clock::now() >= deadline) {
            errors[i] = HttpError{504, "Timeout",
                                  parts[i].name + " did not start within " + plain_number(cfg.timeout_s) +
                                      " s of the request's arrival (--timeout-s): the batch's earlier images took "
                                      "the time; send fewer or smaller images per batch"};
            metrics.observe_image_error(504);
          }
          if (errors[i]) {
            results.push_back(error_json(*errors[i]));
            continue;
          }
          try {
            results.push_back(features_to_json(run_one(parts[i], opt.params), queue_ms));
          } catch (const HttpError& e) {
            results.push_back(error_json(e));
          }
        }
      }
      send_json(res, 200, {{"results", std::move(results)}});
    });
  }

  void handle_match(const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const Clock::time_point arrived = Clock::now();
      check_available();
      const RequestOptions opt = parse_request_options(req, cfg.max_frame_pixels, /*match=*/true);
      if (opt.npz)
        throw HttpError{422, "InvalidArgument",
                        "format: npz is available on /v1/keypoints only; /v1/match answers JSON"};
      const std::vector<ImagePart> parts = match_parts(req);
      for (const ImagePart& part : parts) {
        try {
          check_image(part, cfg.max_pixels, opt.resolved, cfg.max_frame_pixels);
        } catch (const HttpError& e) {
          metrics.observe_image_error(e.status);
          throw;
        }
      }
      MatchOptions options = resolve(opt.match);
      // One thread: the request runs on its worker slot, like a request's decode and post-processing; the server's
      // --workers bound the cores that matching takes.
      options.threads = 1;
      Features f[2];
      Matches m;
      double queue_ms = 0, match_ms = 0;
      {
        Slot slot = admit(arrived);
        queue_ms = std::chrono::duration<double, std::milli>(Clock::now() - arrived).count();
        f[0] = run_one(parts[0], opt.params);
        f[1] = run_one(parts[1], opt.params);
        const Clock::time_point t0 = Clock::now();
        m = match(f[0], f[1], options);
        match_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
      json body = matches_to_json(m, options, opt.match.conf, match_ms);
      body["image0"] = features_to_json(f[0], queue_ms);
      body["image1"] = features_to_json(f[1], queue_ms);
      send_json(res, 200, body);
    });
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
    json confs = json::object();
    for (const auto& c : match_confs())
      confs[std::string(c.name)] = {{"ratio", c.options.ratio_threshold},
                                    {"distance", c.options.distance_threshold},
                                    {"mutual", c.options.mutual_check}};
    j["match"] = {{"params", mp}, {"confs", confs}};
    return j;
  }

  void install_routes() {
    http.Post("/v1/keypoints", [this](const httplib::Request& q, httplib::Response& r) { handle_keypoints(q, r); });
    http.Post("/v1/keypoints/batch", [this](const httplib::Request& q, httplib::Response& r) { handle_batch(q, r); });
    http.Post("/v1/match", [this](const httplib::Request& q, httplib::Response& r) { handle_match(q, r); });
    http.Get("/healthz", [](const httplib::Request&, httplib::Response& r) { send_json(r, 200, {{"status", "ok"}}); });
    http.Get("/readyz", [this](const httplib::Request&, httplib::Response& r) {
      if (draining.load())
        send_error(r, {503, "ShuttingDown", "the server is shutting down"});
      else if (!ready.load(std::memory_order_acquire))
        send_error(r, {503, "NotReady", "the model is loading"});
      else
        send_json(r, 200, {{"status", "ready"}});
    });
    http.Get("/v1/info", [this](const httplib::Request&, httplib::Response& r) { send_json(r, 200, info_json()); });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      r.status = 200;
      r.set_content(metrics.render(cfg.workers, cfg.queue), "text/plain; version=0.0.4; charset=utf-8");
    });
    http.Get("/openapi.json", [](const httplib::Request&, httplib::Response& r) {
      r.status = 200;
      const std::string_view doc = openapi_document();
      r.set_content(doc.data(), doc.size(), "application/json");
    });
    // 405 for the known paths with another method (unknown paths fall through to 404 in the error handler).
    for (const Route& route : kRoutes) {
      const std::string allow = route.allow;
      auto handler = [](const httplib::Request& q, httplib::Response& r) { send_not_allowed(q, r); };
      if (allow.find("GET") == std::string::npos) http.Get(route.path, handler);  // HEAD goes to the GET handlers
      if (allow.find("POST") == std::string::npos) http.Post(route.path, handler);
      http.Put(route.path, handler);
      http.Patch(route.path, handler);
      http.Delete(route.path, handler);
      http.Options(route.path, handler);
    }
  }

  // 405 + Allow on a known path, 404 elsewhere. With `close`, "Connection: close" tells the client not to reuse the
  // connection: for a method httplib does not dispatch, the request body (and, when its parser did not know the
  // method, the headers) stay unread. httplib 0.11 cannot close from a handler; the connection idles out.
  static void send_not_allowed(const httplib::Request& q, httplib::Response& r, bool close = false) {
    // httplib's request-line parser stops before setting `path` when it does not know the method; `target` is set.
    const std::string path = q.path.empty() ? q.target.substr(0, q.target.find('?')) : q.path;
    const Route* route = find_route(path);
    if (close && q.get_header_value("Connection") != "close") r.set_header("Connection", "close");
    if (route == nullptr) {
      send_error(r, {404, "NotFound", "no route " + q.method + " " + path + " (routes: " + route_list() + ")"});
      return;
    }
    r.set_header("Allow", route->allow);
    send_error(r, {405, "MethodNotAllowed",
                   "method " + q.method + " is not allowed on " + path + " (allowed: " + route->allow + ")"});
  }

  void install_hooks() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (t_request.pending) --metrics.in_flight;  // the previous request on this thread ended without a log call
      t_request = {Clock::now(), true, !draining.load()};
      ++metrics.in_flight;
      if (!dispatched_method(req.method)) {  // TRACE, CONNECT, PRI: httplib would answer a bare 400
        send_not_allowed(req, res, true);
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      double seconds = -1;
      if (t_request.pending) {
        seconds = std::chrono::duration<double>(Clock::now() - t_request.start).count();
        t_request.pending = false;
        if (--metrics.in_flight == 0) trim_when_idle();
      }
      metrics.observe_request(Metrics::endpoint_label(req.path), res.status, seconds);
    });
    // Errors raised by httplib itself (unknown route, oversized or malformed body) get the same JSON shape.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                       httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      HttpError e{res.status, "HttpError", "HTTP error " + std::to_string(res.status)};
      if (res.status == 400 && !dispatched_method(req.method) && method_token(req.method) &&
          req.target.rfind('/', 0) == 0 && req.version.rfind("HTTP/1.", 0) == 0) {
        // A method token httplib's request-line parser does not know ("FOO", "trace"): a well-formed request line
        // that no route answers, so 405 as for TRACE (see the pre-routing handler), not "malformed". Its headers
        // and body are unread: the connection closes after the answer.
        send_not_allowed(req, res, true);
        return httplib::Server::HandlerResponse::Handled;
      }
      if (res.status == 404) {
        e.type = "NotFound";
        e.message = "no route " + req.method + " " + req.path + " (routes: " + route_list() + ")";
      } else if (res.status == 413) {
        if (media_type(req.get_header_value("Content-Type")) == "application/x-www-form-urlencoded" &&
            req.get_header_value<std::uint64_t>("Content-Length") <= static_cast<std::uint64_t>(cfg.max_body_bytes)) {
          e = {415, "UnsupportedFormat", kFormHint};  // httplib caps form bodies at 8 KiB; the real issue is the type
        } else {
          e.type = "TooLarge";
          e.message = "the request body is over the limit of " + std::to_string(cfg.max_body_bytes) +
                      " bytes (--max-body-mb " + max_body_mb(cfg) + ")";
        }
      } else if (res.status == 414) {
        e.type = "UriTooLong";
        e.message = "the request line is over the limit of " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) +
                    " bytes (max_header_line_bytes)";
      } else if (res.status == 400) {
        e.type = "BadRequest";
        e.message =
            "malformed HTTP request (request line, headers or multipart body; cpp-httplib also refuses a "
            "multipart body of more than " +
            std::to_string(CPPHTTPLIB_MULTIPART_FORM_DATA_FILE_MAX_COUNT) + " parts this way)";
      }
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, {500, "Internal", "internal error: " + what});
    });
  }
};

static_assert(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH == CPPHTTPLIB_HEADER_MAX_LENGTH,
              "describe_limits() reports one max_header_line_bytes for both");

int resolved_connections(const ServerConfig& c) {
  return c.connections > 0 ? c.connections : c.workers + c.queue + 16;
}

std::vector<LimitDoc> describe_limits(const ServerConfig& c) {
  const std::string conn = c.connections > 0 ? std::to_string(c.connections) : "workers + queue + 16";
  return {
      {"max_body_bytes", c.max_body_bytes, "--max-body-mb", max_body_mb(c),
       "request bodies over this many MiB get 413 without being read"},
      {"max_pixels", c.max_pixels, "--max-pixels", std::to_string(c.max_pixels),
       "an image of more pixels (width x height, from its header) gets 413 before any pixel is decoded"},
      {"max_frame_pixels", c.max_frame_pixels, "--max-frame-pixels", std::to_string(c.max_frame_pixels),
       "a network frame (what resize / resize_max give for the image) of more pixels gets 413 before any plan or "
       "buffer is made; default: the largest preset frame"},
      {"max_batch_parts", c.max_batch_parts, "--max-batch-parts", std::to_string(c.max_batch_parts),
       "a batch of more images gets 413 before any of them is decoded"},
      // The decoders' own bounds (include/superpoint_rt/image.hpp, docs/LIMITS.md): fixed, answered with 413.
      {"max_jpeg_scans", kMaxJpegScans, "", std::to_string(kMaxJpegScans),
       "a progressive JPEG with more scans gets 413 (each scan is a pass over all its coefficients)"},
      {"decode_work_bytes", kDecodeWorkBytes, "", std::to_string(kDecodeWorkBytes),
       "a decoder's working memory for an image of up to 1 MiB; needing more gets 413"},
      {"decode_work_bytes_per_input_byte", kDecodeWorkBytesPerInputByte, "",
       std::to_string(kDecodeWorkBytesPerInputByte), "more working memory allowed per input byte past the first MiB"},
      {"memory_budget_bytes", memory_budget_bytes(c.memory_budget_mb), "--memory-budget-mb",
       std::to_string(c.memory_budget_mb),
       "MiB for network plans, pooled buffers and images in flight (0 = half the machine's memory); a request "
       "that does not fit waits up to 30 s, then gets 503"},
      {"workers", c.workers, "--workers", std::to_string(c.workers), "image requests processed at once"},
      {"queue", c.queue, "--queue", std::to_string(c.queue),
       "requests that may wait for a worker; more get 503 + Retry-After"},
      {"timeout_s", c.timeout_s, "--timeout-s", plain_number(c.timeout_s),
       "an image not started this many seconds after its request arrived gets 504 (each image of a batch)"},
      {"connections", resolved_connections(c), "--connections", conn,
       "HTTP connection threads; more connections wait in the accept queue"},
      {"idle_timeout_s", c.idle_timeout_s, "", std::to_string(c.idle_timeout_s),
       "an idle keep-alive connection is closed after this many seconds"},
      {"read_timeout_s", c.read_timeout_s, "", std::to_string(c.read_timeout_s),
       "a client that sends nothing for this many seconds in the middle of a request is dropped"},
      // httplib checks the request line against CPPHTTPLIB_REQUEST_URI_MAX_LENGTH, the headers against
      // CPPHTTPLIB_HEADER_MAX_LENGTH; static_assert below keeps "one number" true.
      {"max_header_line_bytes", CPPHTTPLIB_HEADER_MAX_LENGTH, "", std::to_string(CPPHTTPLIB_HEADER_MAX_LENGTH),
       "longest request line (longer: 414) or header line (longer: 400), cpp-httplib's build"},
  };
}

HttpServer::HttpServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config), metrics_)) {
  Impl& s = *impl_;
  s.cfg.connections = resolved_connections(s.cfg);
  const auto threads = static_cast<std::size_t>(s.cfg.connections);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(static_cast<std::size_t>(s.cfg.max_body_bytes));
  s.http.set_keep_alive_max_count(1000000);  // keep-alive connections stay open (load balancers, wrk)
  s.http.set_keep_alive_timeout(s.cfg.idle_timeout_s);
  s.http.set_read_timeout(s.cfg.read_timeout_s);
  s.http.set_tcp_nodelay(true);  // responses are written in two sends (headers, body): no Nagle delay
  s.install_routes();
  s.install_hooks();
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::bind() {
  Impl& s = *impl_;
  int port = s.cfg.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.cfg.host);
  } else if (!s.http.bind_to_port(s.cfg.host, port)) {
    port = -1;
  }
  if (port <= 0)
    throw Error(ErrorKind::Io, "cannot listen on " + s.cfg.host + ":" + std::to_string(s.cfg.port) +
                                   " (address in use, or not an address of this machine)");
  s.http.raise_backlog(1024);
  return port;
}

void HttpServer::start() {
  Impl& s = *impl_;
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
}

void HttpServer::set_model(SuperPoint model) {
  Impl& s = *impl_;
  s.model_info = model.info();
  s.model = std::move(model);
  s.ready.store(true, std::memory_order_release);
  metrics_.ready.store(true);
}

void HttpServer::begin_drain() {
  impl_->draining.store(true);
  metrics_.ready.store(false);
}

bool HttpServer::wait_idle(std::chrono::milliseconds limit) {
  // Polling keeps the logger (which decrements in_flight on connection threads) free of any lock.
  const auto deadline = Clock::now() + limit;
  while (metrics_.in_flight.load() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.listener.joinable()) {
    s.http.stop();
    s.listener.join();
  }
  if (s.ready.load()) s.model.close();
}

}  // namespace superpoint_rt::server
