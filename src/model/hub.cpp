// Hugging Face hub cache lookup and download (SPEC §3), mirroring huggingface_hub 2.4 (constants.py,
// file_download.py, utils/_http.py, utils/_auth.py, utils/_validators.py) so that both libraries share one cache.
//
// What is mirrored, and where it comes from:
//   - cache dir: HF_HUB_CACHE > HUGGINGFACE_HUB_CACHE > $HF_HOME/hub > $XDG_CACHE_HOME/huggingface/hub >
//     ~/.cache/huggingface/hub, with ~ and $VAR expansion (constants.py).
//   - offline: HF_HUB_OFFLINE (or, when it is unset/empty, TRANSFORMERS_OFFLINE) in {1, ON, YES, TRUE}, any case.
//   - token: HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH (default $HF_HOME/token); none at
//     all when HF_HUB_DISABLE_IMPLICIT_TOKEN is true (utils/_auth.py, utils/_headers.py).
//   - metadata: a HEAD on {endpoint}/{repo}/resolve/{quote(revision, safe="")}/{quote(file)} that follows redirects
//     only while they stay on the same origin or a hub origin; the commit is X-Repo-Commit, the blob name the
//     X-Linked-Etag (else ETag) without W/ and quotes, the size X-Linked-Size (else Content-Length when the final
//     response is not a redirect), the download URL the Location of a cross-origin redirect (get_hf_file_metadata).
//   - layout: refs/{revision} holds the commit (no newline, written only when it differs from the revision),
//     snapshots/{commit}/{file} is a relative symlink to blobs/{etag}, blobs are written to a per-process
//     blobs/{etag}.{8 hex}.incomplete file then renamed, CACHEDIR.TAG in the cache root, .no_exist/{commit}/{file}
//     after a 404 EntryNotFound (_hf_hub_download_to_cache_dir, _download_to_tmp_and_move).
//
// Deliberate differences: a repo whose snapshot already holds every requested file is used without any network
// request (huggingface_hub sends a HEAD per file to look for a newer commit); the files of one request are pinned
// to the commit the first file resolved to, so a push between two files cannot mix commits; no .locks/ files (the
// temp file + rename makes concurrent downloads safe, a lock would only save bandwidth); no retries or resume.
#include "model/hub.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>

#include "superpoint_rt/errors.hpp"

#ifndef SUPERPOINT_RT_VERSION
#define SUPERPOINT_RT_VERSION "0"
#endif

