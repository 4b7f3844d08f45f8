"""Fidelity of `superpoint-rt extract --preset NAME` against tests/presets/reference_presets.py (SPEC.md §2b).

Rules (SPEC §2's fidelity rule, applied to hloc's request paths):
- hloc presets: the keypoint sets are identical except points whose reference score (the dense pre-NMS score map
  at that pixel) lies within 1e-5 of the threshold, of the k-th score (when top-k truncates) or of an NMS
  competitor (a pixel within 2 * nms_radius, L-inf, whose score is within 1e-5); matched points have equal float32
  coordinates, scores within 1e-5 and descriptors within 1e-4 per component; the ORDER is hloc's: raster (y, x)
  when at most k points pass, else descending score (ties within 1e-5 may swap).
- lightglue: keypoint F1 at 2 px (L-inf, one-to-one) >= 0.99 and the mean descriptor cosine of matched points
  >= 0.999 (the minimum is reported).

Used by test_presets_fidelity.py, and as a script for the table over ALL images of ../shared/images:

  .venv/bin/python tests/presets/fidelity.py --cli build-ref/src/cli/superpoint-rt [--presets P,...] [IMAGE...]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_presets as R  # noqa: E402

SCORE_TOL = 1e-5
DESC_TOL = 1e-4
AMBIG_TOL = 1e-5
IMAGE_EXTS = {".jpg", ".jpeg", ".png"}


def shared_dir() -> pathlib.Path:
    d = (os.environ.get("SUPERPOINT_RT_SHARED") or os.environ.get("SUPERPOINT_RT_SHARED_DEFAULT")
         or os.environ.get("SPRT_SHARED_DIR"))
    return pathlib.Path(d) if d else HERE.parents[2] / "shared"


def all_images() -> list[pathlib.Path]:
    d = shared_dir() / "images"
    return sorted(p for p in d.iterdir() if p.suffix.lower() in IMAGE_EXTS)


def run_cli(cli: str, images, preset: str, out_dir, extra=()) -> None:
    cmd = [cli, "extract", *map(str, images), "--out", str(out_dir), "--preset", preset,
           "--weights", str(shared_dir() / "weights" / "superpoint"), "--quiet", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


def load_ours(out_dir, image: pathlib.Path) -> dict:
    with np.load(pathlib.Path(out_dir) / (image.name + ".npz")) as z:
        return {k: z[k] for k in z.files}


def _ambiguous(heat: np.ndarray, yx: tuple[int, int], p: R.Preset, kth) -> str | None:
    """Why a point present in one output only is allowed to differ (None: it is not)."""
    y, x = yx
    H, W = heat.shape
    if not (0 <= y < H and 0 <= x < W):
        return None
    s = float(heat[y, x])
    if abs(s - p.threshold) <= AMBIG_TOL:
        return "threshold"
    if kth is not None and abs(s - kth) <= AMBIG_TOL:
        return "k-th score"
    r = 2 * max(p.nms_radius, 1)
    win = heat[max(0, y - r):y + r + 1, max(0, x - r):x + r + 1].astype(np.float64)
    close = np.abs(win - s) <= AMBIG_TOL
    if close.sum() > 1:  # the point itself is always close
        return "nms competitor"
    return None


def compare_hloc(ref: dict, ours: dict, preset: str) -> dict:
    """Point-by-point comparison under the fidelity rule; returns the figures and the list of violations."""
    p = R.PRESETS[preset]
    bad: list[str] = []
    ref_yx = [(int(y), int(x)) for x, y in ref["kp_net"].astype(np.int64)]
    ours_kp = ours["keypoints"]
    ours_xy = R.to_network_frame(ours_kp, ref, preset)
    ours_yx = [(int(y), int(x)) for x, y in ours_xy]
    if len(set(ours_yx)) != len(ours_yx):
        bad.append("our keypoints map to repeated network pixels")
    ref_index = {k: i for i, k in enumerate(ref_yx)}
    ours_index = {k: i for i, k in enumerate(ours_yx)}
    pairs = [(ref_index[k], j) for j, k in enumerate(ours_yx) if k in ref_index]
    exceptions = {"threshold": 0, "k-th score": 0, "nms competitor": 0}
    for label, keys, other in (("reference only", ref_yx, ours_index), ("ours only", ours_yx, ref_index)):
        for k in keys:
            if k in other:
                continue
            why = _ambiguous(ref["heat"], k, p, ref["kth"])
            if why is None:
                s = ref["heat"][k] if 0 <= k[0] < ref["heat"].shape[0] and 0 <= k[1] < ref["heat"].shape[1] else None
                bad.append(f"{label}: network (x={k[1]}, y={k[0]}) reference score {s}")
            else:
                exceptions[why] += 1
    ri = np.array([a for a, _ in pairs], dtype=np.int64)
    oi = np.array([b for _, b in pairs], dtype=np.int64)
    n_ex = sum(exceptions.values())
    # more than 1 % unmatched points is not a near-tie effect, whatever the per-point reasons
    if n_ex > max(3, 0.01 * len(ref_yx)):
        bad.append(f"{n_ex} unmatched points (>1 %): {exceptions}")
    coord_diff = 0
    score_err = desc_err = 0.0
    if len(pairs):
        neq = np.any(ref["keypoints"][ri] != ours_kp[oi], axis=1)
        coord_diff = int(neq.sum())
        if coord_diff:
            j = int(np.flatnonzero(neq)[0])
            bad.append(f"{coord_diff} matched keypoints with other float32 coordinates, e.g. reference "
                       f"{ref['keypoints'][ri[j]].tolist()} ours {ours_kp[oi[j]].tolist()}")
        score_err = float(np.max(np.abs(ref["scores"][ri].astype(np.float64) - ours["scores"][oi])))
        if score_err > SCORE_TOL:
            bad.append(f"score error {score_err:.3g} > {SCORE_TOL}")
        if "descriptors" not in ours:
            bad.append("no descriptors in our output")
        else:
            desc_err = float(np.max(np.abs(ref["descriptors"][ri].astype(np.float64) - ours["descriptors"][oi])))
            if desc_err > DESC_TOL:
                bad.append(f"descriptor error {desc_err:.3g} > {DESC_TOL}")
    # order
    if ref["truncated"]:
        order = "score"
        if len(ours_kp) != p.max_keypoints and n_ex == 0:
            bad.append(f"{len(ours_kp)} keypoints, expected the top {p.max_keypoints}")
        s = ours["scores"]
        if np.any(np.diff(s) > 0):
            bad.append("top-k output not sorted by descending score")
        rs = ref["scores"][ri][np.argsort(oi)]
        if np.any(np.diff(rs.astype(np.float64)) > AMBIG_TOL):
            bad.append("top-k output order differs from the reference beyond near-ties")
    else:
        order = "raster"
        key = np.array([y * 100000 + x for y, x in ours_yx], dtype=np.int64)
        if np.any(np.diff(key) <= 0):
            bad.append("output not in hloc's raster order (y, then x) although at most k points pass")
    size_ok = sorted(np.asarray(ours["image_size"]).tolist()) == sorted(ref["image_size"].tolist())
    if not size_ok or list(ours["image_size"]) != [int(ref["image_size"][1]), int(ref["image_size"][0])]:
        bad.append(f"image_size {ours['image_size'].tolist()} vs (H, W) {ref['image_size'][::-1].tolist()}")
    return {"n_ref": len(ref_yx), "n_ours": len(ours_yx), "matched": len(pairs), "exceptions": exceptions,
            "score_err": score_err, "desc_err": desc_err, "coord_diff": coord_diff, "order": order,
            "pairs": (ri, oi), "bad": bad}


def _one_to_one(a: np.ndarray, b: np.ndarray, tol: float):
    """Greedy one-to-one matching of points a (in order) to the nearest unused b within tol (L-inf)."""
    cells: dict[tuple[int, int], list[int]] = {}
    for j, (x, y) in enumerate(b):
        cells.setdefault((int(np.floor(x / tol)), int(np.floor(y / tol))), []).append(j)
    used = np.zeros(len(b), bool)
    pairs = []
    for i, (x, y) in enumerate(a):
        cx, cy = int(np.floor(x / tol)), int(np.floor(y / tol))
        best, bd = -1, np.inf
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for j in cells.get((cx + dx, cy + dy), ()):
                    if used[j]:
                        continue
                    d = max(abs(b[j][0] - x), abs(b[j][1] - y))
                    if d <= tol and d < bd:
                        best, bd = j, d
        if best >= 0:
            used[best] = True
            pairs.append((i, best))
    return pairs


def compare_lightglue(ref: dict, ours: dict, preset: str = "lightglue") -> dict:
    bad: list[str] = []
    pairs = _one_to_one(ref["keypoints"].astype(np.float64), ours["keypoints"].astype(np.float64), 2.0)
    m = len(pairs)
    prec = m / max(len(ours["keypoints"]), 1)
    rec = m / max(len(ref["keypoints"]), 1)
    f1 = 2 * prec * rec / (prec + rec) if m else 0.0
    if len(ref["keypoints"]) == 0 and len(ours["keypoints"]) == 0:
        f1 = 1.0
    cos_mean = cos_min = 1.0
    if m and "descriptors" in ours:
        ri = np.array([i for i, _ in pairs])
        oi = np.array([j for _, j in pairs])
        cos = np.sum(ref["descriptors"][ri].astype(np.float64) * ours["descriptors"][oi], axis=1)
        cos_mean, cos_min = float(cos.mean()), float(cos.min())
    elif "descriptors" not in ours:
        bad.append("no descriptors in our output")
    if f1 < 0.99:
        bad.append(f"keypoint F1@2px {f1:.4f} < 0.99")
    if cos_mean < 0.999:
        bad.append(f"mean descriptor cosine {cos_mean:.5f} < 0.999")
    if list(ours["image_size"]) != [int(ref["image_size"][1]), int(ref["image_size"][0])]:
        bad.append(f"image_size {ours['image_size'].tolist()} vs (H, W) {ref['image_size'][::-1].tolist()}")
    return {"n_ref": len(ref["keypoints"]), "n_ours": len(ours["keypoints"]), "matched": m, "f1": f1,
            "cos_mean": cos_mean, "cos_min": cos_min, "bad": bad}


def compare(ref: dict, ours: dict, preset: str) -> dict:
    return compare_lightglue(ref, ours, preset) if R.PRESETS[preset].kind == "lightglue" else \
        compare_hloc(ref, ours, preset)


def table(cli: str, presets, images, weights=None) -> int:
    net = R.load_net(weights or shared_dir() / "weights" / "superpoint")
    failures = 0
    rows = []
    for preset in presets:
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            run_cli(cli, images, preset, tmp)
            results = []
            for img in images:
                ref = R.run_image(net, img, preset)
                c = compare(ref, load_ours(tmp, img), preset)
                results.append((img, c))
                for b in c["bad"]:
                    print(f"  FAIL {preset} {img.name}: {b}")
                failures += bool(c["bad"])
        n_bad = sum(bool(c["bad"]) for _, c in results)
        kp_ref = sum(c["n_ref"] for _, c in results)
        kp_ours = sum(c["n_ours"] for _, c in results)
        if R.PRESETS[preset].kind == "lightglue":
            f1 = [c["f1"] for _, c in results]
            cm = [c["cos_mean"] for _, c in results]
            cmin = [c["cos_min"] for _, c in results]
            detail = (f"F1@2px mean {np.mean(f1):.5f} min {np.min(f1):.5f}; cosine mean {np.mean(cm):.6f} "
                      f"min-of-image-means {np.min(cm):.6f} min {np.min(cmin):.6f}")
        else:
            ex = {k: sum(c["exceptions"][k] for _, c in results) for k in ("threshold", "k-th score",
                                                                              "nms competitor")}
            detail = (f"matched {sum(c['matched'] for _, c in results)}; near-tie exceptions {ex}; max score err "
                      f"{max(c['score_err'] for _, c in results):.2e}; max desc err "
                      f"{max(c['desc_err'] for _, c in results):.2e}; coord mismatches "
                      f"{sum(c['coord_diff'] for _, c in results)}; orders "
                      f"{sum(c['order'] == 'score' for _, c in results)} score / "
                      f"{sum(c['order'] == 'raster' for _, c in results)} raster")
        rows.append(f"| {preset} | {len(images)} | {len(images) - n_bad} | {kp_ref} / {kp_ours} | {detail} | "
                    f"{time.time() - t0:.0f} s |")
        print(rows[-1], flush=True)
    print()
    print("| preset | images | pass | keypoints ref / ours | figures | time |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if failures else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("images", nargs="*", help="default: every image of $SUPERPOINT_RT_SHARED/images")
    ap.add_argument("--cli", default=os.environ.get("SUPERPOINT_RT_CLI", "build-ref/src/cli/superpoint-rt"))
    ap.add_argument("--presets", default=",".join(R.PRESETS))
    a = ap.parse_args(argv)
    images = [pathlib.Path(x) for x in a.images] or all_images()
    return table(a.cli, a.presets.split(","), images)


if __name__ == "__main__":
    sys.exit(main())
