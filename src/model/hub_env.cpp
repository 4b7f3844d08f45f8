// Hugging Face hub: the environment (HF_* variables, offline mode, endpoint, token, timeouts, the cache folder), as
// huggingface_hub 2.4's constants.py and utils/_auth.py read it. Read at every call, not cached: tests and long-lived
// processes may change it. See hub.cpp for what is mirrored.
#include "model/hub_env.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "model/hub.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"

namespace superpoint_rt::model {

namespace fs = std::filesystem;

namespace hub {
namespace {

constexpr long kDefaultTimeoutS = 10;
// A token is ~40 characters; a token file much larger than this is not one.
constexpr std::uint64_t kMaxTokenFileBytes =
    1 << 20;  // huggingface_hub: DEFAULT_ETAG_TIMEOUT / DEFAULT_DOWNLOAD_TIMEOUT = 10 s

std::string env_or_empty(const char* name) {
  return env(name).value_or("");
}

/// constants._is_true: value.upper() in {"1", "ON", "YES", "TRUE"}.
bool is_true(const std::string& v) {
  std::string u = v;
  for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u == "1" || u == "ON" || u == "YES" || u == "TRUE";
}

std::string home_dir() {
  std::string h = env_or_empty("HOME");
  return h.empty() ? std::string("/") : h;
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

/// utils/_auth._clean_token: drop CR/LF, strip surrounding spaces; empty means no token.
std::optional<std::string> clean_token(std::string t) {
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '\r' || c == '\n'; }), t.end());
  const auto b = t.find_first_not_of(" \t\f\v");
  if (b == std::string::npos) return std::nullopt;
  const auto e = t.find_last_not_of(" \t\f\v");
  return t.substr(b, e - b + 1);
}

}  // namespace

/// The value of an environment variable; nullopt when unset. Python's os.getenv treats "" as set; callers decide.
std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

/// constants.HF_HUB_OFFLINE: _is_true(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")).
bool env_offline() {
  std::string v = env_or_empty("HF_HUB_OFFLINE");
  if (v.empty()) v = env_or_empty("TRANSFORMERS_OFFLINE");
  return is_true(v);
}

/// os.path.expanduser for "~" and "~/..." (the only forms the hub variables use).
std::string expand_user(const std::string& p) {
  if (p == "~") return home_dir();
  if (p.rfind("~/", 0) == 0) return home_dir() + p.substr(1);
  return p;
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

/// The token huggingface_hub would send implicitly (get_token_to_send(None)).
std::optional<std::string> hub_token() {
  if (is_true(env_or_empty("HF_HUB_DISABLE_IMPLICIT_TOKEN"))) return std::nullopt;
  std::string t = env_or_empty("HF_TOKEN");
  if (t.empty()) t = env_or_empty("HUGGING_FACE_HUB_TOKEN");
  if (auto c = clean_token(t)) return c;
  std::string path = env_or_empty("HF_TOKEN_PATH");
  path = path.empty() ? hf_home() + "/token" : expand(path);
  try {
    return clean_token(util::read_text_file(path, kMaxTokenFileBytes));
  } catch (const Error&) {
    return std::nullopt;  // no (readable) token file: no token, as huggingface_hub
  }
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

}  // namespace hub

std::string hub_cache_dir(const std::string& explicit_dir) {
  std::string dir;
  if (!explicit_dir.empty()) {
    dir = hub::expand_user(explicit_dir);  // hf_hub_download: Path(cache_dir).expanduser().resolve()
  } else if (auto v = hub::env("HF_HUB_CACHE"); v && !v->empty()) {
    dir = hub::expand(*v);
  } else if (auto legacy = hub::env("HUGGINGFACE_HUB_CACHE"); legacy && !legacy->empty()) {
    dir = hub::expand(*legacy);
  } else {
    dir = hub::hf_home() + "/hub";
  }
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec || p.empty()) p = fs::absolute(dir, ec).lexically_normal();
  std::string out = p.string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace superpoint_rt::model
