// Finding and downloading model files the way Python's huggingface_hub does (SPEC §3). Implementation notes and the
// list of what is mirrored from huggingface_hub 2.4 are at the top of hub.cpp.
//
// Cache layout (shared with huggingface_hub, both ways):
//   <cache>/models--{org}--{name}/refs/{revision}         the commit hash a branch/tag resolves to (no newline;
//                                                         refs/pr/1 is stored as refs/refs/pr/1)
//   <cache>/models--{org}--{name}/snapshots/{commit}/{f}  a relative symlink to ../../blobs/{etag}
//   <cache>/models--{org}--{name}/blobs/{etag}            the file content (git sha1, or sha256 for LFS files)
//   <cache>/models--{org}--{name}/.no_exist/{commit}/{f}  marker: the hub said {f} does not exist at {commit}
// <cache> = explicit cache_dir, else $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (~ and $VAR are expanded; made absolute).
//
// Lookup: a commit-hash revision, or refs/{revision}, naming a snapshot that holds every requested file is used with
// no network request at all (source "cache").
// Download (otherwise): HEAD $HF_ENDPOINT/{repo}/resolve/{revision}/{file} (default endpoint https://huggingface.co;
// the revision is percent-encoded, "/" included) without leaving the hub's origin; the commit comes from the
// X-Repo-Commit header, the blob name from X-Linked-Etag / ETag, the size from X-Linked-Size / Content-Length; then a
// GET of the file (or of the CDN URL the hub redirects to, without the token) into a per-process temporary file that
// is size-checked and renamed into place (atomic), so a truncated transfer never leaves a partial blob or snapshot
// entry, and concurrent processes cannot corrupt the cache. "Authorization: Bearer <token>" goes to the hub when
// $HF_TOKEN (else $HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH / $HF_HOME/token) is set, unless
// $HF_HUB_DISABLE_IMPLICIT_TOKEN. Timeouts: connect 10 s, HEAD $HF_HUB_ETAG_TIMEOUT (10 s), GET aborts when under
// 1 byte/s for $HF_HUB_DOWNLOAD_TIMEOUT (10 s).
// Offline: local_files_only, or $HF_HUB_OFFLINE (else $TRANSFORMERS_OFFLINE) = 1/ON/YES/TRUE (any case): no network
// at all; a missing file is NotFound naming the repo, revision, files and cache dir.
//
// Environment variables are read at every call. All functions are thread-safe (no shared mutable state).
#pragma once

#include <string>
#include <vector>

namespace superpoint_rt::model {

struct HubRequest {
  std::string repo_id;    // "org/name" (informational: resolve_model takes the repo id / directory separately)
  std::string revision;   // branch, tag, refs/pr/N or 40-hex commit; empty = "main"
  std::string cache_dir;  // empty = the default resolution above
  bool local_files_only = false;
  std::vector<std::string> files{"config.json", "model.safetensors"};  // relative, '/'-separated, no ".." segments
};

struct ResolvedModel {
  std::string dir;     // absolute directory holding the files (a snapshot dir, or the local dir)
  std::string commit;  // commit hash (empty for local dirs)
  std::string source;  // "local", "cache" or "download" (at least one file was downloaded by this call)
};

/// The cache directory that would be used for `explicit_dir` (empty = environment / default).
std::string hub_cache_dir(const std::string& explicit_dir = "");

/// True when `s` looks like a repo id ("org/name" or "name"), not an existing path.
bool is_repo_id(const std::string& s);

/// Resolves a local directory (used as is) or a repo id (cache, then download unless offline).
/// Throws NotFound (a path that is neither a directory nor a repo id; a local dir without a file; HTTP 404; offline
/// with a file missing: names the repo, revision, file and cache dir, and says that offline mode prevented a
/// download), Io (connection failure naming the URL, HTTP 401/403 saying a token may be needed, other HTTP errors,
/// truncated or wrong-size transfers, cache write failures), InvalidArgument (an empty model, an unsafe revision or
/// file name).
ResolvedModel resolve_model(const std::string& model_or_dir, const HubRequest& request);

}  // namespace superpoint_rt::model
