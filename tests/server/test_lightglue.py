"""POST /v1/match?matcher=lightglue (issue 34): a server started with `--matcher-weights` matches with LightGlue, and
answers exactly what `superpoint-rt match --conf superpoint+lightglue` writes for the same features; its fields,
refusals and bounds (the keypoint cap, --timeout-s between layers) and /v1/info.

The weights: cvg's LightGlue with seeded random weights saved as a .pth (tests/lightglue/lg_reference.py, as the
LightGlue tests make them, at SuperPoint's LightGlue's width: 256). The reference features: the CLI's
float32 `extract --format npz` of the same images and fields, written to an hloc features.h5 (float32, so that the
CLI's LightGlue sees the server's exact inputs)."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from test_server import (CLI, IMAGES, JPG_MID, JPG_SMALL, PNG_640, Server, assert_error, image_bytes, post_match,
                         reference, request)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lightglue"))
import lg_reference  # noqa: E402

A, B = "pt_piazza_san_marco_06795901_3725050516.jpg", JPG_SMALL


@pytest.fixture(scope="module")
def weights():
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "superpoint_lightglue.pth"
        model = lg_reference.random_model(256, seed=34, early=False, prune=False, descriptor_dim=256)
        lg_reference.save_pth(model, path)
        yield str(path)


@pytest.fixture(scope="module")
def srv(weights):
    s = Server("--workers", "2", "--queue", "8", "--matcher-weights", weights, warmup="none")
    try:
        yield s
    finally:
        assert s.stop() == 0, s.stderr()


def pair(a=A, b=B):
    return [("image0", a, image_bytes(a)), ("image1", b, image_bytes(b))]


def cli_lightglue(weights, flags, extra, tmp):
    """matches0 (int16) and matching_scores0 (float16) of `superpoint-rt match --conf superpoint+lightglue` on the
    CLI's float32 features of A and B."""
    feats, pairs, out = tmp / "f.h5", tmp / "pairs.txt", tmp / "m.h5"
    with h5py.File(feats, "w") as f:
        for name in (A, B):
            r = reference(name, flags)
            g = f.create_group(name)
            g.create_dataset("keypoints", data=r["keypoints"].astype(np.float32))
            g.create_dataset("descriptors", data=np.ascontiguousarray(r["descriptors"].astype(np.float32).T))
            g.create_dataset("scores", data=r["scores"].astype(np.float32))
            h, w = (int(v) for v in r["image_size"])
            g.create_dataset("image_size", data=np.array([w, h], np.int64))  # hloc's (width, height)
    pairs.write_text(f"{A} {B}")
    subprocess.run([CLI, "match", "--features", str(feats), "--pairs", str(pairs), "-o", str(out), "--conf",
                    "superpoint+lightglue", "--matcher-weights", weights, "--threads", "1", "--quiet", *extra],
                   check=True, timeout=120)
    with h5py.File(out, "r") as f:
        g = f[f"{A}/{B}"]
        return g["matches0"][()], g["matching_scores0"][()]


@pytest.mark.parametrize("query,extra", [
    ("", []),  # cvg's defaults (this random network neither stops early nor prunes: early=False, prune=False)
    ("&depth_confidence=-1&width_confidence=-1&filter_threshold=0.2",
     ["--depth-confidence", "-1", "--width-confidence", "-1", "--filter-threshold", "0.2"])])
def test_matches_equal_the_cli(srv, weights, tmp_path, query, extra):
    status, _, body = post_match(srv, pair(), "?matcher=lightglue&max_keypoints=512" + query)
    assert status == 200, body[:300]
    res = json.loads(body)
    m0, s0 = cli_lightglue(weights, ["--max-keypoints", "512"], extra, tmp_path)
    assert len(m0) == len(res["image0"]["scores"])
    want = [[i, int(j)] for i, j in enumerate(m0) if j >= 0]
    assert len(want) > 20  # the pair has matches to get right
    assert res["matches"] == want  # exactly: the same float32 inputs through the same code
    # The CLI stores scores as float16 (hloc's file): within half its unit in the last place (and the server's
    # rounding to 6 decimals).
    ref = np.array([s0[i] for i, _ in want], np.float32)
    np.testing.assert_array_less(np.abs(np.array(res["scores"]) - ref), 2.0 ** -12 + 5e-7)
    lg = {"matcher": "lightglue", "depth_confidence": 0.95, "width_confidence": 0.99, "filter_threshold": 0.1}
    if query:
        lg.update(depth_confidence=-1.0, width_confidence=-1.0, filter_threshold=0.2)
    assert res["match"] == lg
    assert res["stop"] == 9  # every layer ran (cvg's stop)
    assert res["timing_ms"]["match"] >= 0


