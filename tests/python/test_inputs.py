"""Every input type and dtype gives the features of the equivalent uint8 array (bit for bit); every bad input and bad
parameter raises the documented exception with a message naming the problem; outputs behave as documented."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import pytest
from conftest import assert_same, image_path


try:
    from PIL import Image
except ImportError:  # pragma: no cover - the test venv has Debian's Pillow
    Image = None

JPEG = "berlin01_1600x900.jpg"  # 1600x900 RGB JPEG, > 1024 keypoints
GRAY_PNG = "skimage_camera.png"                      # 512x512 gray PNG


def _need_pillow():
    if Image is None:
        pytest.fail("Pillow is required by these tests (the test venv has Debian's python3-pil)")


@pytest.fixture(scope="module")
def rgb():
    _need_pillow()
    with Image.open(image_path(JPEG)) as im:
        return np.asarray(im.convert("RGB"))


@pytest.fixture(scope="module")
def ref(model, rgb):
    """Features of the plain (H, W, 3) uint8 array: the reference of every equivalent input below."""
    out = model(rgb)
    assert len(out) > 100, "the reference image should give many keypoints"
    return out


# ------------------------------------------------------------------------------------------------ equivalent inputs
def test_paths_bytes_and_file_objects(model, rgb, ref):
    p = image_path(JPEG)
    data = pathlib.Path(p).read_bytes()
    outs = model([p, pathlib.Path(p), data, bytearray(data), memoryview(data), io.BytesIO(data)], num_workers=2)
    for what, o in zip(["str", "Path", "bytes", "bytearray", "memoryview", "BytesIO"], outs):
        assert_same(o, ref, what)


def test_gray_planes_equal_the_red_channel(model, rgb, ref):
    # The network reads channel 0 (R) of an RGB image: the R plane given as a gray image is the same input.
    r = np.ascontiguousarray(rgb[:, :, 0])
    _need_pillow()
    outs = model([r, r[:, :, None], Image.fromarray(r, "L"), rgb[:, :, 0]], num_workers=0)
    for what, o in zip(["(H,W)", "(H,W,1)", "PIL L", "strided channel view"], outs):
        assert_same(o, ref, what)


def test_channel_orders_and_alpha(model, rgb, ref):
    alpha = np.full(rgb.shape[:2] + (1,), 77, np.uint8)
    rgba = np.concatenate([rgb, alpha], axis=2)
    bgr = rgb[:, :, ::-1]  # a negative-stride view (read by copy)
    bgra = np.ascontiguousarray(rgba[:, :, [2, 1, 0, 3]])
    assert_same(model(rgba), ref, "RGBA")
    assert_same(model(bgr, bgr=True), ref, "BGR view, bgr=True")
    assert_same(model(np.ascontiguousarray(bgr), bgr=True), ref, "BGR contiguous, bgr=True")
    assert_same(model(bgra, bgr=True), ref, "BGRA, bgr=True")
    # bgr=False on BGR data reads the blue channel: a different image, so different features (the flag is honoured).
    other = model(np.ascontiguousarray(bgr))
    assert len(other) != len(ref) or not np.array_equal(other.keypoints, ref.keypoints)


def test_pil_images_any_mode(model, rgb, ref):
    _need_pillow()
    im = Image.fromarray(rgb, "RGB")
    assert_same(model(im), ref, "PIL RGB")
    assert_same(model(im.convert("RGBA")), ref, "PIL RGBA")
    # Other modes are converted as Pillow's convert("RGB") does (what the file path gives for such files).
    p = im.convert("P", palette=Image.ADAPTIVE, colors=64)
    assert_same(model(p), model(np.asarray(p.convert("RGB"))), "PIL P")
    cmyk = im.convert("CMYK")
    assert_same(model(cmyk), model(np.asarray(cmyk.convert("RGB"))), "PIL CMYK")
    with Image.open(image_path(JPEG)) as f:  # a lazily loaded file image
        assert_same(model(f), ref, "PIL JpegImageFile")


def test_dtypes(model, rgb, ref):
    ints = [rgb.astype(t) for t in (np.int16, np.uint16, np.int32, np.int64)]
    floats = [(rgb / 255.0).astype(t) for t in (np.float32, np.float64, np.float16)]
    outs = model(ints + floats, num_workers=4)
    names = ["int16", "uint16", "int32", "int64", "float32", "float64", "float16"]
    for n, o in zip(names, outs):
        assert_same(o, ref, n)


def test_non_contiguous_arrays(model, rgb, ref):
    h, w, _ = rgb.shape
    big = np.zeros((h + 20, w + 13, 3), np.uint8)
    big[7:7 + h, 5:5 + w] = rgb
    padded = big[7:7 + h, 5:5 + w]  # padded rows (read in place)
    assert not padded.flags.c_contiguous
    fortran = np.asfortranarray(rgb)
    transposed = np.ascontiguousarray(rgb.transpose(1, 0, 2)).transpose(1, 0, 2)
    every_other = np.repeat(rgb, 2, axis=1)[:, ::2]  # pixel stride 6 bytes
    for what, a in [("padded", padded), ("fortran", fortran), ("transposed", transposed), ("::2", every_other)]:
        assert np.array_equal(a, rgb)
        assert_same(model(a), ref, what)


def test_batches_4d(model, rgb, ref):
    batch = np.stack([rgb, rgb])
    outs = model(batch)
    assert isinstance(outs, list) and len(outs) == 2
    for o in outs:
        assert_same(o, ref, "4-D batch item")


def test_torch_inputs_and_outputs(model, rgb, ref):
    torch = pytest.importorskip("torch")  # optional: not installed in the test venv
    t = torch.from_numpy(rgb)
    chw = t.permute(2, 0, 1)
    assert_same(model(t), ref, "torch HWC")
    assert_same(model(chw.contiguous()), ref, "torch CHW")
    assert_same(model(chw.float() / 255), ref, "torch CHW float")
    assert_same(model(t[:, :, 0]), ref, "torch HW")
    outs = model(chw[None].repeat(2, 1, 1, 1))
    assert len(outs) == 2 and all(np.array_equal(o.keypoints, ref.keypoints) for o in outs)
    pt = model(rgb, return_tensors="pt")
    assert isinstance(pt.keypoints, torch.Tensor) and pt.keypoints.dtype == torch.float32
    assert torch.equal(pt.keypoints, torch.from_numpy(ref.keypoints))


# ------------------------------------------------------------------------------------------------ parameters
def test_parameters_take_effect(model, rgb, ref):
    outs = {
        "all": model(rgb, max_keypoints=-1, return_descriptors=False),
        "k10": model(rgb, max_keypoints=10),
        "thr": model(rgb, keypoint_threshold=0.05, max_keypoints=-1, return_descriptors=False),
        "r0": model(rgb, nms_radius=0, max_keypoints=-1, return_descriptors=False),
    }
    assert len(outs["all"]) > len(ref) == 1024
    assert outs["all"].descriptors is None
    assert len(outs["k10"]) == 10
    np.testing.assert_array_equal(outs["k10"].keypoints, ref.keypoints[:10])  # top-k is a prefix of the sorted list
    assert np.all(outs["thr"].scores > np.float32(0.05)) and len(outs["thr"]) < len(outs["all"])
    assert len(outs["r0"]) > len(outs["all"])  # no suppression: more points
    for o in [ref] + list(outs.values()):
        assert np.all(np.diff(o.scores) <= 0), "scores must be sorted in descending order"
    assert ref.descriptors.shape == (1024, 256) and ref.descriptors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ref.descriptors, axis=1), 1.0, atol=1e-5)
    # numpy scalars are accepted as values
    assert_same(model(rgb, max_keypoints=np.int64(10), keypoint_threshold=np.float32(0.005), bgr=np.bool_(False)),
                outs["k10"], "numpy scalar parameters")


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"max_keypoint": 5}, TypeError, ["max_keypoint", "max_keypoints"]),
    ({"foo": 1}, TypeError, ["foo"]),
    ({"max_keypoints": 1.5}, TypeError, ["max_keypoints", "1.5"]),
    ({"max_keypoints": "3"}, TypeError, ["max_keypoints", "'3'"]),
    ({"max_keypoints": True}, TypeError, ["max_keypoints"]),
    ({"max_keypoints": -2}, ValueError, ["max_keypoints", "-2", "[-1, 307200]"]),
    ({"max_keypoints": 307201}, ValueError, ["max_keypoints", "307201", "[-1, 307200]"]),
    ({"keypoint_threshold": float("nan")}, ValueError, ["keypoint_threshold", "nan", "[0, 1]"]),
    ({"keypoint_threshold": 1.5}, ValueError, ["keypoint_threshold", "1.5", "[0, 1]"]),
    ({"keypoint_threshold": -0.1}, ValueError, ["keypoint_threshold", "-0.1", "[0, 1]"]),
    ({"keypoint_threshold": "0.1"}, TypeError, ["keypoint_threshold"]),
    ({"nms_radius": 33}, ValueError, ["nms_radius", "33", "[0, 32]"]),
    ({"nms_radius": -1}, ValueError, ["nms_radius", "-1", "[0, 32]"]),
    ({"nms_radius": 2.0}, TypeError, ["nms_radius"]),
    ({"return_descriptors": 1}, TypeError, ["return_descriptors"]),
    ({"bgr": "yes"}, TypeError, ["bgr"]),
    ({"grayscale": None}, TypeError, ["grayscale"]),
    ({"num_workers": -1}, ValueError, ["num_workers", "-1"]),
    ({"num_workers": 1.0}, TypeError, ["num_workers"]),
    ({"return_tensors": "tf"}, ValueError, ["return_tensors", "tf"]),
])
def test_bad_parameters(model, kwargs, exc, words):
    img = np.zeros((8, 8), np.uint8)
    for call in (lambda: model(img, **kwargs), lambda: model([img, img], **kwargs)):
        with pytest.raises(exc) as e:
            call()
        for w in words:
            assert w in str(e.value), f"{w!r} not in {str(e.value)!r}"


def test_bad_parameters_fail_before_iteration(model):
    consumed = []

    def gen():
        consumed.append(1)
        yield np.zeros((8, 8), np.uint8)

    with pytest.raises(ValueError, match="nms_radius"):
        model.iter(gen(), nms_radius=99)
    assert not consumed


# ------------------------------------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize("make, exc, words", [
    (lambda: np.zeros((20, 20, 2), np.uint8), ValueError, ["(20, 20, 2)", "2 channels"]),
    (lambda: np.zeros((3, 20, 20), np.uint8), ValueError, ["(3, 20, 20)", "transpose"]),
    (lambda: np.zeros((20,), np.uint8), ValueError, ["(20,)", "1 dimensions"]),
    (lambda: np.zeros((1, 2, 20, 20, 3), np.uint8), ValueError, ["5 dimensions"]),
    (lambda: np.zeros((0, 20), np.uint8), ValueError, ["(0, 20)", "empty"]),
    (lambda: np.zeros((20, 20), bool), TypeError, ["bool"]),
    (lambda: np.zeros((20, 20), np.complex64), TypeError, ["complex64"]),
    (lambda: np.zeros((20, 20), object), TypeError, ["object"]),
    (lambda: np.full((20, 20), 256, np.int16), ValueError, ["int16", "256", "0..255"]),
    (lambda: np.full((20, 20), -1, np.int32), ValueError, ["int32", "-1", "0..255"]),
    (lambda: np.full((20, 20), 1.5, np.float64), ValueError, ["float64", "1.5", "[0, 1]"]),
    (lambda: np.full((20, 20), np.nan, np.float64), ValueError, ["nan", "[0, 1]"]),
    (lambda: np.full((20, 20), 2.0, np.float32), ValueError, ["2.0", "[0, 1]"]),
    (lambda: np.full((20, 20), np.nan, np.float32), ValueError, ["nan", "[0, 1]"]),
    (lambda: 42, TypeError, ["int"]),
    (lambda: {"image": 1}, TypeError, ["dict"]),
    (lambda: b"", ValueError, ["empty"]),
    (lambda: b"this is not an image at all", ValueError, ["JPEG", "PNG"]),
    (lambda: b"\x89PNG\r\n\x1a\n" + b"\0" * 20, ValueError, ["<bytes>"]),
])
def test_bad_inputs(model, make, exc, words):
    with pytest.raises(exc) as e:
        model(make())
    msg = str(e.value)
    for w in words:
        assert w.lower() in msg.lower(), f"{w!r} not in {msg!r}"


def test_missing_file_and_text_file(model, tmp_path):
    missing = tmp_path / "nope.jpg"
    with pytest.raises(FileNotFoundError, match="nope.jpg"):
        model(str(missing))
    with pytest.raises(FileNotFoundError, match="nope.jpg"):
        model(missing)
    txt = tmp_path / "notes.png"
    txt.write_text("hello, not a picture\n")
    with pytest.raises(ValueError, match="notes.png"):
        model(txt)


def test_list_error_names_the_image(model, tmp_path):
    ok = np.zeros((16, 16), np.uint8)
    with pytest.raises(FileNotFoundError) as e:
        model([ok, str(tmp_path / "missing.png"), ok], num_workers=2)
    assert "image 1" in str(e.value) and "missing.png" in str(e.value)
    with pytest.raises(ValueError) as e:
        model([ok, ok, np.zeros((4, 4, 2), np.uint8)])
    assert "(4, 4, 2)" in str(e.value)


# ------------------------------------------------------------------------------------------------ outputs
def test_output_object(model, ref):
    from superpoint_rt import SuperPointOutput

    assert isinstance(ref, SuperPointOutput)
    assert ref["keypoints"] is ref.keypoints and ref["scores"] is ref.scores and ref["descriptors"] is ref.descriptors
    assert len(ref) == ref.keypoints.shape[0] == ref.scores.shape[0]
    assert ref.keypoints.dtype == np.float32 and ref.keypoints.shape[1] == 2
    assert list(ref) == ["keypoints", "scores", "descriptors"] and "scores" in ref
    with pytest.raises(KeyError, match="nope"):
        ref["nope"]
    assert ref.image_size == (900, 1600)
    assert ref.scale == (np.float32(1600 / 640), np.float32(900 / 480))
    assert set(ref.timing_ms) == {"decode", "preprocess", "forward", "postprocess"}
    assert all(v >= 0 for v in ref.timing_ms.values()) and ref.timing_ms["forward"] > 0
    # zero-copy: the arrays are views of the C++ buffers (a capsule owns them), not numpy-owned copies
    for a in (ref.keypoints, ref.scores, ref.descriptors):
        assert not a.flags.owndata and type(a.base).__name__ == "PyCapsule"
    d = ref.numpy()
    assert d["keypoints"] is ref.keypoints
    j = json.loads(json.dumps(ref.to_dict()))
    assert np.array_equal(np.asarray(j["keypoints"], np.float32), ref.keypoints)
    assert np.array_equal(np.asarray(j["scores"], np.float32), ref.scores)
    assert np.array_equal(np.asarray(j["descriptors"], np.float32), ref.descriptors)
    assert j["image_size"] == [900, 1600]
    assert "n=1024" in repr(ref)


def test_outputs_are_independent(model):
    img = np.zeros((480, 640), np.uint8)
    img[100:300, 200:400] = 255
    a, b = model([img, img], num_workers=0)
    assert_same(a, b, "same image twice")
    keep = b.keypoints.copy()
    a.keypoints[:] = -1  # each output owns its buffers
    assert np.array_equal(b.keypoints, keep)
    del b  # the arrays keep the C++ buffer alive after the output object is gone
    kp = a.scores
    del a
    assert kp.shape[0] > 0 and np.all(kp > 0)


def test_gray_file(model):
    _need_pillow()
    p = image_path(GRAY_PNG)
    with Image.open(p) as im:
        assert im.mode == "L"
        plane = np.asarray(im)
    assert_same(model(p), model(plane), "gray PNG file vs its plane")
