#!/usr/bin/env python3
"""A peer of `superpoint-rt bench`: one CPU framework timing the SuperPoint network on a plane of one network frame.

    bench/.venv/bin/python bench/peer_worker.py --peer ort|torch --threads T --weights DIR --plane F32_FILE
                                                [--height 480 --width 640] [--warmup N] [--cache-dir DIR]

  ort    ONNX Runtime CPUExecutionProvider on the graph bench/export_onnx.py builds from the safetensors
         (intra_op_num_threads=T, inter_op_num_threads=1, ORT_ENABLE_ALL, ORT_SEQUENTIAL); the graph, exported at
         the frame's shape, is written once to --cache-dir as superpoint_HxW.onnx (default bench/out/, where
         bench/run.sh has exported and checked the 480x640 one).
  torch  PyTorch (eager, torch.no_grad, torch.set_num_threads(T)) on SuperPointDense of the PyTorch reference
         ($SUPERPOINT_RT_SHARED/tools/reference.py, default ../shared beside the checkout), which loads the same
         safetensors.
Both run encoder + both heads (with the score softmax and the descriptor L2 norm) on the plane's float32 values
(height * width little-endian floats, v / 255.0f), batch 1.

Protocol (the same as `superpoint-rt bench --worker`): after setup prints {"ready": true, "peak_rss_mb": x,
"base_rss_mb": x (before the session / module was made)}, or
{"ready": false, "why": "..."} when this peer cannot run here (e.g. torch is not installed); then answers each
stdin line "forward ITERS" with {"ms": [...], "cpu_ms": x, "peak_rss_mb": x}. Ends at EOF.
"""
import argparse
import json
import os
import resource
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(os.path.dirname(REPO), "shared"))


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def ort_runner(a, plane):
    import onnx
    import onnxruntime as ort
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_onnx

    os.makedirs(a.cache_dir, exist_ok=True)
    path = os.path.join(a.cache_dir, f"superpoint_{a.height}x{a.width}.onnx")
    if not os.path.exists(path):  # the workers of several thread counts start at once: write, then rename
        tmp = f"{path}.{os.getpid()}.tmp"
        onnx.save(export_onnx.build_graph(a.weights, a.height, a.width), tmp)
        os.replace(tmp, path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: plane[None, None]}
    return lambda: sess.run(None, feed), f"onnxruntime {ort.__version__}"


def torch_runner(a, plane):
    import torch
    sys.path.insert(0, os.path.join(SHARED, "tools"))
    import reference

    torch.set_num_threads(a.threads)
    net = reference.SuperPointReference(a.weights).net
    x = torch.from_numpy(plane)[None, None]

    def run():
        with torch.no_grad():
            return net(x)

    return run, f"torch {torch.__version__}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", choices=("ort", "torch"), required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--weights", required=True, help="dir with config.json + model.safetensors")
    ap.add_argument("--plane", required=True, help="height * width float32 values")
    ap.add_argument("--height", type=int, default=480, help="the network frame's height")
    ap.add_argument("--width", type=int, default=640, help="the network frame's width")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--cache-dir", default=os.path.join(REPO, "bench", "out"))
    a = ap.parse_args(argv)
    import numpy as np

    plane = np.fromfile(a.plane, dtype="<f4")
    if plane.size != a.height * a.width:
        sys.exit(f"peer_worker.py: {a.plane} holds {plane.size} floats, expected {a.height} * {a.width}")
    plane = np.ascontiguousarray(plane.reshape(a.height, a.width).astype(np.float32))
    try:
        # The process before anything of the frame's size (its framework imported; the session / module, which hold
        # the weights and the activations, not yet made): `superpoint-rt bench` reports (peak - this) per frame pixel.
        __import__("onnxruntime" if a.peer == "ort" else "torch")
        base_rss_mb = peak_rss_mb()
        run, version = (ort_runner if a.peer == "ort" else torch_runner)(a, plane)
    except ImportError as e:
        say({"ready": False, "why": f"{e} (bash bench/setup-peers.sh{' --with-torch' if a.peer == 'torch' else ''})"})
        return 0
    for _ in range(a.warmup):
        run()
    say({"ready": True, "peak_rss_mb": peak_rss_mb(), "base_rss_mb": base_rss_mb, "version": version})
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2 or parts[0] != "forward" or not parts[1].isdigit() or int(parts[1]) < 1:
            sys.exit(f"peer_worker.py: expected 'forward ITERS', got {line!r}")
        ms = []
        cpu0 = time.process_time()
        for _ in range(int(parts[1])):
            t0 = time.perf_counter()
            run()
            ms.append((time.perf_counter() - t0) * 1e3)
        say({"ms": ms, "cpu_ms": (time.process_time() - cpu0) * 1e3, "peak_rss_mb": peak_rss_mb(),
             "plan": version})
    return 0


if __name__ == "__main__":
    sys.exit(main())
