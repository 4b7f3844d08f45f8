"""Shared fixtures of the Python package tests (run by ctest: tests/CMakeLists.txt sets PYTHONPATH to the build
tree's staged package, SUPERPOINT_RT_CLI, SUPERPOINT_RT_SHARED_DEFAULT and SUPERPOINT_RT_SOURCE).

Missing test data or a missing package is a FAILURE with a clear message, never a skip: only the optional
third-party libraries (torch, cv2) are skipped when absent.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent


def source_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SUPERPOINT_RT_SOURCE", HERE.parent.parent))


def shared_dir() -> pathlib.Path:
    d = os.environ.get("SUPERPOINT_RT_SHARED") or os.environ.get("SUPERPOINT_RT_SHARED_DEFAULT")
    p = pathlib.Path(d) if d else source_dir().parent / "shared"
    if not (p / "weights" / "superpoint" / "model.safetensors").is_file():
        pytest.fail(f"test data not found in {p} (set $SUPERPOINT_RT_SHARED to the shared folder with weights/, "
                    "images/, golden/, tools/)")
    return p


def weights_dir() -> str:
    return str(shared_dir() / "weights" / "superpoint")


def image_path(name: str) -> str:
    p = shared_dir() / "images" / name
    if not p.is_file():
        pytest.fail(f"test image {p} is missing")
    return str(p)


def cli_path() -> str:
    p = os.environ.get("SUPERPOINT_RT_CLI")
    if not p or not os.access(p, os.X_OK):
        pytest.fail(f"$SUPERPOINT_RT_CLI = {p!r} is not an executable superpoint-rt (build with SUPERPOINT_RT_CLI=ON "
                    "and run through ctest)")
    return p


def assert_same(a, b, what: str = "") -> None:
    """Bit-identical features (keypoints, scores, descriptors, image_size, scale)."""
    assert len(a) == len(b), f"{what}: {len(a)} vs {len(b)} keypoints"
    np.testing.assert_array_equal(np.asarray(a.keypoints), np.asarray(b.keypoints), err_msg=f"{what}: keypoints")
    np.testing.assert_array_equal(np.asarray(a.scores), np.asarray(b.scores), err_msg=f"{what}: scores")
    if a.descriptors is None or b.descriptors is None:
        assert a.descriptors is None and b.descriptors is None, f"{what}: descriptors present in one output only"
    else:
        np.testing.assert_array_equal(np.asarray(a.descriptors), np.asarray(b.descriptors),
                                      err_msg=f"{what}: descriptors")
    assert tuple(a.image_size) == tuple(b.image_size), what
    assert tuple(a.scale) == tuple(b.scale), what


@pytest.fixture(scope="session")
def model():
    try:
        from superpoint_rt import SuperPoint
    except ImportError as e:
        pytest.fail(f"superpoint_rt is not importable ({e}); run through ctest (PYTHONPATH = the staged package) or "
                    "pip install the project")
    m = SuperPoint.from_pretrained(weights_dir(), warmup_variants="none", local_files_only=True)
    yield m
    m.close()