namespace superpoint_rt::model {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultEndpoint = "https://huggingface.co";
constexpr long kConnectTimeoutS = 10;  // huggingface_hub: DEFAULT_ETAG_TIMEOUT / DEFAULT_DOWNLOAD_TIMEOUT = 10 s
constexpr long kDefaultTimeoutS = 10;
constexpr long kMaxRedirects = 20;  // utils/_http.py _MAX_REDIRECTS (httpx's default)
constexpr const char* kCachedirTag =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by huggingface_hub.\n"
    "# For information about cache directory tags, see:\n"
    "#\thttps://bford.info/cachedir/\n";

[[noreturn]] void fail(ErrorKind kind, const std::string& message) {
  throw Error(kind, message);
}

// ---------------------------------------------------------------------------------------------------------------
// Environment (read at every call, not cached: tests and long-lived processes may change it).

/// The value of an environment variable; nullopt when unset. Python's os.getenv treats "" as set; callers decide.
std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::string env_or_empty(const char* name) {
  return env(name).value_or("");
}

/// constants._is_true: value.upper() in {"1", "ON", "YES", "TRUE"}.
bool is_true(const std::string& v) {
  std::string u = v;
  for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u == "1" || u == "ON" || u == "YES" || u == "TRUE";
}

/// constants.HF_HUB_OFFLINE: _is_true(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")).
bool env_offline() {
  std::string v = env_or_empty("HF_HUB_OFFLINE");
  if (v.empty()) v = env_or_empty("TRANSFORMERS_OFFLINE");
  return is_true(v);
}

std::string home_dir() {
  std::string h = env_or_empty("HOME");
  return h.empty() ? std::string("/") : h;
}

/// os.path.expanduser for "~" and "~/..." (the only forms the hub variables use).
std::string expand_user(const std::string& p) {
  if (p == "~") return home_dir();
  if (p.rfind("~/", 0) == 0) return home_dir() + p.substr(1);
  return p;
}

/// os.path.expandvars: $NAME and ${NAME} are replaced when NAME is set, left as they are otherwise.
std::string expand_vars(const std::string& p) {
  std::string out;
  for (std::size_t i = 0; i < p.size();) {
    if (p[i] != '$') {
      out += p[i++];
      continue;
    }
    std::size_t j = i + 1;
    std::string name;
    if (j < p.size() && p[j] == '{') {
      const std::size_t close = p.find('}', j + 1);
      if (close == std::string::npos) {
        out += p.substr(i);
        break;
      }
      name = p.substr(j + 1, close - j - 1);
      j = close + 1;
    } else {
      while (j < p.size() && (std::isalnum(static_cast<unsigned char>(p[j])) || p[j] == '_')) name += p[j++];
    }
    const auto v = name.empty() ? std::nullopt : env(name.c_str());
    if (v) {
      out += *v;
    } else {
      out += p.substr(i, j - i);
    }
    i = j;
  }
  return out;
}

std::string expand(const std::string& p) {
  return expand_vars(expand_user(p));
}

/// constants.HF_HOME: expandvars(expanduser($HF_HOME or $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface)).
std::string hf_home() {
  if (auto v = env("HF_HOME"); v && !v->empty()) return expand(*v);
  std::string xdg = env_or_empty("XDG_CACHE_HOME");
  if (xdg.empty()) xdg = home_dir() + "/.cache";
  return expand(xdg + "/huggingface");
}

/// utils/_auth._clean_token: drop CR/LF, strip surrounding spaces; empty means no token.
std::optional<std::string> clean_token(std::string t) {
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '\r' || c == '\n'; }), t.end());
  const auto b = t.find_first_not_of(" \t\f\v");
  if (b == std::string::npos) return std::nullopt;
  const auto e = t.find_last_not_of(" \t\f\v");
  return t.substr(b, e - b + 1);
}

/// The token huggingface_hub would send implicitly (get_token_to_send(None)).
std::optional<std::string> hub_token() {
  if (is_true(env_or_empty("HF_HUB_DISABLE_IMPLICIT_TOKEN"))) return std::nullopt;
  std::string t = env_or_empty("HF_TOKEN");
  if (t.empty()) t = env_or_empty("HUGGING_FACE_HUB_TOKEN");
  if (auto c = clean_token(t)) return c;
  std::string path = env_or_empty("HF_TOKEN_PATH");
  path = path.empty() ? hf_home() + "/token" : expand(path);
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return clean_token(ss.str());
}

