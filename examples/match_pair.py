#!/usr/bin/env python3
"""Match two images with hloc's nearest-neighbour matcher (superpoint_rt.match), drawn side by side.

    python examples/match_pair.py [IMAGE_A IMAGE_B] [--out matches.png] [--max-keypoints N]
                                  [--conf NN-mutual|NN-ratio|NN-superpoint]

Default pair: ../shared/images/berlin01_1600x900.jpg and berlin02_1600x900.jpg beside the repository, or a synthetic
picture and a shifted copy when those are absent. Needs numpy only.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import demo_image, weights  # noqa: E402

from superpoint_rt import SuperPoint, draw_keypoints, match, read_image, synthetic_image, write_png  # noqa: E402
from superpoint_rt._image import draw_line  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("images", nargs="*", help="two image files")
    ap.add_argument("--out", default="matches.png", help="output PNG (default: matches.png)")
    ap.add_argument("--max-keypoints", type=int, default=1024)
    ap.add_argument("--conf", default="NN-superpoint", choices=["NN-mutual", "NN-ratio", "NN-superpoint"],
                    help="hloc's matcher configuration (default NN-superpoint: mutual, distance <= 0.7)")
    args = ap.parse_args()
    if len(args.images) not in (0, 2):
        ap.error("give two images, or none for the demo pair")

    if args.images:
        srcs = args.images
    else:
        a, b = demo_image("berlin01_1600x900.jpg"), demo_image("berlin02_1600x900.jpg")
        srcs = [a, b] if a and b else None
    if srcs:
        pics = [read_image(s) for s in srcs]
    else:
        base = synthetic_image(900, 640, seed=3)
        pics = [base[:, :800], base[20:, 60:860]]  # the same scene moved by (60, 20) pixels
        srcs = ["synthetic A", "synthetic B"]

    with SuperPoint.from_pretrained(weights(), warmup_variants="minimal") as model:
        fa, fb = model(pics, max_keypoints=args.max_keypoints)
    pairs, _ = match(fa, fb, args.conf)
    print(f"{srcs[0]}: {len(fa)} keypoints, {srcs[1]}: {len(fb)} keypoints, {len(pairs)} mutual matches")

    ia, ib = draw_keypoints(pics[0], fa.keypoints, 2), draw_keypoints(pics[1], fb.keypoints, 2)
    h = max(ia.shape[0], ib.shape[0])
    canvas = np.zeros((h, ia.shape[1] + ib.shape[1], 3), np.uint8)
    canvas[:ia.shape[0], :ia.shape[1]] = ia
    canvas[:ib.shape[0], ia.shape[1]:] = ib
    rng = np.random.default_rng(0)
    for i, j in pairs:
        xa, ya = fa.keypoints[i]
        xb, yb = fb.keypoints[j]
        draw_line(canvas, (xa, ya), (xb + ia.shape[1], yb), tuple(int(c) for c in rng.integers(64, 256, 3)))
    write_png(args.out, canvas)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
