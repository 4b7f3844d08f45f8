#!/usr/bin/env python3
"""A pair through the LightGlue preset: mutual nearest neighbours, cv2.findHomography, LightGlue's input dict.

    python examples/lightglue_homography.py [IMAGE_A IMAGE_B]

Default pair: LightGlue's own demo images (../shared/images/lg_DSC_0410.JPG, lg_DSC_0411.JPG). Needs numpy and
OpenCV (cv2); torch is used only to show the dict LightGlue's matcher takes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import cv2
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import demo_image, weights  # noqa: E402

from superpoint_rt import SuperPoint  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("images", nargs="*", help="two image files")
    args = ap.parse_args()
    srcs = args.images or [demo_image("lg_DSC_0410.JPG"), demo_image("lg_DSC_0411.JPG")]
    if len(srcs) != 2 or not all(srcs):
        ap.error("give two images (the demo pair is not beside the repository)")
    with SuperPoint.from_pretrained(weights(), warmup_variants="minimal") as model:
        a, b = (model(s, preset="lightglue") for s in srcs)
    sim = a.descriptors @ b.descriptors.T
    ab, ba = sim.argmax(1), sim.argmax(0)
    mutual = np.flatnonzero(ba[ab] == np.arange(len(ab)))
    H, inliers = cv2.findHomography(a.keypoints[mutual], b.keypoints[ab[mutual]], cv2.RANSAC, 3.0)
    print(f"{len(a)} and {len(b)} keypoints, {len(mutual)} mutual matches, {int(inliers.sum())} homography inliers")
    print("H =", np.array2string(H, precision=4))
    print(f"{len(a.to_cv2_keypoints())} cv2.KeyPoint objects for image A")
    try:
        feats = a.to_lightglue()
        print("LightGlue input:", {k: tuple(v.shape) for k, v in feats.items()})
    except ImportError:
        print("torch is not installed: skipped to_lightglue()")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
