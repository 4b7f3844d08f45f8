// Hub cache + download (src/model/hub.cpp) against tests/hub/fake_hub.py, a local imitation of huggingface.co's
// resolve endpoints (127.0.0.1 only), and interop with the real huggingface_hub library of the test venv
// ($SUPERPOINT_RT_PYTHON) in both directions.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.hpp"
#include "model/hub.hpp"
#include "superpoint_rt/errors.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using superpoint_rt::Error;
using superpoint_rt::ErrorKind;
using superpoint_rt::model::hub_cache_dir;
using superpoint_rt::model::HubRequest;
using superpoint_rt::model::is_repo_id;
using superpoint_rt::model::resolve_model;
using superpoint_rt::model::ResolvedModel;

const std::string kRepo = "sprt-test/superpoint";
const std::string kPrivate = "sprt-test/private";
const std::vector<std::string> kFiles{"config.json", "model.safetensors"};

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// The venv Python with huggingface_hub ($SUPERPOINT_RT_PYTHON, set by ctest; else the checkout's .venv).
std::string hub_python() {
  const char* env = std::getenv("SUPERPOINT_RT_PYTHON");
  return env && *env ? std::string(env) : std::string(SPRT_SOURCE_DIR) + "/.venv/bin/python";
}

std::string script(const std::string& name) {
  return std::string(SPRT_SOURCE_DIR) + "/tests/hub/" + name;
}

/// Sets / unsets environment variables and restores every one of them on destruction.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        ::setenv(name.c_str(), old->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void save(const std::string& name) {
    if (saved_.count(name)) return;
    const char* v = std::getenv(name.c_str());
    saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

/// tests/hub/fake_hub.py as a child process; stopped (SIGTERM + wait) by stop() or the destructor.
class FakeHub {
 public:
  FakeHub() {
    const std::string py = hub_python();
    const std::string weights = sprt_test::weights_dir();
    const std::string fake = script("fake_hub.py");
    const std::string log = state_.file("server.log");
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execl(py.c_str(), py.c_str(), fake.c_str(), "--weights", weights.c_str(), "--state", state_.path().c_str(),
              "--max-seconds", "240", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    if (pid_ < 0) throw std::runtime_error("fork failed");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!fs::exists(state_.file("info.json"))) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        throw std::runtime_error("tests/hub/fake_hub.py (run with " + py + ") exited early with status " +
                                 std::to_string(code) + (code == 127 ? " (could not execute the Python)" : "") + ":\n" +
                                 read_text(state_.file("server.log")));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("tests/hub/fake_hub.py did not start within 20 s:\n" +
                                 read_text(state_.file("server.log")));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    info_ = json::parse(read_text(state_.file("info.json")));
  }
  ~FakeHub() { stop(); }
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(info_["hub_port"].get<int>()); }
  const json& info() const { return info_; }
  std::string commit(const std::string& repo, const std::string& rev) const {
    return info_["repos"][repo]["refs"][rev].get<std::string>();
  }
  std::string etag(const std::string& repo, const std::string& commit, const std::string& file) const {
    return info_["repos"][repo]["files"][commit][file]["etag"].get<std::string>();
  }
  /// Every request the servers saw so far (one JSON object each).
  std::vector<json> requests() const {
    std::vector<json> out;
    std::ifstream f(state_.file("requests.log"));
    for (std::string line; std::getline(f, line);) {
      if (!line.empty()) out.push_back(json::parse(line));
    }
    return out;
  }
  /// The next GET of `file` sends half of its bytes (with the full Content-Length) and closes the connection.
  void truncate_next(const std::string& file) const { std::ofstream(state_.file("truncate")) << file; }
  /// The next CDN GET of `file` is a complete response with half of the bytes (only X-Linked-Size tells).
  void shorten_next(const std::string& file) const { std::ofstream(state_.file("shorten")) << file; }

 private:
  sprt_test::TempDir state_;
  pid_t pid_ = -1;
  json info_;
};

