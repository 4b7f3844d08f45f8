"""`superpoint-rt colmap` (src/sfm/, include/superpoint_rt/colmap.hpp; the Python function: tests/python/test_sfm_api.py):

- the database equals, table by table and byte by byte, the one hloc's reconstruction.py import makes with pycolmap
  (pycolmap.import_images + import_features + import_matches, re-written in tests/sfm/hloc_reference.py): cameras,
  rigs, frames, images, keypoints (+0.5, in float16 as numpy adds it), matches (pair ids, swapped columns, reversed
  groups, repeated pairs, min_match_score in float16), per-image and single cameras, and the schema pycolmap 4.x
  creates;
- COLMAP reconstructs from it: docs/SFM.md's pipeline, superpoint-rt extract -> pairs --exhaustive -> match
  (NN-mutual; its equality to hloc's matcher is tests/match's) -> colmap -> pycolmap.verify_matches +
  incremental_mapping, registers every image of the Sacre Coeur photos of ../shared/images;
- bad inputs are named errors (exit code 2 / 1) that leave no database behind: an existing database, a pair missing
  from the match file, a name missing from the feature file, matches0 of the wrong length or with out-of-range
  indices, an oversized keypoints dataset (refused before it is read), features extracted with the EXIF orientation
  applied while COLMAP reads the stored pixels, single_camera with images of different sizes;
- superpoint-rt plot-matches draws a pair over Pillow's resize of both images, coloured by COLMAP's verification.

pycolmap (PyPI, scripts/setup-venv.sh) and h5py are required.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import h5py
import numpy as np
import pycolmap
import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import hloc_reference as H  # noqa: E402
from synthetic import (SACRE, SAME_SIZE, link_images, make_synthetic, shared,  # noqa: E402
                       synthetic_features, synthetic_matches)


def cli() -> str:
    p = os.environ.get("SUPERPOINT_RT_CLI")
    if not p or not os.access(p, os.X_OK):
        pytest.fail(f"$SUPERPOINT_RT_CLI = {p!r} is not an executable superpoint-rt (run through ctest)")
    return p


def run(*args, ok=True):
    r = subprocess.run([cli(), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return make_synthetic(tmp_path_factory.mktemp("synthetic"))


def colmap_args(s, db, *extra):
    return ["colmap", "--features", s["features"], "--matches", s["matches"], "--pairs", s["pairs"], "-o", db, *extra]


def test_database_equals_hlocs_import(synthetic, tmp_path):
    ours, ref = tmp_path / "ours.db", tmp_path / "ref.db"
    r = run(*colmap_args(synthetic, ours, "--images", synthetic["images"]))
    assert "6 images, 6 cameras" in r.stdout and "skipped 1 repeated" in r.stdout, r.stdout
    H.hloc_import(ref, synthetic["images"], synthetic["features"], synthetic["matches"], synthetic["pairs"],
                  pycolmap.CameraMode.PER_IMAGE)
    a, b = H.dump(ours), H.dump(ref)
    assert all(row[5] == 0 for row in b["cameras"]), "the reference used an EXIF focal length: pick other images"
    for t in b:
        assert a[t] == b[t], f"table {t} differs from hloc's import"
    assert len(a["matches"]) == 15 and len(a["keypoints"]) == 6
    assert any(row[3] is None for row in a["keypoints"]), "the image without keypoints has NULL data, as COLMAP"
    # the float16 rounding of +0.5 is exercised: some keypoints are not the float32 sum
    with h5py.File(synthetic["features"]) as f:
        kp = f[synthetic["names"][0]]["keypoints"][()]
    blob = dict((row[0], row[3]) for row in a["keypoints"])[1]
    got = np.frombuffer(blob, np.float32).reshape(-1, 2)
    assert np.array_equal(got, (kp + np.float16(0.5)).astype(np.float32))
    assert np.any(got != kp.astype(np.float32) + 0.5)


def test_min_match_score_in_float16_as_hloc(synthetic, tmp_path):
    # 0.7 rounds up to 0.7002 in float16; the planted scores 0.7002 are above 0.7 in float64 but not in float16,
    # where numpy compares them (hloc's matches[scores > min_match_score]).
    ours, ref = tmp_path / "ours.db", tmp_path / "ref.db"
    run(*colmap_args(synthetic, ours, "--min-match-score", "0.7"))
    H.hloc_import(ref, synthetic["images"], synthetic["features"], synthetic["matches"], synthetic["pairs"],
                  pycolmap.CameraMode.PER_IMAGE, min_match_score=0.7)
    a, b = H.dump(ours), H.dump(ref)
    assert a["matches"] == b["matches"]
    everything, zero = tmp_path / "all.db", tmp_path / "zero.db"
    run(*colmap_args(synthetic, everything))
    assert 0 < sum(r[1] for r in a["matches"]) < sum(r[1] for r in H.dump(everything)["matches"])
    # hloc's `if min_match_score:` filters nothing at 0 (a score of exactly 0 stays)
    run(*colmap_args(synthetic, zero, "--min-match-score", "0"))
    assert H.dump(zero)["matches"] == H.dump(everything)["matches"]


def test_single_camera_equals_hlocs_single(tmp_path):
    images = link_images(tmp_path / "images", SAME_SIZE)
    feats, matches, pairs = tmp_path / "f.h5", tmp_path / "m.h5", tmp_path / "pairs.txt"
    names = synthetic_features(feats, images, [300, 400])
    H.write_pairs(pairs, H.exhaustive_pairs(names))
    synthetic_matches(matches, feats, H.exhaustive_pairs(names))
    ours, ref = tmp_path / "ours.db", tmp_path / "ref.db"
    r = run("colmap", "--features", feats, "--matches", matches, "--pairs", pairs, "-o", ours, "--single-camera")
    assert "2 images, 1 camera," in r.stdout
    H.hloc_import(ref, images, feats, matches, pairs, pycolmap.CameraMode.SINGLE)
    assert H.dump(ours) == H.dump(ref)


def test_schema_is_pycolmaps(synthetic, tmp_path):
    ours, fresh = tmp_path / "ours.db", tmp_path / "fresh.db"
    run(*colmap_args(synthetic, ours))
    with pycolmap.Database.open(str(fresh)):
        pass
    assert H.schema(ours) == H.schema(fresh)
    assert H.dump(ours)["user_version"] == H.dump(fresh)["user_version"] == 4020100, pycolmap.__version__
    # pycolmap opens it, reads it back and finds nothing to migrate
    with pycolmap.Database.open(str(ours)) as db:
        assert db.num_images() == 6 and db.num_keypoints() == 600 + 700 + 650 + 480 + 512
        assert db.exists_matches(1, 2) and db.read_matches(2, 1).shape[1] == 2


@pytest.fixture(scope="module")
def sacre(tmp_path_factory):
    """The six Sacre Coeur photos through superpoint-rt extract (hloc:superpoint_aachen, float16: hloc's
    feats-superpoint-n4096-r1024), superpoint-rt pairs --exhaustive and superpoint-rt match (NN-mutual)."""
    d = tmp_path_factory.mktemp("sacre")
    images = link_images(d / "images", SACRE)
    feats = d / "feats.h5"
    run("extract", images, "--preset", "hloc:superpoint_aachen", "--as-half", "-o", feats,
        "--weights", shared() / "weights" / "superpoint", "--quiet")
    with h5py.File(str(feats)) as f:
        names = sorted(f.keys())
    pairs_txt, matches = d / "pairs.txt", d / "matches.h5"
    run("pairs", "--exhaustive", feats, "-o", pairs_txt, "--quiet")
    assert pairs_txt.read_text() == "\n".join(" ".join(p) for p in H.exhaustive_pairs(names))
    run("match", "--features", feats, "--pairs", pairs_txt, "--conf", "NN-mutual", "-o", matches, "--quiet")
    return {"dir": d, "images": images, "features": feats, "matches": matches, "pairs": pairs_txt, "names": names}


@pytest.fixture(scope="module")
def verified(sacre):
    """superpoint-rt colmap, then hloc's estimation_and_geometric_verification (pycolmap.verify_matches with hloc's
    RANSAC options), seeded: RANSACOptions.random_seed (pycolmap.set_random_seed does not reach the verification's
    RANSAC, whose default seed -1 draws a new one per run)."""
    db = sacre["dir"] / "database.db"
    run(*colmap_args(sacre, db, "--images", sacre["images"]))
    pycolmap.verify_matches(str(db), str(sacre["pairs"]),
                            options=dict(ransac=dict(max_num_trials=20000, min_inlier_ratio=0.1, random_seed=0)))
    return db


def test_pycolmap_reconstructs_every_image(sacre, verified, tmp_path):
    # hloc's incremental_mapping, the same run every time: seeded and on one thread (with two, the bundle
    # adjustments' order changes the model from run to run; it once left one image unregistered)
    maps = pycolmap.incremental_mapping(str(verified), str(sacre["images"]), str(tmp_path / "sfm"),
                                        options=dict(random_seed=0, num_threads=1))
    assert maps, "no reconstruction"
    best = max(maps.values(), key=lambda r: r.num_reg_images())
    registered = sorted(best.images[i].name for i in best.reg_image_ids())
    assert registered == sacre["names"], f"registered {registered}"
    # structure, not just poses: points seen by three images on average, within COLMAP's reprojection threshold
    assert best.num_points3D() > 100 and best.compute_mean_track_length() > 2.5, best.summary()
    assert best.compute_mean_reprojection_error() < 2.0, best.summary()


def test_plot_matches(sacre, verified, tmp_path):
    """superpoint-rt plot-matches: both images at one height (Pillow's bilinear resize, so every pixel no line touches
    is Pillow's), one line per match, the counts of the match file and of COLMAP's inliers."""
    a, b = "lg_sacre_coeur1.jpg", "lg_sacre_coeur2.jpg"  # 1024x731 and 768x1024
    png = tmp_path / "pair.png"
    base = ["plot-matches", a, b, "--features", sacre["features"], "--matches", sacre["matches"], "--images",
            sacre["images"], "-o", png]
    r = run(*base, "--database", verified)
    m, _ = H.get_matches(sacre["matches"], a, b)
    con = __import__("sqlite3").connect(str(verified))
    ids = dict(con.execute("SELECT name, image_id FROM images"))
    rows = con.execute("SELECT rows FROM two_view_geometries WHERE pair_id = ?",
                       ((min(ids[a], ids[b]) * 2147483647 + max(ids[a], ids[b])),)).fetchone()[0]
    con.close()
    assert f": {len(m)} matches, {rows} verified by COLMAP" in r.stdout, r.stdout
    from PIL import Image
    im = np.asarray(Image.open(png).convert("RGB"))
    h = 731  # the smaller height
    w0, w1 = 1024, round(768 * h / 1024)
    gap = max(4, h // 100)
    assert im.shape == (h, w0 + gap + w1, 3), im.shape
    left = np.asarray(Image.open(sacre["images"] / a).convert("RGB"))
    right = np.asarray(Image.open(sacre["images"] / b).convert("RGB").resize((w1, h), Image.BILINEAR))
    for got, want in ((im[:, :w0], left), (im[:, w0 + gap:], right)):
        same = np.all(got == want, axis=2).mean()
        assert 0.5 < same < 0.999, f"{same:.3f} of the pixels are the image's: no lines, or not the image"
    green = (im[..., 1] > 200) & (im[..., 0] < 80) & (im[..., 2] < 80)
    assert green.sum() > 100 * rows, "the inliers are drawn green"
    # --max-lines draws an even spread of the matches; the counts stay those of all
    r = run(*base, "--database", verified, "--max-lines", "20")
    assert f": {len(m)} matches (20 drawn), {rows} verified" in r.stdout, r.stdout
    fewer = np.asarray(Image.open(png).convert("RGB"))
    assert ((fewer[..., 1] > 200) & (fewer[..., 0] < 80) & (fewer[..., 2] < 80)).sum() < green.sum()
    # without a database: by score; an unverified pair is a named error; a bad height a usage error
    assert f": {len(m)} matches\n" in run(*base, "--height", "300").stdout
    assert Image.open(png).size[1] == 300
    unverified = tmp_path / "unverified.db"
    run(*colmap_args(sacre, unverified))
    r = run(*base, "--database", unverified, ok=False)
    assert r.returncode == 1 and "no verified geometry" in r.stderr, r.stderr
    assert run(*base, "--height", "9", ok=False).returncode == 2
    assert run("plot-matches", a, "--features", sacre["features"], ok=False).returncode == 2


def run_db(s, db, *extra):
    run(*colmap_args(s, db, *extra))
    return db


def _refused(s, db, code, *needles, **paths):
    """Runs colmap with some inputs replaced; asserts the exit code, the message and that no database (or temporary
    file) was left."""
    s = {**s, **paths}
    r = run(*colmap_args(s, db), ok=False)
    assert r.returncode == code, f"exit {r.returncode}: {r.stdout}\n{r.stderr}"
    for n in needles:
        assert n in r.stderr, f"{n!r} not in: {r.stderr}"
    assert not db.exists() and not list(db.parent.glob(db.name + ".*.tmp")), "a failed export left files"
    return r.stderr


def test_bad_inputs_are_named_errors(synthetic, tmp_path):
    s, names = synthetic, synthetic["names"]
    db = tmp_path / "out" / "database.db"
    db.parent.mkdir()
    # an existing database is kept
    db.write_bytes(b"keep")
    r = run(*colmap_args(s, db), ok=False)
    assert r.returncode == 2 and "exists" in r.stderr and db.read_bytes() == b"keep"
    run(*colmap_args(s, db, "--overwrite"))
    assert H.dump(db)["images"]
    db.unlink()
    # a pair of an image with itself is skipped (hloc's pair lists have none; COLMAP has no such pair)
    self_pairs = tmp_path / "self.txt"
    self_pairs.write_text(s["pairs"].read_text() + f"\n{names[2]} {names[2]}\n")
    assert "and 1 self pairs" in run(*colmap_args({**s, "pairs": self_pairs}, db)).stdout
    assert H.dump(db)["matches"] == H.dump(run_db(s, tmp_path / "plain.db"))["matches"]
    db.unlink()
    # a pair the match file does not have; a name the feature file does not have; a malformed pair list
    extra = tmp_path / "extra.txt"
    extra.write_text(s["pairs"].read_text() + f"\n{names[0]} {names[0]}\n{names[1]} nowhere.jpg\n")
    _refused(s, db, 1, "nowhere.jpg", "is not in", pairs=extra)
    missing = tmp_path / "missing.txt"
    with h5py.File(str(s["matches"])) as f:
        first = sorted(f.keys())[0]
    H.write_pairs(missing, [(names[0], names[1]), (names[2], names[3])])
    only = tmp_path / "only.h5"
    with h5py.File(str(s["matches"])) as f, h5py.File(str(only), "w") as g:
        f.copy(f[first], g, first)
    _refused(s, db, 1, "no pair (", "in either order", matches=only, pairs=missing)
    bad_line = tmp_path / "bad.txt"
    bad_line.write_text(f"{names[0]} {names[1]}\n{names[0]} {names[1]} {names[2]}\n")
    _refused(s, db, 2, "bad.txt: line 2: more than two names", pairs=bad_line)
    # matches0 of the wrong length, and an index beyond the other image's keypoints
    for kind in ("length", "index"):
        broken = tmp_path / f"{kind}.h5"
        with h5py.File(str(s["matches"])) as f, h5py.File(str(broken), "w") as g:
            for k in f:
                for k2 in f[k]:
                    m = f[k][k2]["matches0"][()]
                    if len(m) and kind == "length":
                        m = m[:-1]
                    elif len(m):
                        m[-1] = 30000
                    g.create_dataset(f"{k}/{k2}/matches0", data=m)
                    g.create_dataset(f"{k}/{k2}/matching_scores0", data=f[k][k2]["matching_scores0"][()])
        _refused(s, db, 2, "matches0", "expected (" if kind == "length" else "30000", matches=broken)
    # a keypoints dataset declared larger than a record's limit (2^27 values, match/h5.hpp) is refused before it is
    # read (chunked: nothing stored)
    huge = tmp_path / "huge.h5"
    with h5py.File(str(huge), "w") as g:
        g.create_dataset(f"{names[0]}/keypoints", shape=((1 << 26) + 1, 2), dtype="f2", chunks=(1024, 2))
        g.create_dataset(f"{names[0]}/image_size", data=np.array([780, 1063]))
    assert huge.stat().st_size < 1 << 20
    one = tmp_path / "one.txt"
    one.write_text("")
    _refused(s, db, 2, "keypoints: 134217730 values (at most 134217728)", features=huge, pairs=one)
    # single_camera needs one image size
    r = run(*colmap_args(s, db, "--single-camera"), ok=False)
    assert r.returncode == 2 and "single_camera needs images of one size" in r.stderr and not db.exists()
    # unknown option, missing option
    assert run("colmap", "--nope", ok=False).returncode == 2
    assert "--matches M.h5 is required" in run("colmap", "--features", s["features"], ok=False).stderr


def test_features_with_exif_orientation_applied_are_refused(tmp_path):
    """monstree_IMG_1027.JPG is stored 4032x3024 with EXIF Orientation=6. COLMAP reads the stored pixels (as hloc's
    read_image since #373, the hloc presets' default); features extracted with --exif-orientation are in the
    rotated frame, and the export with --images refuses them instead of writing a camera that does not fit."""
    images = link_images(tmp_path / "images", ["monstree_IMG_1027.JPG"])
    feats = tmp_path / "f.h5"
    with h5py.File(str(feats), "w") as g:
        g.create_dataset("monstree_IMG_1027.JPG/keypoints", data=np.zeros((3, 2), np.float16))
        g.create_dataset("monstree_IMG_1027.JPG/image_size", data=np.array([3024, 4032]))  # rotated (W, H)
    empty = tmp_path / "pairs.txt"
    empty.write_text("")
    matches = tmp_path / "m.h5"
    h5py.File(str(matches), "w").close()
    s = {"features": feats, "matches": matches, "pairs": empty}
    db = tmp_path / "db.db"
    r = run(*colmap_args(s, db, "--images", images), ok=False)
    assert r.returncode == 2 and "EXIF orientation" in r.stderr and "4032x3024" in r.stderr, r.stderr
    run(*colmap_args(s, db))  # without the folder: the features' sizes
    assert H.dump(db)["cameras"][0][2:4] == (3024, 4032)


def test_image_names_leaving_the_folder_are_refused(tmp_path):
    """Issue 32: a feature file's image name '../../dev/zero' made `colmap --images` read /dev/zero until bad_alloc.
    Names that leave the image folder, and image files that are not regular files (a link to a device), are refused
    by name; the header of a real image is read from the file's first bytes."""
    images = link_images(tmp_path / "images", [SACRE[0]])
    (images / "zero.jpg").symlink_to("/dev/zero")
    empty = tmp_path / "pairs.txt"
    empty.write_text("")
    matches = tmp_path / "m.h5"
    h5py.File(str(matches), "w").close()
    db = tmp_path / "db.db"
    for name, message in (("../../dev/zero", "leaves the image folder"), ("zero.jpg", "is not a regular file")):
        feats = tmp_path / f"{name.replace('/', '_')}.h5"
        with h5py.File(str(feats), "w") as g:
            g.create_dataset(f"{name}/keypoints", data=np.zeros((1, 2), np.float16))
            g.create_dataset(f"{name}/image_size", data=np.array([640, 480]))
        s = {"features": feats, "matches": matches, "pairs": empty}
        r = run(*colmap_args(s, db, "--images", images), ok=False)
        assert r.returncode == 2 and message in r.stderr, r.stderr
        assert not db.exists()