/// constants.ENDPOINT: $HF_ENDPOINT (default https://huggingface.co) without trailing slashes.
std::string hub_endpoint() {
  std::string e = env_or_empty("HF_ENDPOINT");
  if (e.empty()) e = kDefaultEndpoint;
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

/// HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT (seconds); non-numbers and non-positive values keep the default.
long env_seconds(const char* name) {
  const std::string v = env_or_empty(name);
  if (v.empty()) return kDefaultTimeoutS;
  char* end = nullptr;
  const long s = std::strtol(v.c_str(), &end, 10);
  return (end && *end == '\0' && s > 0) ? s : kDefaultTimeoutS;
}

// ---------------------------------------------------------------------------------------------------------------
// Names.

bool is_word(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// One part of REPO_ID_REGEX: \b[\w\-.]{1,96}\b (ASCII), i.e. 1-96 of [A-Za-z0-9_.-] starting and ending with a word
/// character.
bool valid_repo_part(std::string_view s) {
  if (s.empty() || s.size() > 96 || !is_word(s.front()) || !is_word(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_word(c) || c == '-' || c == '.'; });
}

/// utils/_validators.validate_repo_id without the type checks.
bool valid_repo_id(const std::string& s) {
  if (std::count(s.begin(), s.end(), '/') > 1) return false;
  const auto slash = s.find('/');
  if (slash != std::string::npos && !valid_repo_part(std::string_view(s).substr(0, slash))) return false;
  if (!valid_repo_part(slash == std::string::npos ? std::string_view(s) : std::string_view(s).substr(slash + 1))) {
    return false;
  }
  if (s.find("--") != std::string::npos || s.find("..") != std::string::npos) return false;
  return !(s.size() >= 4 && s.compare(s.size() - 4, 4, ".git") == 0);
}

/// file_download.REGEX_COMMIT_HASH: exactly 40 lowercase hex digits.
bool is_commit_hash(const std::string& s) {
  return s.size() == 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// A '/'-separated relative path with no empty, "." or ".." segment and no control characters: safe to join onto a
/// cache folder (huggingface_hub's _validate_relative_filename rejects '..' and anchored paths; we are stricter).
bool safe_relative_path(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  for (char c : p) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '\\' || c == 0x7f) return false;
  }
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string_view seg(p.data() + start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

/// file_download.repo_folder_name for models: "models--{org}--{name}".
std::string repo_folder_name(const std::string& repo_id) {
  std::string out = "models";
  std::size_t start = 0;
  while (true) {
    const auto slash = repo_id.find('/', start);
    out += "--" + repo_id.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

/// urllib.parse.quote: keeps A-Z a-z 0-9 _ . - ~ (and '/' when `keep_slash`), percent-encodes every other byte.
std::string url_quote(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// file_download._normalize_etag: etag.lstrip("W/").strip('"').
std::string normalize_etag(const std::string& etag) {
  std::size_t b = 0;
  while (b < etag.size() && (etag[b] == 'W' || etag[b] == '/')) ++b;
  std::size_t e = etag.size();
  while (b < e && etag[b] == '"') ++b;
  while (e > b && etag[e - 1] == '"') --e;
  return etag.substr(b, e - b);
}

/// 8 random hex digits for temp names (uuid4().hex[:8] in huggingface_hub). std::random_device reads the kernel's
/// entropy on every call, so processes forked from one parent never draw the same names (a seeded PRNG would).
std::string random_hex8() {
  static const char* hex = "0123456789abcdef";
  std::random_device rd;
  std::uint32_t v = rd();
  std::string out(8, '0');
  for (auto& c : out) {
    c = hex[v & 15];
    v >>= 4;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// File system helpers.

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string errno_text() {
  return std::strerror(errno);
}

void make_dirs(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec && !fs::is_directory(p))
    fail(ErrorKind::Io, "cannot create the cache directory " + p.string() + ": " + ec.message());
}

/// Writes `text` to `path` through a temp file + rename so a concurrent reader never sees a partial file.
void write_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.parent_path() / (path.filename().string() + "." + random_hex8() + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      fail(ErrorKind::Io, "cannot write " + path.string());
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    std::error_code ec;
    fs::remove(tmp, ec);
    fail(ErrorKind::Io, "cannot write " + path.string() + ": " + why);
  }
}

/// _cache_commit_hash_for_specific_revision: refs/{revision} = commit, unless the revision is that commit; written
/// only when it changes (a read-only cache that is already right stays untouched).
void write_ref(const fs::path& storage, const std::string& revision, const std::string& commit) {
  if (revision == commit) return;
  const fs::path ref = storage / "refs" / revision;
  std::error_code ec;
  if (fs::is_regular_file(ref, ec) && read_text(ref) == commit) return;
  make_dirs(ref.parent_path());
  write_atomic(ref, commit);
}

/// _create_cachedir_tag (best effort, like huggingface_hub).
void write_cachedir_tag(const fs::path& cache) {
  std::error_code ec;
  const fs::path tag = cache / "CACHEDIR.TAG";
  if (fs::exists(tag, ec)) return;
  try {
    write_atomic(tag, kCachedirTag);
  } catch (const Error&) {
  }
}

/// _create_symlink: snapshots/{commit}/{file} -> relative path to blobs/{etag}. The link is made under a temp name
/// and renamed over the pointer, so it never goes missing for a concurrent reader. Where symlinks are not supported
/// the blob is copied (huggingface_hub's fallback).
void create_pointer(const fs::path& blob, const fs::path& pointer) {
  const fs::path rel = blob.lexically_relative(pointer.parent_path());
  const fs::path tmp = pointer.parent_path() / ("." + pointer.filename().string() + "." + random_hex8() + ".tmp");
  std::error_code ec;
  fs::create_symlink(rel, tmp, ec);
  if (ec) {
    fs::copy_file(blob, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) fail(ErrorKind::Io, "cannot create " + pointer.string() + ": " + ec.message());
  }
  if (::rename(tmp.c_str(), pointer.c_str()) != 0) {
    const std::string why = errno_text();
    fs::remove(tmp, ec);
    fail(ErrorKind::Io, "cannot create " + pointer.string() + ": " + why);
  }
}

/// Removes a file on scope exit unless released (the partial download of a failed transfer).
class FileGuard {
 public:
  explicit FileGuard(fs::path p) : path_(std::move(p)) {}
  ~FileGuard() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  FileGuard(const FileGuard&) = delete;
  FileGuard& operator=(const FileGuard&) = delete;
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

// ---------------------------------------------------------------------------------------------------------------
// HTTP (libcurl).

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) fail(ErrorKind::Internal, "libcurl initialisation failed");
  });
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

struct Origin {
  std::string scheme, host, port;
  bool operator==(const Origin&) const = default;
};

/// utils/_http._url_origin: (scheme, lower-case host, port with the scheme's default).
std::optional<Origin> url_origin(const std::string& url) {
  std::unique_ptr<CURLU, CurlDeleter> u(curl_url());
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return std::nullopt;
  Origin o;
  const std::pair<CURLUPart, std::string*> parts[] = {
      {CURLUPART_SCHEME, &o.scheme}, {CURLUPART_HOST, &o.host}, {CURLUPART_PORT, &o.port}};
  for (const auto& [part, out] : parts) {
    char* v = nullptr;
    if (curl_url_get(u.get(), part, &v, part == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0) != CURLUE_OK) {
      return std::nullopt;
    }
    *out = v;
    curl_free(v);
  }
  for (auto& c : o.host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

/// utils/_http._is_same_or_hub_host: whether the Authorization header may go to `target`.
bool same_or_hub_origin(const std::string& url, const std::string& target, const std::string& endpoint) {
  const auto t = url_origin(target);
  if (!t) return false;
  for (const std::string& o : {url, std::string(kDefaultEndpoint), std::string("https://hub-ci.huggingface.co"),
                               endpoint, std::string("https://hf.co")}) {
    if (url_origin(o) == t) return true;
  }
  return false;
}

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names, of the last response only
  std::string redirect_url;                    // absolute target of a 3xx Location (not followed)
  std::string error_body;                      // the start of a non-2xx body, for messages
  CURLcode code = CURLE_OK;
  std::string curl_error;
  std::uint64_t bytes_written = 0;
  bool write_failed = false;
  int write_errno = 0;

  std::string header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has(const std::string& lower_name) const { return headers.count(lower_name) != 0; }
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (redirect hop, 100 Continue): forget the previous headers
    r->headers.clear();
    const auto sp = line.find(' ');
    r->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    const auto b = value.find_first_not_of(" \t");
    value = b == std::string::npos ? std::string() : value.substr(b);
    r->headers[name] = value;
  }
  return size * n;
}

struct Sink {
  Response* response;
  int fd;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t len = size * n;
  if (s->response->status < 200 || s->response->status >= 300 || s->fd < 0) {
    if (s->response->error_body.size() < 300) s->response->error_body.append(data, std::min<size_t>(len, 300));
    return len;
  }
  size_t done = 0;
  while (done < len) {
    const ssize_t w = ::write(s->fd, data + done, len - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      s->response->write_failed = true;
      s->response->write_errno = errno;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    done += static_cast<size_t>(w);
  }
  s->response->bytes_written += len;
  return len;
}

struct RequestOptions {
  bool head = false;
  bool follow = false;
  std::optional<std::string> token;
  long total_timeout_s = 0;   // 0 = none (downloads use the low-speed abort instead)
  long low_speed_time_s = 0;  // abort when under 1 byte/s for this long; 0 = off
  int fd = -1;                // body destination (GET)
};

std::string user_agent() {
  return std::string("superpoint-rt/") + SUPERPOINT_RT_VERSION + "; hf_hub-compatible; libcurl/" +
         curl_version_info(CURLVERSION_NOW)->version;
}

Response perform(const std::string& url, const RequestOptions& opt) {
  curl_init_once();
  std::unique_ptr<CURL, CurlDeleter> c(curl_easy_init());
  if (!c) fail(ErrorKind::Internal, "libcurl: curl_easy_init failed");
  Response r;
  Sink sink{&r, opt.fd};
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* raw = nullptr;
  // identity: the size we check is the size of the file, not of a compressed body (get_hf_file_metadata).
  raw = curl_slist_append(raw, "Accept-Encoding: identity");
  if (opt.token) raw = curl_slist_append(raw, ("Authorization: Bearer " + *opt.token).c_str());
  std::unique_ptr<curl_slist, CurlDeleter> headers(raw);
  const std::string ua = user_agent();

  CURL* h = c.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_USERAGENT, ua.c_str());
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutS);
  if (opt.total_timeout_s > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT, opt.total_timeout_s);
  if (opt.low_speed_time_s > 0) {
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, opt.low_speed_time_s);
  }
  curl_easy_setopt(h, CURLOPT_NOBODY, opt.head ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, opt.follow ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, kMaxRedirects);
  // curl (>= 7.83) drops a custom Authorization header when a redirect leaves the host:port/scheme, which is what
  // huggingface_hub does for CDN downloads.
  curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 0L);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);

  r.code = curl_easy_perform(h);
  r.curl_error = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(r.code));
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (status) r.status = status;
  if (!opt.follow) {
    char* redirect = nullptr;
    if (curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &redirect) == CURLE_OK && redirect) r.redirect_url = redirect;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Resolution.

