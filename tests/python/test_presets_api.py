"""The presets and the parameter table from Python: preset=, the explicit-overrides-preset rule, the table exposed by
_core, network_sizes in warm-up, to_lightglue() / to_cv2_keypoints()."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import image_path

import superpoint_rt
from superpoint_rt import _core


def test_table_is_the_cpp_one():
    names = [s["name"] for s in _core.PARAM_SPECS]
    assert names[:4] == ["preset", "max_keypoints", "keypoint_threshold", "nms_radius"]
    assert set(_core.PRESETS) == {"hf", "hloc:superpoint_aachen", "hloc:superpoint_max", "hloc:superpoint_inloc",
                                  "lightglue"}
    assert _core.PRESETS["hf"]["max_keypoints"] == 1024 and _core.PRESETS["hf"]["resize"] == "640x480"
    assert _core.PRESETS["lightglue"]["max_keypoints"] == 2048
    assert _core.PRESETS["hloc:superpoint_aachen"]["nms_radius"] == 3


def test_hloc_preset_frame_order_and_override(model):
    path = image_path("lg_sacre_coeur2.jpg")  # 768x1024 portrait: not larger than 1024, network at its own size
    out = model(path, preset="hloc:superpoint_aachen")
    assert out.network_size == (1024, 768)
    assert 100 < len(out) <= 4096
    kp = out.keypoints
    # raster order (y, then x) when fewer than max_keypoints pass
    order = np.lexsort((kp[:, 0], kp[:, 1]))
    assert np.array_equal(order, np.arange(len(kp)))
    cut = model(path, preset="hloc:superpoint_aachen", max_keypoints=10)  # explicit overrides the preset
    assert len(cut) == 10 and np.all(np.diff(cut.scores) <= 0)
    small = model(path, preset="hloc:superpoint_aachen", resize_max=512)
    assert small.network_size == (512, 384)


def test_lightglue_interop(model):
    torch = pytest.importorskip("torch")  # Debian's python3-torch is a test dependency (install-deps --test)
    out = model(image_path("lg_DSC_0410.JPG"), preset="lightglue")
    assert out.network_size == (682, 1024)  # kornia side="long": int(1024 / (1024 / 682))
    d = out.to_lightglue()
    n = len(out)
    assert n == 2048
    assert tuple(d["keypoints"].shape) == (1, n, 2) and tuple(d["keypoint_scores"].shape) == (1, n)
    assert tuple(d["descriptors"].shape) == (1, n, 256) and d["descriptors"].dtype == torch.float32
    assert d["image_size"].tolist() == [[1024.0, 682.0]]
    cv2 = pytest.importorskip("cv2")
    kps = out.to_cv2_keypoints()
    assert len(kps) == n and isinstance(kps[0], cv2.KeyPoint)
    assert kps[0].pt == pytest.approx(tuple(out.keypoints[0].tolist())) and kps[0].response == pytest.approx(
        float(out.scores[0]))


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"preset": "hloc"}, ValueError, "preset"),
    ({"preset": 3}, TypeError, "preset"),
    ({"resize": "640x480", "resize_max": 1024}, ValueError, "contradict"),
    ({"resize": "4x4"}, ValueError, "out of range"),
    ({"interpolation": "cubic"}, ValueError, "interpolation"),
    ({"resize_max": True}, TypeError, "resize_max"),
    ({"preset": "lightglue", "grayscale": False}, ValueError, "grayscale"),
    ({"resise": "none"}, TypeError, "did you mean 'resize'"),
])
def test_bad_parameters_are_named(model, kwargs, exc, words):
    with pytest.raises(exc, match=words):
        model(np.zeros((64, 64), np.uint8), **kwargs)


def test_warmup_names_network_sizes(model):
    steps = model.warmup(network_sizes=[(320, 240)])
    assert "network:320x240" in steps
    assert model.warmup(network_sizes=[(320, 240)]) == {}  # prepared once
    out = model(np.full((240, 320), 128, np.uint8), resize="320x240")
    assert out.network_size == (240, 320)


def test_native_size_and_resize_none(model):
    out = model(np.zeros((100, 203), np.uint8), resize=None)
    assert out.network_size == (100, 203) and out.scale == (1.0, 1.0)


def test_max_frame_pixels_bounds_the_network_frame():
    from superpoint_rt import SuperPoint

    from conftest import weights_dir

    m = SuperPoint.from_pretrained(weights_dir(), warmup_variants="none", local_files_only=True,
                                   max_frame_pixels=640 * 480)
    try:
        assert m.config["max_frame_pixels"] == 640 * 480
        img = np.zeros((48, 64), np.uint8)
        assert m(img).network_size == (480, 640)  # the hf frame itself: at the limit
        with pytest.raises(ValueError, match=r"resize = 641x480 .*307680 pixels, over the limit of 307200 "
                                             r"\(max_frame_pixels"):
            m(img, resize="641x480")
        with pytest.raises(ValueError, match=r"\(700x500\): resize = none"):
            m(np.zeros((500, 700), np.uint8), resize=None)
    finally:
        m.close()
    for bad in (63, 4096 * 4096 + 1):
        with pytest.raises(ValueError, match="max_frame_pixels"):
            SuperPoint.from_pretrained(weights_dir(), warmup_variants="none", local_files_only=True,
                                       max_frame_pixels=bad)
