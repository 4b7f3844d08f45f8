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
//
// The parts: hub_env (the environment: HF_* variables, offline, endpoint, token, the cache folder), hub_cache (the
// cache layout: names, refs, snapshots, blobs, markers), hub_http (libcurl: HEAD, redirects, GET); this file ties
// them together (local folder, cache, offline, download).
#include "model/hub.hpp"

#include <filesystem>
#include <optional>

#include "model/hub_cache.hpp"
#include "model/hub_env.hpp"
#include "model/hub_http.hpp"
#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::model {
namespace {

using namespace hub;

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
