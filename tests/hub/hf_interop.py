#!/usr/bin/env python3
"""Runs the real huggingface_hub against a cache, for the interop tests in tests/hub/test_hub.cpp.

  hf_interop.py download  CACHE REPO REVISION FILE...   hf_hub_download each file (HF_ENDPOINT = the fake hub)
  hf_interop.py lookup    CACHE REPO REVISION FILE...   hf_hub_download(local_files_only=True) + try_to_load_from_cache
  hf_interop.py cache_dir                                constants.HF_HUB_CACHE for the current environment
  hf_interop.py repo_ids  ID...                          whether validate_repo_id accepts each id

Prints one JSON document on stdout. Any failure is an exception (non-zero exit) with its message on stderr.
"""
import json
import sys


def main(argv):
    cmd = argv[1]
    if cmd == "cache_dir":
        from huggingface_hub import constants

        print(json.dumps({"cache_dir": constants.HF_HUB_CACHE}))
        return 0
    if cmd == "repo_ids":
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        out = {}
        for rid in argv[2:]:
            try:
                validate_repo_id(rid)
                out[rid] = True
            except HFValidationError:
                out[rid] = False
        print(json.dumps(out))
        return 0

    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    cache, repo, revision, files = argv[2], argv[3], argv[4], argv[5:]
    out = {}
    for f in files:
        if cmd == "download":
            out[f] = {"path": hf_hub_download(repo, f, cache_dir=cache, revision=revision)}
        elif cmd == "lookup":
            cached = try_to_load_from_cache(repo, f, cache_dir=cache, revision=revision)
            out[f] = {"path": hf_hub_download(repo, f, cache_dir=cache, revision=revision, local_files_only=True),
                      "try_to_load_from_cache": cached if isinstance(cached, str) else None}
        else:
            raise SystemExit("unknown command " + cmd)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
