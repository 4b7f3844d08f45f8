#!/usr/bin/env python3
"""Variants of one peer's settings, timed side by side: one bench/peer_worker.py process per variant, interleaved
round-robin as `superpoint-rt bench` does, each with its error against the float64 reference (bench/reference_f64.py).

    bench/.venv/bin/python bench/peer_variants.py --plane F32_FILE [--weights DIR] [--threads 2] [--rounds 5]
        [--iters 4] [--pause-ms 200] VARIANT...

A VARIANT is a peer and its --option settings, "PEER[:KEY=VALUE[,KEY=VALUE...]]", e.g.
    ncnn  ncnn:use_winograd63_convolution=0  ncnn:use_winograd_convolution=0  mnn  mnn:winograd_memory_level=0
--plane: 480 * 640 float32 values (v / 255), e.g. the bench's plane of berlin01 (written by --write-plane FILE from
the JPEG with Pillow, which resizes as the engine does). Prints one Markdown row per variant: forward p50 / p90 ms, its
ratio to the first variant, and the max abs error of the score map / the L2-normalised descriptor map.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(os.path.dirname(HERE), "..", "shared"))
H, W = 480, 640


def errors(ref_file, out_file, kp, desc):
    cells = (H // 8) * (W // 8)
    ref = np.fromfile(ref_file, "<f8")
    rs, rd = ref[:(kp - 1) * cells].reshape(kp - 1, cells), ref[(kp - 1) * cells:].reshape(desc, cells)
    out = np.fromfile(out_file, "<f4").astype(np.float64)
    logits, d = out[:kp * cells].reshape(kp, cells), out[kp * cells:].reshape(desc, cells)
    e = np.exp(logits - logits.max(axis=0))
    s = (e / e.sum(axis=0))[:-1]
    d = d / np.maximum(np.sqrt((d * d).sum(axis=0)), 1e-12)
    return float(np.abs(s - rs).max()), float(np.abs(d - rd).max())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variants", nargs="*")
    ap.add_argument("--plane", required=True)
    ap.add_argument("--write-plane", metavar="JPEG", help="first write --plane from this image's red channel")
    ap.add_argument("--weights", default=os.path.join(SHARED, "weights", "superpoint"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--pause-ms", type=int, default=200)
    a = ap.parse_args(argv)
    if a.write_plane:
        from PIL import Image

        rgb = Image.open(a.write_plane).convert("RGB").resize((W, H), Image.BILINEAR)
        (np.asarray(rgb)[:, :, 0].astype(np.float32) / np.float32(255.0)).astype("<f4").tofile(a.plane)
    if not a.variants:
        return 0
    tmp = tempfile.mkdtemp(prefix="peer-variants-")
    ref = os.path.join(tmp, "reference.f64")
    reference = subprocess.Popen([sys.executable, os.path.join(HERE, "reference_f64.py"), "--weights", a.weights,
                                  "--plane", a.plane, "--out", ref], stdout=subprocess.PIPE, text=True)
    procs = []
    for i, v in enumerate(a.variants):
        peer, _, opts = v.partition(":")
        cmd = [sys.executable, os.path.join(HERE, "peer_worker.py"), "--peer", peer, "--threads", str(a.threads),
               "--weights", a.weights, "--plane", a.plane, "--outputs", os.path.join(tmp, f"out{i}.f32")]
        for kv in filter(None, opts.split(",")):
            cmd += ["--option", kv]
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    ready = [json.loads(p.stdout.readline() or "null") for p in procs]
    meta = json.loads(reference.stdout.readline())
    reference.wait()
    kp, desc = meta["channels"][0] + 1, meta["channels"][1]
    ms = [[] for _ in procs]
    for r in range(a.rounds):
        order = list(range(len(procs)))[::(-1 if r % 2 else 1)]
        for i in order:
            if not ready[i] or not ready[i].get("ready"):
                continue
            time.sleep(a.pause_ms / 1e3)
            procs[i].stdin.write(f"forward {a.iters}\n")
            procs[i].stdin.flush()
            ms[i] += json.loads(procs[i].stdout.readline())["ms"]
    print("| variant | forward p50 ms | p90 ms | x first | error vs float64 (scores / descriptors) |")
    print("|---|---|---|---|---|")
    base = None
    for i, v in enumerate(a.variants):
        if not ready[i] or not ready[i].get("ready"):
            print(f"| {v} | not run: {ready[i] and ready[i].get('why')} | | | |")
            continue
        p50, p90 = np.percentile(ms[i], 50), np.percentile(ms[i], 90)
        base = base or p50
        es, ed = errors(ref, os.path.join(tmp, f"out{i}.f32"), kp, desc)
        print(f"| {v} ({ready[i]['version']}) | {p50:.1f} | {p90:.1f} | {p50 / base:.3f} | {es:.1e} / {ed:.1e} |")
    for p in procs:
        p.stdin.close()
        p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
