#!/usr/bin/env python3
"""The SuperPoint network in float64 (numpy only): the reference that `superpoint-rt bench` measures every row's
error against (docs/BENCHMARKS.md, "error vs float64").

    bench/.venv/bin/python bench/reference_f64.py --weights DIR --plane F32_FILE [--height 480 --width 640]
                                                  --out F64_FILE
    bench/.venv/bin/python bench/reference_f64.py --weights DIR --check GOLDEN_DENSE_NPZ

The network is bench/export_onnx.py's network() (config.json + model.safetensors), the same one every peer's graph
is made from, run with float64 weights, activations and sums (a 3x3 convolution is nine float64 matrix products,
one per tap). --out gets the two maps the bench compares, float64 little-endian, one after the other:
  scores       (kp_dim - 1) x H/8 x W/8   softmax over the kp_dim channels of the keypoint head, dustbin dropped
  descriptors  desc_dim x H/8 x W/8       the descriptor head's map, L2-normalised per cell (HF's F.normalize)
then prints one JSON line {"ready": true, "ms": x, "shape": [hc, wc]} (the bench's worker protocol: the driver starts
it beside its workers and waits for that line before the first measurement).
--check compares the float64 maps with the PyTorch reference's float32 golden ones (score_map before depth-to-space
is the same values; descriptor_map); float32 rounding alone is about 1e-5 / 1e-6 there.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_onnx  # noqa: E402  (the network's one definition)


def conv(x, w, b):
    """x: cin x H x W float64; w: cout x cin x k x k (k = 1 or 3, padding k // 2); b: cout. Returns cout x H x W."""
    cin, h, wd = x.shape
    cout, _, k, _ = w.shape
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p))) if p else x
    w = w.astype(np.float64)
    y = np.broadcast_to(b.astype(np.float64)[:, None], (cout, h * wd)).copy()
    for dy in range(k):
        for dx in range(k):
            tap = np.ascontiguousarray(xp[:, dy:dy + h, dx:dx + wd]).reshape(cin, h * wd)
            # Contiguous, so that numpy hands the product to BLAS (a strided operand takes its own loop, 10x slower).
            y += np.ascontiguousarray(w[:, :, dy, dx]) @ tap
    return y.reshape(cout, h, wd)


def maxpool2(x):
    c, h, w = x.shape
    h2, w2 = h // 2, w // 2  # floors odd sizes, as MaxPool2d does
    return x[:, :h2 * 2, :w2 * 2].reshape(c, h2, 2, w2, 2).max(axis=(2, 4))


def run(steps, x):
    for step in steps:
        if step[0] == "pool":
            x = maxpool2(x)
        else:
            _, _, w, b, relu = step
            x = conv(x, w, b)
            if relu:
                np.maximum(x, 0, out=x)
    return x


def forward(weights_dir, plane):
    """plane: H x W float32 (v / 255). Returns (scores, descriptors) float64 as described in the module text."""
    (encoder, score, desc), _ = export_onnx.network(weights_dir)
    enc = run(encoder, plane.astype(np.float64)[None])
    logits = run(score, enc)
    e = np.exp(logits - logits.max(axis=0, keepdims=True))
    scores = (e / e.sum(axis=0, keepdims=True))[:-1]
    d = run(desc, enc)
    d = d / np.maximum(np.sqrt((d * d).sum(axis=0, keepdims=True)), 1e-12)
    return scores, d


def check(weights_dir, golden_path):
    g = np.load(golden_path)
    scores, d = forward(weights_dir, g["pixel_values"].astype(np.float32))
    c, hc, wc = scores.shape
    # score_map is the depth-to-space of the scores: pixel (8y + i, 8x + j) = channel 8i + j of cell (y, x).
    sm = g["score_map"].astype(np.float64).reshape(hc, 8, wc, 8).transpose(1, 3, 0, 2).reshape(c, hc, wc)
    e_s = float(np.abs(scores - sm).max())
    e_d = float(np.abs(d - g["descriptor_map"].astype(np.float64)).max())
    print(f"check {os.path.basename(golden_path)}: max|scores - golden score_map| = {e_s:.3g}, "
          f"max|descriptors - golden descriptor_map| = {e_d:.3g} (the golden maps are float32)")
    return 0 if e_s <= 1e-4 and e_d <= 1e-4 else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True, help="dir with config.json + model.safetensors")
    ap.add_argument("--plane", help="height * width float32 values")
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--out", help="the float64 maps to write")
    ap.add_argument("--check", metavar="NPZ", help="golden dense npz to compare with")
    a = ap.parse_args(argv)
    if a.check:
        return check(a.weights, a.check)
    if not a.plane or not a.out:
        ap.error("--plane and --out are needed (or --check)")
    protocol = os.fdopen(os.dup(1), "w")  # the JSON line goes to the original stdout; anything else to stderr
    os.dup2(2, 1)
    plane = np.fromfile(a.plane, dtype="<f4")
    if plane.size != a.height * a.width:
        sys.exit(f"reference_f64.py: {a.plane} holds {plane.size} floats, expected {a.height} * {a.width}")
    t0 = time.perf_counter()
    scores, d = forward(a.weights, plane.reshape(a.height, a.width))
    ms = (time.perf_counter() - t0) * 1e3
    tmp = f"{a.out}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(scores.astype("<f8").tobytes())
        f.write(d.astype("<f8").tobytes())
    os.replace(tmp, a.out)
    protocol.write(json.dumps({"ready": True, "ms": ms, "shape": list(scores.shape[1:]),
                               "channels": [scores.shape[0], d.shape[0]]}) + "\n")
    protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
