#!/usr/bin/env python3
"""Builds the SuperPoint network as an ONNX graph from config.json + model.safetensors (no torch).

The graph is the peer of our backend's forward (src/backend/backend.hpp): the same work and nothing else.
  input   "pixel"        float32 1 x 1 x H x W   (the normalised plane, v / 255)
  output  "logits"       float32 1 x 65 x H/8 x W/8    raw keypoint head (conv_score_b)
  output  "descriptors"  float32 1 x 256 x H/8 x W/8   raw descriptor head (conv_descriptor_b), NOT L2-normalised
Network (docs/ALGORITHM.md §3.3-3.7, HF modeling_superpoint.py): 8 encoder convs 3x3/pad 1 each with ReLU, max pool
2x2/2 after blocks 1-3; score head conv 3x3 + ReLU + conv 1x1; descriptor head conv 3x3 + ReLU + conv 1x1.

Usage (with bench/.venv/bin/python, which has onnx, onnxruntime and numpy; bench/setup-peers.sh makes it):
  export_onnx.py --weights ../shared/weights/superpoint --out bench/out/superpoint_480x640.onnx
  export_onnx.py --weights ... --out ... --check ../shared/golden/dense/berlin01_1600x900.jpg.npz
  export_onnx.py --weights ... --out bench/out/superpoint_768x1024.onnx --height 768 --width 1024   (any frame;
      bench/peer_worker.py exports each frame of `superpoint-rt bench --frames` this way)
--check runs the exported graph with onnxruntime on the golden pixel_values and compares the logits and the
L2-normalised descriptor map with the golden ones (PyTorch reference); it exits 1 when the max abs error is over
--tol.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


def _onnx():
    """The onnx package, imported where a graph is built (network() and bench/reference_f64.py need numpy only)."""
    try:
        import onnx
    except ImportError:  # a clear message instead of a traceback: the peers live in bench/.venv
        sys.exit("export_onnx.py: the 'onnx' package is missing; run `bash bench/setup-peers.sh` and use "
                 "bench/.venv/bin/python")
    return onnx


OPSET = 17

# safetensors dtype -> numpy little-endian dtype (BF16 is handled separately: numpy has no bfloat16).
_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}


def load_safetensors(path):
    """Tiny safetensors reader (8-byte LE header length, JSON header, raw data), as shared/tools/reference.py does.
    Returns {name: float32 ndarray}; the optional "superpoint." prefix of HF checkpoints is removed."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError(f"{path}: {len(buf)} bytes is too short for a safetensors file")
    (hlen,) = struct.unpack("<Q", buf[:8])
    if 8 + hlen > len(buf):
        raise ValueError(f"{path}: header length {hlen} is past the end of the file ({len(buf)} bytes)")
    header = json.loads(buf[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        raw = buf[base + s:base + e]
        dt = info["dtype"]
        if dt == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt in _ST_DTYPES:
            arr = np.frombuffer(raw, dtype=_ST_DTYPES[dt])
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dt}")
        key = name[len("superpoint."):] if name.startswith("superpoint.") else name
        out[key] = arr.astype(np.float32).reshape(info["shape"])
    return out


def network(weights_dir):
    """The network that config.json + model.safetensors describe, as steps: (encoder, score head, descriptor head),
    each a list of ("conv", name, weight, bias, relu) and ("pool", name) (max pool 2x2/2); plus (kp_dim, desc_dim).
    Checks every shape and that every tensor is used. The ONNX graph (build_graph) and bench/reference_f64.py's float64
    forward are both made from it."""
    with open(os.path.join(weights_dir, "config.json")) as f:
        cfg = json.load(f)
    hs = list(cfg.get("encoder_hidden_sizes", [64, 64, 128, 128]))
    hidden = int(cfg.get("decoder_hidden_size", 256))
    kp_dim = int(cfg.get("keypoint_decoder_dim", 65))
    desc_dim = int(cfg.get("descriptor_decoder_dim", 256))
    tensors = load_safetensors(os.path.join(weights_dir, "model.safetensors"))
    used = set()

    def conv(name, cin, cout, k, relu):
        w, b = tensors.get(name + ".weight"), tensors.get(name + ".bias")
        if w is None or b is None:
            raise ValueError(f"{weights_dir}: tensor {name}.weight/.bias is missing")
        if w.shape != (cout, cin, k, k) or b.shape != (cout,):
            raise ValueError(f"{weights_dir}: {name} has shapes {w.shape} / {b.shape}, expected "
                             f"{(cout, cin, k, k)} / {(cout,)}")
        used.update({name + ".weight", name + ".bias"})
        return ("conv", name, w, b, relu)

    # Encoder: block i has conv_a (cin -> hs[i]) and conv_b (hs[i] -> hs[i]); every block but the last pools.
    encoder, cin = [], 1
    for i, cout in enumerate(hs):
        encoder.append(conv(f"encoder.conv_blocks.{i}.conv_a", cin, cout, 3, True))
        encoder.append(conv(f"encoder.conv_blocks.{i}.conv_b", cout, cout, 3, True))
        if i < len(hs) - 1:
            encoder.append(("pool", f"encoder.pool{i}"))
        cin = cout
    score = [conv("keypoint_decoder.conv_score_a", cin, hidden, 3, True),
             conv("keypoint_decoder.conv_score_b", hidden, kp_dim, 1, False)]
    desc = [conv("descriptor_decoder.conv_descriptor_a", cin, hidden, 3, True),
            conv("descriptor_decoder.conv_descriptor_b", hidden, desc_dim, 1, False)]
    unused = sorted(set(tensors) - used)
    if unused:
        raise ValueError(f"{weights_dir}: tensors not part of the network: {', '.join(unused)}")
    return (encoder, score, desc), (kp_dim, desc_dim)


def build_graph(weights_dir, height, width):
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    (encoder, score, desc), (kp_dim, desc_dim) = network(weights_dir)
    nodes, inits = [], []

    def emit(x, steps):
        for step in steps:
            if step[0] == "pool":
                nodes.append(helper.make_node("MaxPool", [x], [step[1]], name=step[1], kernel_shape=[2, 2],
                                              strides=[2, 2]))
                x = step[1]
                continue
            _, name, w, b, relu = step
            inits.append(numpy_helper.from_array(w, name + ".weight"))
            inits.append(numpy_helper.from_array(b, name + ".bias"))
            y = name + ".out"
            k = w.shape[2]
            p = k // 2
            nodes.append(helper.make_node("Conv", [x, name + ".weight", name + ".bias"], [y], name=name,
                                          kernel_shape=[k, k], pads=[p, p, p, p], strides=[1, 1]))
            if relu:
                nodes.append(helper.make_node("Relu", [y], [y + ".relu"], name=name + ".relu"))
                y += ".relu"
            x = y
        return x

    x = emit("pixel", encoder)
    s = emit(x, score)
    d = emit(x, desc)
    nodes.append(helper.make_node("Identity", [s], ["logits"], name="logits"))
    nodes.append(helper.make_node("Identity", [d], ["descriptors"], name="descriptors"))

    hc, wc = height // 2 // 2 // 2, width // 2 // 2 // 2  # MaxPool2d floors odd sizes
    graph = helper.make_graph(
        nodes, "superpoint",
        [helper.make_tensor_value_info("pixel", TensorProto.FLOAT, [1, 1, height, width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, kp_dim, hc, wc]),
         helper.make_tensor_value_info("descriptors", TensorProto.FLOAT, [1, desc_dim, hc, wc])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="superpoint-rt bench/export_onnx.py")
    model.ir_version = min(model.ir_version, 8)  # readable by any onnxruntime >= 1.10
    onnx.checker.check_model(model)
    return model


def l2_normalise(d):
    """F.normalize(p=2, dim=0) on a C x H x W map: x / max(||x||, 1e-12), as HF does to the dense descriptors."""
    n = np.sqrt(np.sum(d.astype(np.float64) ** 2, axis=0, keepdims=True))
    return (d / np.maximum(n, 1e-12)).astype(np.float32)


def check(model_path, golden_path, tol):
    import onnxruntime as ort

    g = np.load(golden_path)
    pix = g["pixel_values"].astype(np.float32)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    shape = sess.get_inputs()[0].shape
    if list(pix.shape) != list(shape[2:]):
        print(f"check: golden pixel_values {pix.shape} do not match the graph input {shape}", file=sys.stderr)
        return 1
    logits, desc = sess.run(["logits", "descriptors"], {"pixel": pix[None, None]})
    e_logits = float(np.max(np.abs(logits[0] - g["logits"])))
    e_desc = float(np.max(np.abs(l2_normalise(desc[0]) - g["descriptor_map"])))
    ok = e_logits <= tol and e_desc <= tol
    print(f"check {os.path.basename(golden_path)}: max|logits - golden| = {e_logits:.3g}, "
          f"max|normalise(descriptors) - golden descriptor_map| = {e_desc:.3g} (tol {tol:g}): "
          f"{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True, help="dir with config.json + model.safetensors (HF layout)")
    ap.add_argument("--out", required=True, help="the .onnx file to write")
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--check", metavar="NPZ", help="golden dense npz to verify the exported graph against")
    ap.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed by --check")
    a = ap.parse_args(argv)
    if a.height < 8 or a.width < 8:
        ap.error(f"--height/--width must be >= 8 (got {a.height}x{a.width})")
    model = build_graph(a.weights, a.height, a.width)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    _onnx().save(model, a.out)
    print(f"wrote {a.out} ({len(model.graph.node)} nodes, input 1x1x{a.height}x{a.width})")
    if a.check:
        return check(a.out, a.check, a.tol)
    return 0


if __name__ == "__main__":
    sys.exit(main())
