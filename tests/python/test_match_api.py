"""superpoint_rt.match, match_features, pairs_from_* and read_matches (issue 20): equal to a reference of hloc's
nearest-neighbour matcher (tests/match/hloc_nn_reference.py) exactly on descriptors whose similarities are exact
(ties everywhere, 0-3 keypoints), within near-ties on real features; the accepted inputs; the argument checks; the
file API equal to the command line's."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import cli_path, image_path, source_dir, weights_dir

sys.path.insert(0, str(source_dir() / "tests" / "match"))
import hloc_nn_reference as ref  # noqa: E402

import superpoint_rt  # noqa: E402

EPS = 256 * 2.0 ** -24  # float32 summation error of a dot product of two unit vectors of 256 values


def dyadic(rng, n, dim, levels=2):
    """Values k / 4 with |k| <= levels: every product and sum is exact in float32 (the GEMM's order cannot matter),
    and few distinct values give many exact ties of similarity."""
    return (rng.integers(-levels, levels + 1, size=(n, dim)) / 4.0).astype(np.float32)


@pytest.mark.parametrize("conf", list(ref.CONFS))
def test_exactly_the_reference_on_awkward_sizes_with_ties(conf):
    rng = np.random.default_rng(20)
    c = ref.CONFS[conf]
    for n0 in (0, 1, 2, 3, 17, 64):
        for n1 in (0, 1, 2, 5, 33):
            for dim in (1, 4, 256):
                a, b = dyadic(rng, n0, dim), dyadic(rng, n1, dim)
                m0, s0 = superpoint_rt.match(a, b, conf, return_matches0=True)
                rm0, rs0 = ref.nearest_neighbor(ref.similarity(a, b), **c)
                np.testing.assert_array_equal(m0, rm0, err_msg=f"{conf} {n0}x{n1}x{dim}")
                np.testing.assert_array_equal(s0.view(np.uint32), rs0.view(np.uint32), err_msg=f"{n0}x{n1}x{dim}")


def test_overrides_and_the_pair_form():
    rng = np.random.default_rng(3)
    a, b = dyadic(rng, 50, 8, 1), dyadic(rng, 40, 8, 1)
    sim = ref.similarity(a, b)
    for kw, want in [(dict(ratio=0.9), dict(ratio=0.9, distance=None, mutual=True)),
                     (dict(mutual=False), dict(ratio=None, distance=None, mutual=False)),
                     (dict(distance=1.5, mutual=False), dict(ratio=None, distance=1.5, mutual=False)),
                     (dict(ratio=0, distance=0), dict(ratio=None, distance=None, mutual=True))]:
        m0, s0 = superpoint_rt.match(a, b, **kw, return_matches0=True)
        rm0, rs0 = ref.nearest_neighbor(sim, **want)
        np.testing.assert_array_equal(m0, rm0, err_msg=str(kw))
        # The (K, 2) form is hloc's get_matches of that result.
        pairs, scores = superpoint_rt.match(a, b, **kw)
        i = np.nonzero(rm0 >= 0)[0]
        assert pairs.dtype == np.int64 and pairs.shape == (len(i), 2)
        np.testing.assert_array_equal(pairs, np.stack([i, rm0[i]], 1))
        np.testing.assert_array_equal(scores, rs0[i])
    # NN-ratio with ratio overridden to 0 is NN-mutual.
    np.testing.assert_array_equal(superpoint_rt.match(a, b, "NN-ratio", ratio=0)[0], superpoint_rt.match(a, b)[0])


@pytest.fixture(scope="module")
def outputs():
    with superpoint_rt.SuperPoint.from_pretrained(weights_dir(), warmup_variants="minimal") as model:
        return model([image_path("lg_sacre_coeur1.jpg"), image_path("lg_sacre_coeur2.jpg")],
                     preset="hloc:superpoint_aachen")


def test_real_outputs_equal_the_reference_but_near_ties(outputs):
    a, b = outputs
    sim = ref.similarity(a.descriptors, b.descriptors)
    for conf, c in ref.CONFS.items():
        m0, s0 = superpoint_rt.match(a, b, conf, return_matches0=True)
        rm0, rs0 = ref.nearest_neighbor(sim, **c)
        differ = m0 != rm0
        assert not (differ & ~ref.near_tie_rows(sim, c["ratio"], c["distance"], c["mutual"], EPS)).any(), conf
        assert differ.sum() <= len(m0) // 1000
        np.testing.assert_allclose(s0[~differ], rs0[~differ], rtol=0, atol=4 * EPS)
        if conf == "NN-mutual":
            assert (m0 >= 0).sum() > 100  # two views of one scene (the ratio and distance tests keep few here)
    # Every input form gives the same result; the thread count does not change it.
    want = superpoint_rt.match(a, b)
    for x, y in [(a.descriptors, b.descriptors), ({"descriptors": a.descriptors}, {"descriptors": b.descriptors}),
                 (np.asfortranarray(a.descriptors), b.descriptors.astype(np.float64)),
                 (a.descriptors[None], b.descriptors[None])]:
        got = superpoint_rt.match(x, y)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    for threads in (1, 2, 3):
        np.testing.assert_array_equal(superpoint_rt.match(a, b, threads=threads)[0], want[0])


def test_torch_tensors_and_lightglue_dicts(outputs):
    torch = pytest.importorskip("torch")
    a, b = outputs
    want = superpoint_rt.match(a, b)
    got = superpoint_rt.match(torch.from_numpy(a.descriptors), b.to_lightglue())
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("kw,exc,word", [
    (dict(conf="superglue"), ValueError, "conf"), (dict(conf=1), TypeError, "conf"),
    (dict(ratio=1.5), ValueError, "ratio"), (dict(ratio=float("nan")), ValueError, "ratio"),
    (dict(ratio="0.8"), TypeError, "ratio"), (dict(distance=-1), ValueError, "distance"),
    (dict(mutual=1), TypeError, "mutual"), (dict(threads=-1), ValueError, "threads"),
    (dict(threads=1.5), TypeError, "threads")])
def test_argument_errors_name_the_argument(kw, exc, word):
    a = np.eye(3, dtype=np.float32)
    with pytest.raises(exc, match=word):
        superpoint_rt.match(a, a, **kw)


def test_input_errors():
    a = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="different dims"):
        superpoint_rt.match(a, np.eye(4, dtype=np.float32))
    with pytest.raises(ValueError, match=r"\(N, D\)"):
        superpoint_rt.match(a, np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="floats"):
        superpoint_rt.match(a, np.eye(3, dtype=np.int32))
    with pytest.raises(ValueError, match="no descriptors"):
        superpoint_rt.match({"descriptors": None}, a)


def test_files_api_equals_the_command_line(outputs, tmp_path):
    import h5py

    a, b = outputs
    feats = tmp_path / "feats.h5"
    with h5py.File(feats, "w") as f:  # hloc's layout: (D, N) float16
        for name, o in (("x/a.jpg", a), ("b.jpg", b), ("c.jpg", a)):
            f.create_group(name).create_dataset("descriptors", data=o.descriptors.T.astype(np.float16))
    assert superpoint_rt.pairs_from_exhaustive(feats, output=tmp_path / "p.txt") == [
        ("b.jpg", "c.jpg"), ("b.jpg", "x/a.jpg"), ("c.jpg", "x/a.jpg")]
    assert superpoint_rt.read_pairs(tmp_path / "p.txt") == superpoint_rt.pairs_from_exhaustive(feats)
    report = superpoint_rt.match_features(feats, tmp_path / "p.txt", tmp_path / "py.h5", "NN-ratio")
    assert report["matched"] == 3 and report["images_read"] == 3 and report["skipped"] == 0
    assert superpoint_rt.match_features(feats, tmp_path / "p.txt", tmp_path / "py.h5", "NN-ratio")["skipped"] == 3
    r = subprocess.run([cli_path(), "match", "--features", feats, "--pairs", tmp_path / "p.txt", "-o",
                        tmp_path / "cli.h5", "--conf", "NN-ratio", "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "py.h5") as p, h5py.File(tmp_path / "cli.h5") as c:
        for key in ("b.jpg/c.jpg", "b.jpg/x-a.jpg", "c.jpg/x-a.jpg"):
            np.testing.assert_array_equal(p[key]["matches0"][()], c[key]["matches0"][()])
            np.testing.assert_array_equal(p[key]["matching_scores0"][()], c[key]["matching_scores0"][()])
    # read_matches is hloc's get_matches, either order; the reversed pair comes back with its columns swapped.
    m, s = superpoint_rt.read_matches(tmp_path / "py.h5", "c.jpg", "b.jpg")
    m2, s2 = superpoint_rt.read_matches(tmp_path / "py.h5", "b.jpg", "c.jpg")
    np.testing.assert_array_equal(m, m2[:, ::-1])
    np.testing.assert_array_equal(s, s2)
    with pytest.raises(FileNotFoundError, match="no pair"):
        superpoint_rt.read_matches(tmp_path / "py.h5", "b.jpg", "nothing.jpg")
    # A group whose matches0 holds an entry that is neither -1 nor an index, or is not integer, or whose scores have
    # another length, is a malformed file (hloc's get_matches would index with it).
    for m0, scores, needle in ((np.array([0, -2], np.int16), [0.5, 0.5], "entry 1 = -2"),
                               (np.array([0, 1], np.float32), [0.5, 0.5], "not an integer"),
                               (np.array([0, 1], np.int16), [0.5], "1 entries, expected (2,)")):
        with h5py.File(tmp_path / "bad.h5", "w") as f:
            f.create_dataset("b.jpg/c.jpg/matches0", data=m0)
            f.create_dataset("b.jpg/c.jpg/matching_scores0", data=np.array(scores, np.float16))
        with pytest.raises(ValueError, match=re.escape(needle)):
            superpoint_rt.read_matches(tmp_path / "bad.h5", "b.jpg", "c.jpg")
    # The file path matches the float16 descriptors as stored: equal to matching them in memory.
    x, y = (a.descriptors.astype(np.float16).astype(np.float32), b.descriptors.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(superpoint_rt.read_matches(tmp_path / "py.h5", "c.jpg", "x/a.jpg")[0],
                                  superpoint_rt.match(x, x, "NN-ratio")[0])
    np.testing.assert_array_equal(superpoint_rt.read_matches(tmp_path / "py.h5", "b.jpg", "c.jpg")[0],
                                  superpoint_rt.match(y, x, "NN-ratio")[0])


def test_pairs_from_sequential():
    names = [f"{i}.jpg" for i in range(6)]
    assert superpoint_rt.pairs_from_sequential(names, 2) == [
        ("0.jpg", "1.jpg"), ("0.jpg", "2.jpg"), ("1.jpg", "2.jpg"), ("1.jpg", "3.jpg"), ("2.jpg", "3.jpg"),
        ("2.jpg", "4.jpg"), ("3.jpg", "4.jpg"), ("3.jpg", "5.jpg"), ("4.jpg", "5.jpg")]
    assert ("0.jpg", "4.jpg") in superpoint_rt.pairs_from_sequential(names, 2, quadratic=True)
    assert ("0.jpg", "5.jpg") in superpoint_rt.pairs_from_sequential(names, 1, loop_stride=5)
    with pytest.raises(ValueError, match="window"):
        superpoint_rt.pairs_from_sequential(names, 0)
    with pytest.raises(TypeError, match="loop_stride"):
        superpoint_rt.pairs_from_sequential(names, 1, loop_stride=1.5)