/// Every test starts from a clean hub environment: a private HF_HOME (no token file, no default cache), no tokens,
/// no offline flags, loopback never proxied; the fixture restores the caller's environment afterwards.
class HubTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      hub_ = new FakeHub();
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(hub_, nullptr) << "the fake hub did not start: " << start_error_;
    for (const char* v : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "HF_TOKEN",
                          "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                          "HF_HUB_DISABLE_IMPLICIT_TOKEN", "HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT",
                          "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"}) {
      env_.unset(v);
    }
    env_.set("HF_HOME", tmp_.file("hf_home"));
    env_.set("NO_PROXY", "127.0.0.1,localhost");
    env_.set("no_proxy", "127.0.0.1,localhost");
    env_.set("HF_HUB_DISABLE_TELEMETRY", "1");
    env_.set("HF_ENDPOINT", hub_->endpoint());
  }

  HubRequest request(const std::string& cache, const std::string& revision = "") const {
    HubRequest r;
    r.repo_id = kRepo;
    r.revision = revision;
    r.cache_dir = cache;
    return r;
  }
  static fs::path storage(const std::string& cache, const std::string& repo = kRepo) {
    std::string name = "models--" + repo;
    for (std::size_t p; (p = name.find('/')) != std::string::npos;) name.replace(p, 1, "--");
    return fs::path(cache) / name;
  }
  /// Both files byte-identical to the shared weights.
  static void expect_weights(const std::string& dir) {
    for (const auto& f : kFiles) {
      EXPECT_EQ(sprt_test::read_bytes(dir + "/" + f), sprt_test::read_bytes(sprt_test::weights_dir() + "/" + f))
          << dir << "/" << f;
    }
  }
  /// Runs tests/hub/hf_interop.py with huggingface_hub; FAILs (never skips) when that cannot run.
  static json interop(const std::string& args) {
    std::string out;
    const int rc = sprt_test::run_command(
        shell_quote(hub_python()) + " " + shell_quote(script("hf_interop.py")) + " " + args + " 2>/dev/null", &out);
    if (rc != 0) {
      std::string err;
      sprt_test::run_command(shell_quote(hub_python()) + " " + shell_quote(script("hf_interop.py")) + " " + args, &err);
      ADD_FAILURE() << "huggingface_hub interop helper failed (python " << hub_python()
                    << " must have huggingface_hub; scripts/test.sh makes .venv): rc=" << rc << "\n"
                    << err;
      return json::object();
    }
    return json::parse(out);
  }

  static FakeHub* hub_;
  static std::string start_error_;
  sprt_test::TempDir tmp_;
  ScopedEnv env_;
};
FakeHub* HubTest::hub_ = nullptr;
std::string HubTest::start_error_;

template <class F>
Error expect_error(F&& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(superpoint_rt::to_string(e.kind()), std::string(superpoint_rt::to_string(kind))) << e.what();
    return e;
  }
  ADD_FAILURE() << "no superpoint_rt::Error thrown";
  return Error(ErrorKind::Internal, "");
}

void expect_contains(const std::string& text, const std::vector<std::string>& parts) {
  for (const auto& p : parts) EXPECT_NE(text.find(p), std::string::npos) << "'" << p << "' not in: " << text;
}

/// Every path under `root` (relative), with its type and symlink target, minus huggingface_hub's .locks/ folder.
std::map<std::string, std::string> tree(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = it->path().lexically_relative(root).string();
    if (rel.rfind(".locks", 0) == 0) continue;
    if (it->is_symlink()) {
      out[rel] = "link -> " + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      out[rel] = "dir";
    } else {
      out[rel] = "file " + std::to_string(it->file_size());
    }
  }
  return out;
}

