#!/usr/bin/env python3
"""Per-layer sensitivity of the simulated bf16 and int8 plans: keypoint F1@2 (top 500) against fp32 only.

    bench/.venv/bin/python bench/quant_sim_layers.py [--images 12] [--calib real] [--act tensor] [--json PATH]
        [--plans PLAN,...]

Cheaper than bench/quality.py --simulate (no pairs, no descriptors' metrics): the first --images photos of
$SHARED/images (sorted by name, quality.py's 640x480 frames) through the reference network under bench/quant_sim.py
plans. Rows (unless --plans is given):
  bf16            the product's bf16 plan, then one row per layer kept f32 ("bf16:L=f32")
  int8            the product's int8 plan with --calib / --act, then one row per layer kept bf16 ("int8:L=bf16")
  fp32 + one int8 layer ("fp32:L=int8"): that layer's own cost (its input at the calibrated per-tensor scale)
F1@2 as in quality_lib.keypoint_f1 (top 500, 2 px L-inf, mutual nearest); the descriptor head does not change
keypoints, so its layers are left out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quality  # noqa: E402
import quality_lib as Q  # noqa: E402
import quant_sim as S  # noqa: E402

KEYPOINT_LAYERS = S.TRUNK + ["score_a", "score_b"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.environ.get("SUPERPOINT_RT_SHARED",
                                                       os.path.join(os.path.dirname(quality.ROOT), "shared")))
    ap.add_argument("--images", type=int, default=12)
    ap.add_argument("--calib", default="real", choices=["synthetic", "real"])
    ap.add_argument("--act", default="tensor", help="tensor, channel, folded or groupG (bench/quant_sim.py)")
    ap.add_argument("--plans", help="comma-separated plans instead of the default rows")
    ap.add_argument("--only", help="comma-separated substrings: only the images whose names contain one")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    sys.path.insert(0, os.path.join(a.shared, "tools"))
    import reference as R

    folder = os.path.join(a.shared, "images")
    names = sorted(f for f in os.listdir(folder) if f.lower().endswith(quality.IMAGE_EXTS))
    if a.only:
        names = [n for n in names if any(o in n for o in a.only.split(","))]
    names = names[:a.images]
    xs = [torch.from_numpy(R.RESCALE_LUT[quality.frame_of(os.path.join(folder, n))])[None, None] for n in names]
    ref = R.SuperPointReference(os.path.join(a.shared, "weights", "superpoint"), max_keypoints=-1)
    sim = S.Simulator(ref.net, a.shared)

    def keypoints(net, x):
        with torch.no_grad():
            enc = net.encoder(x)
            logits = net.keypoint_decoder(enc)
        s = R.simple_nms(R.scores_from_logits(logits), ref.cfg.nms_radius)
        kp, _, _ = R.extract_keypoints(s, ref.cfg, Q.FIDELITY_TOP_K)
        return kp.numpy().astype(np.float64)

    base = [keypoints(ref.net, x) for x in xs]
    opt = f":act={a.act}:calib={a.calib}"
    if a.plans:
        specs = [s.strip() for s in a.plans.split(",") if s.strip()]
    else:
        specs = (["bf16"] + [f"bf16:{n}=f32" for n in KEYPOINT_LAYERS if n != "conv1a"]
                 + ["int8" + opt] + [f"int8:{n}=bf16" + opt for n in KEYPOINT_LAYERS if n != "conv1a"]
                 + [f"fp32:{n}=int8" + opt for n in KEYPOINT_LAYERS if n != "conv1a"])
    print(f"{len(names)} images ({names[0]} .. {names[-1]}), F1@2 of the top {Q.FIDELITY_TOP_K} vs fp32",
          file=sys.stderr)
    rows = []
    print("| plan | F1@2 mean | F1@2 min | MACs f32/bf16/int8 % |")
    print("|---|---|---|---|")
    for spec in specs:
        t0 = time.perf_counter()
        plan = S.parse_plan(spec)
        net = sim.net(plan)
        f1 = [Q.keypoint_f1(keypoints(net, x), b) for x, b in zip(xs, base)]
        sh = plan.mac_shares()
        rows.append({"plan": spec, "f1@2_mean": float(np.mean(f1)), "f1@2_min": float(np.min(f1)),
                     "per_image_f1@2": dict(zip(names, map(float, f1))), "mac_shares": sh})
        print(f"| {spec} | {np.mean(f1):.4f} | {np.min(f1):.4f} | "
              + " / ".join(f"{100 * sh[p]:.1f}" for p in S.PRECISIONS) + " |", flush=True)
        print(f"  {spec}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"command": " ".join([os.path.relpath(sys.argv[0], quality.ROOT)] + sys.argv[1:]),
                       "images": names, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
