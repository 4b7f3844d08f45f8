#!/usr/bin/env python3
"""superpoint-rt against ONNX Runtime (CPU), interleaved in one run. See docs/BENCHMARKS.md.

Measures, for each thread count (default 1 and 2):
  ORT forward    onnxruntime.InferenceSession on the exported graph (bench/export_onnx.py), 1x1x480x640 input,
                 intra_op_num_threads=T, inter_op_num_threads=1, ORT_ENABLE_ALL, ORT_SEQUENTIAL
  ours forward   sprt_bench --mode forward: the backend's plan(480x640) -> run(true), both heads
  ours request   sprt_bench --mode request: SuperPoint::run(ImageInput::bytes(JPEG)), default Params; its
                 Features::timing_ms split gives the non-network part (decode + preprocess + postprocess)
Both forwards get the same input plane (pixel_values of the golden dense npz: the real network input of the image).

Rounds are interleaved: each round runs ITERS iterations of every (measurement, thread count), alternating which
peer goes first, so that noise from a shared machine hits both peers alike. One sprt_bench process per
(mode, threads) stays alive for the whole run (--stdin), so nothing is re-loaded between rounds.

Prints a table (median and p90 ms, ours/ORT) and writes the raw per-iteration times to --out-dir as JSON.
Run with bench/.venv/bin/python (bench/setup-peers.sh), normally through `bash bench/run.sh`.
--ort-only measures ONNX Runtime alone (when sprt_bench is not built).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

try:
    import onnxruntime as ort
except ImportError:
    sys.exit("run_bench.py: onnxruntime is missing; run `bash bench/setup-peers.sh` and use bench/.venv/bin/python")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
NET_H, NET_W = 480, 640


def percentile(values, q):
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def summary(values):
    return {"n": len(values), "median": float(statistics.median(values)), "p90": percentile(values, 90),
            "min": float(min(values)), "max": float(max(values))}


def input_plane(pixels_npz):
    """The 480x640 float32 network input both peers run on. Falls back to sprt_bench's built-in ramp."""
    if pixels_npz and os.path.exists(pixels_npz):
        p = np.load(pixels_npz)["pixel_values"].astype(np.float32)
        if p.shape != (NET_H, NET_W):
            sys.exit(f"run_bench.py: {pixels_npz}: pixel_values has shape {p.shape}, expected {(NET_H, NET_W)}")
        return p
    y, x = np.mgrid[0:NET_H, 0:NET_W]
    return (((x * 7 + y * 13) % 256) / np.float32(255.0)).astype(np.float32)


class OrtForward:
    def __init__(self, model_path, threads, plane, warmup):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        self.feed = {"pixel": np.ascontiguousarray(plane[None, None])}
        for _ in range(warmup):
            self.sess.run(None, self.feed)

    def measure(self, iters):
        ms = []
        cpu0 = time.process_time()
        for _ in range(iters):
            t0 = time.perf_counter()
            self.sess.run(None, self.feed)
            ms.append((time.perf_counter() - t0) * 1e3)
        return {"ms": ms, "cpu_ms": (time.process_time() - cpu0) * 1e3}


