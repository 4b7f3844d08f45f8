"""Pillow side of tests/resize: resizes / decodes with Debian's Pillow 9.4 (the same libjpeg-turbo as ours).

  pillow_resize.py cases IN.npz OUT.npz
      IN holds img_<i> (H x W uint8 for mode "L", H x W x 3 for mode "RGB") and size_<i> ([out_w, out_h]);
      OUT gets out_<i> = Image.fromarray(img).resize(size, Image.BILINEAR) as an array.
  pillow_resize.py decode OUT.npz PATH...
      OUT gets rgb_<i> = Image.open(PATH).convert("RGB") as an H x W x 3 array and, for i = 0 only when the
      environment asks for it (RESIZE_TO=w,h), rs_<i> = that image resized with Image.BILINEAR.
"""
import os
import sys

import numpy as np
from PIL import Image


def cases(src, dst):
    d = np.load(src)
    out = {}
    i = 0
    while f"img_{i}" in d.files:
        img = d[f"img_{i}"]
        w, h = (int(v) for v in d[f"size_{i}"])
        out[f"out_{i}"] = np.asarray(Image.fromarray(img).resize((w, h), Image.BILINEAR))
        i += 1
    np.savez(dst, **out)


def decode(dst, paths):
    out = {}
    size = os.environ.get("RESIZE_TO")
    for i, p in enumerate(paths):
        im = Image.open(p).convert("RGB")
        out[f"rgb_{i}"] = np.asarray(im)
        if size:
            w, h = (int(v) for v in size.split(","))
            out[f"rs_{i}"] = np.asarray(im.resize((w, h), Image.BILINEAR))
    np.savez(dst, **out)


if __name__ == "__main__":
    import PIL

    if not PIL.__version__.startswith("9.4"):
        sys.exit(f"expected Debian's Pillow 9.4, got {PIL.__version__} from {PIL.__file__}")
    if sys.argv[1] == "cases":
        cases(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "decode":
        decode(sys.argv[2], sys.argv[3:])
    else:
        sys.exit("usage: pillow_resize.py cases IN OUT | decode OUT PATH...")
