"""superpoint_rt.LightGlue against cvg's PyTorch LightGlue (lg_reference.py), random weights in both key layouts
(cvg's .pth, transformers' safetensors), at several keypoint counts, at full depth and adaptive (early exit and
point pruning as cvg runs them on a CPU). The bar (docs/MATCHING.md): matches0 equal on >= 99.8 % of the keypoints
at full depth and >= 99.5 % adaptive, the same stop layer, matching_scores0 within 1e-3 where the matches agree."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import lg_reference as ref  # noqa: E402

import superpoint_rt  # noqa: E402

torch = pytest.importorskip("torch")  # Debian's python3-torch is in the test venv: this never skips there
torch.set_num_threads(2)

SIZE0, SIZE1 = (640, 480), (512, 384)


def compare(ours, theirs, full: bool):
    m_ours, m_ref = ours["matches0"], theirs["matches0"]
    assert m_ours.shape == m_ref.shape
    equal = m_ours == m_ref
    share = equal.mean() if len(equal) else 1.0
    assert share >= (0.998 if full else 0.995), f"matches0 equal on {share:.4f} of {len(equal)} keypoints"
    assert ours["stop"] == theirs["stop"]
    diff = np.abs(ours["matching_scores0"] - theirs["matching_scores0"])[equal]
    assert diff.max(initial=0) <= 1e-3, f"matching_scores0 differ by {diff.max():.2e}"
    e1 = ours["matches1"] == theirs["matches1"]
    assert (e1.mean() if len(e1) else 1.0) >= (0.998 if full else 0.995)
    return share


def pair(n0, n1, dim, seed):
    k0, d0 = ref.features(n0, dim, SIZE0, seed)
    k1, d1 = ref.related_features(k0, d0, SIZE0, seed + 7)
    return k0, d0, k1[:n1] if n1 <= n0 else k1, d1[:n1] if n1 <= n0 else d1


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """{(input_dim, mode): (cvg model, .pth path, .safetensors path)}."""
    out = {}
    tmp = tmp_path_factory.mktemp("lg")
    for dim in (256, 128):
        for mode in ("full", "adaptive"):
            model = ref.random_model(dim, seed=dim + len(mode), early=mode == "adaptive", prune=mode == "adaptive")
            pth = tmp / f"lg_{dim}_{mode}.pth"
            st = tmp / f"lg_{dim}_{mode}.safetensors"
            ref.save_pth(model, pth)
            ref.save_safetensors(ref.transformers_state_dict(model), st)
            out[(dim, mode)] = (model, pth, st)
    return out


@pytest.mark.parametrize("dim", [256, 128])
@pytest.mark.parametrize("layout", ["pth", "safetensors"])
@pytest.mark.parametrize("n", [1, 37, 300, 700])
def test_full_depth(weights, dim, layout, n):
    model, pth, st = weights[(dim, "full")]
    model.conf.depth_confidence = -1
    model.conf.width_confidence = -1
    k0, d0, k1, d1 = pair(n, n, dim, seed=n)
    theirs = ref.run(model, k0, d0, SIZE0, k1, d1, SIZE1)
    lg = superpoint_rt.LightGlue(pth if layout == "pth" else st, depth_confidence=-1, width_confidence=-1, threads=2)
    assert lg.layout == ("cvg" if layout == "pth" else "transformers") and lg.input_dim == dim
    ours = lg.match({"keypoints": k0, "descriptors": d0, "image_size": SIZE0},
                    {"keypoints": k1, "descriptors": d1, "image_size": SIZE1})
    assert theirs["stop"] == 9
    compare(ours, theirs, full=True)
    if n >= 300:
        assert (theirs["matches0"] >= 0).sum() > n // 10  # the pair has matches to get right


@pytest.mark.parametrize("dim", [256, 128])
@pytest.mark.parametrize("n", [64, 500, 1100])
@pytest.mark.parametrize("switches", [(0.95, 0.99), (0.95, -1), (-1, 0.99)])
def test_adaptive(weights, dim, n, switches):
    depth, width = switches
    model, pth, st = weights[(dim, "adaptive")]
    model.conf.depth_confidence = depth
    model.conf.width_confidence = width
    k0, d0, k1, d1 = pair(n, n - n // 5, dim, seed=3 * n)
    theirs = ref.run(model, k0, d0, SIZE0, k1, d1, SIZE1)
    lg = superpoint_rt.LightGlue(pth if dim == 256 else st, depth_confidence=depth, width_confidence=width,
                                 threads=2)
    out = lg.match({"keypoints": k0, "descriptors": d0, "image_size": SIZE0},
                   {"keypoints": k1, "descriptors": d1, "image_size": SIZE1})
    compare(out, theirs, full=False)
    # The paths under test ran: the network stopped early (with depth_confidence) and pruned (with width).
    if depth > 0:
        assert theirs["stop"] < 9
    else:
        assert theirs["stop"] == 9


def test_no_size_uses_the_keypoint_extent(weights):
    model, pth, _ = weights[(256, "full")]
    model.conf.depth_confidence = model.conf.width_confidence = -1
    k0, d0, k1, d1 = pair(200, 150, 256, seed=5)
    import torch as t
    with t.no_grad():
        out = model({"image0": {"keypoints": t.from_numpy(k0)[None], "descriptors": t.from_numpy(d0)[None]},
                     "image1": {"keypoints": t.from_numpy(k1)[None], "descriptors": t.from_numpy(d1)[None]}})
    theirs = {"matches0": out["matches0"][0].numpy(), "matches1": out["matches1"][0].numpy(),
              "matching_scores0": out["matching_scores0"][0].numpy(), "stop": int(out["stop"])}
    ours = superpoint_rt.LightGlue(pth, depth_confidence=-1, width_confidence=-1).match(
        {"keypoints": k0, "descriptors": d0}, {"keypoints": k1, "descriptors": d1})
    compare(ours, theirs, full=True)


def test_empty_image(weights):
    _, pth, _ = weights[(256, "full")]
    lg = superpoint_rt.LightGlue(pth)
    k0, d0 = ref.features(10, 256, SIZE0, 1)
    out = lg.match({"keypoints": k0, "descriptors": d0, "image_size": SIZE0},
                   {"keypoints": np.zeros((0, 2), np.float32), "descriptors": np.zeros((0, 256), np.float32),
                    "image_size": SIZE1})
    assert (out["matches0"] == -1).all() and len(out["matches1"]) == 0 and (out["matching_scores0"] == 0).all()


def test_errors_name_the_key(weights, tmp_path):
    model, _, _ = weights[(256, "full")]
    sd = ref.transformers_state_dict(model)
    del sd["transformer_layers.3.cross_mlp.fc2.bias"]
    sd["transformer_layers.5.self_attention.v_proj.weight"] = sd["transformer_layers.5.self_attention.v_proj.weight"][:7]
    p = tmp_path / "broken.safetensors"
    ref.save_safetensors(sd, p)
    with pytest.raises(RuntimeError) as e:
        superpoint_rt.LightGlue(p)
    assert "transformer_layers.3.cross_mlp.fc2.bias" in str(e.value)
    assert "transformer_layers.5.self_attention.v_proj.weight has shape [7, 256]" in str(e.value)
    lg = superpoint_rt.LightGlue(weights[(256, "full")][1])
    with pytest.raises(ValueError, match="dim 128"):
        k, d = ref.features(5, 128, SIZE0, 2)
        lg.match({"keypoints": k, "descriptors": d, "image_size": SIZE0},
                 {"keypoints": k, "descriptors": d, "image_size": SIZE0})
