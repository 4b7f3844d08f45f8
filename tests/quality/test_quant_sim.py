"""bench/quant_sim.py (the fake quantisation behind bench/quality.py --simulate) on known answers.

bf16 rounding against a bit-level numpy reference, an int8 layer against integer arithmetic (u8 x s8 -> s32), the fp32
plan against the plain reference network (bit for bit), the synthetic calibration images against the C++ generator's
bytes, plan parsing and the multiply-accumulate counts. Needs torch and the shared weights (reference network).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

SOURCE = pathlib.Path(os.environ.get("SUPERPOINT_RT_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
SHARED = pathlib.Path(os.environ.get("SUPERPOINT_RT_SHARED", os.environ.get("SUPERPOINT_RT_SHARED_DEFAULT",
                                                                            SOURCE.parent / "shared")))
sys.path.insert(0, str(SOURCE / "bench"))
sys.path.insert(0, str(SHARED / "tools"))
import quant_sim as S  # noqa: E402

WEIGHTS = SHARED / "weights" / "superpoint"


@pytest.fixture(scope="module")
def ref():
    if not (WEIGHTS / "model.safetensors").is_file():
        pytest.fail(f"no weights in {WEIGHTS} (set SUPERPOINT_RT_SHARED)")
    import reference as R

    return R.SuperPointReference(str(WEIGHTS), max_keypoints=-1)


@pytest.fixture(scope="module")
def weights(ref):
    return S.Weights(ref.net)


def plane(seed=0, h=96, w=128):
    """A textured 8-bit plane / 255 (as the network reads it): the synthetic image's channel 0, cropped."""
    im = S.synthetic_image(640, 480, 1 + seed)[:h, :w, 0]
    return torch.from_numpy((im.astype(np.float64) * (1 / 255)).astype(np.float32))[None, None]


# ---------------------------------------------------------------------------------------------------------------------
# bf16
# ---------------------------------------------------------------------------------------------------------------------
def bf16_numpy(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16, ties to even, by bit manipulation (finite inputs)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def test_bf16_round_matches_bit_reference():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(100000).astype(np.float32) * 10 ** rng.uniform(-6, 6, 100000),
                        np.array([0.0, -0.0, 1.0, 1 / 255, 3e38, -3e38, 1e-40, -1e-40], np.float32)]).astype(np.float32)
    # Exact ties: low 16 bits 0x8000, with an even and an odd bit 16 (round down resp. up).
    ties = (rng.integers(0x3F000000 >> 16, 0x47000000 >> 16, 2000).astype(np.uint32) << 16) | 0x8000
    x = np.concatenate([x, ties.view(np.float32)])
    got = S.bf16_round(torch.from_numpy(x)).numpy()
    want = bf16_numpy(x)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # and it is a rounding (not a truncation): the ties went both ways
    assert np.any(got[-2000:] > x[-2000:]) and np.any(got[-2000:] < x[-2000:])


def test_bf16_layer_rounds_input_and_weights_only(weights):
    plan = S.parse_plan("bf16")
    net = S.SimNet(weights, plan, None)
    x = F.relu(torch.randn(1, 64, 24, 32, generator=torch.Generator().manual_seed(1)))
    w, b = weights.p["conv2a"]
    want = F.conv2d(torch.from_numpy(bf16_numpy(x.numpy())), torch.from_numpy(bf16_numpy(w.numpy())), b, padding=1)
    assert torch.equal(net.conv("conv2a", x), want)
    # conv1a stays f32 in the product's bf16 plan: its input (the plane) is not rounded
    p = plane()
    assert torch.equal(net.conv("conv1a", p), F.conv2d(p, weights.p["conv1a"][0], weights.p["conv1a"][1], padding=1))
    assert not torch.equal(S.bf16_round(p), p)  # (so the check above can tell)


