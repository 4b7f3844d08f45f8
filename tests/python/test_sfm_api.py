"""superpoint_rt.colmap_database (python/superpoint_rt/_sfm.py) writes the database `superpoint-rt colmap` writes (the
same C++ code, include/superpoint_rt/colmap.hpp; the database itself is checked in tests/sfm/test_colmap.py), returns
what it wrote, and checks its arguments as the other Python entry points do.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import source_dir

sys.path.insert(0, str(source_dir() / "tests" / "sfm"))
import hloc_reference as H  # noqa: E402
from synthetic import make_synthetic  # noqa: E402

import superpoint_rt  # noqa: E402


def test_python_api_writes_the_same_database(tmp_path):
    s = make_synthetic(tmp_path / "in")
    cli = os.environ.get("SUPERPOINT_RT_CLI")
    if not cli:
        pytest.fail("$SUPERPOINT_RT_CLI is not set (run through ctest)")
    cli_db, py_db = tmp_path / "cli.db", tmp_path / "py.db"
    subprocess.run([cli, "colmap", "--features", s["features"], "--matches", s["matches"], "--pairs", s["pairs"],
                    "-o", cli_db, "--min-match-score", "0.25", "--quiet"], check=True)
    rep = superpoint_rt.colmap_database(py_db, features=s["features"], matches=s["matches"], pairs=s["pairs"],
                                        images=s["images"], min_match_score=0.25)
    assert H.dump(py_db) == H.dump(cli_db)
    assert (rep["images"], rep["cameras"], rep["pairs_listed"], rep["pairs_written"], rep["pairs_duplicate"],
            rep["pairs_self"]) == (6, 6, 16, 15, 1, 0)
    assert rep["keypoints"] == 600 + 700 + 650 + 480 + 512
    assert rep["matches"] == sum(r[1] for r in H.dump(py_db)["matches"]) and rep["database"] == str(py_db)
    # single_camera with images of several sizes, an existing database, bad types, a missing file
    with pytest.raises(ValueError, match="exists"):
        superpoint_rt.colmap_database(py_db, features=s["features"], matches=s["matches"], pairs=s["pairs"])
    args = dict(features=s["features"], matches=s["matches"], pairs=s["pairs"])
    with pytest.raises(ValueError, match="single_camera needs images of one size"):
        superpoint_rt.colmap_database(tmp_path / "x.db", single_camera=True, **args)
    for bad in ("0.5", True):
        with pytest.raises(TypeError, match="min_match_score"):
            superpoint_rt.colmap_database(tmp_path / "x.db", min_match_score=bad, **args)
    with pytest.raises(ValueError, match="min_match_score"):
        superpoint_rt.colmap_database(tmp_path / "x.db", min_match_score=float("nan"), **args)
    with pytest.raises(TypeError, match="overwrite"):
        superpoint_rt.colmap_database(tmp_path / "x.db", overwrite=1, **args)
    with pytest.raises(FileNotFoundError, match="none.h5"):
        superpoint_rt.colmap_database(tmp_path / "x.db", **{**args, "features": tmp_path / "none.h5"})
    assert not list(tmp_path.glob("x.db*")), "a failed call left files"
    superpoint_rt.colmap_database(py_db, overwrite=True, **args)
    assert H.dump(py_db)["matches"] != H.dump(cli_db)["matches"]  # now without the score threshold
