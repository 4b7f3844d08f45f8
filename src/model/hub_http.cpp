// Hugging Face hub: HTTP with libcurl, as huggingface_hub 2.4's get_hf_file_metadata and
// _download_to_tmp_and_move (file_download.py, utils/_http.py): the HEAD that finds commit, ETag and size, redirects
// that keep the token only on hub origins, the hub's error answers, the GET into a temporary blob. No retries or
// resume (see hub.cpp).
#include "model/hub_http.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include "model/hub_env.hpp"
#include "util/file.hpp"

#ifndef SUPERPOINT_RT_VERSION
#define SUPERPOINT_RT_VERSION "0"
#endif

namespace superpoint_rt::model::hub {
namespace {

constexpr long kConnectTimeoutS = 10;  // huggingface_hub: DEFAULT_ETAG_TIMEOUT / DEFAULT_DOWNLOAD_TIMEOUT = 10 s
constexpr long kMaxRedirects = 20;     // utils/_http.py _MAX_REDIRECTS (httpx's default)

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

/// file_download._normalize_etag: etag.lstrip("W/").strip('"').
std::string normalize_etag(const std::string& etag) {
  std::size_t b = 0;
  while (b < etag.size() && (etag[b] == 'W' || etag[b] == '/')) ++b;
  std::size_t e = etag.size();
  while (b < e && etag[b] == '"') ++b;
  while (e > b && etag[e - 1] == '"') --e;
  return etag.substr(b, e - b);
}

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

}  // namespace

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
  const fs::path tmp = blob.parent_path() / (blob.filename().string() + "." + util::random_hex8() + ".incomplete");
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
  util::rename_into_place(tmp.string(), blob.string());
  guard.release();
}

}  // namespace superpoint_rt::model::hub
