#!/usr/bin/env python3
"""A local imitation of the Hugging Face hub's file-resolution endpoints, for tests/hub (never the internet).

Two HTTP servers on 127.0.0.1 (free ports): the "hub" serves {repo}/resolve/{revision}/{file} like huggingface.co,
the "cdn" serves LFS blobs like cdn-lfs.hf.co (a different origin, so clients must not send the hub token there).

Repos (all serve config.json and model.safetensors, read from --weights, never copied):
  sprt-test/superpoint   public; revisions main, v1.0 (same commit as main), refs/pr/1 (its own commit with a
                         different config.json), and any of those commits by hash
  sprt-test/private      needs "Authorization: Bearer hf_sprt_secret" (else 401, like a private repo)
  solo-model             a repo id without a namespace (same files as sprt-test/superpoint main)

What each response carries (as the real hub):
  config.json        200, ETag = "<git blob sha1>", X-Repo-Commit, Content-Length
  model.safetensors  302 to http://127.0.0.1:<cdn port>/cdn/<sha256>?sig=..., X-Repo-Commit,
                     X-Linked-Etag = "<sha256>", X-Linked-Size, and an ETag/Content-Length of the redirect itself
                     (which a client must NOT use for the blob name / size)
  errors             404 + X-Error-Code RepoNotFound / RevisionNotFound / EntryNotFound (the last with X-Repo-Commit);
                     401 + X-Error-Code RepoNotFound for the private repo without the right token

Test controls, in the --state folder:
  info.json      written (atomically) once both servers listen: ports, commits, per-revision etags and sizes
  requests.log   one JSON line per request: server, method, path, authorization, user-agent
  truncate       if present, holds a file name; the next GET body of that file (hub or cdn) announces the full
                 Content-Length, sends half of the bytes and closes the connection; the control file is then removed
  shorten        like truncate, but for the cdn only: a complete response (consistent Content-Length) with half of
                 the bytes, so only a check against X-Linked-Size can notice

The process exits after --max-seconds, or when its parent process goes away, so a crashed test leaves nothing behind.
"""
import argparse
import hashlib
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "hf_sprt_secret"


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_of(name: str) -> str:
    return hashlib.sha1(("sprt-fake-hub commit " + name).encode()).hexdigest()


class Repo:
    def __init__(self, files_by_commit, refs, private=False):
        self.files_by_commit = files_by_commit  # commit -> {filename: bytes}
        self.refs = refs  # revision name -> commit
        self.private = private

    def commit_for(self, revision):
        if revision in self.refs:
            return self.refs[revision]
        if revision in self.files_by_commit:
            return revision
        return None


def build_repos(weights_dir):
    with open(os.path.join(weights_dir, "config.json"), "rb") as f:
        config = f.read()
    with open(os.path.join(weights_dir, "model.safetensors"), "rb") as f:
        model = f.read()
    pr_config = config.rstrip(b"\n") + b"\n\n"  # a different blob for the PR commit
    main, pr = commit_of("main"), commit_of("refs/pr/1")
    public = Repo({main: {"config.json": config, "model.safetensors": model},
                   pr: {"config.json": pr_config, "model.safetensors": model}},
                  {"main": main, "v1.0": main, "refs/pr/1": pr})
    priv_commit = commit_of("private main")
    private = Repo({priv_commit: {"config.json": config, "model.safetensors": model}}, {"main": priv_commit},
                   private=True)
    solo_commit = commit_of("solo main")
    solo = Repo({solo_commit: {"config.json": config, "model.safetensors": model}}, {"main": solo_commit})
    return {"sprt-test/superpoint": public, "sprt-test/private": private, "solo-model": solo}


LFS_FILES = {"model.safetensors"}


class State:
    def __init__(self, state_dir, repos):
        self.dir = state_dir
        self.repos = repos
        self.lock = threading.Lock()
        self.cdn_port = 0
        self.blobs = {}  # sha256 -> bytes, for the cdn
        for repo in repos.values():
            for files in repo.files_by_commit.values():
                for name, data in files.items():
                    if name in LFS_FILES:
                        self.blobs[hashlib.sha256(data).hexdigest()] = data

    def log(self, entry):
        with self.lock:
            with open(os.path.join(self.dir, "requests.log"), "a") as f:
                f.write(json.dumps(entry) + "\n")

    def take_control(self, name, filename):
        path = os.path.join(self.dir, name)
        with self.lock:
            try:
                with open(path) as f:
                    target = f.read().strip()
            except FileNotFoundError:
                return False
            if target != filename:
                return False
            os.remove(path)
            return True


