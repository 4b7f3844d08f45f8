"""`superpoint-rt pairs` and `superpoint-rt match` over hloc's files (issue 20 §1-2): the pairs.txt format of hloc's
pairs_from_*.py, matches equal to a reference of hloc's nearest-neighbour matcher (hloc_nn_reference.py) on real
features, hloc's matches.h5 layout read with h5py, resuming (pairs present in either order or with hloc's old
separator are skipped; leftover part files are merged), --overwrite, features_ref, and the errors.

Uses the executable only (runs in the sanitizer build too). Missing h5py, the executable or the test data is a
FAILURE, never a skip.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hloc_nn_reference as ref  # noqa: E402

try:
    import h5py
except ImportError:  # pragma: no cover - the failure message is the point
    h5py = None

# (name in the tree, shared image): overlapping views, names with '/' (hloc's names_to_pair turns them into '-').
IMAGES = [
    ("a/piazza1.jpg", "pt_piazza_san_marco_06795901_3725050516.jpg"),
    ("a/piazza2.jpg", "pt_piazza_san_marco_15148634_5228701572.jpg"),
    ("b/piazza3.jpg", "pt_piazza_san_marco_18627786_5929294590.jpg"),
    ("tum1.png", "tum_fr3_1341847980.722988.png"),
    ("tum2.png", "tum_fr3_1341847981.726650.png"),
]
NAMES = sorted(n for n, _ in IMAGES)
# The largest error of a float32 dot product of two unit vectors of 256 float16 values, whatever the summation
# order: 256 * 2^-24 (|sum| <= 1 by Cauchy-Schwarz). Two GEMMs may disagree only within twice this.
EPS = 256 * 2.0 ** -24


def shared_dir() -> pathlib.Path:
    d = os.environ.get("SUPERPOINT_RT_SHARED") or os.environ.get("SUPERPOINT_RT_SHARED_DEFAULT")
    p = pathlib.Path(d) if d else pathlib.Path(__file__).resolve().parents[3] / "shared"
    if not (p / "weights" / "superpoint" / "model.safetensors").is_file():
        pytest.fail(f"test data not found in {p} (set $SUPERPOINT_RT_SHARED)")
    return p


def cli() -> str:
    p = os.environ.get("SUPERPOINT_RT_CLI")
    if not p or not os.access(p, os.X_OK):
        pytest.fail(f"$SUPERPOINT_RT_CLI = {p!r} is not an executable superpoint-rt (run through ctest)")
    return p


def run(*args, ok=True):
    r = subprocess.run([cli(), *map(str, args)], capture_output=True, text=True, timeout=600)
    if ok:
        assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def features(tmp_path_factory) -> pathlib.Path:
    if h5py is None:
        pytest.fail("h5py is not installed in the test Python (run scripts/setup-venv.sh)")
    root = tmp_path_factory.mktemp("match")
    images = root / "images"
    for name, src in IMAGES:
        (images / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_dir() / "images" / src, images / name)
    out = root / "feats.h5"
    run("extract", images, "--preset", "hloc:superpoint_aachen", "--as-half", "-o", out, "--weights",
        shared_dir() / "weights" / "superpoint", "--quiet")
    return out


def descriptors(path, name) -> np.ndarray:
    """(N, D) float32 as hloc's loader gives them (the stored float16 widened)."""
    with h5py.File(path, "r") as f:
        return f[name]["descriptors"][()].astype(np.float32).T.copy()


def group_names(path):
    names = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Group) and "matches0" in o else None)
    return sorted(names)


def pair_key(a, b, sep="/"):
    return a.replace("/", "-") + sep + b.replace("/", "-")


# --- pairs ---------------------------------------------------------------------------------------------------------


def test_pairs_exhaustive_is_hlocs_file(features, tmp_path):
    expected = "\n".join(f"{NAMES[i]} {NAMES[j]}" for i in range(len(NAMES)) for j in range(i + 1, len(NAMES)))
    run("pairs", "--exhaustive", features, "-o", tmp_path / "p.txt")
    # hloc: f.write("\n".join(" ".join([i, j]) for i, j in pairs)), no newline after the last line.
    assert (tmp_path / "p.txt").read_text() == expected
    # A folder gives the names extract gives; a list file the names it lists (sorted either way).
    run("pairs", "--exhaustive", features.parent / "images", "-o", tmp_path / "d.txt")
    assert (tmp_path / "d.txt").read_text() == expected
    (tmp_path / "list.txt").write_text("# images\n" + "\n".join(reversed(NAMES)) + "\n\n")
    run("pairs", "--exhaustive", tmp_path / "list.txt", "-o", tmp_path / "l.txt")
    assert (tmp_path / "l.txt").read_text() == expected


