"""A synthetic test picture (numpy only): for examples and warm-up when no photograph is at hand.

It draws filled rectangles, discs, a checkerboard and line segments over a smooth gradient with a little noise, so
SuperPoint finds several hundred corners on it. Deterministic for a given seed.
"""

from __future__ import annotations

import numpy as np


def synthetic_image(width: int = 640, height: int = 480, seed: int = 0) -> np.ndarray:
    """An RGB uint8 array of shape (height, width, 3)."""
    if width < 1 or height < 1:
        raise ValueError(f"synthetic_image size {width}x{height} must be at least 1x1")
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.empty((height, width, 3), np.float32)
    img[..., 0] = 60 + 80 * xx / max(1, width - 1)
    img[..., 1] = 70 + 60 * yy / max(1, height - 1)
    img[..., 2] = 90.0
    s = min(width, height)
    for _ in range(40):  # rectangles
        w, h = rng.integers(s // 20 + 1, s // 5 + 2, size=2)
        x0, y0 = rng.integers(0, max(1, width - w)), rng.integers(0, max(1, height - h))
        img[y0:y0 + h, x0:x0 + w] = rng.integers(0, 256, size=3)
    for _ in range(25):  # discs
        cx, cy, r = rng.integers(0, width), rng.integers(0, height), rng.integers(s // 40 + 1, s // 10 + 2)
        img[(xx - cx) ** 2 + (yy - cy) ** 2 <= r * r] = rng.integers(0, 256, size=3)
    # a checkerboard patch in the middle
    cw = max(2, s // 30)
    x0, y0 = width // 2 - 4 * cw, height // 2 - 4 * cw
    for i in range(8):
        for j in range(8):
            if (i + j) % 2 == 0:
                img[max(0, y0 + i * cw):max(0, y0 + (i + 1) * cw), max(0, x0 + j * cw):max(0, x0 + (j + 1) * cw)] = 240
    for _ in range(15):  # thin lines
        x1, y1, x2, y2 = rng.integers(0, width), rng.integers(0, height), rng.integers(0, width), rng.integers(0, height)
        n = int(max(abs(x2 - x1), abs(y2 - y1))) + 1
        xs = np.linspace(x1, x2, n).round().astype(int).clip(0, width - 1)
        ys = np.linspace(y1, y2, n).round().astype(int).clip(0, height - 1)
        img[ys, xs] = rng.integers(0, 256, size=3)
    img += rng.normal(0, 4, size=img.shape).astype(np.float32)
    return np.clip(img, 0, 255).round().astype(np.uint8)