# ---------------------------------------------------------------------------------------------------------------------
# int8
# ---------------------------------------------------------------------------------------------------------------------
def conv_int(qx: np.ndarray, qw: np.ndarray) -> np.ndarray:
    """Integer 3x3 'same' convolution: qx (C, H, W) int64, qw (O, C, 3, 3) int64 -> (O, H, W) int64."""
    c, h, w = qx.shape
    pad = np.zeros((c, h + 2, w + 2), np.int64)
    pad[:, 1:-1, 1:-1] = qx
    out = np.zeros((qw.shape[0], h, w), np.int64)
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("oc,chw->ohw", qw[:, :, dy, dx], pad[:, dy:dy + h, dx:dx + w])
    return out


def calibration_of(x_max_tensor, x_max_channel, name):
    return {"tensor": {S.PRODUCER[name]: x_max_tensor}, "channel": {S.PRODUCER[name]: x_max_channel}}


@pytest.mark.parametrize("act", ["tensor", "channel", "folded"])
def test_int8_layer_matches_integer_arithmetic(weights, act):
    name = "conv2b"
    g = torch.Generator().manual_seed(2)
    x = F.relu(torch.randn(1, 64, 20, 24, generator=g)) * torch.linspace(0.2, 3.0, 64).view(1, -1, 1, 1)
    cmax = x[0].reshape(64, -1).max(1).values * 0.9  # some saturation
    tmax = float(cmax.max())
    net = S.SimNet(weights, S.parse_plan(f"int8:act={act}"), calibration_of(tmax, cmax, name))
    got = net.conv(name, x)[0].double().numpy()

    # The codes are computed in f32, as the product's reorders do (the scales are f32 numbers there too).
    w32, b = weights.p[name][0].numpy(), weights.p[name][1].double().numpy()
    xs = x[0].numpy()
    s32 = (np.full(64, 255 / tmax) if act == "tensor" else 255 / cmax.double().numpy()).astype(np.float32)
    qx = np.clip(np.rint(xs * s32[:, None, None]), 0, 255).astype(np.int64)  # u8, ties to even
    wf = w32 / s32[None, :, None, None] if act == "folded" else w32
    ws32 = np.float32(127) / np.abs(wf).reshape(64, -1).max(1)
    qw = np.rint(wf * ws32[:, None, None, None]).astype(np.int64)  # s8 per output channel
    s32, ws = s32.astype(np.float64), ws32.astype(np.float64)
    assert qw.min() >= -127 and qw.max() <= 127 and np.all(np.abs(qw).reshape(64, -1).max(1) == 127)
    if act == "tensor":
        acc = conv_int(qx, qw)  # s32 accumulation, then the product's output scale 1 / (s_in ws[o]) and bias
        want = acc / (s32[0] * ws[:, None, None]) + b[:, None, None]
    else:  # per-channel input scales: dequantise each input channel (folded: its 1 / s[c] is inside qw)
        xd = qx / s32[:, None, None]
        wd = qw / ws[:, None, None, None] * (s32[None, :, None, None] if act == "folded" else 1)
        want = F.conv2d(torch.from_numpy(xd)[None], torch.from_numpy(wd), torch.from_numpy(b), padding=1)[0].numpy()
    scale = np.abs(want).max()
    assert np.max(np.abs(got - want)) <= 2e-5 * scale, np.max(np.abs(got - want)) / scale
    # The u8 codes the product would write at the next scale (s_out = 255 / max of this output) agree too, but for
    # f32 rounding at exact .5 ties: at most a handful off by one.
    s_out = 255 / float(np.maximum(want, 0).max())
    c_got = np.clip(np.rint(np.maximum(got, 0) * s_out), 0, 255)
    c_want = np.clip(np.rint(np.maximum(want, 0) * s_out), 0, 255)
    assert np.abs(c_got - c_want).max() <= 1 and np.mean(c_got != c_want) < 1e-3