def sequential_reference(n, window, quadratic, stride):
    """The definition of docs/MATCHING.md: the window, hloc's pairs_from_sequential quadratic overlap, key frames."""
    pairs = []
    for i in range(n - 1):
        for j in range(i + 1, min(i + window + 1, n)):
            pairs.append((i, j))
        if quadratic:
            for k in range(1, window + 1):
                if 2 ** k > window and i + 2 ** k < n:
                    pairs.append((i, i + 2 ** k))
    if stride:
        keys = list(range(0, n, stride))
        pairs += [(a, b) for x, a in enumerate(keys) for b in keys[x + 1:] if (a, b) not in pairs]
    return pairs


@pytest.mark.parametrize("window,quadratic,stride", [(1, False, 0), (2, True, 0), (3, True, 4), (20, False, 5)])
def test_pairs_sequential(tmp_path, window, quadratic, stride):
    names = [f"frame{i:03d}.jpg" for i in range(17)]
    (tmp_path / "list.txt").write_text("\n".join(names))
    args = ["pairs", "--sequential", window, tmp_path / "list.txt", "-o", tmp_path / "p.txt"]
    if quadratic:
        args.append("--quadratic")
    if stride:
        args += ["--loop", "--loop-stride", stride]
    run(*args)
    got = [tuple(ln.split()) for ln in (tmp_path / "p.txt").read_text().split("\n")]
    want = [(names[i], names[j]) for i, j in sequential_reference(len(names), window, quadratic, stride)]
    assert got == want
    assert len(set(got)) == len(got) and not any((b, a) in set(got) for a, b in got)


def test_pairs_from_retrieval_drops_repeats(tmp_path):
    # hloc's parse_retrieval: split at '\n', empty lines skipped, any whitespace between the two names.
    (tmp_path / "r.txt").write_text("a.jpg b.jpg\r\n\na.jpg\tc.jpg\nb.jpg a.jpg\na.jpg b.jpg\n  c.jpg   d.jpg  \n")
    run("pairs", "--from-retrieval", tmp_path / "r.txt", "-o", tmp_path / "p.txt")
    assert (tmp_path / "p.txt").read_text() == "a.jpg b.jpg\na.jpg c.jpg\nc.jpg d.jpg"
    (tmp_path / "names.txt").write_text("a.jpg\nb.jpg\nc.jpg\n")
    r = run("pairs", "--from-retrieval", tmp_path / "r.txt", tmp_path / "names.txt", "-o", tmp_path / "q.txt", ok=False)
    assert r.returncode == 1 and "'d.jpg'" in r.stderr, r.stderr


@pytest.mark.parametrize("args,word", [
    ([], "exactly one of"), (["--exhaustive", "--sequential", "2"], "exactly one of"),
    (["--exhaustive", "--quadratic"], "--sequential"), (["--sequential", "0"], "out of range"),
    (["--exhaustive"], "-o pairs.txt")])
def test_pairs_usage_errors(features, tmp_path, args, word):
    out = [] if word == "-o pairs.txt" else ["-o", tmp_path / "p.txt"]
    r = run("pairs", *args, features, *out, ok=False)
    assert r.returncode == 2 and word in r.stderr, r.stderr


def test_pairs_file_errors_name_the_line(features, tmp_path):
    (tmp_path / "bad.txt").write_text("a.jpg b.jpg\nc.jpg d.jpg e.jpg\n")
    r = run("match", "--features", features, "--pairs", tmp_path / "bad.txt", "-o", tmp_path / "m.h5", ok=False)
    assert r.returncode == 2 and "line 2" in r.stderr and "more than two names" in r.stderr, r.stderr


# --- match ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pairs_file(features) -> pathlib.Path:
    p = features.parent / "pairs.txt"
    run("pairs", "--exhaustive", features, "-o", p)
    return p


