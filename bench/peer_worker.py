#!/usr/bin/env python3
"""A peer of `superpoint-rt bench`: one CPU framework timing the SuperPoint network on a plane of one network frame.

    bench/.venv/bin/python bench/peer_worker.py --peer ort|ov|ncnn|mnn|torch --threads T --weights DIR
                                                --plane F32_FILE [--height 480 --width 640] [--warmup N]
                                                [--cache-dir DIR] [--precision fp32|bf16|int8]
                                                [--calibration F32_FILE] [--outputs FILE] [--option KEY=VALUE]

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
  ncnn   ncnn (PyPI `ncnn`) on the graph converted from the same ONNX graph by pnnx (PyPI `pnnx`: its own binary,
         no torch needed for an ONNX input; fp16=0, so the weights stay float32), written once to --cache-dir as
         superpoint_HxW.ncnn.param / .bin; opt.num_threads=T, fp16 / bf16 storage and arithmetic off, so that the
         row is fp32 whatever the CPU (ncnn.Option's default has fp16 on; its x86 convolutions gave the same outputs
         with it on here), every other option at ncnn's default (Winograd on: ncnn picks F(6x6), F(4x4) or F(2x2)
         per layer); one Extractor per forward
  mnn    MNN (PyPI `MNN`) on the same ONNX graph converted by MNN's converter, called as its compiled module
         (`_tools.mnnconvert`, inside this Python), never through the `mnnconvert` script (which pip-installs a
         telemetry package into the first Python on PATH), written once to --cache-dir as superpoint_HxW.mnn;
         Module API (MNN.nn.load_module_from_file) on a CPU runtime with numThread=T and MNN's default precision
         "normal" (fp32 on x86) and Winograd setting
  torch  PyTorch (eager, torch.no_grad, torch.set_num_threads(T)) on SuperPointDense of the PyTorch reference
         ($SUPERPOINT_RT_SHARED/tools/reference.py, default ../shared beside the checkout), which loads the same
         safetensors.
Only ov has --precision bf16 / int8 (--calibration: N planes of height * width float32, the same images the
driver's int8 rows of ours calibrate on). All run encoder + both heads on the plane's float32 values (height * width
little-endian floats, v / 255.0f), batch 1; ort, ov, ncnn and mnn give the raw logits and descriptors, torch's
module also applies the score softmax and the descriptor L2 norm.
--outputs FILE: after the warm-up, one more forward's raw outputs are written there (not timed), float32
little-endian, the logits (kp_dim x H/8 x W/8) then the descriptors (desc_dim x H/8 x W/8), for the driver's error
against the float64 reference (bench/reference_f64.py).
--option KEY=VALUE (repeatable; the variants of docs/BENCHMARKS.md, not used by the driver): ncnn: an ncnn.Option
field (e.g. use_winograd63_convolution=0, use_winograd_convolution=0); mnn: winograd_memory_level=0..3 (MNN's hint
WINOGRAD_MEMORY_LEVEL: 0 = no Winograd, 3 = its default) or precision=low|normal|high.

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

    def outputs():
        logits, desc = sess.run(["logits", "descriptors"], feed)
        return logits[0], desc[0]

    return lambda: sess.run(None, feed), f"onnxruntime {ort.__version__}", outputs


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
    return compiled, f"openvino {ov.__version__} {precision}{version_extra}; {ov_convolutions(compiled)}"


def ov_convolutions(compiled):
    """The kernels OpenVINO chose for the convolutions, e.g. "convolutions: brgconv_avx512_f32 x10,
    brgconv_avx512_1x1_f32 x2": which ISA it runs (it follows ONEDNN_MAX_CPU_ISA, its oneDNN's cap)."""
    import collections

    kinds = collections.Counter()
    for op in compiled.get_runtime_model().get_ops():
        rt = op.get_rt_info()
        if "layerType" in rt and rt["layerType"].astype(str) == "Convolution":
            kinds[rt["primitiveType"].astype(str)] += 1
    return "convolutions: " + ", ".join(f"{k} x{n}" for k, n in kinds.most_common())


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

    def outputs():
        r = req.infer({0: x})
        return (np.array(r[compiled.output("logits")])[0], np.array(r[compiled.output("descriptors")])[0])

    return run, version, outputs


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

    def outputs():  # the raw heads (the module's forward applies the softmax and the L2 norm)
        with torch.no_grad():
            enc = net.encoder(x)
            dd = net.descriptor_decoder
            desc = dd.conv_descriptor_b(dd.relu(dd.conv_descriptor_a(enc)))
            return net.keypoint_decoder(enc)[0].numpy(), desc[0].numpy()

    return run, f"torch {torch.__version__}", outputs


