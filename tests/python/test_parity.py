"""The Python API gives the C++ CLI's output bit for bit (superpoint-rt extract --format npz), and passes the golden
fidelity rule of SPEC §2 (../shared/tools/compare_features.py against the PyTorch reference outputs)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import cli_path, image_path, shared_dir, weights_dir

IMAGES = ["berlin01_1600x900.jpg", "icl_250.png", "skimage_camera.png"]  # RGB JPEG, RGB PNG, gray PNG

# (CLI flags, Python parameters, golden set, compare_features.py options)
CASES = {
    "default": ([], {}, "default", ["--nms-radius", "4", "--threshold", "0.005", "--max-keypoints", "1024"]),
    "all": (["--max-keypoints", "-1", "--no-descriptors"], {"max_keypoints": -1, "return_descriptors": False}, "all",
            ["--nms-radius", "4", "--threshold", "0.005", "--max-keypoints", "-1", "--no-descriptors"]),
    "nms0": (["--nms-radius", "0", "--max-keypoints", "2048", "--no-descriptors"],
             {"nms_radius": 0, "max_keypoints": 2048, "return_descriptors": False}, "nms0",
             ["--nms-radius", "0", "--threshold", "0.005", "--max-keypoints", "2048", "--no-descriptors"]),
    "thr015": (["--max-keypoints", "-1", "--keypoint-threshold", "0.015", "--no-descriptors"],
               {"max_keypoints": -1, "keypoint_threshold": 0.015, "return_descriptors": False}, "thr015",
               ["--nms-radius", "4", "--threshold", "0.015", "--max-keypoints", "-1", "--no-descriptors"]),
    "ntsc": (["--grayscale", "--no-descriptors"], {"grayscale": True, "return_descriptors": False}, "ntsc",
             ["--nms-radius", "4", "--threshold", "0.005", "--max-keypoints", "1024", "--no-descriptors"]),
}


def _golden(set_name: str, image: str):
    p = shared_dir() / "golden" / set_name / f"{image}.npz"
    return p if p.is_file() else None


@pytest.mark.parametrize("case", list(CASES))
def test_cli_bit_identical_and_golden(model, case, tmp_path):
    flags, params, golden_set, cmp_opts = CASES[case]
    images = [image_path(n) for n in IMAGES]
    cmd = [cli_path(), "extract", *images, "--out", str(tmp_path / "cli"), "--format", "npz", "--weights",
           weights_dir(), "--local-files-only", "--quiet", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    outs = model(images, num_workers=2, **params)
    compared_golden = 0
    for name, out in zip(IMAGES, outs):
        with np.load(tmp_path / "cli" / f"{name}.npz") as z:
            cli = {k: z[k] for k in z.files}
        np.testing.assert_array_equal(out.keypoints, cli["keypoints"], err_msg=f"{case} {name}: keypoints vs CLI")
        np.testing.assert_array_equal(out.scores, cli["scores"], err_msg=f"{case} {name}: scores vs CLI")
        if out.descriptors is not None:
            np.testing.assert_array_equal(out.descriptors, cli["descriptors"],
                                          err_msg=f"{case} {name}: descriptors vs CLI")
        else:
            assert "descriptors" not in cli or cli["descriptors"].size == 0
        assert list(cli["image_size"]) == list(out.image_size)

        gold = _golden(golden_set, name)
        if gold is None:
            continue
        ours = tmp_path / f"ours_{name}.npz"
        arrays = {"keypoints": out.keypoints, "scores": out.scores}
        if out.descriptors is not None:
            arrays["descriptors"] = out.descriptors
        np.savez(ours, **arrays)
        tool = shared_dir() / "tools" / "compare_features.py"
        r = subprocess.run([sys.executable, str(tool), str(gold), str(ours), *cmp_opts], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"{case} {name}: golden fidelity failed:\n{r.stdout}\n{r.stderr}"
        compared_golden += 1
    assert compared_golden >= 1, f"no golden file of set {golden_set!r} for {IMAGES}"