struct Target {
  std::string repo_id;
  std::string revision;  // as requested ("main", a tag, refs/pr/1, a commit)
  fs::path cache;        // the cache root
  fs::path storage;      // cache/models--org--name
};

std::string describe(const Target& t) {
  return "model '" + t.repo_id + "' (revision '" + t.revision + "')";
}

struct FileMeta {
  std::string commit, etag, location;
  std::optional<std::uint64_t> size;
};

std::optional<std::uint64_t> parse_size(const std::string& v) {
  if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::strtoull(v.c_str(), nullptr, 10);
}

/// The hub's answer to a failed request, as a superpoint_rt::Error (hf_raise_for_status + _raise_on_head_call_error).
[[noreturn]] void raise_http(const Target& t, const std::string& revision_in_url, const std::string& file,
                             const std::string& url, const Response& r, bool token_sent) {
  const std::string code = r.header("x-error-code");
  const std::string msg = r.header("x-error-message");
  const std::string detail =
      "HTTP " + std::to_string(r.status) + " from " + url + (msg.empty() ? "" : " (" + msg + ")");
  if (r.status == 401 || r.status == 403) {
    fail(ErrorKind::Io,
         describe(t) + ": access to '" + file + "' was refused (" + detail + "). The repo may be private or gated: " +
             (token_sent ? "the token that was sent (HF_TOKEN / HUGGING_FACE_HUB_TOKEN / token file) was not accepted"
                         : "a token may be needed; set HF_TOKEN"));
  }
  if (r.status == 404) {
    std::string what = "'" + file + "' was not found";
    if (code == "RepoNotFound") what = "the repository was not found";
    if (code == "RevisionNotFound") what = "revision '" + revision_in_url + "' was not found";
    if (code == "EntryNotFound")
      what = "the repository has no file '" + file + "' at revision '" + revision_in_url + "'";
    fail(ErrorKind::NotFound, describe(t) + ": " + what + " (" + detail + "; repo '" + t.repo_id + "', revision '" +
                                  t.revision + "', file '" + file + "')");
  }
  fail(ErrorKind::Io, describe(t) + ": fetching '" + file + "' failed: " + detail);
}