def converted(a, suffixes, convert):
    """The frame's ONNX graph converted by convert(onnx_path, {suffix: output path}) into files named
    superpoint_HxW<suffix> in --cache-dir, made once (the workers of several thread counts start at once: each
    converts into its own temporary names, then renames)."""
    paths = {x: os.path.join(a.cache_dir, f"superpoint_{a.height}x{a.width}{x}") for x in suffixes}
    if not all(os.path.exists(p) for p in paths.values()):
        tmp = {x: f"{p}.{os.getpid()}.tmp" for x, p in paths.items()}
        convert(onnx_path(a), tmp)
        for x in suffixes:
            os.replace(tmp[x], paths[x])
    return paths


def options(a):
    """--option KEY=VALUE pairs as a dict of ints where the value is one."""
    out = {}
    for kv in a.option:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            sys.exit(f"peer_worker.py: --option {kv!r} is not KEY=VALUE")
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def ncnn_runner(a, plane):
    import importlib.metadata
    import importlib.util
    import subprocess
    import tempfile

    import ncnn
    import numpy as np

    # The pnnx package's __init__ imports torch (its TorchScript route); its binary converts an ONNX graph without it.
    spec = importlib.util.find_spec("pnnx")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'pnnx'")
    pnnx_bin = os.path.join(spec.submodule_search_locations[0], "pnnx")

    def convert(onnx_file, out):
        with tempfile.TemporaryDirectory(dir=a.cache_dir) as work:  # pnnx writes its by-products beside its input
            src = os.path.join(work, "superpoint.onnx")
            os.symlink(os.path.abspath(onnx_file), src)
            subprocess.run([pnnx_bin, src, f"inputshape=[1,1,{a.height},{a.width}]", "fp16=0",
                            f"ncnnparam={out['.ncnn.param']}", f"ncnnbin={out['.ncnn.bin']}"],
                           cwd=work, check=True, stdout=sys.stderr)

    paths = converted(a, (".ncnn.param", ".ncnn.bin"), convert)
    net = ncnn.Net()
    net.opt.num_threads = a.threads
    # fp32 whatever the CPU: ncnn.Option's default enables fp16 storage / arithmetic where a layer and the CPU have it.
    net.opt.use_fp16_storage = net.opt.use_fp16_packed = net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = net.opt.use_bf16_packed = False
    opts = options(a)
    for k, v in opts.items():
        if not hasattr(net.opt, k):
            sys.exit(f"peer_worker.py: --option {k}: ncnn.Option has no such field")
        setattr(net.opt, k, bool(v) if isinstance(getattr(net.opt, k), bool) else v)
    if net.load_param(paths[".ncnn.param"]) != 0 or net.load_model(paths[".ncnn.bin"]) != 0:
        raise RuntimeError(f"ncnn cannot load {paths['.ncnn.param']}")
    x = ncnn.Mat(np.ascontiguousarray(plane[None])).clone()  # c = 1, h, w

    def run():
        with net.create_extractor() as ex:
            ex.input("in0", x)
            _, logits = ex.extract("out0")
            _, desc = ex.extract("out1")
            return logits, desc

    def outputs():
        logits, desc = run()
        return np.array(logits), np.array(desc)

    extra = "".join(f", {k}={v}" for k, v in opts.items())
    return run, f"ncnn {ncnn.__version__} (model by pnnx {importlib.metadata.version('pnnx')}){extra}", outputs


