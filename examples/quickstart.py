#!/usr/bin/env python3
"""Quickstart: SuperPoint keypoints and descriptors of one image.

    python examples/quickstart.py [IMAGE] [--out-dir DIR]

Writes DIR/keypoints.png (the keypoints drawn on the image), DIR/keypoints.json and DIR/descriptors.npy
(default DIR: quickstart_out/ in the current directory). Without IMAGE it uses the demo photograph
../shared/images/berlin01_1600x900.jpg beside the repository, or draws a synthetic picture when that is absent.
Weights: $SUPERPOINT_RT_WEIGHTS, else ../shared/weights/superpoint when present, else the Hugging Face hub.
Needs numpy only.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # _common.py beside this file
from _common import demo_image, weights  # noqa: E402

from superpoint_rt import SuperPoint, draw_keypoints, read_image, synthetic_image, write_png  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("image", nargs="?", help="an image file (default: the demo photograph, or a synthetic picture)")
    ap.add_argument("--out-dir", default="quickstart_out", help="output folder (default: quickstart_out)")
    args = ap.parse_args()

    src = args.image or demo_image("berlin01_1600x900.jpg")
    image = read_image(src) if src else synthetic_image(1600, 900)
    name = src or "synthetic 1600x900"

    with SuperPoint.from_pretrained(weights(), warmup_variants="minimal") as model:
        out = model(src if src else image)
        print(len(out), out.keypoints[:3], out.scores[:3], out.descriptors.shape)

    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_png(out_dir / "keypoints.png", draw_keypoints(image, out.keypoints, radius=max(2, image.shape[1] // 400)))
    doc = {"image": name, **out.to_dict()}
    del doc["descriptors"]  # in descriptors.npy
    (out_dir / "keypoints.json").write_text(json.dumps(doc, indent=1))
    np.save(out_dir / "descriptors.npy", out.descriptors)
    print(f"{name}: {len(out)} keypoints -> {out_dir}/keypoints.png, keypoints.json, descriptors.npy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
