"""Synthetic hloc files over real images of ../shared/images, for the COLMAP export tests (tests/sfm/test_colmap.py,
tests/python/test_sfm_api.py): feature files with random keypoints and descriptors at the images' stored sizes, match
files with random matches0 / matching_scores0, in hloc's layouts (float16 features, int16 matches, float16 scores)."""

from __future__ import annotations

import os
import pathlib

import h5py
import numpy as np
import pytest
from PIL import Image

import hloc_reference as H

HERE = pathlib.Path(__file__).resolve().parent
SACRE = ["hloc_sacre_02928139_3448003521.jpg", "hloc_sacre_03903474_1471484089.jpg",
         "hloc_sacre_10265353_3838484249.jpg", "hloc_sacre_71295362_4051449754.jpg", "lg_sacre_coeur1.jpg",
         "lg_sacre_coeur2.jpg"]
SAME_SIZE = ["berlin01_1600x900.jpg", "berlin02_1600x900.jpg"]


def shared() -> pathlib.Path:
    d = os.environ.get("SUPERPOINT_RT_SHARED") or os.environ.get("SUPERPOINT_RT_SHARED_DEFAULT")
    p = pathlib.Path(d) if d else HERE.parents[2] / "shared"
    if not (p / "images" / SACRE[0]).is_file():
        pytest.fail(f"test images not found in {p} (set $SUPERPOINT_RT_SHARED to the shared folder)")
    return p


def link_images(folder: pathlib.Path, names) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).symlink_to(shared() / "images" / n)
    return folder


def synthetic_features(path, image_dir, counts, seed=0) -> list[str]:
    """A float16 feature file in hloc's layout for the images of image_dir (sizes as stored), `counts` keypoints each
    (spread over the whole image, so some land on float16's rounding of +0.5), random unit descriptors."""
    rng = np.random.default_rng(seed)
    names = sorted(p.name for p in image_dir.iterdir())
    with h5py.File(str(path), "w") as f:
        for name, n in zip(names, counts):
            w, h = Image.open(image_dir / name).size
            g = f.create_group(name)
            kp = rng.uniform([-0.5, -0.5], [w - 0.5, h - 0.5], (n, 2)).astype(np.float16)
            g.create_dataset("keypoints", data=kp)
            g["keypoints"].attrs["uncertainty"] = 2.0
            g.create_dataset("scores", data=rng.uniform(0, 1, n).astype(np.float16))
            d = rng.normal(size=(256, n))
            g.create_dataset("descriptors", data=(d / np.linalg.norm(d, axis=0, keepdims=True)).astype(np.float16))
            g.create_dataset("image_size", data=np.array([w, h], np.int64))
    return names


def synthetic_matches(path, features, pairs, reversed_pairs=(), seed=1, score_ties=()) -> None:
    """Random matches0 / matching_scores0 in hloc's layout (int16, float16); `score_ties` are scores planted exactly."""
    rng = np.random.default_rng(seed)
    with h5py.File(str(features), "r") as f, h5py.File(str(path), "w") as fd:
        for a, b in pairs:
            if (a, b) in reversed_pairs:
                a, b = b, a
            n0, n1 = len(f[a]["keypoints"]), len(f[b]["keypoints"])
            m = np.full(n0, -1, np.int16)
            if n1:
                take = rng.random(n0) < 0.4
                m[take] = rng.integers(0, n1, int(take.sum()))
            s = rng.uniform(0, 1, n0).astype(np.float16)
            s[: len(score_ties)] = np.array(score_ties, np.float16)[: n0]
            g = fd.create_group(H.names_to_pair(a, b))
            g.create_dataset("matches0", data=m)
            g.create_dataset("matching_scores0", data=s)



def make_synthetic(d: pathlib.Path) -> dict:
    """The Sacre Coeur images with synthetic features (one image without keypoints) and matches: a pair list with a
    repeated pair (listed both ways), a pair listed with the larger image id first and a pair stored reversed in the
    match file; some scores are exactly 0.7 (0.7002 in float16) or 0. Returns the paths and the image names."""
    images = link_images(d / "images", SACRE)
    feats = d / "feats.h5"
    names = synthetic_features(feats, images, [600, 0, 700, 650, 480, 512])
    pairs = H.exhaustive_pairs(names)
    pairs[3] = pairs[3][::-1]          # larger id first
    pairs.append(pairs[0][::-1])       # repeated, the other way round
    stored = pairs[:-1]                # the match file holds each unordered pair once
    matches = d / "matches.h5"
    synthetic_matches(matches, feats, stored, reversed_pairs={stored[5]}, score_ties=[0.7] * 5 + [0.0] * 5)
    pairs_txt = d / "pairs.txt"
    H.write_pairs(pairs_txt, pairs)
    return {"dir": d, "images": images, "features": feats, "matches": matches, "pairs": pairs_txt, "names": names}