/// Partial downloads anywhere under `root`.
std::vector<std::string> leftovers(const fs::path& root) {
  std::vector<std::string> out;
  if (!fs::exists(root)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (n.find(".incomplete") != std::string::npos || n.find(".tmp") != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------

TEST_F(HubTest, CacheDirFollowsHuggingfaceHubPrecedence) {
  const std::string home = tmp_.file("home");
  fs::create_directories(home);
  env_.set("HOME", home);
  struct Case {
    std::map<std::string, std::string> set;
    std::string expected;
  };
  const std::vector<Case> cases{
      {{}, home + "/.cache/huggingface/hub"},
      {{{"XDG_CACHE_HOME", tmp_.file("xdg")}}, tmp_.file("xdg") + "/huggingface/hub"},
      {{{"XDG_CACHE_HOME", tmp_.file("xdg")}, {"HF_HOME", tmp_.file("hfh")}}, tmp_.file("hfh") + "/hub"},
      {{{"HF_HOME", "~/hfhome"}}, home + "/hfhome/hub"},
      {{{"HF_HOME", tmp_.file("hfh")}, {"HUGGINGFACE_HUB_CACHE", tmp_.file("legacy")}}, tmp_.file("legacy")},
      {{{"HUGGINGFACE_HUB_CACHE", tmp_.file("legacy")}, {"HF_HUB_CACHE", tmp_.file("new")}}, tmp_.file("new")},
      {{{"SPRT_X", "sub"}, {"HF_HUB_CACHE", "$HOME/${SPRT_X}/c"}}, home + "/sub/c"},
  };
  for (const auto& c : cases) {
    ScopedEnv local;
    local.unset("HF_HOME");
    for (const auto& [k, v] : c.set) local.set(k, v);
    const std::string ours = hub_cache_dir();
    EXPECT_EQ(ours, fs::weakly_canonical(c.expected).string());
    // The oracle: huggingface_hub's own constants under the same environment.
    const json py = interop("cache_dir");
    if (py.contains("cache_dir")) {
      EXPECT_EQ(ours, fs::weakly_canonical(py["cache_dir"].get<std::string>()).string());
    }
  }
  // An explicit directory wins over everything; ~ is expanded.
  ScopedEnv local;
  local.set("HF_HUB_CACHE", tmp_.file("new"));
  EXPECT_EQ(hub_cache_dir(tmp_.file("explicit")), fs::weakly_canonical(tmp_.file("explicit")).string());
  EXPECT_EQ(hub_cache_dir("~/mine"), fs::weakly_canonical(home + "/mine").string());
}

TEST_F(HubTest, RepoIdRulesMatchHuggingfaceHub) {
  const std::vector<std::string> ids{"foo",
                                     "foo/bar",
                                     "123",
                                     "Foo-BAR_foo.bar123",
                                     "a",
                                     "datasets/foo/bar",
                                     ".repo_id",
                                     "foo--bar",
                                     "foo.git",
                                     "other..repo..id",
                                     "-foo",
                                     "foo-",
                                     "org/.name",
                                     "org./name",
                                     "a b",
                                     "caf\xc3\xa9",
                                     "/abs/path",
                                     "./rel",
                                     "org/",
                                     "/name",
                                     std::string(96, 'x'),
                                     std::string(97, 'x'),
                                     std::string("o/").append(96, 'n')};
  std::string args = "repo_ids";
  for (const auto& id : ids) args.append(" ").append(shell_quote(id));
  const json py = interop(args);
  ASSERT_FALSE(py.empty());
  for (const auto& id : ids) EXPECT_EQ(is_repo_id(id), py[id].get<bool>()) << id;
  EXPECT_FALSE(is_repo_id(""));
  // An existing path is a local path even when it is shaped like a repo id.
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp_.path());
  fs::create_directories("org/name");
  EXPECT_FALSE(is_repo_id("org/name"));
  EXPECT_TRUE(is_repo_id("org/other"));
  fs::current_path(cwd);
}

TEST_F(HubTest, LocalDirectory) {
  const ResolvedModel r = resolve_model(sprt_test::weights_dir(), request(tmp_.file("cache")));
  EXPECT_EQ(r.source, "local");
  EXPECT_TRUE(r.commit.empty());
  expect_weights(r.dir);
  EXPECT_FALSE(fs::exists(tmp_.file("cache")));

  fs::create_directories(tmp_.file("partial"));
  fs::copy_file(sprt_test::weights_dir() + "/config.json", tmp_.file("partial/config.json"));
  Error e = expect_error([&] { resolve_model(tmp_.file("partial"), request("")); }, ErrorKind::NotFound);
  expect_contains(e.what(), {tmp_.file("partial"), "model.safetensors"});

  e = expect_error([&] { resolve_model("/nonexistent/sprt/model", request("")); }, ErrorKind::NotFound);
  expect_contains(e.what(), {"/nonexistent/sprt/model"});
  e = expect_error([&] { resolve_model(tmp_.file("partial/config.json"), request("")); }, ErrorKind::NotFound);
  expect_contains(e.what(), {"config.json", "not a directory"});
  expect_error([&] { resolve_model("", request("")); }, ErrorKind::InvalidArgument);
}

TEST_F(HubTest, DownloadLayoutThenCacheWithoutNetwork) {
  FakeHub own;                                    // stopped half-way through this test
  env_.set("HF_ENDPOINT", own.endpoint() + "/");  // a trailing slash is stripped, as huggingface_hub does
  env_.set("HF_TOKEN", "hf_some_token");          // public repo: the token goes to the hub, never to the CDN
  const std::string cache = tmp_.file("cache");
  const ResolvedModel r = resolve_model(kRepo, request(cache));
  const std::string commit = own.commit(kRepo, "main");
  const fs::path st = storage(cache);
  EXPECT_EQ(r.source, "download");
  EXPECT_EQ(r.commit, commit);
  EXPECT_EQ(r.dir, (st / "snapshots" / commit).string());
  expect_weights(r.dir);

  // huggingface_hub's layout.
  EXPECT_EQ(read_text(st / "refs" / "main"), commit);  // no trailing newline
  for (const auto& f : kFiles) {
    const fs::path pointer = st / "snapshots" / commit / f;
    ASSERT_TRUE(fs::is_symlink(pointer)) << pointer;
    EXPECT_EQ(fs::read_symlink(pointer).string(), "../../blobs/" + own.etag(kRepo, commit, f));
    EXPECT_TRUE(fs::is_regular_file(st / "blobs" / own.etag(kRepo, commit, f)));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(st / "blobs"), fs::directory_iterator()), 2);
  EXPECT_EQ(read_text(fs::path(cache) / "CACHEDIR.TAG").rfind("Signature: 8a477f597d28d172789f06886806bc55\n", 0), 0u);
  EXPECT_TRUE(leftovers(cache).empty());

  // The requests: HEAD then GET per file, the LFS file fetched from the CDN origin without the token.
  bool saw_cdn = false;
  for (const auto& q : own.requests()) {
    EXPECT_NE(q["user_agent"].get<std::string>().find("superpoint-rt/"), std::string::npos) << q.dump();
    if (q["server"] == "cdn") {
      saw_cdn = true;
      EXPECT_TRUE(q["authorization"].is_null()) << "token leaked to the CDN: " << q.dump();
    } else {
      EXPECT_EQ(q["authorization"], "Bearer hf_some_token") << q.dump();
    }
  }
  EXPECT_TRUE(saw_cdn);

  // Second resolve: the server is gone, the cache answers.
  own.stop();
  const ResolvedModel again = resolve_model(kRepo, request(cache));
  EXPECT_EQ(again.source, "cache");
  EXPECT_EQ(again.dir, r.dir);
  EXPECT_EQ(again.commit, commit);
  // ... also through $HF_HUB_CACHE instead of an explicit directory.
  env_.set("HF_HUB_CACHE", cache);
  EXPECT_EQ(resolve_model(kRepo, request("")).source, "cache");
}

TEST_F(HubTest, RepoWithoutNamespace) {
  const std::string cache = tmp_.file("cache");
  HubRequest req = request(cache);
  const ResolvedModel r = resolve_model("solo-model", req);
  EXPECT_EQ(r.source, "download");
  EXPECT_EQ(r.dir,
            (fs::path(cache) / "models--solo-model" / "snapshots" / hub_->commit("solo-model", "main")).string());
  expect_weights(r.dir);
}

TEST_F(HubTest, OfflineWithEmptyCacheIsNotFoundWithoutNetwork) {
  const std::string cache = tmp_.file("cache");
  const std::size_t before = hub_->requests().size();
  HubRequest req = request(cache);
  req.local_files_only = true;
  Error e = expect_error([&] { resolve_model(kRepo, req); }, ErrorKind::NotFound);
  expect_contains(e.what(), {kRepo, "'main'", "config.json", "model.safetensors", fs::weakly_canonical(cache).string(),
                             "offline mode", "local_files_only"});
  for (const std::string v : {"1", "ON", "yes", "True"}) {
    ScopedEnv local;
    local.set("HF_HUB_OFFLINE", v);
    e = expect_error([&] { resolve_model(kRepo, request(cache, "v1.0")); }, ErrorKind::NotFound);
    expect_contains(e.what(), {kRepo, "'v1.0'", "model.safetensors", "offline mode", "HF_HUB_OFFLINE"});
  }
  {
    ScopedEnv local;
    local.set("TRANSFORMERS_OFFLINE", "1");  // huggingface_hub honours it when HF_HUB_OFFLINE is unset
    expect_error([&] { resolve_model(kRepo, request(cache)); }, ErrorKind::NotFound);
  }
  EXPECT_EQ(hub_->requests().size(), before) << "offline mode touched the network";
  EXPECT_FALSE(fs::exists(storage(cache)));
  {
    ScopedEnv local;
    local.set("HF_HUB_OFFLINE", "0");  // not a true value: downloads
    EXPECT_EQ(resolve_model(kRepo, request(cache)).source, "download");
  }
  // Offline with everything cached is fine.
  req.local_files_only = true;
  EXPECT_EQ(resolve_model(kRepo, req).source, "cache");
}

TEST_F(HubTest, TruncatedTransferLeavesNothingThenRetrySucceeds) {
  const std::string cache = tmp_.file("cache");
  const std::string commit = hub_->commit(kRepo, "main");
  for (const std::string file : {"model.safetensors", "config.json"}) {  // from the CDN, then from the hub itself
    SCOPED_TRACE(file);
    fs::remove_all(cache);
    hub_->truncate_next(file);
    const Error e = expect_error([&] { resolve_model(kRepo, request(cache)); }, ErrorKind::Io);
    expect_contains(e.what(), {kRepo, file, "truncated"});
    const fs::path st = storage(cache);
    EXPECT_FALSE(fs::exists(st / "blobs" / hub_->etag(kRepo, commit, file)));
    EXPECT_FALSE(fs::is_symlink(st / "snapshots" / commit / file));
    EXPECT_TRUE(leftovers(cache).empty()) << leftovers(cache).front();
    // Offline, the half-filled cache is not mistaken for a complete model.
    HubRequest offline = request(cache);
    offline.local_files_only = true;
    expect_error([&] { resolve_model(kRepo, offline); }, ErrorKind::NotFound);

    const ResolvedModel r = resolve_model(kRepo, request(cache));
    EXPECT_EQ(r.source, "download");
    expect_weights(r.dir);
    EXPECT_TRUE(leftovers(cache).empty());
  }
}

TEST_F(HubTest, WrongSizeFromTheCdnIsRejected) {
  const std::string cache = tmp_.file("cache");
  const std::string commit = hub_->commit(kRepo, "main");
  const auto size = hub_->info()["repos"][kRepo]["files"][commit]["model.safetensors"]["size"].get<std::uint64_t>();
  hub_->shorten_next("model.safetensors");
  const Error e = expect_error([&] { resolve_model(kRepo, request(cache)); }, ErrorKind::Io);
  expect_contains(e.what(), {kRepo, "model.safetensors", "wrong size", "expected " + std::to_string(size)});
  EXPECT_FALSE(fs::exists(storage(cache) / "blobs" / hub_->etag(kRepo, commit, "model.safetensors")));
  EXPECT_FALSE(fs::is_symlink(storage(cache) / "snapshots" / commit / "model.safetensors"));
  EXPECT_TRUE(leftovers(cache).empty());
  expect_weights(resolve_model(kRepo, request(cache)).dir);
}

TEST_F(HubTest, NotFoundErrorsNameRepoRevisionAndFile) {
  const std::string cache = tmp_.file("cache");
  Error e = expect_error([&] { resolve_model("sprt-test/no-such-repo", request(cache)); }, ErrorKind::NotFound);
  expect_contains(e.what(), {"sprt-test/no-such-repo", "'main'", "config.json", "404"});

  e = expect_error([&] { resolve_model(kRepo, request(cache, "no-such-branch")); }, ErrorKind::NotFound);
  expect_contains(e.what(), {kRepo, "no-such-branch", "config.json"});

  HubRequest req = request(cache);
  req.files = {"config.json", "missing.bin"};
  e = expect_error([&] { resolve_model(kRepo, req); }, ErrorKind::NotFound);
  expect_contains(e.what(), {kRepo, "'main'", "missing.bin"});
  // huggingface_hub remembers a missing file (.no_exist/{commit}/{file}); offline, the message says so.
  const std::string commit = hub_->commit(kRepo, "main");
  EXPECT_TRUE(fs::exists(storage(cache) / ".no_exist" / commit / "missing.bin"));
  req.local_files_only = true;
  e = expect_error([&] { resolve_model(kRepo, req); }, ErrorKind::NotFound);
  expect_contains(e.what(), {"missing.bin", "does not exist at commit " + commit});

  // Unsafe names never reach the file system.
  HubRequest bad = request(cache, "../../etc");
  expect_error([&] { resolve_model(kRepo, bad); }, ErrorKind::InvalidArgument);
  bad = request(cache);
  bad.files = {"../escape.json"};
  expect_error([&] { resolve_model(kRepo, bad); }, ErrorKind::InvalidArgument);
}

TEST_F(HubTest, PrivateRepoNeedsToken) {
  const std::string cache = tmp_.file("cache");
  Error e = expect_error([&] { resolve_model(kPrivate, request(cache)); }, ErrorKind::Io);
  expect_contains(e.what(), {kPrivate, "401", "token"});
  env_.set("HF_TOKEN", "hf_wrong");
  e = expect_error([&] { resolve_model(kPrivate, request(cache)); }, ErrorKind::Io);
  expect_contains(e.what(), {kPrivate, "401", "token"});
  {
    ScopedEnv local;  // HF_HUB_DISABLE_IMPLICIT_TOKEN: no token is sent at all
    local.set("HF_TOKEN", hub_->info()["token"].get<std::string>());
    local.set("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1");
    expect_error([&] { resolve_model(kPrivate, request(cache)); }, ErrorKind::Io);
  }
  EXPECT_FALSE(fs::exists(storage(cache, kPrivate) / "snapshots"));

  const std::string token = hub_->info()["token"].get<std::string>();
  env_.set("HF_TOKEN", token);
  ResolvedModel r = resolve_model(kPrivate, request(cache));
  EXPECT_EQ(r.source, "download");
  expect_weights(r.dir);

  env_.unset("HF_TOKEN");  // the legacy variable
  env_.set("HUGGING_FACE_HUB_TOKEN", token);
  r = resolve_model(kPrivate, request(tmp_.file("cache2")));
  EXPECT_EQ(r.source, "download");

  env_.unset("HUGGING_FACE_HUB_TOKEN");  // the token file `hf auth login` writes ($HF_HOME/token)
  fs::create_directories(tmp_.file("hf_home"));
  std::ofstream(tmp_.file("hf_home/token")) << token << "\n";
  r = resolve_model(kPrivate, request(tmp_.file("cache3")));
  EXPECT_EQ(r.source, "download");

  for (const auto& q : hub_->requests()) {
    if (q["server"] == "cdn") {
      EXPECT_TRUE(q["authorization"].is_null()) << "token leaked to the CDN: " << q.dump();
    }
  }
}

TEST_F(HubTest, RevisionsBranchCommitAndPullRequest) {
  const std::string cache = tmp_.file("cache");
  const fs::path st = storage(cache);
  const std::string main_commit = hub_->commit(kRepo, "main");
  const std::string pr_commit = hub_->commit(kRepo, "refs/pr/1");
  ASSERT_NE(main_commit, pr_commit);

  // refs/pr/1: URL-encoded in the URL, stored as refs/refs/pr/1 (huggingface_hub's layout).
  const std::size_t before = hub_->requests().size();
  ResolvedModel pr = resolve_model(kRepo, request(cache, "refs/pr/1"));
  EXPECT_EQ(pr.commit, pr_commit);
  EXPECT_EQ(read_text(st / "refs" / "refs" / "pr" / "1"), pr_commit);
  const auto reqs = hub_->requests();
  ASSERT_GT(reqs.size(), before);
  EXPECT_EQ(reqs[before]["path"], "/" + kRepo + "/resolve/refs%2Fpr%2F1/config.json");
  // The PR's config.json is a different blob than main's.
  EXPECT_EQ(fs::read_symlink(st / "snapshots" / pr_commit / "config.json").string(),
            "../../blobs/" + hub_->etag(kRepo, pr_commit, "config.json"));
  EXPECT_NE(sprt_test::read_bytes(pr.dir + "/config.json"),
            sprt_test::read_bytes(sprt_test::weights_dir() + "/config.json"));

  // A commit hash: no refs entry is written for it.
  ResolvedModel by_commit = resolve_model(kRepo, request(cache, main_commit));
  EXPECT_EQ(by_commit.commit, main_commit);
  EXPECT_EQ(by_commit.source, "download");
  EXPECT_FALSE(fs::exists(st / "refs" / main_commit));
  expect_weights(by_commit.dir);

  // A tag on the same commit: only a refs entry is added, the blobs are reused.
  const auto blobs_before = tree(st / "blobs");
  ResolvedModel tag = resolve_model(kRepo, request(cache, "v1.0"));
  EXPECT_EQ(tag.dir, by_commit.dir);
  EXPECT_EQ(tag.source, "cache");  // nothing downloaded
  EXPECT_EQ(read_text(st / "refs" / "v1.0"), main_commit);
  EXPECT_EQ(tree(st / "blobs"), blobs_before);

  // All of them now resolve offline.
  HubRequest offline = request(cache);
  offline.local_files_only = true;
  for (const std::string rev : {"refs/pr/1", "v1.0", main_commit.c_str(), pr_commit.c_str()}) {
    offline.revision = rev;
    const ResolvedModel r = resolve_model(kRepo, offline);
    EXPECT_EQ(r.source, "cache") << rev;
    EXPECT_EQ(r.commit, rev == "refs/pr/1" || rev == pr_commit ? pr_commit : main_commit) << rev;
  }
  offline.revision = "main";  // never resolved as "main": no refs/main
  expect_error([&] { resolve_model(kRepo, offline); }, ErrorKind::NotFound);
}

TEST_F(HubTest, ConnectionFailureIsIoNamingTheUrl) {
  std::string dead_endpoint;
  {
    FakeHub gone;
    dead_endpoint = gone.endpoint();
  }  // stopped: its port refuses connections now
  env_.set("HF_ENDPOINT", dead_endpoint);
  const Error e = expect_error([&] { resolve_model(kRepo, request(tmp_.file("cache"))); }, ErrorKind::Io);
  expect_contains(e.what(), {dead_endpoint + "/" + kRepo + "/resolve/main/config.json"});
}

TEST_F(HubTest, ConcurrentProcessesAndThreadsShareOneCache) {
  const std::string cache = tmp_.file("cache");
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 1;
      try {
        rc = resolve_model(kRepo, request(cache)).commit == hub_->commit(kRepo, "main") ? 0 : 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        rc = 3;
      }
      ::_exit(rc);
    }
    ASSERT_GT(pid, 0);
    children.push_back(pid);
  }
  std::vector<std::thread> threads;
  std::vector<std::string> dirs(3);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      try {
        dirs[static_cast<std::size_t>(i)] = resolve_model(kRepo, request(cache)).dir;
      } catch (const std::exception& e) {
        dirs[static_cast<std::size_t>(i)] = std::string("error: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const pid_t pid : children) {
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  }
  for (const auto& d : dirs) {
    EXPECT_EQ(d, (storage(cache) / "snapshots" / hub_->commit(kRepo, "main")).string());
  }
  expect_weights(dirs[0]);
  EXPECT_TRUE(leftovers(cache).empty());
  EXPECT_EQ(std::distance(fs::directory_iterator(storage(cache) / "blobs"), fs::directory_iterator()), 2);
}

