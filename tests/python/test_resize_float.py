"""The float32 plane resizes of the hloc and LightGlue presets (src/image/resize_float.hpp, SPEC.md §2b) against the
libraries they reproduce, through the private binding superpoint_rt._core._resize_float(plane, dw, dh, kind):

- "cv2_area" / "cv2_linear" must equal OpenCV 4.6's cv2.resize(plane, (dw, dh), interpolation=INTER_AREA /
  INTER_LINEAR) bit for bit on random float32 planes in [0, 255] (so also after hloc's / 255), on awkward shapes:
  integer factors (OpenCV's resizeAreaFast_ path, the 2x2 SIMD grouping), non-integer factors (resizeArea_ with
  computeResizeAreaTab), 1-pixel rows and columns, odd sizes, one axis only, enlarging (INTER_AREA then runs
  OpenCV's linear code with area coefficients);
- "cv2_area" (the fast kernel) must equal "cv2_area_reference" (the literal transcription) bit for bit;
- "kornia_antialias" must be within 1e-5 of tests/resize/kornia_reference.py (kornia's resize rebuilt in torch)
  on [0, 1] planes;
- the size helpers must equal hloc's `int(round(x * scale))` and kornia's `_side_to_image_size(..., "long")`.

It lives in tests/python/ (not tests/resize/) because it needs the Python module, which the sanitizer build does
not build (tests/CMakeLists.txt runs tests/python/ only where it is built); tests/resize/test_resize_float.cpp
covers the C++ side there. cv2 (Debian's python3-opencv 4.6) and torch (python3-torch) are required, not optional.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from conftest import source_dir

import cv2  # noqa: E402  (required: see the module docstring)
import torch  # noqa: E402
from superpoint_rt import _core

sys.path.insert(0, str(source_dir() / "tests" / "resize"))
import kornia_reference  # noqa: E402

assert cv2.__version__.startswith("4.6."), f"these expectations are OpenCV 4.6's, found {cv2.__version__}"

# (src_w, src_h) -> (dst_w, dst_h)
SHAPES = [
    ((8, 8), (4, 4)),  # 2x2: the SIMD 4-lane grouping only
    ((22, 10), (11, 5)),  # 2x2 with a scalar tail (11 = 2 * 4 + 3)
    ((64, 48), (32, 24)),
    ((63, 48), (21, 16)),  # 3x3
    ((64, 48), (16, 12)),  # 4x4
    ((60, 40), (20, 10)),  # 3x4
    ((33, 17), (11, 17)),  # 3x1: one axis only
    ((50, 40), (50, 13)),  # height only, non-integer
    ((50, 40), (17, 40)),  # width only, non-integer
    ((4032, 3024), (1024, 768)),  # a phone photo to hloc's 1024
    ((1063, 780), (1024, 751)),  # barely over the limit
    ((1600, 1067), (1024, 683)),
    ((97, 61), (13, 9)),
    ((61, 41), (30, 20)),
    ((30, 1), (7, 1)),  # 1-pixel row
    ((1, 30), (1, 7)),  # 1-pixel column
    ((1000, 3), (250, 1)),
    ((2, 2), (1, 1)),
    ((7, 5), (9, 3)),  # enlarge one axis, shrink the other
    ((10, 10), (37, 23)),  # enlarge
    ((9, 9), (9, 27)),
    ((1, 1), (5, 3)),
    ((300, 200), (300, 200)),  # identity: a copy
    ((17000, 40), (1024, 2)),  # panoramas: sources over 16384 a side (hloc takes them; issue 19)
    ((40, 17000), (2, 1024)),
    ((16400, 37), (1600, 4)),
    ((20000, 3), (16000, 5)),  # a wide source, enlarging one axis (the linear path with area coefficients)
]


def plane(w: int, h: int, seed: int, scale: float = 255.0) -> np.ndarray:
    return (np.random.default_rng(seed).random((h, w), dtype=np.float32) * np.float32(scale)).astype(np.float32)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("interp,kind", [(cv2.INTER_AREA, "cv2_area"), (cv2.INTER_LINEAR, "cv2_linear")])
def test_cv2_bit_exact(interp, kind):
    cv2.setNumThreads(1)
    for i, ((sw, sh), (dw, dh)) in enumerate(SHAPES):
        src = plane(sw, sh, seed=i)
        ref = cv2.resize(src, (dw, dh), interpolation=interp).reshape(dh, dw)
        ours = _core._resize_float(src, dw, dh, kind)
        assert ours.shape == (dh, dw)
        diff = np.abs(ours.astype(np.float64) - ref).max()
        np.testing.assert_array_equal(bits(ours), bits(ref),
                                      err_msg=f"{kind} {sw}x{sh}->{dw}x{dh}: max abs diff {diff}")


def test_cv2_area_random_shapes():
    """Random sizes (mostly shrinking, some integer factors) against cv2, and the fast kernel against the reference."""
    cv2.setNumThreads(1)
    rnd = random.Random(11)
    for i in range(60):
        sw, sh = rnd.randint(1, 300), rnd.randint(1, 300)
        if i % 4 == 0:
            f = rnd.randint(1, 5)
            sw, sh = sw - sw % f or f, sh - sh % f or f
            dw, dh = sw // f, sh // f
        else:
            dw, dh = rnd.randint(1, sw), rnd.randint(1, sh)
        src = plane(sw, sh, seed=100 + i)
        ref = cv2.resize(src, (dw, dh), interpolation=cv2.INTER_AREA).reshape(dh, dw)
        fast = _core._resize_float(src, dw, dh, "cv2_area")
        slow = _core._resize_float(src, dw, dh, "cv2_area_reference")
        np.testing.assert_array_equal(bits(fast), bits(ref), err_msg=f"{sw}x{sh}->{dw}x{dh}")
        np.testing.assert_array_equal(bits(slow), bits(fast), err_msg=f"reference {sw}x{sh}->{dw}x{dh}")


def test_cv2_linear_random_shapes():
    cv2.setNumThreads(1)
    rnd = random.Random(12)
    for i in range(60):
        sw, sh = rnd.randint(1, 200), rnd.randint(1, 200)
        dw, dh = rnd.randint(1, 400), rnd.randint(1, 400)
        src = plane(sw, sh, seed=200 + i)
        ref = cv2.resize(src, (dw, dh), interpolation=cv2.INTER_LINEAR).reshape(dh, dw)
        ours = _core._resize_float(src, dw, dh, "cv2_linear")
        np.testing.assert_array_equal(bits(ours), bits(ref), err_msg=f"{sw}x{sh}->{dw}x{dh}")


def test_hloc_path_after_division():
    """hloc: gray uint8 -> float32 -> cv2.resize(INTER_AREA) -> / 255 (the check the issue names: within 1e-6)."""
    cv2.setNumThreads(1)
    gray = np.random.default_rng(5).integers(0, 256, (3024, 4032), dtype=np.uint8).astype(np.float32)
    w, h = _core._resize_float_sizes(4032, 3024, 1024)[0]
    ref = cv2.resize(gray, (w, h), interpolation=cv2.INTER_AREA) / 255.0
    ours = _core._resize_float(gray, w, h, "cv2_area") / 255.0
    assert np.abs(ours - ref).max() <= 1e-6


KORNIA_SHAPES = [
    ((4032, 3024), (1024, 768)),  # LightGlue's resize(img, 1024, side="long") of a phone photo
    ((1063, 780), (1024, 751)),
    ((640, 480), (1024, 768)),  # enlarging: no blur, plain bilinear
    ((300, 200), (100, 200)),  # one axis shrinks: blur with sigma 0.001 on the other
    ((97, 61), (13, 9)),  # strong shrink: wide kernels
    ((33, 17), (11, 17)),
    ((50, 40), (50, 13)),
    ((31, 9), (8, 4)),  # kernel radius close to the height (reflect padding of short sides)
    ((5, 3), (12, 7)),
    ((17000, 30), (1024, 18)),  # panoramas (issue 19): LightGlue's 1024-pixel long side
    ((30, 17000), (18, 1024)),
]


def test_kornia_within_tolerance():
    torch.set_num_threads(1)
    worst = 0.0
    for i, ((sw, sh), (dw, dh)) in enumerate(KORNIA_SHAPES):
        src = plane(sw, sh, seed=300 + i, scale=1.0)
        with torch.no_grad():
            ref = kornia_reference.resize_antialias(torch.from_numpy(src)[None, None], (dh, dw))[0, 0].numpy()
        ours = _core._resize_float(src, dw, dh, "kornia_antialias")
        assert ours.shape == ref.shape == (dh, dw)
        d = float(np.abs(ours.astype(np.float64) - ref).max())
        worst = max(worst, d)
        assert d <= 1e-5, f"kornia {sw}x{sh}->{dw}x{dh}: max abs diff {d}"
    print(f"kornia_antialias: max abs diff {worst:.3g} over {len(KORNIA_SHAPES)} shapes")


def test_reference_bilinear_is_torch_interpolate():
    """The reference's written-out bilinear step is F.interpolate up to torch 1.13's double source position."""
    for (sw, sh), (dw, dh) in [((1063, 780), (1024, 751)), ((97, 61), (13, 9)), ((5, 3), (12, 7))]:
        x = torch.from_numpy(plane(sw, sh, seed=7, scale=1.0))[None, None]
        with torch.no_grad():
            a = kornia_reference.bilinear_torch2(x, (dh, dw))
            b = torch.nn.functional.interpolate(x, size=(dh, dw), mode="bilinear", align_corners=False)
        assert float((a - b).abs().max()) <= 1e-4


def test_kornia_identity_is_a_copy():
    src = plane(41, 23, seed=9, scale=1.0)
    np.testing.assert_array_equal(_core._resize_float(src, 41, 23, "kornia_antialias"), src)


def test_size_helpers():
    rnd = random.Random(13)
    sizes = [(4032, 3024), (3024, 4032), (1063, 780), (1024, 1024), (1600, 1067), (1, 5000), (5000, 3), (640, 480),
             (17000, 300), (300, 17000), (40000, 9), (178956970, 1)]
    sizes += [(rnd.randint(1, 9000), rnd.randint(1, 9000)) for _ in range(300)]
    for n in (1024, 1600, 640):
        for w, h in sizes:
            scale = n / max(w, h)
            # A short side may round to 0 (the tools then fail in cv2.resize / kornia); the engine refuses such a frame
            # naming the parameter, the helpers return it as the tools compute it.
            want_hloc = tuple(int(round(x * scale)) for x in (w, h))
            want_kornia = kornia_reference.long_side_size(w, h, n)
            got_hloc, got_kornia = _core._resize_float_sizes(w, h, n)
            assert tuple(got_hloc) == want_hloc, (w, h, n)
            assert tuple(got_kornia) == want_kornia, (w, h, n)
    # Python's round is half to even: 1000 * 0.5 -> 500 and 1001 * 0.5 = 500.5 -> 500, 1003 * 0.5 -> 502.
    assert _core._resize_float_sizes(2002, 1001, 1001)[0] == (1001, 500)
    assert _core._resize_float_sizes(2006, 1003, 1003)[0] == (1003, 502)


def test_bad_sizes_name_them():
    src = plane(10, 10, seed=1)
    for kind in ("cv2_area", "cv2_linear", "kornia_antialias"):
        with pytest.raises(ValueError, match="0x5"):
            _core._resize_float(src, 0, 5, kind)
        with pytest.raises(ValueError, match="16385x5"):
            _core._resize_float(src, 16385, 5, kind)
    with pytest.raises(ValueError, match="unknown kind"):
        _core._resize_float(src, 5, 5, "lanczos")