def test_int8_per_tensor_differs_from_per_channel_weights(weights):
    """Guards the test above: per-tensor weight scales would not pass it (the s8 rounding really is per channel)."""
    w = weights.p["conv2b"][0]
    q, ws = S.s8_weights(w)
    assert ws.shape == (64,) and len(set(ws.tolist())) > 32
    per_tensor = torch.round(w * 127 / w.abs().max()) / (127 / w.abs().max())
    assert not torch.allclose(q / ws.view(-1, 1, 1, 1), per_tensor, atol=1e-6)


def test_folded_equals_tensor_when_channel_maxima_are_equal(weights):
    name = "conv3a"
    x = F.relu(torch.randn(1, 64, 16, 16, generator=torch.Generator().manual_seed(3)))
    m = 255 / 64  # scale 64: a power of two, so folding 1 / s into the weights and back is exact in f32
    cmax = torch.full((64,), m)
    a = S.SimNet(weights, S.parse_plan("int8:act=tensor"), calibration_of(m, cmax, name)).conv(name, x)
    b = S.SimNet(weights, S.parse_plan("int8:act=folded"), calibration_of(m, cmax, name)).conv(name, x)
    c = S.SimNet(weights, S.parse_plan("int8:act=channel"), calibration_of(m, cmax, name)).conv(name, x)
    assert torch.equal(a, b) and torch.equal(a, c)
    # unequal maxima: folded differs from tensor (the per-channel scales are used)
    cmax2 = torch.linspace(1.0, 4.0, 64)
    d = S.SimNet(weights, S.parse_plan("int8:act=folded"), calibration_of(4.0, cmax2, name)).conv(name, x)
    assert not torch.allclose(a, d, atol=1e-3)


def test_u8_codes_saturate_and_round_to_even():
    x = torch.tensor([0.0, 0.5, 1.5, 2.5, 254.5, 300.0, -3.0])
    assert S.u8_codes(x, 1.0).tolist() == [0, 0, 2, 2, 254, 255, 0]


# ---------------------------------------------------------------------------------------------------------------------
# Whole network
# ---------------------------------------------------------------------------------------------------------------------
def test_fp32_plan_is_the_reference_bit_for_bit(ref, weights):
    x = plane(0, 120, 160)
    with torch.no_grad():
        enc = ref.net.encoder(x)
        want_l, want_d = ref.net.keypoint_decoder(enc), ref.net.descriptor_decoder(enc)
        got_l, got_d = S.SimNet(weights, S.parse_plan("fp32"), None).forward(x)
    assert torch.equal(got_l, want_l) and torch.equal(got_d, want_d)


def test_fp32_plan_through_run_pixel_gives_the_reference_keypoints(ref, weights):
    import copy

    import reference as R

    img = S.synthetic_image(640, 480, 4)[:, :, 0]
    want, _ = ref.run_pixel(R.RESCALE_LUT[img], img.shape)
    r = copy.copy(ref)
    r.net = S.SimNet(weights, S.parse_plan("fp32"), None)
    with torch.no_grad():
        got, _ = r.run_pixel(R.RESCALE_LUT[img], img.shape)
    assert len(want["keypoints"]) > 100
    for k in ("keypoints", "scores", "descriptors"):
        assert np.array_equal(got[k], want[k]), k
    # and a quantised plan does change them (the swap is effective)
    r.net = S.SimNet(weights, S.parse_plan("bf16"), None)
    with torch.no_grad():
        bf, _ = r.run_pixel(R.RESCALE_LUT[img], img.shape)
    assert not np.array_equal(bf["scores"], want["scores"])


