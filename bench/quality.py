#!/usr/bin/env python3
"""Quality of the fast precisions: the SuperPoint paper's homography protocol on our own photos (issue 12, section 1).

    PYTHONPATH=build/python/stage bench/.venv/bin/python bench/quality.py [--pairs 132] [--seed 0]
        [--precisions fp32,bf16,int8] [--no-reference] [--shared ../shared] [--threads N] [--json PATH]
        [--calibration IMAGE]... [--ours-python PYTHON] [--simulate PLAN[,PLAN]...] [--ransac-seeds 10]
        [--openvino fp32,bf16,int8 --ov-python bench/.venv/bin/python]

    bench/.venv/bin/python bench/quality.py --precisions none --simulate bf16,int8 [--pairs 132] [--json PATH]

--simulate adds rows computed by the PyTorch reference network under fake quantisation (bench/quant_sim.py: the
product's bf16 and int8 arithmetic simulated in float, per layer; its docstring has the plan syntax, e.g.
"int8:conv1b=bf16:act=folded:calib=real"). Their rows are named "sim <plan>" and are simulations, not measurements
of this library. --precisions none leaves out this library's rows (no build needed); the F1 / cosine columns are
then against the reference row (fp32, bit-exact with this library's fp32). A second table gives, per row, each
percentage metric minus fp32's in points, the F1@2 over the images that are not calibration images, the share of the
640x480 forward's multiply-accumulates at each precision and a rough time estimate (int8 7x, bf16 4x the f32 speed).

--ours-python runs this library's rows in another interpreter (a worker process per precision): the extension
staged by the CMake build links Debian's pybind11 2.10, which misreads numpy 2 arrays (bench/.venv has numpy 2), so
with that build pass --ours-python .venv/bin/python (the test venv, numpy 1.24). A `pip install .` build needs none.

Pairs: every image of SHARED/images (sorted by name) is read as Pillow's luma ("L"), resized (Pillow bilinear,
antialiased when shrinking) so that it covers 640x480, and centre-cropped to 640x480 (image 1). Pair i uses image
i mod (number of images) and the homography drawn from numpy's default_rng([seed, i]) (quality_lib.sample_homography,
SuperPoint's sampler; the ranges are printed and written to the JSON); image 2 = cv2.warpPerspective(image 1, H,
640x480, bilinear). Both are fed at 640x480 as uint8 gray arrays, so the hf request path's resize is the identity and
the keypoints are network-frame pixels. Every model runs with max_keypoints=-1 (all points above the 0.005 threshold,
NMS radius 4, border 4): the protocol takes its own top k.

Rows: the PyTorch reference ($SHARED/tools/reference.py, the independent fp32 re-implementation) and each
--precisions mode of this library (Python API). A mode the CPU cannot run is reported as such, with the engine's
message, not faked. --openvino adds OpenVINO rows ("OpenVINO fp32" ...): the peer of `superpoint-rt bench`
(bench/peer_worker.py's ov_compiled: the same ONNX graph, bf16 by inference-precision hint, int8 by NNCF
post-training quantisation on the calibration images this library's int8 row uses: --calibration's, else the
engine's built-in synthetic planes) run in --ov-python (bench/.venv, which has openvino and nncf) on the same uint8
frames (v / 255); its raw logits and descriptors go through the reference's post-processing here. The F1 / cosine
columns of an OpenVINO row are against OpenVINO fp32 (each engine against its own fp32, as issue 21 compares them).

Columns, per pair then averaged over pairs (quality_lib has the exact rules and their sources):
  rep@3    repeatability of the top 300 points in the shared region, 3 px (paper section 5.2)
  loc      localisation error of the repeated points (px)
  MMA@t    fraction of the mutual-nearest-neighbour descriptor matches (top 1000 points) within t px of the truth
  HA@t     fraction of (pair, RANSAC draw) whose cv2.findHomography(RANSAC, 3 px) estimate from those matches has a
           mean corner error <= t px; --ransac-seeds N estimates each pair N times, the k-th on the matches permuted
           by numpy's default_rng([seed, k]) (OpenCV's RANSAC has a fixed internal seed: the order is what changes
           its draw; k = 0 is the plain order), so reruns agree and one pair's RANSAC luck no longer moves HA by a
           whole pair (0.76 point at 132 pairs)
  MS       matching score (paper's compute_matching_score, 3 px)
and per image (both images of every pair), against fp32 on the same image:
  F1@2     F1 of the top-500 keypoints at 2 px (L-inf), mean and min
  cos      descriptor cosine of the keypoints at the same pixel, mean and min
Percentages are points out of 100; the second table gives each difference with its paired standard error over the
pairs (quality_lib.paired_difference): HA moves by whole pairs, so at 44 pairs its standard error is 1.4-2.2 points
even for a plan whose keypoints are 0.999 F1 from fp32's, and a 0.5-point target needs hundreds of pairs and
--ransac-seeds 10 (440 x 10: 0.45-0.9 point). Targets (issue 12, section 2): bf16 F1@2 mean >= 0.995, min >= 0.97,
every percentage metric within 0.5 point of fp32; int8 F1@2 mean >= 0.97, min >= 0.90, within 1 point. The JSON's
"ha_seed_spread" gives, per row, the range of HA@t over the single seeds, i.e. how much RANSAC alone moves HA.

Needs numpy, Pillow and opencv-python-headless (bench/.venv), torch for the reference row, and the superpoint_rt
package (the build tree's staged package, or pip install .). Seconds per image are wall time of the calls,
including Python; they are not the benchmark of record (bench/run.sh is).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import quality_lib as Q  # noqa: E402

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".gif")
REFERENCE = "torch reference"
# Issue 12, section 2: (F1@2 mean, F1@2 min, largest |metric - fp32| in points) per precision.
TARGETS = {"bf16": (0.995, 0.97, 0.5), "int8": (0.97, 0.90, 1.0)}
# The percentage metrics the "within N points of fp32" targets compare (loc is in pixels, so not among them).
POINT_METRICS = ["repeatability", "mma@1", "mma@3", "mma@5", "h_acc@1", "h_acc@3", "h_acc@5", "matching_score"]


def fail(msg: str, code: int = 2):
    print(f"quality.py: {msg}", file=sys.stderr)
    sys.exit(code)


def import_cv2():
    try:
        import cv2
    except ImportError:
        fail("OpenCV missing (warping and RANSAC need it); run `bash bench/setup-peers.sh` and use "
             "bench/.venv/bin/python", 1)
    return cv2


# ---------------------------------------------------------------------------------------------------------------------
# Pairs
# ---------------------------------------------------------------------------------------------------------------------
def frame_of(path: str) -> np.ndarray:
    """The image's luma, resized to cover 640x480 and centre-cropped to it (uint8, 480x640)."""
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("L")
        w, h = im.size
        s = max(Q.FRAME_W / w, Q.FRAME_H / h)
        nw, nh = max(Q.FRAME_W, math.ceil(w * s - 1e-9)), max(Q.FRAME_H, math.ceil(h * s - 1e-9))
        if (nw, nh) != (w, h):
            im = im.resize((nw, nh), Image.BILINEAR)
        x0, y0 = (nw - Q.FRAME_W) // 2, (nh - Q.FRAME_H) // 2
        return np.ascontiguousarray(np.asarray(im)[y0:y0 + Q.FRAME_H, x0:x0 + Q.FRAME_W])