/// get_hf_file_metadata: HEAD, following redirects while they stay on the same or a hub origin.
FileMeta fetch_metadata(const Target& t, const std::string& revision, const std::string& file,
                        const std::string& endpoint, const std::optional<std::string>& token) {
  const std::string start =
      endpoint + "/" + t.repo_id + "/resolve/" + url_quote(revision, false) + "/" + url_quote(file, true);
  std::string url = start;
  RequestOptions opt;
  opt.head = true;
  opt.token = token;
  opt.total_timeout_s = env_seconds("HF_HUB_ETAG_TIMEOUT");
  for (long hop = 0; hop <= kMaxRedirects; ++hop) {
    const Response r = perform(url, opt);
    if (r.code != CURLE_OK) {
      fail(ErrorKind::Io, describe(t) + ": cannot reach " + url + " for '" + file + "': " + r.curl_error);
    }
    if (r.status >= 400) {
      // huggingface_hub caches the fact that a file does not exist at a commit (.no_exist/{commit}/{file}).
      if (r.status == 404 && r.header("x-error-code") == "EntryNotFound" && is_commit_hash(r.header("x-repo-commit"))) {
        try {
          const std::string commit = r.header("x-repo-commit");
          const fs::path marker = t.storage / ".no_exist" / commit / file;
          make_dirs(marker.parent_path());
          if (!fs::exists(marker)) std::ofstream(marker).flush();
          write_ref(t.storage, t.revision, commit);
        } catch (const Error&) {
        }
      }
      raise_http(t, revision, file, url, r, token.has_value());
    }
    const bool redirect = r.status >= 300 && r.status < 400 && !r.redirect_url.empty();
    if (redirect && same_or_hub_origin(url, r.redirect_url, endpoint)) {
      url = r.redirect_url;
      continue;
    }
    FileMeta m;
    m.commit = r.header("x-repo-commit");
    m.etag = normalize_etag(r.has("x-linked-etag") && !r.header("x-linked-etag").empty() ? r.header("x-linked-etag")
                                                                                         : r.header("etag"));
    m.location = redirect ? r.redirect_url : url;
    m.size = parse_size(r.header("x-linked-size"));
    if (!m.size && !redirect) m.size = parse_size(r.header("content-length"));
    if (m.commit.empty()) {
      fail(ErrorKind::Io, describe(t) + ": the response from " + url +
                              " has no X-Repo-Commit header, so it does not come from a Hugging Face hub (check "
                              "HF_ENDPOINT, proxy and firewall settings)");
    }
    if (!is_commit_hash(m.commit)) {
      fail(ErrorKind::Io, describe(t) + ": the response from " + url + " names an invalid commit '" + m.commit + "'");
    }
    if (m.etag.empty() || m.etag == "." || m.etag == ".." || m.etag.find('/') != std::string::npos ||
        m.etag.find('\0') != std::string::npos) {
      fail(ErrorKind::Io, describe(t) + ": the response from " + url + " has no usable ETag / X-Linked-Etag for '" +
                              file + "' (got '" + m.etag + "')");
    }
    return m;
  }
  fail(ErrorKind::Io, describe(t) + ": more than " + std::to_string(kMaxRedirects) + " redirects resolving " + start);
}

