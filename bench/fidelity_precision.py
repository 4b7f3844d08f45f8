#!/usr/bin/env python3
"""Fidelity of the reduced-precision modes (bf16, int8) against fp32, measured on the product.

Runs the superpoint-rt CLI (`extract --precision MODE --format npz`) on
  * the golden images (every <image>.npz in SHARED/golden/default names an image in SHARED/images), and
  * the image pairs of SHARED/images/MANIFEST.tsv (rows whose `group` starts with pair_),
once per mode (fp32 first), then compares each mode with fp32:
  * keypoint Jaccard: |A & B| / |A | B| over keypoint positions. Both modes map the same network-frame cell
    positions to image coordinates with the same arithmetic, so equal network-frame positions give bit-equal
    coordinates and set comparison of the (x, y) pairs is exact.
    Also over "strong" keypoints only (score >= --strong, default 0.05 = 10x the model's 0.005 threshold) in either
    mode, which tells flips of barely-detected corners apart from moved or lost salient ones.
  * descriptor cosine of the keypoints present in both (descriptors are L2-normalised by the product).
  * per pair: mutual-nearest-neighbour matches (L2 on the descriptors) and the RANSAC inlier ratio (inliers /
    matches) of a fundamental matrix (cv2.findFundamentalMat, FM_RANSAC, 1 px, 0.999) and of a homography
    (cv2.findHomography, RANSAC, 3 px); OpenCV's RNG is seeded so reruns agree.

    bench/.venv/bin/python bench/fidelity_precision.py [--cli build/src/cli/superpoint-rt] [--modes bf16,int8]
        [--shared ../shared] [--out bench/out/fidelity] [--threads N] [--reuse] [--calibration IMAGE|FOLDER]...

--calibration passes int8 calibration images to the CLI (default: the built-in synthetic set). Images of the
calibration set are then left out of the Jaccard and cosine summary (reported as "held-out"), so that the numbers
are not measured on the images the ranges came from.

Needs numpy and opencv-python-headless (bash bench/setup-peers.sh installs both into bench/.venv).
Writes OUT/<mode>/<image>.npz and OUT/fidelity.json; prints a table.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

import numpy as np

try:
    import cv2
except ImportError:  # the table without RANSAC would hide half of the question: refuse
    sys.exit("fidelity_precision: OpenCV missing; run `bash bench/setup-peers.sh` and use bench/.venv/bin/python")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def golden_images(shared):
    names = sorted(f[:-4] for f in os.listdir(os.path.join(shared, "golden", "default")) if f.endswith(".npz"))
    return [n for n in names if os.path.exists(os.path.join(shared, "images", n))]


def pairs(shared):
    groups = {}
    with open(os.path.join(shared, "images", "MANIFEST.tsv"), newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["group"].startswith("pair_"):
                groups.setdefault(row["group"], []).append(row["file"])
    return {g: v for g, v in sorted(groups.items()) if len(v) == 2}


def extract(cli, shared, mode, images, out_dir, threads, reuse, calibration):
    todo = [i for i in images if not (reuse and os.path.exists(os.path.join(out_dir, i + ".npz")))]
    if not todo:
        return 0.0
    os.makedirs(out_dir, exist_ok=True)
    cmd = [cli, "extract", *[os.path.join(shared, "images", i) for i in todo], "--out", out_dir, "--format", "npz",
           "--precision", mode, "--weights", os.path.join(shared, "weights", "superpoint"), "--quiet"]
    if threads:
        cmd += ["--threads", str(threads)]
    if mode == "int8":
        for c in calibration:
            cmd += ["--calibration", c]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"fidelity_precision: {' '.join(cmd[:2])} --precision {mode} failed ({r.returncode}):\n"
                 f"{r.stderr.strip()}")
    return time.time() - t0


def load(out_dir, image):
    z = np.load(os.path.join(out_dir, image + ".npz"))
    return z["keypoints"].astype(np.float32), z["scores"], z["descriptors"].astype(np.float32)


def keypoint_agreement(a, b, strong):
    """Jaccard of the keypoint positions (all, and strong ones), descriptor cosines of the common ones."""
    ka = {tuple(p): i for i, p in enumerate(a[0].tolist())}
    kb = {tuple(p): i for i, p in enumerate(b[0].tolist())}
    common = ka.keys() & kb.keys()
    union = len(ka.keys() | kb.keys())
    jac = len(common) / union if union else 1.0
    sa = {p for p, i in ka.items() if a[1][i] >= strong}
    sb = {p for p, i in kb.items() if b[1][i] >= strong}
    su = (sa | sb)
    # A strong keypoint of one mode counts as kept when the other mode has the same position at any score.
    jac_strong = len({p for p in su if p in ka and p in kb}) / len(su) if su else 1.0
    if common:
        ia = np.array([ka[p] for p in common])
        ib = np.array([kb[p] for p in common])
        cos = np.sum(a[2][ia].astype(np.float64) * b[2][ib], axis=1)
    else:
        cos = np.array([np.nan])
    return jac, jac_strong, cos


def mutual_nn(d1, d2):
    # ||a - b||^2 = 2 - 2 a.b for unit descriptors: nearest = largest dot product.
    sim = d1.astype(np.float32) @ d2.astype(np.float32).T
    nn12 = np.argmax(sim, axis=1)
    nn21 = np.argmax(sim, axis=0)
    i1 = np.nonzero(nn21[nn12] == np.arange(len(d1)))[0]
    return i1, nn12[i1]


def geometry(f1, f2):
    i1, i2 = mutual_nn(f1[2], f2[2])
    n = len(i1)
    res = {"matches": n, "F_inlier_ratio": float("nan"), "H_inlier_ratio": float("nan")}
    if n >= 8:
        p1 = f1[0][i1].astype(np.float64)
        p2 = f2[0][i2].astype(np.float64)
        cv2.setRNGSeed(0)
        _, mf = cv2.findFundamentalMat(p1, p2, cv2.FM_RANSAC, 1.0, 0.999, 10000)
        cv2.setRNGSeed(0)
        _, mh = cv2.findHomography(p1, p2, cv2.RANSAC, 3.0, maxIters=10000, confidence=0.999)
        res["F_inlier_ratio"] = float(mf.sum()) / n if mf is not None else 0.0
        res["H_inlier_ratio"] = float(mh.sum()) / n if mh is not None else 0.0
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "src", "cli", "superpoint-rt"))
    ap.add_argument("--shared", default=os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--modes", default="bf16", help="comma-separated modes compared with fp32")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "fidelity"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="keep features already in OUT/<mode>/")
    ap.add_argument("--strong", type=float, default=0.05, help="score of a strong keypoint")
    ap.add_argument("--calibration", action="append", default=[], help="int8 calibration image or folder")
    a = ap.parse_args()
    if not os.access(a.cli, os.X_OK):
        sys.exit(f"fidelity_precision: no CLI at {a.cli} (build the superpoint-rt target, or pass --cli)")

    calib_names = set()
    for c in a.calibration:
        calib_names |= set(os.listdir(c)) if os.path.isdir(c) else {os.path.basename(c)}
    golden = [g for g in golden_images(a.shared) if g not in calib_names]
    prs = pairs(a.shared)
    images = sorted(set(golden) | {i for v in prs.values() for i in v})
    modes = ["fp32"] + [m for m in a.modes.split(",") if m and m != "fp32"]
    feats, wall = {}, {}
    for m in modes:
        d = os.path.join(a.out, m)
        wall[m] = extract(a.cli, a.shared, m, images, d, a.threads, a.reuse, a.calibration)
        feats[m] = {i: load(d, i) for i in images}

    report = {"images": golden, "pairs": prs, "calibration": sorted(calib_names), "modes": {}}
    ref = feats["fp32"]
    geo_ref = {g: geometry(ref[v[0]], ref[v[1]]) for g, v in prs.items()}
    for m in modes[1:]:
        per_image, cos_all = {}, []
        for i in golden:
            jac, jac_strong, cos = keypoint_agreement(feats[m][i], ref[i], a.strong)
            per_image[i] = {"jaccard": jac, "jaccard_strong": jac_strong, "n": len(feats[m][i][0]),
                            "n_fp32": len(ref[i][0]),
                            "cos_mean": float(np.nanmean(cos)), "cos_min": float(np.nanmin(cos))}
            cos_all.append(cos)
        cos_all = np.concatenate(cos_all)
        per_pair = {}
        for g, v in prs.items():
            r = geometry(feats[m][v[0]], feats[m][v[1]])
            r["fp32"] = geo_ref[g]
            per_pair[g] = r
        jacs = np.array([p["jaccard"] for p in per_image.values()])
        jacs_strong = np.array([p["jaccard_strong"] for p in per_image.values()])
        dF = np.array([100 * (p["F_inlier_ratio"] - p["fp32"]["F_inlier_ratio"]) for p in per_pair.values()])
        dH = np.array([100 * (p["H_inlier_ratio"] - p["fp32"]["H_inlier_ratio"]) for p in per_pair.values()])
        summary = {"jaccard_mean": float(jacs.mean()), "jaccard_min": float(jacs.min()),
                   "jaccard_strong_mean": float(jacs_strong.mean()), "jaccard_strong_min": float(jacs_strong.min()),
                   "cos_mean": float(np.nanmean(cos_all)), "cos_p01": float(np.nanpercentile(cos_all, 1)),
                   "cos_min": float(np.nanmin(cos_all)),
                   "F_ratio_diff_pts_mean": float(np.nanmean(dF)), "F_ratio_diff_pts_maxabs": float(np.nanmax(abs(dF))),
                   "H_ratio_diff_pts_mean": float(np.nanmean(dH)), "H_ratio_diff_pts_maxabs": float(np.nanmax(abs(dH))),
                   "extract_wall_s": wall[m], "extract_wall_s_fp32": wall["fp32"]}
        report["modes"][m] = {"summary": summary, "images": per_image, "pairs": per_pair}

        held = f" (held-out: {len(calib_names)} calibration images left out)" if calib_names and m == "int8" else ""
        print(f"\n== {m} vs fp32: {len(golden)} golden images{held}, {len(prs)} pairs ==")
        print(f"keypoint Jaccard mean {summary['jaccard_mean']:.4f} min {summary['jaccard_min']:.4f}; descriptor "
              f"cosine of common keypoints mean {summary['cos_mean']:.5f} p1 {summary['cos_p01']:.4f} "
              f"min {summary['cos_min']:.4f}")
        print(f"strong keypoints (score >= {a.strong:g}) kept: Jaccard mean {summary['jaccard_strong_mean']:.4f} "
              f"min {summary['jaccard_strong_min']:.4f}")
        print(f"{'pair':28s} {'matches':>15s} {'F inliers %':>17s} {'H inliers %':>17s}")
        print(f"{'':28s} {'fp32 / ' + m:>15s} {'fp32 / ' + m:>17s} {'fp32 / ' + m:>17s}")
        for g, p in per_pair.items():
            f = p["fp32"]
            print(f"{g:28s} {f['matches']:>7d} / {p['matches']:<7d} {100 * f['F_inlier_ratio']:>7.2f} / "
                  f"{100 * p['F_inlier_ratio']:<7.2f} {100 * f['H_inlier_ratio']:>7.2f} / {100 * p['H_inlier_ratio']:<7.2f}")
        print(f"inlier-ratio difference (points): F mean {summary['F_ratio_diff_pts_mean']:+.2f} max|d| "
              f"{summary['F_ratio_diff_pts_maxabs']:.2f}; H mean {summary['H_ratio_diff_pts_mean']:+.2f} max|d| "
              f"{summary['H_ratio_diff_pts_maxabs']:.2f}")
        worst = sorted(per_image.items(), key=lambda kv: kv[1]["jaccard"])[:3]
        print("lowest Jaccard: " + ", ".join(f"{k} {v['jaccard']:.4f}" for k, v in worst))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "fidelity.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {os.path.join(a.out, 'fidelity.json')}")


if __name__ == "__main__":
    main()
