"""Float simulation of the product's bf16 and int8 arithmetic, per layer, for bench/quality.py --simulate (issue 12 §2).

A plan gives every convolution of SuperPoint one precision:
  f32   the layer reads its input and weights as they are (the reference network's own arithmetic);
  bf16  its input and its weights are rounded to bfloat16 (round to nearest even, torch's .to(torch.bfloat16)), the
        products and sums in f32, bias f32: what oneDNN's bf16 convolutions compute (a bf16 x bf16 product is exact
        in f32, so only the summation order differs from the product);
  int8  its input is quantised to u8 (q = clamp(round(x * s), 0, 255), s = 255 / calibrated maximum of the producer's
        output, per tensor) and its weights to s8 per output channel (round(w * 127 / max|w[o]|)); the convolution of
        the dequantised values is the product's s32 accumulation times its output scale, up to f32 rounding.
The rounding of a layer's input is done when the layer reads it, which is where the product rounds too: a bf16 layer
writes bf16 (the next layer's input) and an int8 layer writes u8 at the scale of its own calibrated maximum, which the
next int8 layer reads as is; a mixed plan lets a layer write the format its consumer reads (oneDNN's bf16 and int8
convolutions can write f32, bf16 or u8), and conv4b, read by both heads, is rounded once per head. Max pooling
commutes with these roundings. The last 1x1 convolutions (score_b, descriptor_b) write f32 in every plan.

The product's two plans (src/backend/onednn/onednn_backend.cpp):
  bf16  conv1a f32 (its f32 output rounded to bf16 by conv1b's input), every other layer bf16;
  int8  conv1a f32 and its output quantised to u8 (conv1b's input), every other layer int8, per-tensor activation
        scales, maxima (not percentiles) of the fp32 network's ReLU outputs over 6 synthetic 640x480 images
        (image::synthetic_image seeds 1 to 6, channel 0 / 255; ported below) unless images are given.

Plan syntax (one --simulate entry): BASE[:OPTION]... with BASE fp32 | bf16 | int8 (the product's plans above) and
options
  LAYERS=PREC      LAYERS: layer names or groups joined by '+' (groups: trunk, heads, score, descriptor, last1x1,
                   all); PREC: f32 | bf16 | int8
  act=tensor       u8 input scale per tensor (the product; the only source scale of oneDNN 2.6)
  act=channel      per input channel, the weights quantised as in act=tensor (ideal, for reference)
  act=folded       per input channel, folded into the weights: w'[o, c] = w[o, c] / s[c] is what gets the s8
                   per-output-channel rounding; implementable with oneDNN 2.6 (the producer's per-output-channel
                   output scales write q[c] = x[c] s[c]; the consumer's weights carry 1 / s[c])
  act=groupG       the input channels sorted by calibrated maximum and cut into G equal groups: one u8 scale per
                   group and s8 weight scales per (output channel, group); implementable as G convolutions of C / G
                   input channels each summed into one output (oneDNN's sum post-op), the producer's channels
                   permuted so that each group is contiguous
  grouped=LAYERS   the layers act=groupG applies to (default: every int8 layer; the others per tensor)
  damp=D           GPTQ's dampening, D times the mean of the Hessian's diagonal (default 0.01, the backend's)
  wql=LAYERS       the layers wq applies to (default: every int8 layer; the others wq=max)
  wq=max           s8 weights per output channel at 127 / max|w[o]| (the product)
  wq=mse           per output channel the scale among 127 / (f max|w[o]|), f in [0.50, 1.00], that minimises the
                   squared rounding error of w[o]
  wq=gptq          GPTQ (Frantar et al. 2022, column by column with the rounding error of each weight spread over the
                   not yet rounded ones through the inverse Hessian of the layer's inputs, H = X X^T over calibration
                   patches), the per-output-channel scales of wq=max; costs nothing at run time
  calib=synthetic  the product's default (3 synthetic images)
  calib=real       six of the shared photos (quant_sensitivity.py's DEFAULT_CALIBRATION), the hf request path's
                   640x480 plane
  clip=max | clip=pP   calibrated maximum = the largest activation (the product) or the P-th percentile of each
                   image's activations (the largest over the images), e.g. clip=p99.99
Example: int8:conv1b+score_b=bf16:act=folded:calib=real.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

# (our layer name, the reference module path, input channels, output channels, kernel, downsampling of its frame)
LAYERS = [("conv1a", "encoder.conv_blocks.0.conv_a", 1, 64, 3, 1),
          ("conv1b", "encoder.conv_blocks.0.conv_b", 64, 64, 3, 1),
          ("conv2a", "encoder.conv_blocks.1.conv_a", 64, 64, 3, 2),
          ("conv2b", "encoder.conv_blocks.1.conv_b", 64, 64, 3, 2),
          ("conv3a", "encoder.conv_blocks.2.conv_a", 64, 128, 3, 4),
          ("conv3b", "encoder.conv_blocks.2.conv_b", 128, 128, 3, 4),
          ("conv4a", "encoder.conv_blocks.3.conv_a", 128, 128, 3, 8),
          ("conv4b", "encoder.conv_blocks.3.conv_b", 128, 128, 3, 8),
          ("score_a", "keypoint_decoder.conv_score_a", 128, 256, 3, 8),
          ("score_b", "keypoint_decoder.conv_score_b", 256, 65, 1, 8),
          ("descriptor_a", "descriptor_decoder.conv_descriptor_a", 128, 256, 3, 8),
          ("descriptor_b", "descriptor_decoder.conv_descriptor_b", 256, 256, 1, 8)]
NAMES = [n for n, *_ in LAYERS]
TRUNK = NAMES[:8]
POOL_AFTER = {"conv1b", "conv2b", "conv3b"}
# The layer whose (ReLU) output each layer reads; "input" = the network's plane (values in [0, 1]).
PRODUCER = {"conv1a": "input", "score_a": "conv4b", "descriptor_a": "conv4b", "score_b": "score_a",
            "descriptor_b": "descriptor_a", **{TRUNK[i]: TRUNK[i - 1] for i in range(1, 8)}}
GROUPS = {"trunk": TRUNK, "heads": NAMES[8:], "score": ["score_a", "score_b"],
          "descriptor": ["descriptor_a", "descriptor_b"], "last1x1": ["score_b", "descriptor_b"], "all": NAMES}
PRECISIONS = ("f32", "bf16", "int8")
# Relative throughput of each precision on AMX, used only for the rough time estimate of a plan (issue 12: int8 ~7x,
# bf16 ~4x the f32 speed).
SPEEDUP = {"f32": 1.0, "bf16": 4.0, "int8": 7.0}
REAL_CALIBRATION = ["tum_fr3_1341847983.738736.png", "skimage_brick.png",
                    "pt_st_pauls_cathedral_37347628_10902811376.jpg", "hloc_sacre_71295362_4051449754.jpg",
                    "opensfm_berlin_03.jpg", "lg_sacre_coeur2.jpg"]


def macs(width: int = 640, height: int = 480) -> dict:
    """Multiply-accumulates of each convolution at a width x height input."""
    return {n: (height // d) * (width // d) * cout * cin * k * k for n, _, cin, cout, k, d in LAYERS}


# ---------------------------------------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    spec: str
    precision: dict = field(default_factory=dict)  # layer -> f32 | bf16 | int8
    act: str = "tensor"  # tensor | channel | folded | group<G>
    grouped: tuple = ()  # layers act=group<G> applies to (empty: every int8 layer)
    wq: str = "max"  # max | mse | gptq | gptq-order
    wq_layers: tuple = ()  # layers wq applies to (empty: every int8 layer; the others wq=max)
    damp: float = 0.01  # GPTQ's dampening (times the mean of H's diagonal)
    calib: str = "synthetic"  # synthetic | real
    clip: str = "max"  # max | p<percentile>

    @property
    def target(self) -> str | None:
        """Which issue-12 targets the plan answers to: int8 when any layer is int8, else bf16 when any is bf16."""
        used = set(self.precision.values())
        return "int8" if "int8" in used else "bf16" if "bf16" in used else None

    def uses_calibration(self) -> bool:
        return self.target == "int8"

    def mac_shares(self, width: int = 640, height: int = 480) -> dict:
        m = macs(width, height)
        total = sum(m.values())
        out = {p: sum(v for n, v in m.items() if self.precision[n] == p) / total for p in PRECISIONS}
        # Rough forward time relative to fp32: every MAC at its precision's relative AMX throughput.
        out["time_vs_fp32"] = sum(v / SPEEDUP[self.precision[n]] for n, v in m.items()) / total
        return out

    def describe(self) -> str:
        by = {p: [n for n in NAMES if self.precision[n] == p] for p in PRECISIONS}
        s = "; ".join(f"{p}: {' '.join(v)}" for p, v in by.items() if v)
        if self.target == "int8":
            s += f"; act={self.act}; calib={self.calib}; clip={self.clip}"
            if self.grouped:
                s += f"; grouped={'+'.join(self.grouped)}"
            s += f"; wq={self.wq}"
        return s


def parse_plan(spec: str) -> Plan:
    parts = spec.strip().split(":")
    base = parts[0]
    if base == "fp32":
        prec = {n: "f32" for n in NAMES}
    elif base == "bf16":
        prec = {n: "bf16" for n in NAMES}
        prec["conv1a"] = "f32"
    elif base == "int8":
        prec = {n: "int8" for n in NAMES}
        prec["conv1a"] = "f32"
    else:
        raise ValueError(f"plan {spec!r}: base must be fp32, bf16 or int8, not {base!r}")
    plan = Plan(spec=spec.strip(), precision=prec)
    for opt in parts[1:]:
        key, eq, val = opt.partition("=")
        if not eq:
            raise ValueError(f"plan {spec!r}: option {opt!r} is not KEY=VALUE")
        if key == "act":
            if val not in ("tensor", "channel", "folded") and not (val.startswith("group") and val[5:].isdigit()):
                raise ValueError(f"plan {spec!r}: act must be tensor, channel, folded or groupG")
            plan.act = val
        elif key == "wq":
            if val not in ("max", "mse", "gptq", "gptq-order"):
                raise ValueError(f"plan {spec!r}: wq must be max, mse, gptq or gptq-order")
            plan.wq = val
        elif key == "damp":
            plan.damp = float(val)
        elif key == "wql":
            plan.wq_layers = tuple(n for g in val.split("+") for n in GROUPS.get(g, [g]))
        elif key == "grouped":
            plan.grouped = tuple(n for g in val.split("+") for n in GROUPS.get(g, [g]))
        elif key == "calib":
            if val not in ("synthetic", "real"):
                raise ValueError(f"plan {spec!r}: calib must be synthetic or real")
            plan.calib = val
        elif key == "clip":
            if val != "max" and not (val.startswith("p") and _is_float(val[1:]) and 0 < float(val[1:]) <= 100):
                raise ValueError(f"plan {spec!r}: clip must be max or pP (0 < P <= 100)")
            plan.clip = val
        else:
            if val not in PRECISIONS:
                raise ValueError(f"plan {spec!r}: precision of {key} must be one of {PRECISIONS}, not {val!r}")
            for name in key.split("+"):
                layers = GROUPS.get(name, [name])
                for n in layers:
                    if n not in NAMES:
                        raise ValueError(f"plan {spec!r}: unknown layer or group {name!r}")
                    plan.precision[n] = val
    return plan


def _is_float(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------------------------------
# Roundings
# ---------------------------------------------------------------------------------------------------------------------
def bf16_round(t):
    """float32 tensor -> the nearest bfloat16 (ties to even), back in float32."""
    import torch

    return t.to(torch.bfloat16).float()


def s8_weights(w, col_scale=None):
    """Per-output-channel symmetric s8 weights: (codes q as float, scale ws[o] = 127 / max|w[o]|), w ~ q / ws.
    col_scale (per input channel) divides the weights first (act=folded: w'[o, c] = w[o, c] / s[c])."""
    import torch

    if col_scale is not None:
        w = w / col_scale.view(1, -1, 1, 1)
    m = w.abs().reshape(w.shape[0], -1).max(1).values
    ws = torch.where(m > 0, 127.0 / m.clamp_min(1e-30), torch.ones_like(m))
    q = torch.clamp(torch.round(w * ws.view(-1, 1, 1, 1)), -127, 127)
    return q, ws


def s8_weights_mse(w):
    """wq=mse: per output channel, the clipped scale 127 / (f max|w[o]|) with the least squared rounding error."""
    import torch

    flat = w.reshape(w.shape[0], -1)
    m = flat.abs().max(1).values.clamp_min(1e-30)
    best_err = torch.full_like(m, float("inf"))
    best_ws = 127.0 / m
    for f in np.arange(0.50, 1.0001, 0.01):
        ws = 127.0 / (m * float(f))
        q = torch.clamp(torch.round(flat * ws.view(-1, 1)), -127, 127)
        err = ((q / ws.view(-1, 1) - flat) ** 2).sum(1)
        better = err < best_err
        best_err = torch.where(better, err, best_err)
        best_ws = torch.where(better, ws, best_ws)
    q = torch.clamp(torch.round(w * best_ws.view(-1, 1, 1, 1)), -127, 127)
    return q, best_ws


def s8_weights_gptq(w, hessian, damp: float = 0.01, act_order: bool = False):
    """wq=gptq: s8 codes per output channel (scales of s8_weights) chosen column by column, each column's rounding
    error compensated on the later columns through the Cholesky factor of the inverse Hessian (GPTQ's algorithm,
    written from the paper: arXiv 2210.17323, Algorithm 1, without its lazy batching)."""
    import torch

    _, ws = s8_weights(w)
    W = w.reshape(w.shape[0], -1).double().clone()
    H = hessian.double().clone()
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H += damp * torch.mean(torch.diag(H)) * torch.eye(H.shape[0], dtype=H.dtype)
    perm = torch.argsort(torch.diag(H), descending=True) if act_order else torch.arange(H.shape[0])
    W, H = W[:, perm], H[perm][:, perm]
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    s = ws.double()
    Q = torch.empty_like(W)
    for i in range(W.shape[1]):
        col = W[:, i]
        q = torch.clamp(torch.round(col * s), -127, 127)
        Q[:, i] = q
        err = (col - q / s) / Hinv[i, i]
        W[:, i + 1:] -= err.view(-1, 1) * Hinv[i, i + 1:].view(1, -1)
    Q = Q[:, torch.argsort(perm)]
    return Q.reshape(w.shape).float(), ws


def u8_codes(x, scale):
    """u8 codes of x at scale (a number, or a per-channel tensor): clamp(round(x * s), 0, 255), ties to even."""
    import torch

    s = scale.view(1, -1, 1, 1) if hasattr(scale, "view") else scale
    return torch.clamp(torch.round(x * s), 0, 255)


# ---------------------------------------------------------------------------------------------------------------------
# The product's built-in calibration images (port of src/image/synthetic.cpp, same xorshift32 stream)
# ---------------------------------------------------------------------------------------------------------------------
def synthetic_image(width: int, height: int, seed: int) -> np.ndarray:
    """image::synthetic_image: (height, width, 3) uint8 RGB."""
    width, height = max(width, 1), max(height, 1)
    state = [(seed * 2654435761 + 12345) & 0xFFFFFFFF]

    def nxt():
        s = state[0]
        s ^= (s << 13) & 0xFFFFFFFF
        s ^= s >> 17
        s ^= (s << 5) & 0xFFFFFFFF
        state[0] = s
        return s

    def uniform(lo, hi):
        return lo + nxt() % (hi - lo + 1)

    n = width * height * 3
    bg = np.empty(n, np.uint8)
    for i in range(n):
        bg[i] = 96 + uniform(0, 24)
    im = bg.reshape(height, width, 3)
    scale = max(1, min(width, height) // 60)
    cb = 4 * scale
    ys, xs = np.mgrid[0:height // 3, 0:width // 3]
    im[:height // 3, :width // 3][((xs // cb) + (ys // cb)) % 2 == 0] = 230

    def put(x, y, c):
        if 0 <= x < width and 0 <= y < height:
            im[y, x] = c

    def tdiv(a, b):  # C++ integer division (truncation towards zero)
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    for i in range(40):
        c = (uniform(0, 255), uniform(0, 255), uniform(0, 255))
        cx, cy = uniform(0, width - 1), uniform(0, height - 1)
        r = uniform(2, 10) * scale
        if i % 3 == 0:
            for y in range(cy - r, cy + r):
                for x in range(cx - tdiv(r, 2), cx + tdiv(r, 2) + 1):
                    put(x, y, c)
        elif i % 3 == 1:
            for y in range(cy - r, cy + r + 1):
                for x in range(cx - r, cx + r + 1):
                    if (x - cx) ** 2 + (y - cy) ** 2 <= r * r:
                        put(x, y, c)
        else:
            dx, dy = uniform(-8, 8) * scale, uniform(-8, 8) * scale
            steps = max(abs(dx), abs(dy)) + 1
            for t in range(steps):
                for w in range(scale):
                    put(cx + tdiv(dx * t, steps) + w, cy + tdiv(dy * t, steps), c)
    return im


# backend::kDefaultCalibrationPlanes: seeds 1 to 6.
SYNTHETIC_SEEDS = (1, 2, 3, 4, 5, 6)


def synthetic_planes() -> list:
    """The product's default int8 calibration planes: channel 0 of synthetic_image(640, 480, 1..3) / 255."""
    return [synthetic_image(640, 480, s)[:, :, 0].astype(np.float32) / np.float32(255) for s in SYNTHETIC_SEEDS]


def real_planes(shared: str) -> list:
    import reference as R  # $SHARED/tools on sys.path

    out = []
    for n in REAL_CALIBRATION:
        im, _ = R.decode_and_resize(os.path.join(shared, "images", n))
        out.append(R.pixel_values_from_resized(im))
    return out


# ---------------------------------------------------------------------------------------------------------------------
# The network under a plan
# ---------------------------------------------------------------------------------------------------------------------
class Weights:
    """The convolutions' (weight, bias) from a reference network, by our layer names."""

    def __init__(self, net):
        mods = dict(net.named_modules())
        self.p = {n: (mods[path].weight.detach(), mods[path].bias.detach()) for n, path, *_ in LAYERS}


def calibrate(weights: Weights, planes: list, clip: str = "max") -> dict:
    """Per layer, the calibrated maximum of its ReLU output over the planes (fp32 network): {"tensor": {layer: m},
    "channel": {layer: tensor (C,)}}; "input" is the plane (maximum 1: an 8-bit plane / 255 is exact in u8)."""
    import torch

    fp32 = SimNet(weights, parse_plan("fp32"), None)
    t_max, c_max = {}, {}

    def record(n, t):
        v = t[0].reshape(t.shape[1], -1)
        if clip == "max":
            mc, mt = v.max(1).values, float(v.max())
        else:
            p = float(clip[1:])
            a = v.numpy()
            mc = torch.from_numpy(np.percentile(a, p, axis=1).astype(np.float32))
            mt = float(np.percentile(a, p))
        c_max[n] = torch.maximum(c_max.get(n, torch.zeros_like(mc)), mc)
        t_max[n] = max(t_max.get(n, 0.0), mt)

    with torch.no_grad():
        for p in planes:
            fp32.forward(torch.from_numpy(np.ascontiguousarray(p, np.float32))[None, None], record)
    t_max["input"] = 1.0
    c_max["input"] = torch.ones(1)
    return {"tensor": t_max, "channel": c_max}


def hessian_stride(h: int, w: int, planes: int, k: int) -> int:
    """The backend's rule (onednn_backend.cpp hessian_stride): the largest of 4, 2 that gives at least 10 K patches
    over the planes, else 1."""
    for s in (4, 2):
        if planes * (-(-h // s)) * (-(-w // s)) >= 10 * k:
            return s
    return 1


def layer_hessians(weights: Weights, planes: list, stride: int | None = None) -> dict:
    """Per layer, H = X X^T over the fp32 network's input patches of that layer (every s-th row and column of each
    calibration plane's frame, s by hessian_stride unless stride is given), the K x K matrix (K = in channels x
    kernel taps, PyTorch's unfold order) GPTQ needs."""
    import torch
    import torch.nn.functional as F

    fp32 = SimNet(weights, parse_plan("fp32"), None)
    hs = {}
    plain = fp32.conv

    def conv(name, x):
        k = weights.p[name][0].shape[-1]
        cols = F.unfold(x, k, padding=k // 2)[0]  # (K, positions), row-major positions
        w = x.shape[-1]
        s = stride or hessian_stride(x.shape[-2], w, len(planes), cols.shape[0])
        idx = torch.arange(cols.shape[1])
        c = cols[:, idx[((idx // w) % s == 0) & ((idx % w) % s == 0)]].double()
        hs[name] = hs.get(name, 0) + c @ c.T
        return plain(name, x)

    fp32.conv = conv
    with torch.no_grad():
        for p in planes:
            fp32.forward(torch.from_numpy(np.ascontiguousarray(p, np.float32))[None, None])
    return hs


class SimNet:
    """forward(x) -> (logits, normalised dense descriptors) under a plan; .encoder / .keypoint_decoder /
    .descriptor_decoder mirror the reference's SuperPointDense so that SuperPointReference.run_pixel can use it."""

    def __init__(self, weights: Weights, plan: Plan, calibration: dict | None):
        if plan.target == "int8" and calibration is None:
            raise ValueError("an int8 plan needs a calibration")
        self.w, self.plan, self.cal = weights, plan, calibration
        self._wcache = {}
        self.encoder = self._encoder
        self.keypoint_decoder = lambda enc: self.conv("score_b", self._relu_conv("score_a", enc))
        self.descriptor_decoder = self._descriptors

    # -- one layer ------------------------------------------------------------------------------------------------
    def groups_of(self, name):
        """act=groupG: the producer's channels sorted by calibrated maximum (largest first), cut into G equal groups
        (lists of channel indices); None when layer name is quantised per tensor."""
        act = self.plan.act
        if not act.startswith("group") or (self.plan.grouped and name not in self.plan.grouped):
            return None
        g = int(act[5:])
        c = self.cal["channel"][PRODUCER[name]]
        if c.numel() % g:
            raise ValueError(f"{name}: {c.numel()} input channels do not split into {g} groups")
        order = sorted(range(c.numel()), key=lambda i: -float(c[i]))
        n = c.numel() // g
        return [order[k * n:(k + 1) * n] for k in range(g)]

    def in_scale(self, name):
        """The u8 scale(s) of layer name's input (int8 layers)."""
        import torch

        prod = PRODUCER[name]
        groups = self.groups_of(name)
        if groups is not None:
            cm = self.cal["channel"][prod]
            s = torch.empty_like(cm)
            for grp in groups:
                m = float(cm[grp].max())
                s[grp] = 255.0 / m if m > 0 else 1.0
            return s
        if self.plan.act in ("tensor",) or self.plan.act.startswith("group"):
            m = self.cal["tensor"][prod]
            return 255.0 / m if m > 0 else 1.0
        # A channel's maximum is floored at one per-tensor step (tensor maximum / 255): a channel that is (almost)
        # dead over the calibration would otherwise get a huge scale, and act=folded would give its weights a
        # huge share of the s8 range (w / s is what gets rounded) at the expense of every live channel.
        m = self.cal["channel"][prod].clamp_min(max(self.cal["tensor"][prod], 1e-30) / 255.0)
        return 255.0 / m

    def layer_weights(self, name):
        """(weights the convolution uses, in f32, and the per-channel input scale for int8 or None)."""
        import torch

        if name in self._wcache:
            return self._wcache[name]
        w, _ = self.w.p[name]
        prec = self.plan.precision[name]
        s = None
        if prec == "bf16":
            w = bf16_round(w)
        elif prec == "int8":
            s = self.in_scale(name)
            groups = self.groups_of(name)
            if groups is not None:
                wq = torch.empty_like(w)
                for grp in groups:
                    q, ws = s8_weights(w[:, grp])
                    wq[:, grp] = q / ws.view(-1, 1, 1, 1)
                w = wq
            elif self.plan.act == "folded" and hasattr(s, "view"):
                q, ws = s8_weights(w, s)
                w = q / ws.view(-1, 1, 1, 1) * s.view(1, -1, 1, 1)
            elif self.plan.wq_layers and name not in self.plan.wq_layers:
                q, ws = s8_weights(w)
                w = q / ws.view(-1, 1, 1, 1)
            elif self.plan.wq == "mse":
                q, ws = s8_weights_mse(w)
                w = q / ws.view(-1, 1, 1, 1)
            elif self.plan.wq.startswith("gptq"):
                q, ws = s8_weights_gptq(w, self.cal["hessian"][name], damp=self.plan.damp,
                                        act_order=self.plan.wq == "gptq-order")
                w = q / ws.view(-1, 1, 1, 1)
            else:
                q, ws = s8_weights(w)
                w = q / ws.view(-1, 1, 1, 1)
        self._wcache[name] = (w, s)
        return w, s

    def conv(self, name, x):
        import torch.nn.functional as F

        w, s = self.layer_weights(name)
        prec = self.plan.precision[name]
        if prec == "bf16":
            x = bf16_round(x)
        elif prec == "int8":
            x = u8_codes(x, s) / (s.view(1, -1, 1, 1) if hasattr(s, "view") else s)
        return F.conv2d(x, w, self.w.p[name][1], padding=w.shape[-1] // 2)

    def _relu_conv(self, name, x, record=None):
        import torch.nn.functional as F

        y = F.relu(self.conv(name, x))
        if record is not None:
            record(name, y)
        return y

    # -- the network ----------------------------------------------------------------------------------------------
    def _encoder(self, x, record=None):
        import torch.nn.functional as F

        for n in TRUNK:
            x = self._relu_conv(n, x, record)
            if n in POOL_AFTER:
                x = F.max_pool2d(x, 2, 2)
        return x

    def _descriptors(self, enc):
        import torch.nn.functional as F

        return F.normalize(self.conv("descriptor_b", self._relu_conv("descriptor_a", enc)), p=2, dim=1)

    def forward(self, x, record=None):
        enc = self._encoder(x, record)
        s = self._relu_conv("score_a", enc, record)
        d = self._relu_conv("descriptor_a", enc, record)
        import torch.nn.functional as F

        return self.conv("score_b", s), F.normalize(self.conv("descriptor_b", d), p=2, dim=1)


class Simulator:
    """Builds SimNets for plans on one reference network, caching the calibrations."""

    def __init__(self, net, shared: str):
        self.weights = Weights(net)
        self.shared = shared
        self._cal = {}

    def planes(self, calib: str) -> list:
        return synthetic_planes() if calib == "synthetic" else real_planes(self.shared)

    def calibration(self, plan: Plan):
        if not plan.uses_calibration():
            return None
        key = (plan.calib, plan.clip)
        if key not in self._cal:
            self._cal[key] = calibrate(self.weights, self.planes(plan.calib), plan.clip)
        cal = self._cal[key]
        if plan.wq.startswith("gptq") and "hessian" not in cal:
            cal["hessian"] = layer_hessians(self.weights, self.planes(plan.calib))
        return cal

    def net(self, plan: Plan) -> SimNet:
        return SimNet(self.weights, plan, self.calibration(plan))

    def calibration_images(self, plan: Plan) -> list:
        """Shared image names the plan calibrated on (they are also evaluation images: see the held-out F1)."""
        return list(REAL_CALIBRATION) if plan.uses_calibration() and plan.calib == "real" else []
