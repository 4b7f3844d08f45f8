#!/usr/bin/env python3
"""How much keypoint agreement with fp32 each part of int8 quantisation costs, by simulation (fake quantisation).

    bench/.venv/bin/python bench/quant_sensitivity.py [--calibration IMAGE...] [--n-eval 12] [--per-layer]

The network is the PyTorch reference module ($SUPERPOINT_RT_SHARED/tools/reference.py, default ../shared beside the
checkout) on the weights of $SUPERPOINT_RT_SHARED/weights/superpoint; the keypoints are the reference's own
post-processing (softmax, NMS radius 4, threshold 0.005, border 4, top 1024). Quantisation is simulated in float:
  * weights: symmetric s8 per output channel (q = round(w * 127 / max|w[o]|)), as the oneDNN int8 plan does;
  * activations (the ReLU outputs feeding the next convolution): u8 with scale 255 / calibrated maximum, per
    tensor (what oneDNN 2.6 offers for a convolution's source) or per channel (ideal: not expressible there);
    "16-bit" uses 65535 levels, i.e. activations almost exact;
  * conv1a (one input channel) stays float, as in the product; logits and descriptors are float outputs.
The calibration maxima come from --calibration images (default: six of ../shared/images); every other image is a
held-out evaluation image (the first --n-eval of them, sorted by name). Reported: the keypoint Jaccard (exact
positions, as bench/fidelity_precision.py) of each scheme against the fp32 network, mean and minimum.

--per-layer adds one row per layer with only that layer's weights in s8 (16-bit activations elsewhere): the cost of
each layer's weight rounding alone.
"""
import argparse
import glob
import os
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("quant_sensitivity.py: needs torch (bash bench/setup-peers.sh --with-torch)")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
sys.path.insert(0, os.path.join(SHARED, "tools"))
import reference as R  # noqa: E402

DEFAULT_CALIBRATION = ["tum_fr3_1341847983.738736.png", "skimage_brick.png",
                       "pt_st_pauls_cathedral_37347628_10902811376.jpg", "hloc_sacre_71295362_4051449754.jpg",
                       "opensfm_berlin_03.jpg", "lg_sacre_coeur2.jpg"]
# (our layer name, the reference module path)
LAYERS = [("conv1a", "encoder.conv_blocks.0.conv_a"), ("conv1b", "encoder.conv_blocks.0.conv_b"),
          ("conv2a", "encoder.conv_blocks.1.conv_a"), ("conv2b", "encoder.conv_blocks.1.conv_b"),
          ("conv3a", "encoder.conv_blocks.2.conv_a"), ("conv3b", "encoder.conv_blocks.2.conv_b"),
          ("conv4a", "encoder.conv_blocks.3.conv_a"), ("conv4b", "encoder.conv_blocks.3.conv_b"),
          ("score_a", "keypoint_decoder.conv_score_a"), ("score_b", "keypoint_decoder.conv_score_b"),
          ("descriptor_a", "descriptor_decoder.conv_descriptor_a"),
          ("descriptor_b", "descriptor_decoder.conv_descriptor_b")]
TRUNK = [n for n, _ in LAYERS[:8]]
POOL_AFTER = {"conv1b", "conv2b", "conv3b"}
QUANTISED = [n for n, _ in LAYERS if n != "conv1a"]  # conv1a stays float in the product