def test_calibration_maxima(weights):
    planes = [plane(0).numpy()[0, 0], plane(1).numpy()[0, 0]]
    cal = S.calibrate(weights, planes)
    fp32 = S.SimNet(weights, S.parse_plan("fp32"), None)
    seen = {}
    for p in planes:
        fp32.forward(torch.from_numpy(p)[None, None], lambda n, t: seen.setdefault(n, []).append(float(t.max())))
    for n in ("conv1a", "conv2b", "conv4b", "score_a", "descriptor_a"):
        assert cal["tensor"][n] == max(seen[n])
        assert float(cal["channel"][n].max()) == cal["tensor"][n]
    assert cal["tensor"]["input"] == 1.0
    p100 = S.calibrate(weights, planes, "p100")
    assert p100["tensor"]["conv3b"] == pytest.approx(cal["tensor"]["conv3b"], rel=1e-6)
    p99 = S.calibrate(weights, planes, "p99")
    assert p99["tensor"]["conv3b"] < cal["tensor"]["conv3b"]


# ---------------------------------------------------------------------------------------------------------------------
# Calibration images, plans, MACs
# ---------------------------------------------------------------------------------------------------------------------
def test_synthetic_images_match_the_cpp_generator():
    """sha256 of src/image/synthetic.cpp's synthetic_image(640, 480, seed) RGB bytes (compiled and dumped once)."""
    want = {1: "9f1f28fed86256f11661881cc62dbb16ae0fce6e5debbcfd00d721e58cd1d35e",
            2: "8dd5f515ece4a9b524a67c542662e9eaa36c4f6d5f49a904dd8255b750750702",
            3: "76632d3bbb5094bd68520211fb9b9c144494744434c517781ff7993385ad120c",
            4: "4f5d30523ecc40c6e43bbeba3e6deb08eb694c447c3e346f5229468c43dbf8d0",
            5: "25fc989f86441d7aafa88f867141789b711466685bac00a7b245938b7ed5c92d",
            6: "0e24205f3bd7c3d1b9e83ed20cdb269aaecf67cbd3020a5c92bce04fc559d448"}
    assert set(want) == set(S.SYNTHETIC_SEEDS)
    for seed, h in want.items():
        assert hashlib.sha256(S.synthetic_image(640, 480, seed).tobytes()).hexdigest() == h, seed


def test_plan_parsing():
    p = S.parse_plan("bf16")
    assert p.precision["conv1a"] == "f32" and all(p.precision[n] == "bf16" for n in S.NAMES[1:])
    assert p.target == "bf16"
    p = S.parse_plan("int8:conv1b+score=bf16:last1x1=f32:act=folded:calib=real:clip=p99.99")
    assert p.precision["conv1a"] == "f32" and p.precision["conv1b"] == "bf16"
    assert p.precision["score_a"] == "bf16" and p.precision["score_b"] == "f32" and p.precision["descriptor_b"] == "f32"
    assert p.precision["conv2a"] == "int8" and p.precision["descriptor_a"] == "int8"
    assert (p.act, p.calib, p.clip, p.target) == ("folded", "real", "p99.99", "int8")
    assert S.parse_plan("fp32").target is None
    assert S.parse_plan("fp32:conv4b=bf16").target == "bf16"
    for bad in ("fp16", "int8:conv9=bf16", "int8:conv1b=fp8", "int8:act=row", "int8:clip=p0", "int8:conv1b"):
        with pytest.raises(ValueError):
            S.parse_plan(bad)


def test_macs_and_shares():
    m = S.macs(640, 480)
    assert m["conv1a"] == 480 * 640 * 64 * 9
    assert m["conv1b"] == 480 * 640 * 64 * 64 * 9
    assert m["conv3a"] == 120 * 160 * 128 * 64 * 9
    assert m["score_b"] == 60 * 80 * 65 * 256 and m["descriptor_b"] == 60 * 80 * 256 * 256
    assert sum(m.values()) == 26051788800
    sh = S.parse_plan("int8:conv1b=bf16").mac_shares()
    assert sh["f32"] == pytest.approx(m["conv1a"] / sum(m.values()))
    assert sh["bf16"] == pytest.approx(m["conv1b"] / sum(m.values()))
    assert sh["f32"] + sh["bf16"] + sh["int8"] == pytest.approx(1.0)
    assert S.parse_plan("fp32").mac_shares()["time_vs_fp32"] == 1.0
