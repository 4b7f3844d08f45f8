#!/usr/bin/env python3
"""A peer of `superpoint-rt bench`: one CPU framework timing the SuperPoint network on a plane of one network frame.

    bench/.venv/bin/python bench/peer_worker.py --peer ort|torch|ov --threads T --weights DIR --plane F32_FILE
                                                [--height 480 --width 640] [--warmup N] [--cache-dir DIR]
                                                [--precision fp32|bf16|int8] [--calibration F32_FILE]

  ort    ONNX Runtime CPUExecutionProvider on the graph bench/export_onnx.py builds from the safetensors
         (intra_op_num_threads=T, inter_op_num_threads=1, ORT_ENABLE_ALL, ORT_SEQUENTIAL); the graph, exported at
         the frame's shape, is written once to --cache-dir as superpoint_HxW.onnx (default bench/out/, where
         bench/run.sh has exported and checked the 480x640 one).
  ov     OpenVINO (CPU plugin) on the same ONNX graph as ort (openvino.Core.read_model), compiled with
         INFERENCE_NUM_THREADS=T, NUM_STREAMS=1, PERFORMANCE_HINT=LATENCY and INFERENCE_PRECISION_HINT f32 (fp32) or
         bf16 (bf16; refused as "not ready" where the plugin's OPTIMIZATION_CAPABILITIES lack BF16); int8 is the graph
         quantised by NNCF's post-training quantisation (nncf.quantize, preset PERFORMANCE, every --calibration plane
         as the calibration set, the subset size = their number) and compiled at f32 hint, written once to
         --cache-dir as superpoint_HxW_int8_<digest of the planes>.xml
  torch  PyTorch (eager, torch.no_grad, torch.set_num_threads(T)) on SuperPointDense of the PyTorch reference
         ($SUPERPOINT_RT_SHARED/tools/reference.py, default ../shared beside the checkout), which loads the same
         safetensors.
Only ov has --precision bf16 / int8 (--calibration: N planes of height * width float32, the same images the
driver's int8 rows of ours calibrate on). All run encoder + both heads (with the score softmax and the descriptor L2 norm) on the plane's float32 values
(height * width little-endian floats, v / 255.0f), batch 1.

Protocol (the same as `superpoint-rt bench --worker`): after setup prints {"ready": true, "peak_rss_mb": x}, or
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


# The protocol's channel: the process's original stdout. main() points file descriptor 1 (and sys.stdout) at stderr,
# so that whatever the frameworks print (NNCF's progress bars, C-level messages) cannot break the line protocol.
PROTOCOL = sys.stdout


def say(obj):
    PROTOCOL.write(json.dumps(obj) + "\n")
    PROTOCOL.flush()


def ort_runner(a, plane):
    import onnxruntime as ort

    path = onnx_path(a)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: plane[None, None]}
    return lambda: sess.run(None, feed), f"onnxruntime {ort.__version__}"


def onnx_path(a):
    """The graph bench/export_onnx.py builds at the frame, written once to --cache-dir."""
    import onnx
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_onnx

    os.makedirs(a.cache_dir, exist_ok=True)
    path = os.path.join(a.cache_dir, f"superpoint_{a.height}x{a.width}.onnx")
    if not os.path.exists(path):  # the workers of several thread counts start at once: write, then rename
        tmp = f"{path}.{os.getpid()}.tmp"
        onnx.save(export_onnx.build_graph(a.weights, a.height, a.width), tmp)
        os.replace(tmp, path)
    return path


class NotHere(Exception):
    """This peer cannot run this row on this machine (the driver drops the row with the reason)."""


def ov_compiled(weights, height, width, threads, precision, calibration, cache_dir):
    """An OpenVINO CompiledModel of the graph at the frame: (compiled model, version text). bench/quality.py uses
    it too (its OpenVINO rows), so both measure the same thing. calibration: (N, height, width) float32 planes."""
    import hashlib

    import numpy as np
    import openvino as ov

    a = argparse.Namespace(weights=weights, height=height, width=width, cache_dir=cache_dir)
    core = ov.Core()
    caps = core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if precision == "bf16" and "BF16" not in caps:
        raise NotHere(f"OpenVINO's CPU plugin has no bf16 here (OPTIMIZATION_CAPABILITIES: {' '.join(caps)})")
    path = onnx_path(a)
    model = core.read_model(path)
    if precision == "int8":
        if calibration is None or len(calibration) == 0:
            raise NotHere("OpenVINO int8 needs --calibration planes (NNCF post-training quantisation)")
        import nncf

        digest = hashlib.sha256(np.ascontiguousarray(calibration, np.float32).tobytes()).hexdigest()[:12]
        qpath = os.path.join(cache_dir, f"superpoint_{height}x{width}_int8_{digest}.xml")
        if not os.path.exists(qpath):
            data = nncf.Dataset(list(calibration), lambda p: p[None, None].astype(np.float32))
            q = nncf.quantize(model, data, preset=nncf.QuantizationPreset.PERFORMANCE,
                              subset_size=len(calibration))
            tmp = f"{qpath[:-4]}.{os.getpid()}.tmp.xml"
            ov.save_model(q, tmp, compress_to_fp16=False)
            os.replace(tmp, qpath)
            os.replace(tmp[:-4] + ".bin", qpath[:-4] + ".bin")
        model = core.read_model(qpath)
        version_extra = f", nncf {nncf.__version__} PTQ on {len(calibration)} planes"
    else:
        version_extra = ""
    config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
              "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32"}
    compiled = core.compile_model(model, "CPU", config)
    return compiled, f"openvino {ov.__version__} {precision}{version_extra}"


def ov_runner(a, plane):
    import numpy as np

    calib = None
    if a.calibration:
        calib = np.fromfile(a.calibration, dtype="<f4")
        if calib.size % (a.height * a.width) != 0:
            sys.exit(f"peer_worker.py: {a.calibration} holds {calib.size} floats, not a multiple of "
                     f"{a.height} * {a.width}")
        calib = calib.reshape(-1, a.height, a.width)
    compiled, version = ov_compiled(a.weights, a.height, a.width, a.threads, a.precision, calib, a.cache_dir)
    req = compiled.create_infer_request()
    x = np.ascontiguousarray(plane[None, None])

    def run():
        return req.infer({0: x})

    return run, version


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
    ap.add_argument("--peer", choices=("ort", "torch", "ov"), required=True)
    ap.add_argument("--precision", choices=("fp32", "bf16", "int8"), default="fp32", help="ov only")
    ap.add_argument("--calibration", help="ov int8: N planes of height * width float32 values")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--weights", required=True, help="dir with config.json + model.safetensors")
    ap.add_argument("--plane", required=True, help="height * width float32 values")
    ap.add_argument("--height", type=int, default=480, help="the network frame's height")
    ap.add_argument("--width", type=int, default=640, help="the network frame's width")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--cache-dir", default=os.path.join(REPO, "bench", "out"))
    a = ap.parse_args(argv)
    global PROTOCOL
    PROTOCOL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import numpy as np

    plane = np.fromfile(a.plane, dtype="<f4")
    if plane.size != a.height * a.width:
        sys.exit(f"peer_worker.py: {a.plane} holds {plane.size} floats, expected {a.height} * {a.width}")
    plane = np.ascontiguousarray(plane.reshape(a.height, a.width).astype(np.float32))
    if a.peer != "ov" and a.precision != "fp32":
        sys.exit(f"peer_worker.py: --precision {a.precision} is for --peer ov only")
    try:
        run, version = {"ort": ort_runner, "torch": torch_runner, "ov": ov_runner}[a.peer](a, plane)
    except ImportError as e:
        say({"ready": False, "why": f"{e} (bash bench/setup-peers.sh{' --with-torch' if a.peer == 'torch' else ''})"})
        return 0
    except NotHere as e:
        say({"ready": False, "why": str(e)})
        return 0
    for _ in range(a.warmup):
        run()
    say({"ready": True, "peak_rss_mb": peak_rss_mb(), "version": version})
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
