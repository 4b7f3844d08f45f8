// Fuzz harness: everything the hub client (src/model/hub.cpp) takes from the network. A loopback HTTP server in this
// process answers each connection with the next response of the input, verbatim; resolve_model then downloads
// "config.json" and "model.safetensors" of a repo from it into a fresh cache folder. So the status lines, headers
// (X-Repo-Commit, ETag / X-Linked-Etag, X-Linked-Size, Content-Length, X-Error-Code, Location), redirects (same-origin
// HEAD hops, cross-origin download URLs), bodies and truncations all come from the fuzzer, through libcurl's parser
// and the client's own checks, and the files land in the cache under the names the responses give.
// All HTTP(S) traffic goes to the loopback server, redirects to other hosts included: it is the endpoint
// (HF_ENDPOINT) and the proxy (http_proxy / https_proxy / all_proxy), so nothing leaves the machine.
// Input: responses separated by kResponseSeparator; a connection beyond the last one is closed unanswered.
// Properties checked besides the sanitizers: nothing is written outside the cache folder; a successful resolution
// names a snapshot folder inside it that holds both files; no error other than superpoint_rt::Error escapes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_util.hpp"
#include "model/hub.hpp"

using namespace superpoint_rt;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kResponseSeparator = "\r\n--next-response--\r\n";
constexpr std::size_t kMaxResponses = 64;

class LoopbackServer {
 public:
  LoopbackServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(fd_ >= 0, "socket: %s", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    FUZZ_CHECK(::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd_, 16) == 0 &&
                   ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0,
               "loopback listen: %s", std::strerror(errno));
    port_ = ntohs(a.sin_port);
    std::thread([this] { serve(); }).detach();  // lives as long as the process
  }
  int port() const { return port_; }

  void set_responses(std::vector<std::string> r) {
    std::lock_guard<std::mutex> lock(mu_);
    responses_ = std::move(r);
    next_ = 0;
  }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval tv{2, 0};  // a client that stops sending mid-request is dropped, not waited for
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      // Read the request head (requests of the hub client have no body).
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<std::size_t>(n));
      }
      std::string answer;
      bool have = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (next_ < responses_.size()) {
          answer = responses_[next_++];
          have = true;
        }
      }
      for (std::size_t done = 0; have && done < answer.size();) {
        const ssize_t n = ::send(c, answer.data() + done, answer.size() - done, MSG_NOSIGNAL);
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
      }
      ::shutdown(c, SHUT_WR);
      ::close(c);
    }
  }

  int fd_ = -1, port_ = 0;
  std::mutex mu_;
  std::vector<std::string> responses_;
  std::size_t next_ = 0;
};

struct Setup {
  LoopbackServer server;
  fs::path root;
  Setup() {
    const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
    ::setenv("HF_ENDPOINT", url.c_str(), 1);
    for (const char* v : {"http_proxy", "https_proxy", "all_proxy", "HTTPS_PROXY", "ALL_PROXY"})
      ::setenv(v, url.c_str(), 1);
    for (const char* v :
         {"no_proxy", "NO_PROXY", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_IMPLICIT_TOKEN"})
      ::unsetenv(v);
    ::setenv("HF_TOKEN", "hf_fuzz_token", 1);  // so the token / no-token-to-the-CDN paths run
    ::setenv("HF_HUB_ETAG_TIMEOUT", "2", 1);
    ::setenv("HF_HUB_DOWNLOAD_TIMEOUT", "2", 1);
    char tmpl[] = "/tmp/sprt-fuzz-hub-XXXXXX";
    FUZZ_CHECK(::mkdtemp(tmpl) != nullptr, "mkdtemp: %s", std::strerror(errno));
    root = tmpl;
  }
  ~Setup() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Setup setup;
  std::vector<std::string> responses;
  std::span<const std::uint8_t> rest(data, size);
  for (;;) {
    const sprt_fuzz::Split s = sprt_fuzz::split_at(rest, kResponseSeparator);
    responses.emplace_back(s.before.begin(), s.before.end());
    if (!s.found || responses.size() == kMaxResponses) break;
    rest = s.after;
  }
  setup.server.set_responses(std::move(responses));

  const fs::path cache = setup.root / "cache";
  model::HubRequest req;
  req.repo_id = "fuzz-org/fuzz-model";
  req.cache_dir = cache.string();
  model::ResolvedModel got;
  const bool ok = sprt_fuzz::ok([&] { got = model::resolve_model(req.repo_id, req); });
  for (const auto& e : fs::directory_iterator(setup.root)) {
    FUZZ_CHECK(e.path() == cache, "wrote '%s' outside the cache folder", e.path().c_str());
  }
  if (ok) {
    const fs::path dir = fs::weakly_canonical(got.dir);
    const fs::path base = fs::weakly_canonical(cache);
    FUZZ_CHECK(dir.string().rfind(base.string() + "/", 0) == 0, "resolved to '%s', outside '%s'", dir.c_str(),
               base.c_str());
    for (const auto& f : req.files) {
      FUZZ_CHECK(fs::is_regular_file(dir / f), "resolved, but '%s' is not in '%s'", f.c_str(), dir.c_str());
    }
  }
  std::error_code ec;
  fs::remove_all(cache, ec);
  return 0;
}
