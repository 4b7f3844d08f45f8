// Hugging Face hub: the cache layout shared with huggingface_hub 2.4 (file_download.py): models--{org}--{name},
// refs/, snapshots/, blobs/, .no_exist/, CACHEDIR.TAG, and the names that may be joined onto it. No .locks/: see
// hub.cpp.
#include "model/hub_cache.hpp"

#include "util/file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>

namespace superpoint_rt::model::hub {
namespace {

// A refs/ file holds a 40-digit commit hash; anything much larger is not one.
constexpr std::uint64_t kMaxRefBytes = 4096;

constexpr const char* kCachedirTag =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by huggingface_hub.\n"
    "# For information about cache directory tags, see:\n"
    "#\thttps://bford.info/cachedir/\n";

bool is_word(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// One part of REPO_ID_REGEX: \b[\w\-.]{1,96}\b (ASCII), i.e. 1-96 of [A-Za-z0-9_.-] starting and ending with a word
/// character.
bool valid_repo_part(std::string_view s) {
  if (s.empty() || s.size() > 96 || !is_word(s.front()) || !is_word(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_word(c) || c == '-' || c == '.'; });
}

/// A refs/ file: empty when it cannot be read or is implausibly large (then it names no commit, and a download
/// rewrites it).
std::string read_small_text(const fs::path& p) {
  try {
    return util::read_text_file(p.string(), kMaxRefBytes);
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

std::string errno_text() {
  return std::strerror(errno);
}

std::string describe(const Target& t) {
  return "model '" + t.repo_id + "' (revision '" + t.revision + "')";
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

void make_dirs(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec && !fs::is_directory(p))
    fail(ErrorKind::Io, "cannot create the cache directory " + p.string() + ": " + ec.message());
}

/// _cache_commit_hash_for_specific_revision: refs/{revision} = commit, unless the revision is that commit; written
/// only when it changes (a read-only cache that is already right stays untouched).
void write_ref(const fs::path& storage, const std::string& revision, const std::string& commit) {
  if (revision == commit) return;
  const fs::path ref = storage / "refs" / revision;
  std::error_code ec;
  if (fs::is_regular_file(ref, ec) && read_small_text(ref) == commit) return;
  make_dirs(ref.parent_path());
  util::write_file_atomic(ref.string(), commit);
}

/// _create_cachedir_tag (best effort, like huggingface_hub).
void write_cachedir_tag(const fs::path& cache) {
  std::error_code ec;
  const fs::path tag = cache / "CACHEDIR.TAG";
  if (fs::exists(tag, ec)) return;
  try {
    util::write_file_atomic(tag.string(), kCachedirTag);
  } catch (const Error&) {
  }
}

/// _create_symlink: snapshots/{commit}/{file} -> relative path to blobs/{etag}. The link is made under a temp name
/// and renamed over the pointer, so it never goes missing for a concurrent reader. Where symlinks are not supported
/// the blob is copied (huggingface_hub's fallback).
void create_pointer(const fs::path& blob, const fs::path& pointer) {
  const fs::path rel = blob.lexically_relative(pointer.parent_path());
  // Built by appending: GCC 12's -Wrestrict misfires on `"." + string` here.
  std::string tmp_name = ".";
  tmp_name += pointer.filename().string();
  tmp_name += '.';
  tmp_name += util::random_hex8();
  tmp_name += ".tmp";
  const fs::path tmp = pointer.parent_path() / tmp_name;
  std::error_code ec;
  fs::create_symlink(rel, tmp, ec);
  if (ec) {
    fs::copy_file(blob, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) fail(ErrorKind::Io, "cannot create " + pointer.string() + ": " + ec.message());
  }
  util::rename_into_place(tmp.string(), pointer.string());
}

/// The commit the cache maps `revision` to: the revision itself when it is a commit hash, else refs/{revision}.
std::optional<std::string> cached_commit(const Target& t) {
  if (is_commit_hash(t.revision)) return t.revision;
  const fs::path ref = t.storage / "refs" / t.revision;
  std::error_code ec;
  if (!fs::is_regular_file(ref, ec)) return std::nullopt;
  std::string c = read_small_text(ref);
  while (!c.empty() && std::isspace(static_cast<unsigned char>(c.back()))) c.pop_back();
  return c.empty() ? std::nullopt : std::optional<std::string>(c);
}

bool exists_followed(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);  // follows the symlink: a dangling pointer is "missing", as os.path.exists
}

}  // namespace superpoint_rt::model::hub
