"""superpoint-rt match --conf superpoint+lightglue / disk+lightglue over hloc's files, against hloc's match_features
steps run here with cvg's PyTorch LightGlue (lg_reference.py): FeaturePairsDataset's loading (every dataset .float(),
descriptors transposed to (N, D), image_size as cvg's size), the model, writer_fn's int16 matches0 and float16
matching_scores0. Random weights, as for test_lightglue_exact.py."""

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import lg_reference as ref  # noqa: E402

torch = pytest.importorskip("torch")  # Debian's python3-torch is in the test venv: this never skips there
torch.set_num_threads(2)
CLI = os.environ.get("SUPERPOINT_RT_CLI", "superpoint-rt")


def write_features(path, images):
    with h5py.File(path, "w") as f:
        for name, (k, d, size) in images.items():
            g = f.create_group(name)
            g.create_dataset("keypoints", data=k.astype(np.float16).astype(np.float32))
            g.create_dataset("descriptors", data=d.T.astype(np.float16))  # hloc's --as-half layout: (D, N)
            g.create_dataset("scores", data=np.ones(len(k), np.float16))
            g.create_dataset("image_size", data=np.array(size))


def hloc_match(model, features, pairs):
    """hloc's match_features with cvg's LightGlue, in memory: {pair: (matches0 int16, scores0 float16)}."""
    out = {}
    with h5py.File(features, "r") as f:
        for a, b in pairs:
            data = {}
            for name, s in ((a, "0"), (b, "1")):
                data["image" + s] = {"keypoints": torch.from_numpy(f[name]["keypoints"][()]).float()[None],
                                     "descriptors": torch.from_numpy(f[name]["descriptors"][()]).float().T[None],
                                     "image_size": torch.from_numpy(f[name]["image_size"][()]).float()[None]}
            with torch.no_grad():
                pred = model(data)
            out[(a, b)] = (pred["matches0"][0].short().numpy(), pred["matching_scores0"][0].half().numpy())
    return out


@pytest.mark.parametrize("conf,dim,adaptive", [("superpoint+lightglue", 256, False), ("disk+lightglue", 128, True)])
def test_match_files(tmp_path, conf, dim, adaptive):
    # A narrow network (descriptor_dim 64) keeps the reference quick (lg_reference.random_model).
    model = ref.random_model(dim, seed=11 + dim, early=adaptive, prune=adaptive, descriptor_dim=64)
    if not adaptive:
        model.conf.depth_confidence = model.conf.width_confidence = -1
    weights = tmp_path / "lg.pth"
    ref.save_pth(model, weights)
    k0, d0 = ref.features(300, dim, (640, 480), 1)
    k1, d1 = ref.related_features(k0, d0, (640, 480), 2)
    k2, d2 = ref.related_features(k0, d0, (640, 480), 3, keep=0.5)
    images = {"a/x.jpg": (k0, d0, (640, 480)), "b.jpg": (k1[:250], d1[:250], (640, 480)),
              "c.jpg": (k2, d2, (800, 600))}
    write_features(tmp_path / "f.h5", images)
    pairs = [("a/x.jpg", "b.jpg"), ("a/x.jpg", "c.jpg"), ("b.jpg", "c.jpg")]
    (tmp_path / "pairs.txt").write_text("\n".join(f"{a} {b}" for a, b in pairs))
    args = [CLI, "match", "--features", str(tmp_path / "f.h5"), "--pairs", str(tmp_path / "pairs.txt"), "-o",
            str(tmp_path / "m.h5"), "--conf", conf, "--matcher-weights", str(weights), "--threads", "2", "--quiet"]
    if not adaptive:
        args += ["--depth-confidence", "-1", "--width-confidence", "-1"]
    # The adaptive run also asks for the stage table (src/match/lg_profile.hpp), printed to stderr at exit.
    env = dict(os.environ, SUPERPOINT_RT_LIGHTGLUE_PROFILE="1") if adaptive else os.environ
    run = subprocess.run(args, check=True, capture_output=True, text=True, env=env)
    check_profile(run.stderr, printed=adaptive)
    expected = hloc_match(model, tmp_path / "f.h5", pairs)
    with h5py.File(tmp_path / "m.h5", "r") as f:
        for (a, b), (m_ref, s_ref) in expected.items():
            g = f[a.replace("/", "-") + "/" + b.replace("/", "-")]
            m, s = g["matches0"][()], g["matching_scores0"][()]
            assert m.dtype == np.int16 and s.dtype == np.float16 and m.shape == m_ref.shape
            equal = m == m_ref
            assert equal.mean() >= (0.995 if adaptive else 0.998), (a, b, equal.mean())
            assert np.abs(s.astype(np.float32) - s_ref.astype(np.float32))[equal].max(initial=0) <= 1e-3
            if not adaptive:
                assert (m_ref >= 0).sum() > 10  # the pair has matches to get right
    # superpoint-rt colmap takes LightGlue's matches as the nearest-neighbour ones (docs/SFM.md).
    db = tmp_path / "database.db"
    subprocess.run([CLI, "colmap", "--features", str(tmp_path / "f.h5"), "--matches", str(tmp_path / "m.h5"),
                    "--pairs", str(tmp_path / "pairs.txt"), "-o", str(db)], check=True, capture_output=True)
    import sqlite3

    with sqlite3.connect(db) as c:
        rows = dict(c.execute("SELECT pair_id, rows FROM matches").fetchall())
    ids = {n: i + 1 for i, n in enumerate(sorted(images))}
    for (a, b), (m_ref, _) in expected.items():
        i, j = sorted((ids[a], ids[b]))
        assert abs(rows[i * 2147483647 + j] - int((m_ref >= 0).sum())) <= 0.005 * len(m_ref) + 1


