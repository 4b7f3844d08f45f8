#!/usr/bin/env python3
"""First-call latency of the Python API with the default warm-up (seed PYTHON.md "Measured first-call latency"),
and the overhead of a Python call over the C++ call.

    python bench/bench_first_call.py [--variants a,b,...] [--precisions fp32,bf16,int8] [--images K] [--passes P]
                                     [--reps R] [--threads N]
    python bench/bench_first_call.py --overhead [--calls N]

First-call method (the seed's): ONE FRESH PROCESS for each variant and repetition (nothing is shared between them:
no resize tables, no thread pools, no faulted-in pages). In it, from_pretrained (default warmup_variants) is timed,
then pass 1 calls the model on K different images (real photographs from ../shared/images, resampled to the
variant's size, or synthetic pictures when those are absent): call i gets a new image. Passes 2..P repeat the same
images; the "steady" latency of image i is the median of its later calls, because the latency depends on the image.
Reported: call 1, 2 and 10 (when K >= 10) as ms and as the ratio to the steady latency of the same image, and the
median steady latency over all images; the median over R repetitions. --precisions repeats every variant for each
precision (each a prepared variant of its own: from_pretrained(precision=...) with the default warm-up).

Overhead method: in one process, each call of model(plane) (a 480x640 uint8 array) is timed in Python around the
call, and the C++ engine's own stage timers of the same call (timing_ms: decode + preprocess + forward +
postprocess) are subtracted, paired per call so the network's noise cancels. The same difference is measured for the
C++ call timed inside C++ (SuperPoint::run, no Python in the loop): the C++ call's own untimed part (parameter checks,
locks, context pool). Python overhead = median(Python wall - stages) - median(C++ wall - stages): what the Python
layer adds (argument checks, input view, GIL release and re-acquire, output arrays). A second figure compares the
median of model(plane) with the median of the C++ call (noisy: the network dominates both).

Requires the superpoint_rt package (pip install . or PYTHONPATH=<build>/python/stage) and numpy.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("SUPERPOINT_RT_SHARED", REPO.parent / "shared"))

# name -> (kind, width, height, params); kind: "jpeg" / "png" file, "rgb" array, "plane" (gray array), "list4"
VARIANTS = {
    "jpeg_1600x900": ("jpeg", 1600, 900, {}),
    "rgb_1920x1080": ("rgb", 1920, 1080, {}),
    "rgb_1280x720": ("rgb", 1280, 720, {}),
    "plane_480x640": ("plane", 640, 480, {}),
    "png_1600x900": ("png", 1600, 900, {}),
    "all_keypoints_1600x900": ("rgb", 1600, 900, {"max_keypoints": -1}),
    "no_descriptors_1600x900": ("rgb", 1600, 900, {"return_descriptors": False}),
    "nms0_1600x900": ("rgb", 1600, 900, {"nms_radius": 0}),
    "list4_jpeg_1600x900": ("list4", 1600, 900, {}),
}


def weights() -> str:
    w = os.environ.get("SUPERPOINT_RT_WEIGHTS")
    if w:
        return w
    local = SHARED / "weights" / "superpoint"
    return str(local) if (local / "model.safetensors").is_file() else "magic-leap-community/superpoint"


def source_pictures(k: int):
    """k RGB uint8 arrays: the shared photographs (and their mirror images), or synthetic pictures."""
    from superpoint_rt import read_image, synthetic_image

    paths = sorted(p for p in (SHARED / "images").glob("*") if p.suffix.lower() in (".jpg", ".png"))
    pics = []
    for p in paths:
        a = read_image(str(p))
        if a.ndim == 2:
            a = np.repeat(a[:, :, None], 3, axis=2)
        pics += [a, a[:, ::-1]]
        if len(pics) >= k:
            break
    seed = 0
    while len(pics) < k:
        pics.append(synthetic_image(1600, 900, seed=seed))
        seed += 1
    return pics[:k]


def resample(a: np.ndarray, w: int, h: int) -> np.ndarray:
    """Nearest-neighbour resampling to w x h (only to make inputs of the variant's size; not the model's resize)."""
    ys = (np.arange(h) * a.shape[0] // h).clip(0, a.shape[0] - 1)
    xs = (np.arange(w) * a.shape[1] // w).clip(0, a.shape[1] - 1)
    return np.ascontiguousarray(a[ys][:, xs])


def make_inputs(kind: str, w: int, h: int, k: int, tmp: pathlib.Path):
    from superpoint_rt import write_png

    pics = [resample(p, w, h) for p in source_pictures(k if kind != "list4" else 4 * k)]
    if kind == "rgb":
        return pics
    if kind == "plane":
        return [np.ascontiguousarray(p[:, :, 0]) for p in pics]
    if kind == "png":
        out = []
        for i, p in enumerate(pics):
            f = tmp / f"img{i}.png"
            write_png(f, p)
            out.append(str(f))
        return out
    # JPEG files: Pillow when present (quality 90), else the photographs' own JPEG bytes are not resizable without
    # it, so PNG is used and the variant is marked.
    try:
        from PIL import Image
    except ImportError:
        Image = None
    out = []
    for i, p in enumerate(pics):
        f = tmp / (f"img{i}.jpg" if Image else f"img{i}.png")
        if Image:
            Image.fromarray(p).save(f, quality=90)
        else:
            write_png(f, p)
        out.append(str(f))
    if kind == "list4":
        return [out[4 * i:4 * i + 4] for i in range(k)]
    return out


def child(variant: str, k: int, passes: int, threads, precision: str) -> dict:
    kind, w, h, params = VARIANTS[variant]
    with tempfile.TemporaryDirectory() as td:
        inputs = make_inputs(kind, w, h, k, pathlib.Path(td))
        from superpoint_rt import SuperPoint

        t0 = time.perf_counter()
        model = SuperPoint.from_pretrained(weights(), threads=threads, precision=precision)
        load_s = time.perf_counter() - t0
        lat = [[0.0] * k for _ in range(passes)]
        for p in range(passes):
            for i, x in enumerate(inputs):
                t = time.perf_counter()
                model(x, **params)
                lat[p][i] = (time.perf_counter() - t) * 1000.0
        model.close()
    steady = [statistics.median(lat[p][i] for p in range(1, passes)) for i in range(k)]
    res = {"variant": variant, "precision": precision, "load_s": load_s, "steady_median_ms": statistics.median(steady)}
    for c in (1, 2, 10):
        if c <= k:
            res[f"call{c}_ms"] = lat[0][c - 1]
            res[f"call{c}_ratio"] = lat[0][c - 1] / steady[c - 1]
    return res


def first_call(args) -> None:
    names = args.variants.split(",") if args.variants else list(VARIANTS)
    for n in names:
        if n not in VARIANTS:
            raise SystemExit(f"unknown variant {n!r}: {', '.join(VARIANTS)}")
    precisions = [p for p in args.precisions.split(",") if p]
    print(f"{'variant':26s} {'prec':>4s} {'load s':>7s} {'call 1 ms (ratio)':>18s} {'call 2 (ratio)':>16s} "
          f"{'call 10 (ratio)':>16s} {'steady ms':>10s}")
    for n, prec in ((n, p) for p in precisions for n in names):
        reps = []
        for _ in range(args.reps):
            cmd = [sys.executable, __file__, "--child", n, "--images", str(args.images), "--passes", str(args.passes),
                   "--precisions", prec]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"{n}: child failed:\n{r.stderr}")
            reps.append(json.loads(r.stdout.strip().splitlines()[-1]))

        def med(key):
            v = [x[key] for x in reps if key in x]
            return statistics.median(v) if v else float("nan")

        cell = lambda c: f"{med(f'call{c}_ms'):8.2f} ({med(f'call{c}_ratio'):4.2f})"  # noqa: E731
        print(f"{n:26s} {prec:>4s} {med('load_s'):7.2f} {cell(1):>18s} {cell(2):>16s} {cell(10):>16s} "
              f"{med('steady_median_ms'):10.2f}", flush=True)


def overhead(args) -> dict:
    from superpoint_rt import SuperPoint, synthetic_image

    plane = np.ascontiguousarray(synthetic_image(640, 480, seed=1)[:, :, 0])
    with SuperPoint.from_pretrained(weights(), warmup_variants="minimal", threads=args.threads) as model:
        for _ in range(3):
            model(plane)
        diffs, py_ms, cpp = [], [], []
        for _ in range(args.calls):  # interleaved, so a change of machine load affects both alike
            t = time.perf_counter()
            out = model(plane)
            wall = (time.perf_counter() - t) * 1000.0
            py_ms.append(wall)
            diffs.append(wall - sum(out.timing_ms.values()))
            cpp += model._core.time_cpp_calls(plane, 1, 1024, 0.005, 4, True, False, False)
    cpp_ms = [w * 1000.0 for w, _ in cpp]
    cpp_untimed = [w * 1000.0 - stages for w, stages in cpp]
    res = {"calls": args.calls,
           "python_wall_minus_stages_ms_median": statistics.median(diffs),
           "cpp_wall_minus_stages_ms_median": statistics.median(cpp_untimed),
           "python_call_ms_median": statistics.median(py_ms), "cpp_call_ms_median": statistics.median(cpp_ms)}
    res["python_overhead_ms"] = res["python_wall_minus_stages_ms_median"] - res["cpp_wall_minus_stages_ms_median"]
    res["median_difference_ms"] = res["python_call_ms_median"] - res["cpp_call_ms_median"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description="first-call latency and Python overhead of superpoint_rt")
    ap.add_argument("--variants", default="")
    ap.add_argument("--images", type=int, default=12)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--precisions", default="fp32", help="comma-separated: fp32, bf16, int8")
    ap.add_argument("--overhead", action="store_true")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.images, args.passes, args.threads, args.precisions)))
    elif args.overhead:
        r = overhead(args)
        print(json.dumps(r, indent=1))
        print(f"Python overhead per call (480x640 plane): {r['python_overhead_ms'] * 1000:.0f} us "
              f"(median of wall - stage timers, Python call minus C++ call), target < 200 us")
    else:
        first_call(args)


if __name__ == "__main__":
    main()