/// _download_to_tmp_and_move: GET into blobs/{etag}.{8 hex}.incomplete, check the size, rename to blobs/{etag}.
void download_blob(const Target& t, const std::string& file, const FileMeta& m, const fs::path& blob,
                   const std::string& endpoint, const std::optional<std::string>& token, const std::string& head_url) {
  const fs::path tmp = blob.parent_path() / (blob.filename().string() + "." + random_hex8() + ".incomplete");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(ErrorKind::Io, "cannot create " + tmp.string() + ": " + errno_text());
  FileGuard guard(tmp);
  RequestOptions opt;
  opt.follow = true;
  opt.fd = fd;
  // The signed CDN URL of an LFS file must not receive the hub token (file_download._get_metadata_or_catch_error).
  if (same_or_hub_origin(head_url, m.location, endpoint)) opt.token = token;
  opt.low_speed_time_s = env_seconds("HF_HUB_DOWNLOAD_TIMEOUT");
  const Response r = perform(m.location, opt);
  const int close_rc = ::close(fd);
  if (r.write_failed) {
    fail(ErrorKind::Io, "cannot write " + tmp.string() + ": " + std::strerror(r.write_errno));
  }
  if (r.status >= 400) raise_http(t, t.revision, file, m.location, r, opt.token.has_value());
  const std::string got = std::to_string(r.bytes_written) + " bytes";
  if (r.code != CURLE_OK) {
    const std::string what = r.code == CURLE_PARTIAL_FILE ? "was truncated after " : "failed after ";
    fail(ErrorKind::Io, describe(t) + ": downloading '" + file + "' from " + m.location + " " + what + got + ": " +
                            r.curl_error + " (the partial file was removed)");
  }
  if (r.status < 200 || r.status >= 300) {
    fail(ErrorKind::Io, describe(t) + ": downloading '" + file + "' from " + m.location + ": unexpected HTTP " +
                            std::to_string(r.status));
  }
  std::optional<std::uint64_t> expected = m.size;
  if (!expected) expected = parse_size(r.header("content-length"));
  if (expected && *expected != r.bytes_written) {
    fail(ErrorKind::Io, describe(t) + ": download of '" + file + "' from " + m.location + " has the wrong size: got " +
                            got + ", expected " + std::to_string(*expected) + " (the partial file was removed)");
  }
  if (close_rc != 0) fail(ErrorKind::Io, "cannot write " + tmp.string() + ": " + errno_text());
  // Another process may have renamed the same blob into place meanwhile: rename() replaces it atomically with
  // identical content, so readers always see a complete file.
  if (::rename(tmp.c_str(), blob.c_str()) != 0) {
    fail(ErrorKind::Io, "cannot move " + tmp.string() + " to " + blob.string() + ": " + errno_text());
  }
  guard.release();
}