@pytest.mark.parametrize("conf", ["NN-mutual", "NN-ratio", "NN-superpoint"])
def test_matches_equal_the_hloc_reference(features, pairs_file, tmp_path, conf):
    out = tmp_path / "m.h5"
    run("match", "--features", features, "--pairs", pairs_file, "-o", out, "--conf", conf, "--quiet")
    c = ref.CONFS[conf]
    exempt = rows = 0
    with h5py.File(out, "r") as f:
        for line in pairs_file.read_text().split("\n"):
            a, b = line.split()
            g = f[pair_key(a, b)]
            assert set(g.keys()) == {"matches0", "matching_scores0"}
            m0, s0 = g["matches0"][()], g["matching_scores0"][()]
            assert m0.dtype == np.int16 and s0.dtype == np.float16
            sim = ref.similarity(descriptors(features, a), descriptors(features, b))
            rm0, rs0 = ref.nearest_neighbor(sim, **c)
            assert m0.shape == rm0.shape == s0.shape
            differ = m0 != rm0
            near = ref.near_tie_rows(sim, c["ratio"], c["distance"], c["mutual"], EPS)
            assert not (differ & ~near).any(), f"{a} {b}: rows {np.nonzero(differ & ~near)[0][:10]} differ"
            exempt += int(differ.sum())
            rows += len(m0)
            # Scores: float16 of (sim + 1) / 2; the similarities differ by their rounding at most.
            same = ~differ & (rs0 > 0)
            np.testing.assert_allclose(s0[same].astype(np.float32), rs0[same].astype(np.float16).astype(np.float32),
                                       rtol=0, atol=2.0 ** -11)
            assert (s0[~differ & (rs0 == 0)] == 0).all()
            assert (m0 >= 0).sum() > 0 or "tum" in a + b
    assert rows > 5000 and exempt <= rows // 1000, (exempt, rows)


def test_file_layout_resume_and_reversed_pairs(features, pairs_file, tmp_path):
    lines = pairs_file.read_text().split("\n")
    out = tmp_path / "m.h5"
    (tmp_path / "first.txt").write_text("\n".join(lines[:3]))
    r = run("match", "--features", features, "--pairs", tmp_path / "first.txt", "-o", out)
    assert "3 pairs matched" in r.stderr
    assert group_names(out) == sorted(pair_key(*ln.split()) for ln in lines[:3])
    with h5py.File(out, "r") as f:
        before = {k: f[k]["matches0"][()] for k in group_names(out)}
    # The same pairs again, one of them reversed, plus the rest: only the rest is matched.
    a, b = lines[0].split()
    (tmp_path / "all.txt").write_text("\n".join([f"{b} {a}"] + lines))
    r = run("match", "--features", features, "--pairs", tmp_path / "all.txt", "-o", out)
    assert f"{len(lines) - 3} pairs matched" in r.stderr and "3 already in" in r.stderr, r.stderr
    assert group_names(out) == sorted(pair_key(*ln.split()) for ln in lines)
    with h5py.File(out, "r") as f:
        for k, v in before.items():
            np.testing.assert_array_equal(f[k]["matches0"][()], v)
    assert not os.path.exists(str(out) + ".parts") and not os.path.exists(str(out) + ".tmp")
    # Everything present: nothing to do.
    r = run("match", "--features", features, "--pairs", pairs_file, "-o", out)
    assert "0 pairs matched" in r.stderr


def test_old_separator_counts_as_present_and_overwrite_rematches(features, pairs_file, tmp_path):
    a, b = pairs_file.read_text().split("\n")[0].split()
    out = tmp_path / "m.h5"
    (tmp_path / "one.txt").write_text(f"{a} {b}")
    with h5py.File(out, "w") as f:  # hloc's older layout: one group "name0_name1"
        g = f.create_group(pair_key(a, b, "_"))
        g.create_dataset("matches0", data=np.full(3, -1, np.int16))
        g.create_dataset("matching_scores0", data=np.zeros(3, np.float16))
    r = run("match", "--features", features, "--pairs", tmp_path / "one.txt", "-o", out)
    assert "0 pairs matched" in r.stderr, r.stderr
    # --overwrite matches it again (hloc's overwrite), written under the current name.
    r = run("match", "--features", features, "--pairs", tmp_path / "one.txt", "-o", out, "--overwrite")
    assert "1 pairs matched" in r.stderr, r.stderr
    with h5py.File(out, "r") as f:
        assert (f[pair_key(a, b)]["matches0"][()] >= 0).sum() > 0


def test_leftover_part_file_is_counted_and_merged(features, pairs_file, tmp_path):
    lines = pairs_file.read_text().split("\n")
    full = tmp_path / "full.h5"
    run("match", "--features", features, "--pairs", pairs_file, "-o", full, "--quiet")
    out = tmp_path / "m.h5"
    parts = tmp_path / "m.h5.parts"
    parts.mkdir()
    key = pair_key(*lines[1].split())
    with h5py.File(full, "r") as src, h5py.File(parts / "part-1-1-0.h5", "w") as dst:
        src.copy(src[key], dst, name=key)  # what a killed run left: one finished part
    r = run("match", "--features", features, "--pairs", pairs_file, "-o", out)
    assert f"{len(lines) - 1} pairs matched" in r.stderr and "1 already in" in r.stderr, r.stderr
    assert group_names(out) == group_names(full) and not parts.exists()
    with h5py.File(out, "r") as f, h5py.File(full, "r") as g:
        for k in group_names(full):
            np.testing.assert_array_equal(f[k]["matches0"][()], g[k]["matches0"][()])
            np.testing.assert_array_equal(f[k]["matching_scores0"][()], g[k]["matching_scores0"][()])


