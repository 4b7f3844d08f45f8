"""Input safety and one parameter check for every entry point (issue 14 §2).

Buffers: the engine reads encoded bytes as one run from a buffer's pointer, and pixels through a row stride. A
strided or reversed memoryview (memoryview(data)[::2] / [::-1]) used to be read as if it were contiguous: the wrong
bytes, or bytes before the buffer's start. Now the Python layer copies such views (the bytes they show), _core
refuses them wherever it takes a buffer (single images, lists, calibration, decode), and arrays the engine cannot
read in place (unaligned, byte-swapped float32) are copied.

Parameters: model(...), model.iter, warmup, from_pretrained (with or without calibration), BatchExtractor and
extract_folder check their numbers and flags with the same functions (_params.py): 1.9 is not an int, True is not a
count, "3" is not a number, and out-of-range values are ValueErrors. extract_folder used to turn max_keypoints=1.9
and True into 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same, image_path, weights_dir

import superpoint_rt
from superpoint_rt import BatchExtractor, SuperPoint, extract_folder, merge_features, read_image
from superpoint_rt._model import _calibration_inputs, _DEFAULT_PARAMS

PNG = "skimage_coins.png"  # 384x303 gray PNG


@pytest.fixture(scope="module")
def data() -> bytes:
    with open(image_path(PNG), "rb") as f:
        return f.read()


def strided(data: bytes) -> memoryview:
    """A view whose bytes are `data`, every other byte of a buffer twice as long (junk in between)."""
    buf = bytearray(b"\xAB" * (2 * len(data)))
    buf[::2] = data
    mv = memoryview(buf)[::2]
    assert not mv.c_contiguous and mv.tobytes() == data
    return mv


def reversed_view(data: bytes) -> memoryview:
    """A view whose bytes are `data`, read backwards from a reversed copy (its pointer is at the LAST byte)."""
    mv = memoryview(bytes(reversed(data)))[::-1]
    assert not mv.c_contiguous and mv.tobytes() == data
    return mv


# ------------------------------------------------------------------------------------------------ buffers
def test_non_contiguous_memoryviews_are_read_as_the_bytes_they_show(model, data):
    ref = model(data)
    assert len(ref) > 10
    for what, mv in [("[::2]", strided(data)), ("[::-1]", reversed_view(data))]:
        assert_same(model(mv), ref, f"memoryview {what}")
        outs = model([mv, data], num_workers=2)
        for o in outs:
            assert_same(o, ref, f"list with memoryview {what}")
        assert np.array_equal(read_image(mv), read_image(data)), what
    # A view that shows something that is not an image is an error about those bytes, not about other memory.
    with pytest.raises(ValueError, match="not in a supported format"):
        model(memoryview(data)[::-1])
    with pytest.raises(ValueError, match="empty"):
        model(memoryview(data)[:0])


def test_core_refuses_non_contiguous_buffers(model, data):
    """_core itself (what the Python layer calls) never reads a strided buffer as contiguous: every place that takes
    a buffer refuses it, naming the input."""
    core = model._core
    for mv in (strided(data), reversed_view(data)):
        with pytest.raises(ValueError, match="not C-contiguous"):
            core.run_one(mv, _DEFAULT_PARAMS)
        with pytest.raises(ValueError, match="not C-contiguous"):
            core.run_list([data, mv], _DEFAULT_PARAMS, 2)
        with pytest.raises(ValueError, match="not C-contiguous"):
            superpoint_rt._core.decode(mv)
        with pytest.raises(ValueError, match="not C-contiguous"):  # calibration images (read before loading)
            superpoint_rt._core.load(weights_dir(), "", "", True, "cpu", 1, "fp32", 1 << 20, [], [], [], 0, False,
                                     [mv])
    # Contiguous multi-dimensional buffers are plain runs of bytes.
    n = len(data) // 4 * 4
    padded = data + b"\0" * (n + 4 - len(data)) if n != len(data) else data
    mv2 = memoryview(padded).cast("B", shape=[len(padded) // 4, 4])
    assert mv2.c_contiguous
    assert_same(model(memoryview(padded)), model(mv2), "2-D contiguous memoryview")


def test_calibration_inputs_are_contiguous(data):
    for item in _calibration_inputs([strided(data), reversed_view(data), data]):
        assert item == data if isinstance(item, bytes) else bytes(item) == data


def test_unaligned_and_byte_swapped_float_arrays(model):
    rng = np.random.default_rng(3)
    a = rng.random((61, 83, 3), dtype=np.float32)
    ref = model(a)
    raw = np.empty(a.nbytes + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, np.float32, count=a.size, offset=1).reshape(a.shape)
    unaligned[...] = a
    assert not unaligned.flags.aligned
    assert_same(model(unaligned), ref, "unaligned float32")
    swapped = a.astype(">f4")
    assert swapped.dtype.byteorder == ">"
    assert_same(model(swapped), ref, "big-endian float32")
    # _core directly (the Python layer converts byte-swapped arrays itself): the same features, not misread bytes.
    assert_same(superpoint_rt.SuperPointOutput(*model._core.run_one(swapped, _DEFAULT_PARAMS)), ref,
                "_core big-endian float32")
    assert_same(superpoint_rt.SuperPointOutput(*model._core.run_one(unaligned, _DEFAULT_PARAMS)), ref,
                "_core unaligned float32")
    # Rows 202 bytes apart (not a multiple of 4), starting one byte into a buffer: a float view into byte memory.
    h, w = 40, 50
    buf = np.zeros(h * (w * 4 + 2) + 8, np.uint8)
    fv = np.lib.stride_tricks.as_strided(np.frombuffer(buf.data, np.float32, count=1, offset=1), (h, w),
                                         (w * 4 + 2, 4))
    f = rng.random((h, w), dtype=np.float32)
    fv[...] = f
    assert np.array_equal(fv, f)
    assert_same(superpoint_rt.SuperPointOutput(*model._core.run_one(fv, _DEFAULT_PARAMS)), model(f),
                "float rows with a 202-byte stride")


# ------------------------------------------------------------------------------------------------ parameters
BAD = [  # (value, exception) for a count parameter such as max_keypoints
    (1.9, TypeError), (1.0, TypeError), (True, TypeError), (np.bool_(True), TypeError), ("3", TypeError),
    (None, TypeError), (np.float64(2.0), TypeError), (-5, ValueError), (10**9, ValueError),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    superpoint_rt.write_png(str(d / "a.png"), superpoint_rt.synthetic_image(64, 48, seed=1))
    return d


def _raises(exc, name, fn):
    with pytest.raises(exc) as e:
        fn()
    assert name in str(e.value), f"{name!r} not in {str(e.value)!r}"


@pytest.fixture(scope="module")
def extractor():
    with BatchExtractor(weights_dir(), local_files_only=True, threads=1) as x:
        yield x


@pytest.mark.parametrize("value, exc", BAD)
def test_request_parameters_one_check_everywhere(model, extractor, folder, tmp_path, value, exc):
    img = np.zeros((8, 8), np.uint8)
    out = str(tmp_path / "f.h5")
    for name in ("max_keypoints", "nms_radius"):
        kw = {name: value}
        _raises(exc, name, lambda: model(img, **kw))
        _raises(exc, name, lambda: model([img, img], **kw))
        _raises(exc, name, lambda: model.iter([img], **kw))
        _raises(exc, name, lambda: extractor.extract(str(folder), out, **kw))
        # extract_folder checks before it loads the model.
        _raises(exc, name, lambda: extract_folder(str(folder), out, weights=weights_dir(), local_files_only=True,
                                                  **kw))
    assert not (tmp_path / "f.h5").exists()


@pytest.mark.parametrize("kwargs, exc, name", [
    ({"keypoint_threshold": "0.1"}, TypeError, "keypoint_threshold"),
    ({"keypoint_threshold": True}, TypeError, "keypoint_threshold"),
    ({"keypoint_threshold": float("nan")}, ValueError, "keypoint_threshold"),
    ({"keypoint_threshold": 1.5}, ValueError, "keypoint_threshold"),
    ({"descriptors": 1}, TypeError, "descriptors"),
    ({"descriptors": "no"}, TypeError, "descriptors"),
    ({"grayscale": 1}, TypeError, "grayscale"),
    ({"workers": 1.5}, TypeError, "workers"),
    ({"workers": True}, TypeError, "workers"),
    ({"workers": -1}, ValueError, "workers"),
    ({"as_half": 1}, TypeError, "as_half"),
    ({"skip_existing": "yes"}, TypeError, "skip_existing"),
    ({"overwrite": 0}, TypeError, "overwrite"),
    ({"progress": None}, TypeError, "progress"),
    ({"shard": 1}, TypeError, "shard"),
    ({"threads": 1.9}, TypeError, "threads"),
    ({"threads": True}, TypeError, "threads"),
    ({"threads": -1}, ValueError, "threads"),
    ({"local_files_only": 1}, TypeError, "local_files_only"),
    ({"max_keypoint": 5}, TypeError, "max_keypoint"),
])
def test_extract_folder_options(folder, tmp_path, kwargs, exc, name):
    _raises(exc, name, lambda: extract_folder(str(folder), str(tmp_path / "f.h5"), weights=weights_dir(), **kwargs))
    assert not (tmp_path / "f.h5").exists()


@pytest.mark.parametrize("kwargs, exc, name", [
    ({"threads": 1.9}, TypeError, "threads"), ({"threads": True}, TypeError, "threads"),
    ({"threads": "2"}, TypeError, "threads"), ({"threads": -1}, ValueError, "threads"),
    ({"max_pixels": 1.5}, TypeError, "max_pixels"), ({"max_pixels": True}, TypeError, "max_pixels"),
    ({"max_pixels": 0}, ValueError, "max_pixels"),
    ({"verbose": 1}, TypeError, "verbose"), ({"revision": 3}, TypeError, "revision"),
])
def test_batch_extractor_options(kwargs, exc, name):
    _raises(exc, name, lambda: BatchExtractor(weights_dir(), local_files_only=True, **kwargs))


def test_merge_features_overwrite(tmp_path):
    _raises(TypeError, "overwrite", lambda: merge_features([str(tmp_path / "a.h5")], str(tmp_path / "b.h5"),
                                                           overwrite=1))


@pytest.mark.parametrize("kwargs, exc, name", [
    ({"threads": 1.9}, TypeError, "threads"), ({"threads": True}, TypeError, "threads"),
    ({"threads": "2"}, TypeError, "threads"), ({"threads": 0}, ValueError, "threads"),
    ({"max_pixels": 2.5}, TypeError, "max_pixels"), ({"max_pixels": True}, TypeError, "max_pixels"),
    ({"local_files_only": 1}, TypeError, "local_files_only"),
    ({"warmup_variants": {"num_workers": 1.5}}, TypeError, "num_workers"),
    ({"warmup_variants": {"num_workers": True}}, TypeError, "num_workers"),
    ({"warmup_variants": {"num_workers": 2000}}, ValueError, "num_workers"),
    ({"warmup_variants": {"sizes": [(640.0, 480)]}}, TypeError, "width"),
    ({"warmup_variants": {"nms_radii": [True]}}, TypeError, "nms_radii"),
    ({"warmup_variants": {"nms_radii": [33]}}, ValueError, "nms_radii"),
    ({"warmup_variants": {"fallbacks": 1}}, TypeError, "fallbacks"),
    ({"precompile_nms_radii": [1.5]}, TypeError, "precompile_nms_radii"),
    ({"device": "cpu", "device_id": True}, TypeError, "device_id"),
])
@pytest.mark.parametrize("calibrated", [False, True])
def test_from_pretrained_options(kwargs, exc, name, calibrated):
    kw = {"warmup_variants": "none", "local_files_only": True}
    if calibrated:  # the int8 load with calibration images checks the same options first
        kw.update(precision="int8", calibration=[superpoint_rt.synthetic_image(64, 48, seed=2)])
    kw.update(kwargs)
    _raises(exc, name, lambda: SuperPoint.from_pretrained(weights_dir(), **kw))


@pytest.mark.parametrize("kwargs, exc, name", [
    ({"num_workers": 1.5}, TypeError, "num_workers"), ({"num_workers": True}, TypeError, "num_workers"),
    ({"num_workers": -1}, ValueError, "num_workers"), ({"nms_radius": 1.5}, TypeError, "nms_radius"),
    ({"nms_radius": True}, TypeError, "nms_radius"), ({"nms_radii": [40]}, ValueError, "nms_radii"),
    ({"size": (64, 48.0)}, TypeError, "size"), ({"sizes": [(0, 48)]}, ValueError, "sizes"),
])
def test_warmup_options(model, kwargs, exc, name):
    _raises(exc, name, lambda: model.warmup(**kwargs))


# ------------------------------------------------------------------------------------------------ order of refusals
def _png_header_only(width: int, height: int) -> bytes:
    """A 45-byte PNG: the signature, an IHDR that declares width x height (8-bit RGB), and IEND; no pixel data."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IEND", b"")


def test_input_limits_come_before_the_memory_budget(model):
    """An image over max_pixels is refused as such (ValueError naming max_pixels) from its header, before the memory
    budget is asked (which would say RuntimeError "over the memory budget": that is for valid work that does not fit
    now). Every entry point that reads encoded bytes: a call, a list, and a file path."""
    bomb = _png_header_only(4294967295, 4294967295)
    assert len(bomb) == 45
    big = _png_header_only(20000, 10000)  # 200 MP: over Pillow's default limit, a valid PNG header
    for data in (bomb, big):
        with pytest.raises(ValueError, match="max_pixels") as e:
            model(data)
        assert "memory budget" not in str(e.value)
        with pytest.raises(ValueError, match="max_pixels"):
            model([data, data], num_workers=2)