class OursProcess:
    """One sprt_bench --stdin process: set up once, then one JSON line per requested measurement."""

    def __init__(self, exe, args):
        self.cmd = [exe] + args + ["--stdin"]
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        ready = self._read()
        if not ready.get("ready"):
            raise RuntimeError(f"{' '.join(self.cmd)}: unexpected first line {ready}")

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.wait()
            raise RuntimeError(f"{' '.join(self.cmd)} exited with status {rc} (its message is above)")
        return json.loads(line)

    def measure(self, iters):
        self.proc.stdin.write(f"{iters}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def machine_info():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "loadavg_at_start": list(os.getloadavg()),
            "python": platform.python_version(), "onnxruntime": ort.__version__, "numpy": np.__version__}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sprt-bench", default=os.path.join(REPO, "build", "bench", "sprt_bench"))
    ap.add_argument("--weights", default=os.path.join(SHARED, "weights", "superpoint"))
    ap.add_argument("--image", default=os.path.join(SHARED, "images", "berlin01_1600x900.jpg"))
    ap.add_argument("--pixels", default=os.path.join(SHARED, "golden", "dense", "berlin01_1600x900.jpg.npz"),
                    help="npz whose pixel_values (480x640) both forwards run on")
    ap.add_argument("--onnx", default=os.path.join(REPO, "bench", "out", "superpoint_480x640.onnx"))
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=4, help="iterations per measurement per round")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.2,
                    help="seconds of rest between measurements (lets spinning pool threads go to sleep)")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "bench", "out"))
    ap.add_argument("--ort-only", action="store_true", help="measure ONNX Runtime alone")
    a = ap.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",") if t.strip()]
    if not threads or min(threads) < 1:
        ap.error(f"--threads must list counts >= 1, got '{a.threads}'")
    if a.rounds < 1 or a.iters < 1:
        ap.error("--rounds and --iters must be >= 1")
    for path, what in ((a.onnx, "--onnx (bench/export_onnx.py writes it)"), (a.weights, "--weights"),
                       (a.image, "--image")):
        if not os.path.exists(path):
            sys.exit(f"run_bench.py: {what}: {path} does not exist")
    if not a.ort_only and not os.access(a.sprt_bench, os.X_OK):
        sys.exit(f"run_bench.py: {a.sprt_bench} is not built (ninja -C build sprt_bench), or pass --ort-only")

    info = machine_info()
    if info["loadavg_at_start"][0] > 0.5:
        print(f"note: load average {info['loadavg_at_start'][0]:.2f} at start: other work shares the CPUs; "
              "the medians of interleaved rounds stay comparable, absolute numbers do not", file=sys.stderr)
    plane = input_plane(a.pixels)
    pixels_arg = ["--pixels", a.pixels] if a.pixels and os.path.exists(a.pixels) else []

    print(f"setting up ({'ORT only' if a.ort_only else 'ORT + superpoint-rt'}, threads {threads}) ...",
          file=sys.stderr)
    peers = {}  # (name, threads) -> object with measure(iters)
    try:
        for t in threads:
            peers[("ort_forward", t)] = OrtForward(a.onnx, t, plane, a.warmup)
            if not a.ort_only:
                common = ["--weights", a.weights, "--threads", str(t), "--warmup", str(a.warmup)]
                peers[("ours_forward", t)] = OursProcess(a.sprt_bench, common + ["--mode", "forward"] + pixels_arg)
                peers[("ours_request", t)] = OursProcess(a.sprt_bench,
                                                         common + ["--mode", "request", "--image", a.image])

        raw = {k: {"ms": [], "cpu_ms": 0.0, "extra": {}} for k in peers}
        names = ["ort_forward"] + ([] if a.ort_only else ["ours_forward", "ours_request"])
        for r in range(a.rounds):
            for t in threads:
                # Alternate the order each round: ORT first on even rounds, ours first on odd rounds.
                order = names if r % 2 == 0 else names[1:] + names[:1]
                for name in order:
                    time.sleep(a.pause)
                    res = peers[(name, t)].measure(a.iters)
                    acc = raw[(name, t)]
                    acc["ms"] += res["ms"]
                    acc["cpu_ms"] += res["cpu_ms"]
                    for key in ("decode", "preprocess", "forward", "postprocess"):
                        if key in res:
                            acc["extra"].setdefault(key, []).extend(res[key])
                    for key in ("plan", "keypoints", "backend_threads", "model_threads"):
                        if key in res:
                            acc["extra"][key] = res[key]
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    finally:
        for p in peers.values():
            if isinstance(p, OursProcess):
                p.close()

    # ---- report ----
    results = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "machine": info,
               "config": {"rounds": a.rounds, "iters": a.iters, "warmup": a.warmup, "threads": threads,
                          "image": a.image, "pixels": a.pixels if pixels_arg else "<ramp>", "onnx": a.onnx},
               "results": {}}
    for (name, t), acc in raw.items():
        entry = {"summary": summary(acc["ms"]), "ms": acc["ms"],
                 "cores_used": acc["cpu_ms"] / max(sum(acc["ms"]), 1e-9)}
        for key, v in acc["extra"].items():
            entry[key] = v
        if name == "ours_request":
            ex = acc["extra"]
            nonnet = [d + p + q for d, p, q in zip(ex["decode"], ex["preprocess"], ex["postprocess"])]
            entry["nonnet_ms"] = nonnet
            entry["nonnet_summary"] = summary(nonnet)
            entry["wall_minus_forward_summary"] = summary([w - f for w, f in zip(acc["ms"], ex["forward"])])
            for key in ("decode", "preprocess", "forward", "postprocess"):
                entry[key + "_median"] = float(statistics.median(ex[key]))
                entry[key + "_min"] = float(min(ex[key]))
        results["results"][f"{name}@{t}"] = entry

    lines = []
    lines.append(f"superpoint-rt vs ONNX Runtime {ort.__version__} (CPU), {info['cpu']}, "
                 f"{info['logical_cpus']} logical CPUs, {results['date']}")
    lines.append(f"{a.rounds} interleaved rounds x {a.iters} iterations; ms of wall clock; ours/ORT = ours median / "
                 "ORT forward median,")
    lines.append("(of mins) = the same for the fastest iterations; < 1: ours is faster")
    lines.append("")
    hdr = (f"{'threads':>7}  {'measurement':<34} {'median':>9} {'p90':>9} {'min':>9} {'cores':>6} "
           f"{'ours/ORT':>9} {'(of mins)':>9}")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    res = results["results"]
    for t in threads:
        ort_med = res[f"ort_forward@{t}"]["summary"]["median"]
        ort_min = res[f"ort_forward@{t}"]["summary"]["min"]
        rows = [("ORT forward 480x640", f"ort_forward@{t}"), ("ours forward 480x640", f"ours_forward@{t}"),
                ("ours request (JPEG bytes 1600x900)", f"ours_request@{t}")]
        for label, key in rows:
            if key not in res:
                continue
            s = res[key]["summary"]
            ratio = "" if key.startswith("ort") else f"{s['median'] / ort_med:9.3f} {s['min'] / ort_min:9.3f}"
            lines.append(f"{t:>7}  {label:<34} {s['median']:9.2f} {s['p90']:9.2f} {s['min']:9.2f} "
                         f"{res[key]['cores_used']:6.2f} {ratio:>9}")
        if f"ours_request@{t}" in res:
            e = res[f"ours_request@{t}"]
            n = e["nonnet_summary"]
            lines.append(f"{t:>7}  {'  non-network (decode+pre+post)':<34} {n['median']:9.2f} {n['p90']:9.2f}"
                         f" {n['min']:9.2f}")
            lines.append(f"{'':>7}    medians: decode {e['decode_median']:.2f}, "
                         f"preprocess {e['preprocess_median']:.2f}, postprocess {e['postprocess_median']:.2f}, "
                         f"network {e['forward_median']:.2f}, "
                         f"wall - network {e['wall_minus_forward_summary']['median']:.2f}")
            lines.append(f"{'':>7}    mins:    decode {e['decode_min']:.2f}, preprocess {e['preprocess_min']:.2f}, "
                         f"postprocess {e['postprocess_min']:.2f}, network {e['forward_min']:.2f}")
    lines.append("")
    lines.append("cores = process CPU time / wall time (how many cores the measurement really kept busy)")
    lines.append("min = the fastest iteration (the least disturbed by other work on the machine)")
    table = "\n".join(lines)
    print(table)
    results["table"] = table

    os.makedirs(a.out_dir, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for name in (f"bench-{stamp}.json", "latest.json"):
        with open(os.path.join(a.out_dir, name), "w") as f:
            json.dump(results, f, indent=1)
    print(f"\nwrote {os.path.join(a.out_dir, 'bench-' + stamp + '.json')} (and latest.json)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