/// The commit the cache maps `revision` to: the revision itself when it is a commit hash, else refs/{revision}.
std::optional<std::string> cached_commit(const Target& t) {
  if (is_commit_hash(t.revision)) return t.revision;
  const fs::path ref = t.storage / "refs" / t.revision;
  std::error_code ec;
  if (!fs::is_regular_file(ref, ec)) return std::nullopt;
  std::string c = read_text(ref);
  while (!c.empty() && std::isspace(static_cast<unsigned char>(c.back()))) c.pop_back();
  return c.empty() ? std::nullopt : std::optional<std::string>(c);
}

bool exists_followed(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);  // follows the symlink: a dangling pointer is "missing", as os.path.exists
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

ResolvedModel resolve_local(const std::string& dir, const std::vector<std::string>& files) {
  std::vector<std::string> missing;
  for (const auto& f : files) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(dir) / f, ec)) missing.push_back(f);
  }
  if (!missing.empty()) {
    fail(ErrorKind::NotFound, "local model directory '" + dir + "' has no " + join_names(missing) +
                                  " (a model directory needs " + join_names(files) + ")");
  }
  std::error_code ec;
  fs::path abs = fs::absolute(dir, ec);
  if (ec) abs = dir;
  std::string out = abs.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return {out, "", "local"};
}

}  // namespace

std::string hub_cache_dir(const std::string& explicit_dir) {
  std::string dir;
  if (!explicit_dir.empty()) {
    dir = expand_user(explicit_dir);  // hf_hub_download: Path(cache_dir).expanduser().resolve()
  } else if (auto v = env("HF_HUB_CACHE"); v && !v->empty()) {
    dir = expand(*v);
  } else if (auto legacy = env("HUGGINGFACE_HUB_CACHE"); legacy && !legacy->empty()) {
    dir = expand(*legacy);
  } else {
    dir = hf_home() + "/hub";
  }
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec || p.empty()) p = fs::absolute(dir, ec).lexically_normal();
  std::string out = p.string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

bool is_repo_id(const std::string& s) {
  std::error_code ec;
  if (s.empty() || fs::exists(fs::path(s), ec)) return false;
  return valid_repo_id(s);
}

