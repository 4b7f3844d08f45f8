"""hloc's pair list and COLMAP import, re-written in numpy + pycolmap from hloc's published code (read, not copied), to
check `superpoint-rt colmap` (src/sfm/) against (hloc's matcher has its own reference: tests/match/hloc_nn_reference.py):

- hloc/pairs_from_exhaustive.py: every (names[i], names[j]) with i < j, one "a b" per line, joined by "\\n";
- hloc/utils/parsers.py names_to_pair: the group of a pair in a match file;
- hloc/reconstruction.py create_empty_db + import_images (pycolmap.import_images with a CameraMode) + get_image_ids,
  and hloc/triangulation.py import_features (get_keypoints, keypoints += 0.5, db.write_keypoints) and import_matches
  ([p.split() for p in f.readlines()], the first of each unordered pair, get_matches, matches[scores >
  min_match_score], db.write_matches), with hloc/utils/io.py get_keypoints / find_pair / get_matches.
"""

from __future__ import annotations

import pathlib
import sqlite3

import h5py
import numpy as np


def names_to_pair(name0: str, name1: str, separator: str = "/") -> str:
    return separator.join((name0.replace("/", "-"), name1.replace("/", "-")))


def exhaustive_pairs(names: list[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(names) for j, b in enumerate(names) if j > i]


def write_pairs(path, pairs) -> None:
    pathlib.Path(path).write_text("\n".join(" ".join(p) for p in pairs))


def _find_pair(fd, name0, name1):
    for sep in ("/", "_"):
        if names_to_pair(name0, name1, sep) in fd:
            return names_to_pair(name0, name1, sep), False
        if names_to_pair(name1, name0, sep) in fd:
            return names_to_pair(name1, name0, sep), True
    raise ValueError(f"Could not find pair {(name0, name1)}")


def get_matches(path, name0, name1):
    with h5py.File(str(path), "r", libver="latest") as fd:
        pair, reverse = _find_pair(fd, name0, name1)
        matches = fd[pair]["matches0"].__array__()
        scores = fd[pair]["matching_scores0"].__array__()
    idx = np.where(matches != -1)[0]
    matches = np.stack([idx, matches[idx]], -1)
    if reverse:
        matches = np.flip(matches, -1)
    return matches, scores[idx]


def hloc_import(database, image_dir, features, matches, pairs_path, camera_mode, min_match_score=None) -> None:
    """hloc's reconstruction.main up to the geometric verification: a COLMAP database made by pycolmap."""
    import pycolmap

    with pycolmap.Database.open(str(database)):
        pass
    pycolmap.import_images(str(database), str(image_dir), camera_mode, image_names=[])
    with pycolmap.Database.open(str(database)) as db:
        image_ids = {im.name: im.image_id for im in db.read_all_images()}
        with h5py.File(str(features), "r", libver="latest") as f:
            for name, image_id in image_ids.items():
                keypoints = f[name]["keypoints"].__array__()
                keypoints += 0.5  # COLMAP origin
                db.write_keypoints(image_id, keypoints)
        with open(str(pairs_path)) as f:
            pairs = [p.split() for p in f.readlines()]
        matched = set()
        for name0, name1 in pairs:
            id0, id1 = image_ids[name0], image_ids[name1]
            if len({(id0, id1), (id1, id0)} & matched) > 0:
                continue
            m, scores = get_matches(matches, name0, name1)
            if min_match_score:
                m = m[scores > min_match_score]
            db.write_matches(id0, id1, m)
            matched |= {(id0, id1), (id1, id0)}


TABLES = ("rigs", "rig_sensors", "cameras", "frames", "frame_data", "images", "pose_priors", "keypoints",
          "descriptors", "matches", "two_view_geometries")


def dump(database) -> dict:
    """Every row of every COLMAP table (blobs as bytes), sorted, and PRAGMA user_version."""
    con = sqlite3.connect(str(database))
    try:
        out = {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}
        out["user_version"] = con.execute("PRAGMA user_version").fetchone()[0]
        out["sqlite_sequence"] = sorted(con.execute("SELECT * FROM sqlite_sequence").fetchall())
    finally:
        con.close()
    return out


def schema(database) -> dict:
    """Columns (name, type, not null, default, primary key) and indexes (name, unique, columns) of every table."""
    con = sqlite3.connect(str(database))
    try:
        out = {}
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
            cols = [r[1:] for r in con.execute(f"PRAGMA table_info({t})")]
            idx = sorted((r[1], r[2], tuple(c[2] for c in con.execute(f"PRAGMA index_info({r[1]})")))
                         for r in con.execute(f"PRAGMA index_list({t})"))
            fks = sorted(r[2:] for r in con.execute(f"PRAGMA foreign_key_list({t})"))
            out[t] = (cols, idx, fks)
        checks = {t: sql for t, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'")
                  if "CHECK" in (sql or "")}
        out["checks"] = {t: " ".join(sql[sql.index("CHECK"):].split()) for t, sql in checks.items()}
    finally:
        con.close()
    return out