def make_pairs(shared: str, n_pairs: int, seed: int, ranges: Q.HomographyRanges):
    cv2 = import_cv2()
    folder = os.path.join(shared, "images")
    names = sorted(f for f in os.listdir(folder) if f.lower().endswith(IMAGE_EXTS))
    if not names:
        fail(f"no images in {folder}")
    frames = {}
    pairs = []
    for i in range(n_pairs):
        name = names[i % len(names)]
        if name not in frames:
            frames[name] = frame_of(os.path.join(folder, name))
        h, info = Q.sample_homography(np.random.default_rng([seed, i]), Q.FRAME_W, Q.FRAME_H, ranges)
        warped = cv2.warpPerspective(frames[name], h, (Q.FRAME_W, Q.FRAME_H), flags=cv2.INTER_LINEAR,
                                     borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        pairs.append({"index": i, "image": name, "H": h, "drawn": info, "warped": warped})
    return frames, pairs


# ---------------------------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------------------------
def features(kp, desc) -> dict:
    """What the protocol keeps of one image: every keypoint (score order) and the descriptors of the top ones."""
    return {"keypoints": np.asarray(kp, np.float64).reshape(-1, 2).copy(),
            "descriptors": np.asarray(desc[:Q.DESCRIPTOR_TOP_K], np.float32).copy()}


def reference_model(shared: str, weights: str, threads: int):
    try:
        import torch
    except ImportError:
        fail("torch missing for the reference row (bash bench/setup-peers.sh --with-torch), or pass --no-reference",
             1)
    if threads:
        torch.set_num_threads(threads)
    sys.path.insert(0, os.path.join(shared, "tools"))
    import reference as R

    ref = R.SuperPointReference(weights, max_keypoints=-1)

    def run(img):
        out, _ = ref.run_pixel(R.RESCALE_LUT[img], img.shape)
        return features(out["keypoints"], out["descriptors"])

    return run, {"model": "shared/tools/reference.py", "torch": torch.__version__}


def simulated_models(shared: str, weights: str, threads: int, specs: list[str]):
    """[(row name, run, info, plan)] for the --simulate plans (bench/quant_sim.py), on one reference network."""
    import copy

    import quant_sim as S

    try:
        plans = [S.parse_plan(s) for s in specs]
    except ValueError as e:
        fail(f"--simulate: {e}")
    reference_model(shared, weights, threads)  # torch check, threads, $SHARED/tools on sys.path
    import reference as R
    import torch

    ref = R.SuperPointReference(weights, max_keypoints=-1)
    sim = S.Simulator(ref.net, shared)
    out = []
    for plan in plans:
        r = copy.copy(ref)
        r.net = sim.net(plan)

        def run(img, r=r):
            with torch.no_grad():
                o, _ = r.run_pixel(R.RESCALE_LUT[img], img.shape)
            return features(o["keypoints"], o["descriptors"])

        info = {"simulated": True, "plan": plan.spec, "layers": dict(plan.precision), "described": plan.describe(),
                "act": plan.act, "calib": plan.calib, "clip": plan.clip, "targets": plan.target,
                "calibration_images": sim.calibration_images(plan), "mac_shares": plan.mac_shares(),
                "model": "shared/tools/reference.py under bench/quant_sim.py fake quantisation",
                "torch": torch.__version__}
        out.append((f"sim {plan.spec}", run, info, plan))
    return out


def plan_env(row: str) -> tuple[str, dict]:
    """A --precisions entry "PRECISION[@ITEM+ITEM...]" -> (precision, environment): each ITEM is LAYER=TYPE (joined
    into SUPERPOINT_RT_LAYER_PRECISION, the backend's per-layer plan override) or clip=max|pP
    (SUPERPOINT_RT_INT8_CLIP), wq=gptq|nearest (SUPERPOINT_RT_INT8_WEIGHTS), e.g.
    int8@conv1b=bf16+conv2a=bf16+clip=max or int8@wq=nearest: experiments beside the shipped plans."""
    precision, _, spec = row.partition("@")
    layers, env = [], {}
    for item in filter(None, spec.split("+")):
        key, eq, val = item.partition("=")
        if not eq:
            fail(f"--precisions {row}: {item!r} is not LAYER=TYPE, clip=VALUE or wq=VALUE")
        if key == "clip":
            env["SUPERPOINT_RT_INT8_CLIP"] = val
        elif key == "wq":
            env["SUPERPOINT_RT_INT8_WEIGHTS"] = val
        else:
            layers.append(item)
    if layers:
        env["SUPERPOINT_RT_LAYER_PRECISION"] = ",".join(layers)
    return precision, env


def our_model(row: str, weights: str, threads: int, calibration: list[str]):
    """(run, engine config, None), or (None, None, reason) when the engine refuses the precision on this CPU."""
    from superpoint_rt import SuperPoint

    precision, env = plan_env(row)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # read while the backend is created
    kw = {"precision": precision, "warmup_variants": "minimal", "local_files_only": True}
    if threads:
        kw["threads"] = threads
    if precision == "int8" and calibration:
        kw["calibration"] = calibration
    try:
        model = SuperPoint.from_pretrained(weights, **kw)
    except ValueError as e:
        if env:
            fail(f"--precisions {row}: {e}")
        # The engine names the missing CPU feature ("... which this CPU lacks"); any other refusal is a usage error
        # (an unknown precision name), not a row to report.
        if "lacks" in str(e):
            return None, None, str(e)
        fail(f"--precisions {precision}: {e}")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def run(img):
        out = model(img, max_keypoints=-1)
        return features(out.keypoints, out.descriptors)

    c = model.config
    info = {k: c.get(k) for k in ("precision", "backend", "cpu_features", "plan", "calibration", "threads",
                                  "version")}
    return run, info, None


def calibration_planes(shared: str, calibration: list[str]) -> np.ndarray:
    """(N, 480, 640) float32: the planes this library's int8 calibrates on: each --calibration image through the hf
    request path (the reference's decode, 640x480 bilinear resize, red channel, v / 255; bit-exact with ours), or
    the engine's built-in synthetic planes (backend::default_calibration_planes, ported in bench/quant_sim.py)."""
    if calibration:
        sys.path.insert(0, os.path.join(shared, "tools"))
        import reference as R

        return np.stack([R.pixel_values_from_resized(R.decode_and_resize(p)[0]) for p in calibration])
    import quant_sim as S

    lut = (np.arange(256, dtype=np.float64) * (1 / 255)).astype(np.float32)
    return np.stack([lut[S.synthetic_image(640, 480, seed)[:, :, 0]] for seed in S.SYNTHETIC_SEEDS])


def ov_worker_main(a) -> int:
    """--ov-worker IN OUT (in bench/.venv): OpenVINO at --precision on the uint8 images of IN.npz; writes the raw
    logits and descriptors of each image to OUT.npz, and OUT.npz.json (engine, seconds per image, or the reason)."""
    import peer_worker as P

    imgs = np.load(a.ov_worker[0])
    calib = imgs["calibration"] if "calibration" in imgs.files else None
    n = len([k for k in imgs.files if k.startswith("i")])
    lut = (np.arange(256, dtype=np.float64) * (1 / 255)).astype(np.float32)
    meta = {"reason": None}
    try:
        compiled, version = P.ov_compiled(a.weights, Q.FRAME_H, Q.FRAME_W, a.threads or os.cpu_count(),
                                          a.precision, calib, a.ov_cache_dir)
    except P.NotHere as e:
        meta["reason"] = str(e)
    if meta["reason"] is None:
        req = compiled.create_infer_request()
        out = {}
        t0 = time.perf_counter()
        for i in range(n):
            r = req.infer({0: lut[imgs[f"i{i}"]][None, None]})
            out[f"l{i}"], out[f"d{i}"] = r["logits"][0].copy(), r["descriptors"][0].copy()
        meta.update({"seconds_per_image": (time.perf_counter() - t0) / max(n, 1),
                     "engine": {"engine": version, "precision": a.precision, "threads": a.threads,
                                "calibration_planes": None if calib is None else len(calib)}})
        np.savez(a.ov_worker[1], **out)
    with open(a.ov_worker[1] + ".json", "w") as f:
        json.dump(meta, f)
    return 0


def extract_openvino(precision, images, calib, weights, threads, python, shared, tmp):
    """Features of every image with OpenVINO at one precision: (features, engine info, seconds/image, reason).
    The raw outputs go through the reference's post-processing (threshold 0.005, NMS 4, border 4, all points)."""
    import torch

    src, dst = os.path.join(tmp, "ov_images.npz"), os.path.join(tmp, f"ov_{precision}.npz")
    if not os.path.exists(src):
        np.savez(src, calibration=calib, **{f"i{i}": img for i, img in enumerate(images)})
    cmd = [python, os.path.abspath(__file__), "--ov-worker", src, dst, "--precision", precision, "--weights", weights,
           "--threads", str(threads), "--ov-cache-dir", os.path.join(tmp, "ov-cache")]
    r = subprocess.run(cmd, env=os.environ.copy())
    if r.returncode != 0:
        fail(f"the OpenVINO {precision} worker ({python}) failed with exit code {r.returncode}", r.returncode)
    with open(dst + ".json") as f:
        meta = json.load(f)
    if meta["reason"]:
        return None, None, None, meta["reason"]
    sys.path.insert(0, os.path.join(shared, "tools"))
    import reference as R

    ref = R.SuperPointReference(weights, max_keypoints=-1)
    z = np.load(dst)
    feats = []
    with torch.no_grad():
        for i in range(len(images)):
            score_map = R.scores_from_logits(torch.from_numpy(z[f"l{i}"])[None])
            nms = R.simple_nms(score_map, ref.cfg.nms_radius)
            kp, _, _ = R.extract_keypoints(nms, ref.cfg, -1, "score")
            dmap = torch.nn.functional.normalize(torch.from_numpy(z[f"d{i}"])[None], p=2, dim=1)
            desc = R.sample_descriptors(kp[None], dmap, 8)[0].t() if len(kp) else torch.zeros((0, dmap.shape[1]))
            feats.append(features(kp.numpy(), desc.numpy()))
    os.remove(dst)
    return feats, meta["engine"], meta["seconds_per_image"], None


def worker_main(a) -> int:
    """--worker: extract the images of IN.npz with one precision, write OUT.npz (+ OUT.npz.json: engine or reason)."""
    imgs = np.load(a.worker[0])
    run, info, reason = our_model(a.precision, a.weights, a.threads, a.calibration)
    meta = {"reason": reason, "engine": info}
    arrays = {}
    if run is not None:
        t0 = time.perf_counter()
        for i in range(len(imgs.files)):
            f = run(imgs[f"i{i}"])
            arrays[f"k{i}"], arrays[f"d{i}"] = f["keypoints"], f["descriptors"]
        meta["seconds_per_image"] = (time.perf_counter() - t0) / max(len(imgs.files), 1)
        np.savez(a.worker[1], **arrays)
    with open(a.worker[1] + ".json", "w") as f:
        json.dump(meta, f)
    return 0


def extract_ours(precision, images, weights, threads, calibration, python, tmp):
    """Features of every image with one precision: (list of features, engine config, seconds/image, reason).

    In this interpreter, or in `python` (--ours-python) through --worker: the staged extension must be loaded by a
    numpy its pybind11 supports (Debian's pybind11 2.10 predates numpy 2, which bench/.venv has)."""
    if python in (None, "", sys.executable):
        run, info, reason = our_model(precision, weights, threads, calibration)
        if run is None:
            return None, None, None, reason
        t0 = time.perf_counter()
        feats = [run(img) for img in images]
        return feats, info, (time.perf_counter() - t0) / len(images), None
    src, dst = os.path.join(tmp, "images.npz"), os.path.join(tmp, f"{precision}.npz")
    if not os.path.exists(src):
        np.savez(src, **{f"i{i}": img for i, img in enumerate(images)})
    cmd = [python, os.path.abspath(__file__), "--worker", src, dst, "--precision", precision, "--weights", weights,
           "--threads", str(threads)] + [x for c in calibration for x in ("--calibration", c)]
    r = subprocess.run(cmd, env=os.environ.copy())
    if r.returncode != 0:
        fail(f"the {precision} worker ({python}) failed with exit code {r.returncode}", r.returncode)
    with open(dst + ".json") as f:
        meta = json.load(f)
    if meta["reason"]:
        return None, None, None, meta["reason"]
    z = np.load(dst)
    feats = [{"keypoints": z[f"k{i}"], "descriptors": z[f"d{i}"]} for i in range(len(images))]
    return feats, meta["engine"], meta["seconds_per_image"], None


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------------------------
def evaluate_row(feats, frames, pairs, seed, ransac_seeds=1):
    """Per-pair metrics of one row; feats: the features of the frames (in frames' order), then of the pairs' image 2.
    ransac_seeds > 1: that many RANSAC draws per pair (see estimate_one), all counted by the homography accuracy."""
    cv2 = import_cv2()

    def estimate_one(p1, p2, k):
        # OpenCV's RANSAC draws its samples from an RNG of its own with a fixed seed (cv2.setRNGSeed does not reach
        # it: measured, every seed gave the same estimate), so a different RANSAC draw is made by presenting the
        # matches in another order: the k-th estimate sees them permuted by numpy's default_rng([seed, k]); k = 0
        # keeps the order (the single-estimate protocol).
        if k:
            perm = np.random.default_rng([seed, k]).permutation(len(p1))
            p1, p2 = p1[perm], p2[perm]
        cv2.setRNGSeed(seed)
        h, _ = cv2.findHomography(p1, p2, cv2.RANSAC, Q.RANSAC_REPROJ_PX)
        return h

    def estimate(p1, p2):
        if ransac_seeds == 1:
            return estimate_one(p1, p2, 0)
        return [estimate_one(p1, p2, k) for k in range(ransac_seeds)]

    feats1 = dict(zip(frames, feats[:len(frames)]))
    feats2 = feats[len(frames):]
    rows = []
    for p, f2 in zip(pairs, feats2):
        m = Q.pair_metrics(feats1[p["image"]], f2, p["H"], estimate)
        rows.append({"pair": p["index"], "image": p["image"], **m})
    # Per image, for the comparison with fp32: image 1 of each source image, image 2 of each pair.
    per_image = {("frame", n): f for n, f in feats1.items()}
    per_image.update({("pair", p["index"]): f for p, f in zip(pairs, feats2)})
    return rows, per_image


def ha_seed_spread(pair_rows) -> dict:
    """HA@t with each RANSAC seed alone: {"h_acc@t": [min, max]} over the seeds (empty with one seed)."""
    if not pair_rows or "corner_errors" not in pair_rows[0]:
        return {}
    out = {}
    for t in Q.HOMOGRAPHY_THRESHOLDS:
        per_seed = [Q.homography_accuracy([r["corner_errors"][k] for r in pair_rows], [t])[0]
                    for k in range(len(pair_rows[0]["corner_errors"]))]
        out[f"h_acc@{t:g}"] = [min(per_seed), max(per_seed)]
    return out


def fidelity(per_image: dict, fp32: dict, keep=None) -> dict:
    """keep(key) -> bool: only those images (e.g. the ones a simulated int8 plan did not calibrate on)."""
    f1s, cos_mean, cos_all = [], [], []
    for key, f in per_image.items():
        if keep is not None and not keep(key):
            continue
        g = fp32[key]
        k = Q.FIDELITY_TOP_K
        f1s.append(Q.keypoint_f1(f["keypoints"][:k], g["keypoints"][:k]))
        c = Q.descriptor_cosine(f["keypoints"][:k], f["descriptors"][:k], g["keypoints"][:k], g["descriptors"][:k])
        cos_all.append(c)
        cos_mean.append(float(np.mean(c)) if len(c) else math.nan)
    cos = np.concatenate(cos_all) if cos_all else np.zeros(0)
    if not f1s:
        return {"images": 0, "f1@2_mean": math.nan, "f1@2_min": math.nan, "cos_mean": math.nan, "cos_min": math.nan,
                "per_image_f1@2": []}
    return {"images": len(f1s), "f1@2_mean": float(np.mean(f1s)), "f1@2_min": float(np.min(f1s)),
            "cos_mean": float(np.mean(cos)) if len(cos) else math.nan,
            "cos_min": float(np.min(cos)) if len(cos) else math.nan,
            "per_image_f1@2": [float(v) for v in f1s]}


def check_targets(name: str, row: dict, fp32: dict):
    """name: the precision whose targets apply (a simulated row: its plan's, see quant_sim.Plan.target)."""
    if name not in TARGETS or row.get("status") != "ok":
        return None
    f1_mean, f1_min, pts = TARGETS[name]
    fid = row["fidelity"]
    checks = {f"f1@2_mean >= {f1_mean}": fid["f1@2_mean"] >= f1_mean,
              f"f1@2_min >= {f1_min}": fid["f1@2_min"] >= f1_min}
    for m in POINT_METRICS:
        d = 100 * (row["summary"][m] - fp32["summary"][m])
        se = row.get("paired_se", {}).get(m, math.nan)
        checks[f"|{m} - fp32| = {abs(d):.2f} (paired s.e. {se:.2f}) <= {pts} pt"] = abs(d) <= pts
    return {"pass": all(checks.values()), "checks": checks}


# ---------------------------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------------------------
COLUMNS = [("rep@3", "repeatability", "pct"), ("loc px", "localization_error", "px"), ("MMA@1", "mma@1", "pct"),
           ("MMA@3", "mma@3", "pct"), ("MMA@5", "mma@5", "pct"), ("HA@1", "h_acc@1", "pct"),
           ("HA@3", "h_acc@3", "pct"), ("HA@5", "h_acc@5", "pct"), ("MS", "matching_score", "pct")]
FID_COLUMNS = [("F1@2 mean", "f1@2_mean", "f1"), ("F1@2 min", "f1@2_min", "f1"), ("cos mean", "cos_mean", "cos"),
               ("cos min", "cos_min", "cos")]


def fmt(v, kind):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return {"pct": f"{100 * v:.2f}", "px": f"{v:.3f}", "f1": f"{v:.4f}", "cos": f"{v:.5f}"}[kind]


def table(rows: dict) -> str:
    head = ["row"] + [c[0] for c in COLUMNS + FID_COLUMNS] + ["s/img"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in rows.items():
        if r["status"] != "ok":
            lines.append(f"| {name} | " + " | ".join(["n/a"] * (len(head) - 1)) + " |")
            continue
        cells = [fmt(r["summary"][k], kind) for _, k, kind in COLUMNS]
        cells += [fmt(r.get("fidelity", {}).get(k), kind) for _, k, kind in FID_COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['seconds_per_image']:.3f} |")
    notes = [f"{name}: not run: {r['reason']}" for name, r in rows.items() if r["status"] != "ok"]
    return "\n".join(lines + ([""] + notes if notes else []))


def delta_table(rows: dict, base: str, targets: dict) -> str:
    """Each row against fp32 (base): percentage metrics minus fp32's in points ± the paired standard error over pairs
    (quality_lib.paired_difference; at 44 pairs it is 1.4-2.2 points for HA even for a plan with F1 0.999), F1@2
    (all images, and the images no calibration used), share of MACs per precision and the rough time estimate of
    simulated rows, targets."""
    import quant_sim as S

    short = {"repeatability": "rep@3", "mma@1": "MMA@1", "mma@3": "MMA@3", "mma@5": "MMA@5", "h_acc@1": "HA@1",
             "h_acc@3": "HA@3", "h_acc@5": "HA@5", "matching_score": "MS"}
    head = (["row"] + [f"d{short[m]}" for m in POINT_METRICS] + ["max abs d", "F1@2 mean", "F1@2 min",
            "held-out F1 mean/min", "MACs f32/bf16/int8 %", "est. time vs fp32", "targets"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    b = rows[base]["summary"]
    for name, r in rows.items():
        if r["status"] != "ok" or name == base:
            continue
        d = [100 * (r["summary"][m] - b[m]) for m in POINT_METRICS]
        se = [r.get("paired_se", {}).get(m, math.nan) for m in POINT_METRICS]
        cells = [f"{v:+.2f} ±{e:.2f}" for v, e in zip(d, se)] + [f"{max(abs(v) for v in d):.2f}"]
        cells += [fmt(r["fidelity"]["f1@2_mean"], "f1"), fmt(r["fidelity"]["f1@2_min"], "f1")]
        h = r.get("fidelity_heldout")
        cells.append(f"{fmt(h['f1@2_mean'], 'f1')} / {fmt(h['f1@2_min'], 'f1')} ({h['images']} img)" if h else "-")
        ms = r["engine"].get("mac_shares") if isinstance(r.get("engine"), dict) else None
        if ms:
            cells += [" / ".join(f"{100 * ms[p]:.1f}" for p in S.PRECISIONS), f"{ms['time_vs_fp32']:.3f}"]
        else:
            cells += ["-", "-"]
        t = targets.get(name)
        cells.append("-" if t is None else "PASS" if t["pass"] else "FAIL")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, np.generic):
        return json_safe(x.item())
    return x


def machine() -> dict:
    flags, model = [], ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            key, _, val = line.partition(":")
            if key.strip() == "Flags":
                flags = val.split()
            elif key.strip() == "Model name":
                model = val.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16",
              "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")
    return {"cpu": model, "isa": [f for f in wanted if f in flags], "cores": os.cpu_count(),
            "python": platform.python_version()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_shared = os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
    ap.add_argument("--shared", default=default_shared, help="folder with images/, weights/superpoint, tools/")
    ap.add_argument("--pairs", type=int, default=132, help="number of pairs (default 132 = 3 per image of 44)")
    ap.add_argument("--seed", type=int, default=0, help="homography and RANSAC seed")
    ap.add_argument("--precisions", default="fp32,bf16,int8", help="comma-separated modes of this library")
    ap.add_argument("--no-reference", action="store_true", help="leave out the PyTorch reference row")
    ap.add_argument("--threads", type=int, default=0, help="threads of each model (default: all cores)")
    ap.add_argument("--calibration", action="append", default=[],
                    help="int8 calibration image (repeatable; default: the engine's built-in set)")
    ap.add_argument("--json", help="write every number (per pair and per image too) to this file")
    ap.add_argument("--ours-python", default=os.environ.get("SUPERPOINT_RT_QUALITY_PYTHON"),
                    help="run this library's rows in that interpreter (default: this one; "
                         "$SUPERPOINT_RT_QUALITY_PYTHON), e.g. .venv/bin/python when the staged extension needs "
                         "numpy 1")
    ap.add_argument("--simulate", action="append", default=[],
                    help="comma-separated simulated plans (bench/quant_sim.py), e.g. bf16,int8,int8:conv1b=bf16; "
                         "repeatable")
    ap.add_argument("--ransac-seeds", type=int, default=10,
                    help="RANSAC draws per pair behind HA (the matches permuted per draw; default 10)")
    ap.add_argument("--openvino", default="",
                    help="comma-separated OpenVINO rows (fp32, bf16, int8) through --ov-python; empty: none")
    ap.add_argument("--ov-python", default=os.path.join(HERE, ".venv", "bin", "python"),
                    help="a Python with openvino and nncf (default bench/.venv/bin/python: bash bench/setup-peers.sh)")
    ap.add_argument("--worker", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--ov-worker", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--ov-cache-dir", help=argparse.SUPPRESS)
    ap.add_argument("--precision", help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main(a)
    if a.ov_worker:
        return ov_worker_main(a)
    if a.pairs < 1:
        fail(f"--pairs must be >= 1, got {a.pairs}")
    if a.ransac_seeds < 1:
        fail(f"--ransac-seeds must be >= 1, got {a.ransac_seeds}")
    ov_precisions = [p.strip() for p in a.openvino.split(",") if p.strip()]
    for p in ov_precisions:
        if p not in ("fp32", "bf16", "int8"):
            fail(f"--openvino: {p!r} is not fp32, bf16 or int8")
    if ov_precisions and "fp32" not in ov_precisions:
        ov_precisions.insert(0, "fp32")  # OpenVINO's F1 / cosine columns are against OpenVINO fp32
    ov_rows = {f"OpenVINO {p}": p for p in ov_precisions}
    precisions = [p.strip() for p in a.precisions.split(",") if p.strip() and p.strip() != "none"]
    sim_specs = [s.strip() for v in a.simulate for s in v.split(",") if s.strip()]
    if not precisions and not sim_specs and not a.openvino.strip():
        fail("--precisions is empty")
    if precisions and "fp32" not in precisions:
        precisions.insert(0, "fp32")  # every F1 / cosine column is against fp32
    if not precisions and a.no_reference:
        fail("--precisions none needs the reference row (the fp32 the simulated rows are compared with)")
    weights = os.path.join(a.shared, "weights", "superpoint")
    if not os.path.isfile(os.path.join(weights, "model.safetensors")):
        fail(f"no weights in {weights} (--shared or $SUPERPOINT_RT_SHARED)")

    ranges = Q.HomographyRanges()
    t_start = time.time()
    frames, pairs = make_pairs(a.shared, a.pairs, a.seed, ranges)
    print(f"{len(pairs)} pairs from {len(frames)} images, seed {a.seed}, homography ranges {ranges.to_dict()}",
          file=sys.stderr)

    images = list(frames.values()) + [p["warped"] for p in pairs]
    rows, per_image = {}, {}
    sims = {name: (run, info, plan) for name, run, info, plan in
            (simulated_models(a.shared, weights, a.threads, sim_specs) if sim_specs else [])}
    with tempfile.TemporaryDirectory(prefix="sprt-quality-") as tmp:
        for name in ([] if a.no_reference else [REFERENCE]) + precisions + list(ov_rows) + list(sims):
            if name in ov_rows:
                feats, info, secs, reason = extract_openvino(ov_rows[name], images,
                                                             calibration_planes(a.shared, a.calibration), weights,
                                                             a.threads, a.ov_python, a.shared, tmp)
            elif name in sims:
                run, info = sims[name][:2]
                t_row = time.perf_counter()
                feats = [run(img) for img in images]
                secs, reason = (time.perf_counter() - t_row) / len(images), None
            elif name == REFERENCE:
                run, info = reference_model(a.shared, weights, a.threads)
                t_row = time.perf_counter()
                feats = [run(img) for img in images]
                secs, reason = (time.perf_counter() - t_row) / len(images), None
            else:
                feats, info, secs, reason = extract_ours(name, images, weights, a.threads, a.calibration,
                                                         a.ours_python, tmp)
            if feats is None:
                rows[name] = {"status": "unavailable", "reason": reason}
                print(f"{name}: not available: {reason}", file=sys.stderr)
                continue
            pair_rows, per_image[name] = evaluate_row(feats, frames, pairs, a.seed, a.ransac_seeds)
            rows[name] = {"status": "ok", "engine": info, "seconds_per_image": secs,
                          "summary": Q.summarize_pairs(pair_rows), "pairs": pair_rows,
                          "ha_seed_spread": ha_seed_spread(pair_rows)}
            early = ""
            if name != REFERENCE and REFERENCE in per_image:  # progress: the F1 against fp32 as soon as known
                fid = fidelity(per_image[name], per_image[REFERENCE])
                early = f", F1@2 vs the reference {fid['f1@2_mean']:.4f} mean / {fid['f1@2_min']:.4f} min"
            print(f"{name}: {secs:.3f} s/image{early}", file=sys.stderr)
    base = "fp32" if rows.get("fp32", {}).get("status") == "ok" else REFERENCE
    if base not in per_image:
        fail("no fp32 row to compare with (the library's fp32 did not run and the reference row is left out)")
    image_of = {("pair", p["index"]): p["image"] for p in pairs}
    ov_base = "OpenVINO fp32" if rows.get("OpenVINO fp32", {}).get("status") == "ok" else None
    base_of = {n: (ov_base if n in ov_rows else base) for n in rows}
    for name, r in rows.items():
        if r["status"] == "ok" and base_of[name]:
            r["fidelity_vs"] = base_of[name]
            r["fidelity"] = fidelity(per_image[name], per_image[base_of[name]])
            # Points: the standard error of each percentage metric's difference from the same base, over pairs.
            r["paired_se"] = {m: 100 * Q.paired_difference(r["pairs"], rows[base_of[name]]["pairs"], m)[1]
                              for m in POINT_METRICS}
            held = set(r["engine"].get("calibration_images", [])) if name in sims else set()
            if held:
                r["fidelity_heldout"] = fidelity(per_image[name], per_image[base],
                                                 lambda k: (k[1] if k[0] == "frame" else image_of[k]) not in held)
    targets = {n: check_targets(n.partition("@")[0], r, rows[base]) for n, r in rows.items()
               if n.partition("@")[0] in TARGETS and n not in ov_rows}
    if ov_base:  # OpenVINO against its own fp32, by the same targets (for comparison, not the goal)
        targets.update({n: check_targets(ov_rows[n], r, rows[ov_base]) for n, r in rows.items()
                        if n in ov_rows and ov_rows[n] in TARGETS})
    targets.update({n: check_targets(sims[n][2].target, r, rows[base]) for n, r in rows.items()
                    if n in sims and sims[n][2].target})

    print(table(rows))
    if sims or ov_base or sum(n not in ov_rows for n in rows) > 1:
        print()
        print(delta_table({n: r for n, r in rows.items() if n not in ov_rows}, base, targets))
    if ov_base:
        print()
        print(delta_table({n: r for n, r in rows.items() if n in ov_rows}, ov_base, targets))
    for n, t in targets.items():
        if t is None:
            print(f"targets {n}: not measured (the mode did not run)")
        else:
            failed = [k for k, ok in t["checks"].items() if not ok]
            print(f"targets {n}: {'PASS' if t['pass'] else 'FAIL: ' + '; '.join(failed)}")
    if a.json:
        doc = {"command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
               "machine": machine(), "seconds": time.time() - t_start,
               "protocol": {"seed": a.seed, "pairs": len(pairs), "images": sorted(frames),
                            "ransac_seeds": a.ransac_seeds,
                            "frame": [Q.FRAME_W, Q.FRAME_H], "homography_ranges": ranges.to_dict(),
                            "repeatability_top_k": Q.REPEATABILITY_TOP_K, "repeatability_eps": Q.REPEATABILITY_EPS,
                            "descriptor_top_k": Q.DESCRIPTOR_TOP_K, "mma_thresholds": Q.MMA_THRESHOLDS,
                            "homography_thresholds": Q.HOMOGRAPHY_THRESHOLDS, "ransac_px": Q.RANSAC_REPROJ_PX,
                            "matching_score_eps": Q.MATCHING_SCORE_EPS, "fidelity_top_k": Q.FIDELITY_TOP_K,
                            "fidelity_eps_linf": Q.FIDELITY_EPS,
                            "drawn": [{"pair": p["index"], "image": p["image"], **p["drawn"],
                                       "H": p["H"].tolist()} for p in pairs]},
               "rows": rows, "targets": targets}
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(json_safe(doc), f, indent=1)
        print(f"wrote {a.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