class Net:
    def __init__(self, weights_dir):
        sd = R.load_safetensors(os.path.join(weights_dir, "model.safetensors"))
        sd = {(k[len("superpoint."):] if k.startswith("superpoint.") else k): v.float() for k, v in sd.items()}
        self.p = {n: (sd[k + ".weight"], sd[k + ".bias"]) for n, k in LAYERS}
        self.qw = {}  # layer -> fake-quantised weights

    def conv(self, n, x, quant_w):
        w, b = self.p[n]
        if quant_w:
            if n not in self.qw:
                m = w.abs().reshape(w.shape[0], -1).max(1).values.clamp_min(1e-12).view(-1, 1, 1, 1)
                self.qw[n] = torch.round(w * (127.0 / m)) / (127.0 / m)
            w = self.qw[n]
        return F.conv2d(x, w, b, padding=w.shape[-1] // 2)

    @torch.no_grad()
    def logits(self, x, act=None, wq=()):
        """act(name, relu_output) -> what the next layer reads; wq: layers whose weights are s8."""
        act = act or (lambda n, t: t)
        for n in TRUNK:
            x = act(n, F.relu(self.conv(n, x, n in wq)))
            if n in POOL_AFTER:
                x = F.max_pool2d(x, 2, 2)
        s = act("score_a", F.relu(self.conv("score_a", x, "score_a" in wq)))
        return self.conv("score_b", s, "score_b" in wq)


def plane(path):
    im, _ = R.decode_and_resize(path)
    return torch.from_numpy(R.pixel_values_from_resized(im))[None, None]


def keypoints(logits, cfg):
    s = R.simple_nms(R.scores_from_logits(logits), cfg.nms_radius)
    kp, _, _ = R.extract_keypoints(s, cfg, 1024)
    return {tuple(p) for p in kp.int().tolist()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibration", nargs="*", default=None, help="calibration images (default: six shared ones)")
    ap.add_argument("--n-eval", type=int, default=12)
    ap.add_argument("--per-layer", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    images = sorted(p for p in glob.glob(os.path.join(SHARED, "images", "*")) if not p.endswith(".tsv"))
    calib = a.calibration or [os.path.join(SHARED, "images", n) for n in DEFAULT_CALIBRATION]
    names = {os.path.basename(c) for c in calib}
    evals = [p for p in images if os.path.basename(p) not in names][:a.n_eval]
    net = Net(os.path.join(SHARED, "weights", "superpoint"))
    cfg = R.Cfg({})

    max_t, max_c = {}, {}

    def record(n, t):
        m = t[0].reshape(t.shape[1], -1).max(1).values
        max_c[n] = torch.maximum(max_c.get(n, torch.zeros_like(m)), m)
        max_t[n] = max(max_t.get(n, 0.0), float(m.max()))
        return t

    for c in calib:
        net.logits(plane(c), record)
    ev = [plane(p) for p in evals]
    ref = [keypoints(net.logits(x), cfg) for x in ev]

    def act_quant(per_channel, levels):
        def f(n, t):
            s = (levels / max_c[n].clamp_min(1e-12)).view(1, -1, 1, 1) if per_channel else levels / max(max_t[n], 1e-12)
            return torch.clamp(torch.round(t * s), 0, levels) / s
        return f

    def row(label, act, wq):
        jac = np.array([len(k & r) / max(1, len(k | r))
                        for k, r in ((keypoints(net.logits(x, act, wq), cfg), r) for x, r in zip(ev, ref))])
        print(f"{label:62s} {jac.mean():8.4f} {jac.min():8.4f}", flush=True)

    print(f"calibration: {len(calib)} images; evaluation: {len(evals)} held-out images at 480x640; "
          f"keypoint Jaccard vs fp32")
    print(f"{'scheme':62s} {'mean':>8s} {'min':>8s}")
    row("s8 weights, u8 activations per tensor (the int8 plan)", act_quant(False, 255), QUANTISED)
    row("s8 weights, u8 activations per channel (ideal)", act_quant(True, 255), QUANTISED)
    row("s8 weights, 16-bit activations (weights' cost alone)", act_quant(False, 65535), QUANTISED)
    row("float weights, u8 activations per tensor (activations' cost)", act_quant(False, 255), ())
    if a.per_layer:
        for n in QUANTISED:
            if n.startswith("descriptor"):
                continue  # the descriptor head does not change keypoints
            row(f"only {n} weights s8, 16-bit activations", act_quant(False, 65535), (n,))


if __name__ == "__main__":
    main()