def test_features_ref(features, tmp_path):
    # Queries from one file, references from another (hloc's features_ref): here a copy with the names moved.
    refs = tmp_path / "refs.h5"
    with h5py.File(features, "r") as src, h5py.File(refs, "w") as dst:
        for n in NAMES[:2]:
            src.copy(src[n], dst, name="db/" + n.replace("/", "_"))
    (tmp_path / "p.txt").write_text(f"{NAMES[2]} db/{NAMES[0].replace('/', '_')}")
    out = tmp_path / "m.h5"
    run("match", "--features", features, "--features-ref", refs, "--pairs", tmp_path / "p.txt", "-o", out)
    sim = ref.similarity(descriptors(features, NAMES[2]), descriptors(features, NAMES[0]))
    with h5py.File(out, "r") as f:
        m0 = f[pair_key(NAMES[2], "db/" + NAMES[0].replace("/", "_"))]["matches0"][()]
    rm0, _ = ref.nearest_neighbor(sim)
    assert ((m0 != rm0) & ~ref.near_tie_rows(sim, None, None, True, EPS)).sum() == 0


def fake_features(path, records):
    with h5py.File(path, "w") as f:
        for name, desc in records.items():
            g = f.create_group(name)
            g.create_dataset("descriptors", data=desc)
            g.create_dataset("keypoints", data=np.zeros((desc.shape[-1], 2), np.float32))


def test_match_errors_name_the_input(features, pairs_file, tmp_path):
    out = tmp_path / "m.h5"
    (tmp_path / "missing.txt").write_text(f"{NAMES[0]} nothere.jpg")
    r = run("match", "--features", features, "--pairs", tmp_path / "missing.txt", "-o", out, ok=False)
    assert r.returncode == 1 and "'nothere.jpg'" in r.stderr and "is not in" in r.stderr, r.stderr
    r = run("match", "--features", features, "--pairs", pairs_file, "-o", out, "--ratio", "2", ok=False)
    assert r.returncode == 2 and "--ratio" in r.stderr and "0..1" in r.stderr, r.stderr
    r = run("match", "--features", features, "-o", out, ok=False)
    assert r.returncode == 2 and "--pairs" in r.stderr
    r = run("match", "--features", tmp_path / "none.h5", "--pairs", pairs_file, "-o", out, ok=False)
    assert r.returncode == 1 and "none.h5" in r.stderr
    bad = tmp_path / "bad.h5"
    fake_features(bad, {"x.jpg": np.ones((128, 5), np.float16), "y.jpg": np.ones((256, 5), np.float16),
                        "z.jpg": np.ones((4, 3, 2), np.float32), "one.jpg": np.ones((1, 5), np.float16),
                        "big.jpg": np.ones((1, 40000), np.float16)})
    for pair, word in [("x.jpg y.jpg", "dim 128 and 256"), ("x.jpg z.jpg", "3 dimensions"),
                       ("one.jpg big.jpg", "32767")]:
        (tmp_path / "p.txt").write_text(pair)
        r = run("match", "--features", bad, "--pairs", tmp_path / "p.txt", "-o", out, ok=False)
        assert r.returncode != 0 and word in r.stderr, (pair, r.stderr)
    assert not out.exists()


def test_bench_matching_table_runs(features, pairs_file, tmp_path):
    # The matching table of `superpoint-rt bench` on the test's files (one short round, a small pair; no hloc).
    r = run("bench", "--matching", "--features", features, "--pairs", pairs_file, "--rounds", "1", "--pair-size",
            "128", "--threads", "1", "--json", tmp_path / "b.json")
    for row in ("ours files", "ours pair", "gemm", "x gemm"):
        assert row in r.stdout, r.stdout
    import json
    j = json.loads((tmp_path / "b.json").read_text())
    assert j["pairs"] == len(pairs_file.read_text().split("\n")) and j["rows"]["ours files"]["p50"] > 0
    env = {k: v for k, v in os.environ.items() if k != "SUPERPOINT_RT_BENCH_PYTHON"}
    r = subprocess.run([cli(), "bench", "--matching", "--hloc", str(tmp_path)], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "--peer-python" in r.stderr, r.stderr
