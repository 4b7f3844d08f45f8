"""Image helpers that need numpy only: read an image file with the engine's decoders (the pixels Pillow's
Image.open(f).convert("RGB") gives; gray files stay (H, W)), write a PNG, and draw keypoints / matches."""

from __future__ import annotations

import os
from typing import Any, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._params import check_max_pixels


def read_image(src: Union[str, "os.PathLike[str]", bytes, bytearray, memoryview],
               max_pixels: int = _core.DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decodes a file or encoded bytes: uint8 (H, W) for gray images, (H, W, 3) RGB otherwise.

    Raises FileNotFoundError (missing file), ValueError (undecodable, unsupported format, over max_pixels)."""
    if isinstance(src, os.PathLike):
        src = os.fsdecode(src)
    elif isinstance(src, memoryview) and not src.c_contiguous:
        src = src.tobytes()  # _core reads a buffer as one run of bytes (see _inputs.to_engine)
    return _core.decode(src, check_max_pixels(max_pixels))


def write_png(path: Union[str, "os.PathLike[str]"], image: np.ndarray) -> None:
    """Writes a uint8 (H, W) or (H, W, 3) array as an 8-bit PNG."""
    a = np.asarray(image)
    if a.dtype != np.uint8:
        raise TypeError(f"write_png takes a uint8 array, got {a.dtype}")
    _core.write_png(os.fsdecode(path), a)


def _as_rgb(image: np.ndarray) -> np.ndarray:
    a = np.asarray(image)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    return np.ascontiguousarray(a[:, :, :3]).astype(np.uint8, copy=True)


def draw_keypoints(image: np.ndarray, keypoints: Any, radius: int = 3,
                   color: Tuple[int, int, int] = (0, 255, 0)) -> np.ndarray:
    """An RGB copy of `image` with a filled disc (dark rim) at each [x, y] keypoint."""
    out = _as_rgb(image)
    h, w = out.shape[:2]
    kp = np.asarray(keypoints, np.float64).reshape(-1, 2)
    r = int(radius)
    dy, dx = np.mgrid[-r - 1:r + 2, -r - 1:r + 2]
    d2 = dx * dx + dy * dy
    for ring, col in (((r + 1) ** 2, (20, 20, 20)), (r * r, color)):
        m = d2 <= ring
        ys = (np.rint(kp[:, 1])[:, None] + dy[m][None, :]).ravel().astype(np.int64)
        xs = (np.rint(kp[:, 0])[:, None] + dx[m][None, :]).ravel().astype(np.int64)
        ok = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
        out[ys[ok], xs[ok]] = col
    return out


def draw_line(image: np.ndarray, p0: Sequence[float], p1: Sequence[float], color: Tuple[int, int, int]) -> None:
    """Draws a 1-pixel line segment into an RGB uint8 array, in place."""
    h, w = image.shape[:2]
    n = int(max(abs(p1[0] - p0[0]), abs(p1[1] - p0[1]))) + 1
    xs = np.rint(np.linspace(p0[0], p1[0], n)).astype(np.int64)
    ys = np.rint(np.linspace(p0[1], p1[1], n)).astype(np.int64)
    ok = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    image[ys[ok], xs[ok]] = color