def check_profile(stderr, printed):
    """The stage table: every stage named once with its thread ms, the products' stages above zero, the total their
    sum; nothing without SUPERPOINT_RT_LIGHTGLUE_PROFILE."""
    if not printed:
        assert "LightGlue profile" not in stderr
        return
    lines = stderr[stderr.index("LightGlue profile"):].splitlines()[1:]
    ms, total = {}, None
    for line in lines:
        if line.strip().startswith("total"):
            total = float(line.split()[-2])
            continue
        fields = line.split()
        ms[" ".join(fields[:-4])] = float(fields[-4])
    assert len(ms) == 11, ms
    for stage in ("linear layers: sgemm", "self attention: q k^T", "attention values (rows)", "cross attention: sim",
                  "cross attention: column values", "assignment"):
        assert ms[stage] > 0, (stage, ms)
    assert abs(sum(ms.values()) - total) <= 0.1 * len(ms), (ms, total)


def test_bad_conf_and_weights(tmp_path):
    r = subprocess.run([CLI, "match", "--features", "f.h5", "--pairs", "p.txt", "-o", "m.h5", "--conf",
                        "superglue"], capture_output=True, text=True)
    assert r.returncode == 2 and "superpoint+lightglue" in r.stderr
    model = ref.random_model(128, seed=1, early=False, prune=False, descriptor_dim=64)
    ref.save_pth(model, tmp_path / "disk.pth")
    write_features(tmp_path / "f.h5", {"a": (*ref.features(5, 256, (64, 48), 1), (64, 48))})
    (tmp_path / "p.txt").write_text("a a")
    r = subprocess.run([CLI, "match", "--features", str(tmp_path / "f.h5"), "--pairs", str(tmp_path / "p.txt"), "-o",
                        str(tmp_path / "m.h5"), "--conf", "superpoint+lightglue", "--matcher-weights",
                        str(tmp_path / "disk.pth")], capture_output=True, text=True)
    assert r.returncode == 2 and "dim 256" in r.stderr and "take 128" in r.stderr, r.stderr