TEST_F(HubTest, InteropPythonDownloadsWeFind) {
  const std::string py_cache = tmp_.file("py_cache");
  for (const std::string rev : {"main", "refs/pr/1"}) {
    const json py = interop("download " + shell_quote(py_cache) + " " + kRepo + " " + shell_quote(rev) +
                            " config.json model.safetensors");
    ASSERT_TRUE(py.contains("config.json")) << py.dump();
    HubRequest req = request(py_cache, rev);
    req.local_files_only = true;
    const ResolvedModel r = resolve_model(kRepo, req);
    EXPECT_EQ(r.source, "cache");
    EXPECT_EQ(r.commit, hub_->commit(kRepo, rev));
    for (const auto& f : kFiles) {
      EXPECT_EQ(fs::path(py[f]["path"].get<std::string>()), fs::path(r.dir) / f);
    }
  }
  // Same requests from us into another cache: the same tree (huggingface_hub's .locks/ aside).
  const std::string our_cache = tmp_.file("our_cache");
  for (const std::string rev : {"main", "refs/pr/1"}) resolve_model(kRepo, request(our_cache, rev));
  EXPECT_EQ(tree(our_cache), tree(py_cache));
}

TEST_F(HubTest, InteropWeDownloadPythonFinds) {
  const std::string cache = tmp_.file("cache");
  for (const std::string& rev : std::vector<std::string>{"main", "refs/pr/1", hub_->commit(kRepo, "main")}) {
    const ResolvedModel r = resolve_model(kRepo, request(cache, rev));
    ScopedEnv local;
    local.set("HF_HUB_OFFLINE", "1");  // Python must find it without asking the server
    const json py = interop("lookup " + shell_quote(cache) + " " + kRepo + " " + shell_quote(rev) +
                            " config.json model.safetensors");
    ASSERT_TRUE(py.contains("config.json")) << rev;
    for (const auto& f : kFiles) {
      EXPECT_EQ(fs::path(py[f]["path"].get<std::string>()), fs::path(r.dir) / f) << rev;
      ASSERT_TRUE(py[f]["try_to_load_from_cache"].is_string()) << rev << " " << f;
      EXPECT_EQ(fs::path(py[f]["try_to_load_from_cache"].get<std::string>()), fs::path(r.dir) / f) << rev;
    }
  }
}

}  // namespace
