// Finding and downloading model files the way Python's huggingface_hub does (SPEC §3).
//
// Cache layout (shared with huggingface_hub, both ways):
//   <cache>/models--{org}--{name}/refs/{revision}         the commit hash a branch/tag resolves to
//   <cache>/models--{org}--{name}/snapshots/{commit}/{f}  a relative symlink to ../../blobs/{etag}
//   <cache>/models--{org}--{name}/blobs/{etag}            the file content
// <cache> = explicit cache_dir, else $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
//
// Download: GET $HF_ENDPOINT/{repo}/resolve/{revision}/{file} (default endpoint https://huggingface.co), following
// redirects, with "Authorization: Bearer $HF_TOKEN" when set; the commit comes from the X-Repo-Commit header and the
// blob name from X-Linked-Etag / ETag. Writes go to a temporary file that is renamed into place (atomic), so a
// truncated transfer never leaves a partial blob. local_files_only or $HF_HUB_OFFLINE=1: no network at all.
#pragma once

#include <string>
#include <vector>

namespace superpoint_rt::model {

struct HubRequest {
  std::string repo_id;    // "org/name"
  std::string revision;   // branch, tag or 40-hex commit; empty = "main"
  std::string cache_dir;  // empty = the default resolution above
  bool local_files_only = false;
  std::vector<std::string> files{"config.json", "model.safetensors"};
};

struct ResolvedModel {
  std::string dir;     // directory holding the files (a snapshot dir, or the local dir)
  std::string commit;  // commit hash (empty for local dirs)
  std::string source;  // "local", "cache" or "download"
};

/// The cache directory that would be used for `explicit_dir` (empty = environment / default).
std::string hub_cache_dir(const std::string& explicit_dir = "");

/// True when `s` looks like a repo id ("org/name" or "name"), not an existing path.
bool is_repo_id(const std::string& s);

/// Resolves a local directory (used as is) or a repo id (cache, then download unless offline).
/// Throws NotFound (names the repo, revision, file and cache dir, and says when offline mode prevented a download),
/// Io (network errors, HTTP status and URL).
ResolvedModel resolve_model(const std::string& model_or_dir, const HubRequest& request);

}  // namespace superpoint_rt::model