@pytest.mark.parametrize("query,word", [
    ("?matcher=lightglue&ratio=0.8", "ratio"), ("?matcher=lightglue&conf=NN-mutual", "conf"),
    ("?depth_confidence=0.5", "depth_confidence"), ("?matcher=nn&filter_threshold=0.5", "filter_threshold"),
    ("?matcher=superglue", "matcher"), ("?matcher=lightglue&width_confidence=1.5", "width_confidence"),
    ("?matcher=lightglue&depth_confidence=-2", "depth_confidence"),
    ("?matcher=lightglue&filter_threshold=x", "filter_threshold")])
def test_wrong_fields_are_422(srv, query, word):
    # The server's convention for query fields (docs/SERVING.md): 422 naming the field, before the body is read.
    msg = assert_error(*post_match(srv, pair(JPG_SMALL, JPG_SMALL), query), 422)
    assert word in msg, msg
    # LightGlue's fields belong to /v1/match only.
    assert "depth_confidence" in assert_error(*request(srv, "POST", "/v1/keypoints?depth_confidence=0.5",
                                                       image_bytes(JPG_SMALL), {"Content-Type": "image/jpeg"}), 422)


def test_info_says_lightglue_is_loaded(srv, weights):
    info = json.loads(request(srv, "GET", "/v1/info")[2])
    lg = info["match"]["lightglue"]
    assert lg["loaded"] is True and lg["weights"] == weights and lg["layout"] == "cvg"
    assert lg["input_dim"] == 256 and lg["layers"] == 9
    assert lg["max_keypoints"] == info["limits"]["max_lightglue_keypoints"] == 4096
    assert set(lg["params"]) == {"depth_confidence", "width_confidence", "filter_threshold"}
    assert lg["params"]["depth_confidence"] == {"type": "float", "allowed": "-1..1, <= 0 = off", "min": -1, "max": 1,
                                                "default": 0.95}
    assert info["match"]["params"]["matcher"]["choices"] == ["nn", "lightglue"]
    assert info["match"]["params"]["matcher"]["default"] == "nn"


def test_keypoint_cap_is_413(srv):
    # Every keypoint of JPG_MID's 640 x 480 frame above a tiny threshold: 5152, over max_lightglue_keypoints (4096).
    msg = assert_error(*post_match(srv, pair(PNG_640, JPG_MID),
                                   "?matcher=lightglue&keypoint_threshold=0.00001&max_keypoints=-1"), 413)
    assert "max_lightglue_keypoints" in msg and "4096" in msg, msg


def test_deadline_answers_504_and_frees_the_worker(weights):
    # --timeout-s 3 (both images are extracted well within it) and 4096 keypoints per image at full depth (about a
    # second per layer on one thread, nine layers): LightGlue is still in its layers at the deadline, and gives up at
    # the next one; the one worker is free again at once.
    s = Server("--workers", "1", "--matcher-weights", weights, "--timeout-s", "3", warmup="none")
    try:
        t0 = time.time()
        status, headers, body = post_match(
            s, pair(JPG_MID, JPG_MID),
            "?matcher=lightglue&keypoint_threshold=0.00001&max_keypoints=4096&depth_confidence=-1&width_confidence=-1")
        elapsed = time.time() - t0
        msg = assert_error(status, headers, body, 504)
        assert "LightGlue" in msg and "--timeout-s" in msg and "layers done" in msg, msg
        assert elapsed < 3 + 5, elapsed  # the deadline plus at most a layer (and the extraction's margin)
        status, _, body = post_match(s, pair(JPG_SMALL, JPG_SMALL), "?matcher=lightglue&max_keypoints=64")
        assert status == 200, body[:300]
    finally:
        assert s.stop() == 0, s.stderr()


def test_without_weights():
    s = Server("--workers", "1", warmup="none")
    try:
        msg = assert_error(*post_match(s, pair(JPG_SMALL, JPG_SMALL), "?matcher=lightglue"), 422)
        assert "--matcher-weights" in msg, msg
        info = json.loads(request(s, "GET", "/v1/info")[2])
        assert info["match"]["lightglue"]["loaded"] is False and "weights" not in info["match"]["lightglue"]
        # The nearest-neighbour matcher is the default, as before.
        status, _, body = post_match(s, pair(JPG_SMALL, JPG_SMALL), "?max_keypoints=64")
        assert status == 200 and "conf" in json.loads(body)["match"], body[:300]
    finally:
        assert s.stop() == 0, s.stderr()


def test_weights_of_another_dim_fail_the_start(tmp_path):
    # DISK / ALIKED weights (input_dim 128) cannot take SuperPoint's descriptors: the server does not start.
    path = tmp_path / "disk_lightglue.pth"
    lg_reference.save_pth(lg_reference.random_model(128, seed=1, early=False, prune=False, descriptor_dim=64), path)
    r = subprocess.run([CLI, "serve", "--port", "0", "--weights", os.path.join(os.path.dirname(IMAGES), "weights",
                                                                               "superpoint"),
                        "--warmup", "none", "--matcher-weights", str(path)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1
    assert "--matcher-weights" in r.stderr and "128" in r.stderr, r.stderr
