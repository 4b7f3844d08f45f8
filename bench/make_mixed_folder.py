#!/usr/bin/env python3
"""Writes a folder of photos of different sizes, like a structure-from-motion dataset (issue 19: hloc's
datasets/sacre_coeur/mapping has 10 Flickr photos of 0.7-0.8 MP, every one a different size).

    .venv/bin/python bench/make_mixed_folder.py OUT_DIR [--count 10] [--scale 1.0]

Each image is a crop of one of the large photos of $SUPERPOINT_RT_SHARED/images (default ../shared/images beside the
checkout), landscape and portrait, 0.7-0.8 MP at --scale 1 (the pixel count scales with --scale squared), saved as
JPEG (quality 92). Sizes are fixed (the same folder every run) and all different. The crops stay outside the
repository (the images' licences): OUT_DIR is typically a temporary folder.

Used by the memory measurements of docs/BENCHMARKS.md (`superpoint-rt extract OUT_DIR --preset
hloc:superpoint_aachen ...` under /usr/bin/time -v) and, at a small --scale, by tests/cli's folder-vs-largest-image
memory check.
"""
import argparse
import os
import sys

from PIL import Image

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(os.path.dirname(REPO), "shared"))

# (width, height) at scale 1: 0.70-0.80 MP, landscape and portrait, no two alike.
SIZES = [(1001, 747), (781, 1003), (1066, 703), (964, 781), (1100, 690), (697, 1071), (922, 812), (1052, 742),
         (859, 903), (1013, 761), (742, 1049), (1080, 695)]
SOURCES = ["opensfm_berlin_01.jpg", "roma_toronto_A.jpg", "roma_toronto_B.jpg", "berlin01_1920x1080.jpg"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--count", type=int, default=10, help=f"images (at most {len(SIZES)})")
    ap.add_argument("--scale", type=float, default=1.0, help="side scale of every size (0.5: a quarter of the pixels)")
    a = ap.parse_args(argv)
    if not 1 <= a.count <= len(SIZES):
        sys.exit(f"--count must be 1..{len(SIZES)}")
    os.makedirs(a.out_dir, exist_ok=True)
    sources = [Image.open(os.path.join(SHARED, "images", s)).convert("RGB") for s in SOURCES]
    seen = set()
    for i, (w, h) in enumerate(SIZES[: a.count]):
        w, h = max(16, round(w * a.scale)), max(16, round(h * a.scale))
        if (w, h) in seen:
            sys.exit(f"--scale {a.scale} makes two sizes equal ({w}x{h})")
        seen.add((w, h))
        src = sources[i % len(sources)]
        # Crops at different places, downscaled from a region about 1.4x larger so that they look like photos.
        rw, rh = min(src.width, round(w * 1.4)), min(src.height, round(h * 1.4))
        x0 = (i * 97) % max(1, src.width - rw + 1)
        y0 = (i * 53) % max(1, src.height - rh + 1)
        img = src.crop((x0, y0, x0 + rw, y0 + rh)).resize((w, h), Image.LANCZOS)
        img.save(os.path.join(a.out_dir, f"photo_{i:02d}_{w}x{h}.jpg"), quality=92)
    print(a.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