def make_handler(state, server_name):
    class Handler(BaseHTTPRequestHandler):
        server_version = "FakeHub/1.0"

        def log_message(self, fmt, *args):  # keep stderr quiet; requests.log has the details
            pass

        def _log(self):
            state.log({"server": server_name, "method": self.command, "path": self.path,
                       "authorization": self.headers.get("Authorization"),
                       "user_agent": self.headers.get("User-Agent")})

        def _send(self, status, headers, body=b"", truncate=False):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command == "GET":
                if truncate:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        def _error(self, status, code, message, extra=None):
            headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
            headers.update(extra or {})
            self._send(status, headers, json.dumps({"error": message}).encode())

        def do_HEAD(self):
            self._handle()

        def do_GET(self):
            self._handle()

        def _handle(self):
            self._log()
            if server_name == "cdn":
                return self._cdn()
            parts = urllib.parse.urlsplit(self.path)
            segs = [urllib.parse.unquote(s) for s in parts.path.split("/")[1:]]
            if len(segs) >= 4 and segs[1] == "resolve":
                repo_id, rest = segs[0], segs[2:]
            elif len(segs) >= 5 and segs[2] == "resolve":
                repo_id, rest = segs[0] + "/" + segs[1], segs[3:]
            else:
                return self._error(404, "RepoNotFound", "Not a resolve URL")
            revision, filename = rest[0], "/".join(rest[1:])
            repo = state.repos.get(repo_id)
            if repo is None:
                return self._error(404, "RepoNotFound", "Repository not found")
            if repo.private and self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self._error(401, "RepoNotFound", "Invalid username or password.")
            commit = repo.commit_for(revision)
            if commit is None:
                return self._error(404, "RevisionNotFound", "Invalid rev id: " + revision)
            data = repo.files_by_commit[commit].get(filename)
            if data is None:
                return self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
            if filename in LFS_FILES:
                sha = hashlib.sha256(data).hexdigest()
                location = "http://127.0.0.1:%d/cdn/%s?sig=fake%%2Fsigned&file=%s" % (
                    state.cdn_port, sha, urllib.parse.quote(filename))
                body = b"Found. Redirecting to " + location.encode()
                return self._send(302, {"Location": location, "X-Repo-Commit": commit,
                                        "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                                        "ETag": 'W/"redirect-etag-not-the-blob"', "Content-Type": "text/plain"},
                                  body)
            self._send(200, {"ETag": '"%s"' % git_blob_sha1(data), "X-Repo-Commit": commit,
                             "Content-Type": "application/octet-stream"},
                       data, truncate=self.command == "GET" and state.take_control("truncate", filename))

        def _cdn(self):
            parts = urllib.parse.urlsplit(self.path)
            segs = parts.path.split("/")
            data = state.blobs.get(segs[-1]) if len(segs) == 3 and segs[1] == "cdn" else None
            if data is None:
                return self._send(404, {"Content-Type": "text/plain"}, b"NoSuchKey")
            query = urllib.parse.parse_qs(parts.query)
            filename = query.get("file", [""])[0]
            if self.command == "GET" and state.take_control("shorten", filename):
                data = data[: len(data) // 2]  # a complete response, but not the size X-Linked-Size announced
            self._send(200, {"ETag": '"s3-multipart-etag-1"', "Content-Type": "application/octet-stream"}, data,
                       truncate=self.command == "GET" and state.take_control("truncate", filename))

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--max-seconds", type=float, default=300)
    args = ap.parse_args()

    repos = build_repos(args.weights)
    state = State(args.state, repos)
    hub = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state, "hub"))
    cdn = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state, "cdn"))
    hub.daemon_threads = cdn.daemon_threads = True
    state.cdn_port = cdn.server_address[1]
    for s in (hub, cdn):
        threading.Thread(target=s.serve_forever, daemon=True).start()

    manifest = {}
    for repo_id, repo in repos.items():
        files = {}
        for commit, entries in repo.files_by_commit.items():
            files[commit] = {name: {"etag": hashlib.sha256(d).hexdigest() if name in LFS_FILES else git_blob_sha1(d),
                                    "size": len(d)} for name, d in entries.items()}
        manifest[repo_id] = {"refs": repo.refs, "files": files}
    info = {"hub_port": hub.server_address[1], "cdn_port": state.cdn_port, "token": TOKEN, "repos": manifest}
    tmp = os.path.join(args.state, "info.json.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(args.state, "info.json"))

    parent = os.getppid()
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    hub.shutdown()
    cdn.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