ResolvedModel resolve_model(const std::string& model_or_dir, const HubRequest& request) {
  if (model_or_dir.empty()) {
    fail(ErrorKind::InvalidArgument, "model: expected a local model directory or a Hugging Face repo id, got ''");
  }
  if (request.files.empty()) fail(ErrorKind::InvalidArgument, "model '" + model_or_dir + "': no files requested");
  for (const auto& f : request.files) {
    if (!safe_relative_path(f)) {
      fail(ErrorKind::InvalidArgument, "model '" + model_or_dir + "': invalid file name '" + f +
                                           "' (a relative path without '..', '.' or empty segments)");
    }
  }
  std::error_code ec;
  if (fs::is_directory(model_or_dir, ec)) return resolve_local(model_or_dir, request.files);
  if (!is_repo_id(model_or_dir)) {
    const bool exists = fs::exists(model_or_dir, ec);
    fail(ErrorKind::NotFound,
         "model '" + model_or_dir + "': " +
             (exists ? std::string("is not a directory (a local model is a directory holding ") +
                           join_names(request.files) + ")"
                     : std::string("no such directory, and not a valid Hugging Face repo id ('name' or 'org/name' "
                                   "of letters, digits, '-', '_', '.')")));
  }

  Target t;
  t.repo_id = model_or_dir;
  t.revision = request.revision.empty() ? "main" : request.revision;
  if (!safe_relative_path(t.revision)) {
    fail(ErrorKind::InvalidArgument, "model '" + t.repo_id + "': invalid revision '" + t.revision + "'");
  }
  t.cache = hub_cache_dir(request.cache_dir);
  t.storage = t.cache / repo_folder_name(t.repo_id);

  // 1. The cache: a commit with every file in its snapshot (no network at all).
  const std::optional<std::string> commit = cached_commit(t);
  std::vector<std::string> missing;
  if (commit && is_commit_hash(*commit)) {
    for (const auto& f : request.files) {
      if (!exists_followed(t.storage / "snapshots" / *commit / f)) missing.push_back(f);
    }
    if (missing.empty()) return {(t.storage / "snapshots" / *commit).string(), *commit, "cache"};
  } else {
    missing = request.files;
  }

  // 2. Offline: a clear NotFound naming what is missing and where we looked.
  const bool offline_env = env_offline();
  if (request.local_files_only || offline_env) {
    std::string where;
    if (!commit) {
      where = "the cache has no refs/" + t.revision + " entry in " + t.storage.string();
    } else {
      where = "looked in " + (t.storage / "snapshots" / *commit).string();
      for (const auto& f : missing) {
        if (exists_followed(t.storage / ".no_exist" / *commit / f)) {
          where += "; the hub reported that '" + f + "' does not exist at commit " + *commit;
        }
      }
    }
    const std::string why = request.local_files_only && offline_env ? "local_files_only and HF_HUB_OFFLINE"
                            : request.local_files_only              ? "local_files_only"
                                                                    : "HF_HUB_OFFLINE";
    fail(ErrorKind::NotFound, describe(t) + ": " + join_names(missing) + " not found in the Hugging Face cache " +
                                  t.cache.string() + " (" + where + "), and offline mode (" + why +
                                  ") prevented a download");
  }

  // 3. Download. The first file fixes the commit; the others are requested at that commit.
  const std::string endpoint = hub_endpoint();
  const std::optional<std::string> token = hub_token();
  std::string pinned;
  bool downloaded = false;
  for (const auto& f : request.files) {
    const std::string rev = pinned.empty() ? t.revision : pinned;
    const FileMeta m = fetch_metadata(t, rev, f, endpoint, token);
    if (!pinned.empty() && m.commit != pinned) {
      fail(ErrorKind::Io,
           describe(t) + ": the hub answered commit " + m.commit + " for '" + f + "' when asked for commit " + pinned);
    }
    if (pinned.empty()) {
      // Like huggingface_hub, the ref is recorded as soon as the commit is known (before any download): a later
      // failure leaves refs/{revision} -> a snapshot that lacks files, which the cache check treats as missing.
      pinned = m.commit;
      write_ref(t.storage, t.revision, pinned);
    }
    const fs::path pointer = t.storage / "snapshots" / m.commit / f;
    if (exists_followed(pointer)) continue;
    const fs::path blob = t.storage / "blobs" / m.etag;
    make_dirs(blob.parent_path());
    make_dirs(pointer.parent_path());
    write_cachedir_tag(t.cache);
    if (!exists_followed(blob)) {
      const std::string head_url =
          endpoint + "/" + t.repo_id + "/resolve/" + url_quote(rev, false) + "/" + url_quote(f, true);
      download_blob(t, f, m, blob, endpoint, token, head_url);
      downloaded = true;
    }
    create_pointer(blob, pointer);
  }
  return {(t.storage / "snapshots" / pinned).string(), pinned, downloaded ? "download" : "cache"};
}

}  // namespace superpoint_rt::model
