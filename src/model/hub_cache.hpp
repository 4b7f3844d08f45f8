// Hugging Face hub, internal: the cache layout shared with huggingface_hub 2.4 (the layout is described in hub.hpp).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::model::hub {

namespace fs = std::filesystem;

[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
  throw Error(kind, message);
}

/// strerror(errno).
std::string errno_text();

/// One repo at one revision, and where it lives in the cache.
struct Target {
  std::string repo_id;
  std::string revision;  // as requested ("main", a tag, refs/pr/1, a commit)
  fs::path cache;        // the cache root
  fs::path storage;      // cache/models--org--name
};

/// "model '{repo}' (revision '{revision}')", the start of every message about `t`.
std::string describe(const Target& t);

/// utils/_validators.validate_repo_id without the type checks.
bool valid_repo_id(const std::string& s);
/// file_download.REGEX_COMMIT_HASH: exactly 40 lowercase hex digits.
bool is_commit_hash(const std::string& s);
/// A '/'-separated relative path with no empty, "." or ".." segment and no control characters: safe to join onto a
/// cache folder.
bool safe_relative_path(const std::string& p);
/// file_download.repo_folder_name for models: "models--{org}--{name}".
std::string repo_folder_name(const std::string& repo_id);
/// create_directories; throws Error(Io) naming the folder.
void make_dirs(const fs::path& p);
/// refs/{revision} = commit, unless the revision is that commit; written only when it changes.
void write_ref(const fs::path& storage, const std::string& revision, const std::string& commit);
/// CACHEDIR.TAG in the cache root (best effort).
void write_cachedir_tag(const fs::path& cache);
/// snapshots/{commit}/{file} -> relative symlink to blobs/{etag} (a copy where symlinks are not supported).
void create_pointer(const fs::path& blob, const fs::path& pointer);
/// The commit the cache maps t.revision to: the revision itself when it is a commit hash, else refs/{revision}.
std::optional<std::string> cached_commit(const Target& t);
/// fs::exists following symlinks (a dangling pointer is missing, as os.path.exists).
bool exists_followed(const fs::path& p);

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

}  // namespace superpoint_rt::model::hub