def mnn_runner(a, plane):
    import MNN
    import MNN.expr as F
    import MNN.nn as nn
    import numpy as np

    def convert(onnx_file, out):
        import _tools  # MNN's compiled converter (what the mnnconvert script calls, without its telemetry)

        if not _tools.mnnconvert(["mnnconvert", "-f", "ONNX", "--modelFile", onnx_file, "--MNNModel", out[".mnn"]]):
            raise RuntimeError(f"MNN's converter failed on {onnx_file}")

    path = converted(a, (".mnn",), convert)[".mnn"]
    opts = options(a)
    unknown = set(opts) - {"winograd_memory_level", "precision"}
    if unknown:
        sys.exit(f"peer_worker.py: --option {', '.join(sorted(unknown))}: mnn knows winograd_memory_level, precision")
    rt = nn.create_runtime_manager(({"backend": "CPU", "numThread": a.threads,
                                     "precision": opts.get("precision", "normal")},))
    if "winograd_memory_level" in opts:
        rt.set_hint(3, opts["winograd_memory_level"])  # Interpreter::WINOGRAD_MEMORY_LEVEL
    net = nn.load_module_from_file(path, ["pixel"], ["logits", "descriptors"], runtime_manager=rt)
    x = F.const(np.ascontiguousarray(plane[None, None]), [1, 1, a.height, a.width], F.NCHW)

    def run():
        return net.forward([x])  # computes now (Module API); reading the outputs costs microseconds

    def outputs():
        logits, desc = net.forward([x])
        return (np.array(F.convert(logits, F.NCHW).read())[0], np.array(F.convert(desc, F.NCHW).read())[0])

    extra = "".join(f", {k}={v}" for k, v in opts.items())
    return run, f"MNN {MNN.version()}{extra}", outputs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", choices=("ort", "ov", "ncnn", "mnn", "torch"), required=True)
    ap.add_argument("--precision", choices=("fp32", "bf16", "int8"), default="fp32", help="ov only")
    ap.add_argument("--calibration", help="ov int8: N planes of height * width float32 values")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--weights", required=True, help="dir with config.json + model.safetensors")
    ap.add_argument("--plane", required=True, help="height * width float32 values")
    ap.add_argument("--height", type=int, default=480, help="the network frame's height")
    ap.add_argument("--width", type=int, default=640, help="the network frame's width")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--cache-dir", default=os.path.join(REPO, "bench", "out"))
    ap.add_argument("--outputs", help="write one forward's raw logits and descriptors here (float32) after warm-up")
    ap.add_argument("--option", action="append", default=[], help="ncnn / mnn: KEY=VALUE (see the module text)")
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
    if a.option and a.peer not in ("ncnn", "mnn"):
        sys.exit("peer_worker.py: --option is for --peer ncnn and mnn")
    modules = {"ort": "onnxruntime", "ov": "openvino", "ncnn": "ncnn", "mnn": "MNN", "torch": "torch"}
    setup_flag = {"torch": " --with-torch", "ncnn": " --with-ncnn", "mnn": " --with-mnn"}.get(a.peer, "")
    try:
        # The process before anything of the frame's size (its framework imported; the session / module, which hold
        # the weights and the activations, not yet made): `superpoint-rt bench` reports (peak - this) per frame pixel.
        __import__(modules[a.peer])
        base_rss_mb = peak_rss_mb()
        runners = {"ort": ort_runner, "ov": ov_runner, "ncnn": ncnn_runner, "mnn": mnn_runner, "torch": torch_runner}
        run, version, outputs = runners[a.peer](a, plane)
    except ImportError as e:
        say({"ready": False, "why": f"{e} (bash bench/setup-peers.sh{setup_flag})"})
        return 0
    except NotHere as e:
        say({"ready": False, "why": str(e)})
        return 0
    for _ in range(a.warmup):
        run()
    if a.outputs:  # once, before any timing: the driver's error against the float64 reference
        logits, desc = outputs()
        tmp = f"{a.outputs}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            for m in (logits, desc):
                f.write(np.ascontiguousarray(m, dtype="<f4").tobytes())
        os.replace(tmp, a.outputs)
    ready = {"ready": True, "peak_rss_mb": peak_rss_mb(), "base_rss_mb": base_rss_mb, "version": version}
    if a.outputs:
        ready["outputs"] = [list(logits.shape), list(desc.shape)]
    say(ready)
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
