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


# (input_dim, descriptor_dim): SuperPoint's shape (256, 256), small pairs only (the reference runs on Debian's
# python3-torch, whose BLAS is the netlib reference); and narrower networks, one with input_proj as DISK's and
# ALIKED's, for the larger pairs.
SHAPES = {"superpoint": (256, 256), "proj": (128, 64), "narrow": (64, 64)}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """{(shape, mode): (cvg model, .pth path, .safetensors path)}."""
    out = {}
    tmp = tmp_path_factory.mktemp("lg")
    for name, (dim, width) in SHAPES.items():
        for mode in ("full", "adaptive"):
            model = ref.random_model(dim, seed=dim + width + len(mode), early=mode == "adaptive",
                                     prune=mode == "adaptive", descriptor_dim=width)
            pth = tmp / f"lg_{name}_{mode}.pth"
            st = tmp / f"lg_{name}_{mode}.safetensors"
            ref.save_pth(model, pth)
            ref.save_safetensors(ref.transformers_state_dict(model), st)
            out[(name, mode)] = (model, pth, st)
    return out


def match_both(weights, shape, mode, layout, depth, width, n0, n1, seed, threads=2):
    model, pth, st = weights[(shape, mode)]
    model.conf.depth_confidence = depth
    model.conf.width_confidence = width
    dim = SHAPES[shape][0]
    k0, d0, k1, d1 = pair(n0, n1, dim, seed)
    theirs = ref.run(model, k0, d0, SIZE0, k1, d1, SIZE1)
    lg = superpoint_rt.LightGlue(pth if layout == "pth" else st, depth_confidence=depth, width_confidence=width,
                                 threads=threads)
    assert lg.layout == ("cvg" if layout == "pth" else "transformers") and lg.input_dim == dim
    ours = lg.match({"keypoints": k0, "descriptors": d0, "image_size": SIZE0},
                    {"keypoints": k1, "descriptors": d1, "image_size": SIZE1})
    return ours, theirs


@pytest.mark.parametrize("layout", ["pth", "safetensors"])
@pytest.mark.parametrize("shape,n", [("superpoint", 1), ("superpoint", 90), ("proj", 37), ("proj", 400),
                                     ("narrow", 250), ("narrow", 700)])
def test_full_depth(weights, layout, shape, n):
    ours, theirs = match_both(weights, shape, "full", layout, -1, -1, n, n - n // 7, seed=n)
    assert theirs["stop"] == 9
    compare(ours, theirs, full=True)
    if n >= 90:
        assert (theirs["matches0"] >= 0).sum() > n // 10  # the pair has matches to get right


def test_online_softmax_over_several_key_tiles(weights, monkeypatch):
    # 300 keys in tiles of 64: five online-softmax steps per query block, each rescaling what came before.
    monkeypatch.setenv("SUPERPOINT_RT_LIGHTGLUE_KEY_TILE", "64")
    ours, theirs = match_both(weights, "narrow", "full", "pth", -1, -1, 300, 280, seed=9)
    compare(ours, theirs, full=True)
    assert (theirs["matches0"] >= 0).sum() > 30


@pytest.mark.parametrize("shape,n", [("superpoint", 120), ("proj", 64), ("proj", 500), ("narrow", 600)])
@pytest.mark.parametrize("switches", [(0.95, 0.99), (0.95, -1), (-1, 0.99)])
def test_adaptive(weights, shape, n, switches):
    depth, width = switches
    ours, theirs = match_both(weights, shape, "adaptive", "pth" if n % 2 else "safetensors", depth, width, n,
                              n - n // 5, seed=3 * n)
    compare(ours, theirs, full=False)
    # The paths under test ran: the network stopped early (with depth_confidence), and pruned points (with width).
    assert (theirs["stop"] < 9) == (depth > 0)
    pruned = ours["prune0"] < ours["stop"]
    assert not pruned[ours["matches0"] >= 0].any()  # a pruned point has no match
    if width > 0 and (depth <= 0 or shape == "narrow"):  # the weights of lg_reference.random_model prune there
        assert pruned.any()
    if width <= 0:
        assert not pruned.any()


def test_no_size_uses_the_keypoint_extent(weights):
    model, pth, _ = weights[("narrow", "full")]
    model.conf.depth_confidence = model.conf.width_confidence = -1
    k0, d0, k1, d1 = pair(200, 150, 64, seed=5)
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
    _, pth, _ = weights[("narrow", "full")]
    lg = superpoint_rt.LightGlue(pth)
    k0, d0 = ref.features(10, 64, SIZE0, 1)
    out = lg.match({"keypoints": k0, "descriptors": d0, "image_size": SIZE0},
                   {"keypoints": np.zeros((0, 2), np.float32), "descriptors": np.zeros((0, 64), np.float32),
                    "image_size": SIZE1})
    assert (out["matches0"] == -1).all() and len(out["matches1"]) == 0 and (out["matching_scores0"] == 0).all()


def test_errors_name_the_key(weights, tmp_path):
    model, _, _ = weights[("superpoint", "full")]
    sd = ref.transformers_state_dict(model)
    del sd["transformer_layers.3.cross_mlp.fc2.bias"]
    sd["transformer_layers.5.self_attention.v_proj.weight"] = sd["transformer_layers.5.self_attention.v_proj.weight"][:7]
    p = tmp_path / "broken.safetensors"
    ref.save_safetensors(sd, p)
    with pytest.raises(RuntimeError) as e:
        superpoint_rt.LightGlue(p)
    assert "transformer_layers.3.cross_mlp.fc2.bias" in str(e.value)
    assert "transformer_layers.5.self_attention.v_proj.weight has shape [7, 256]" in str(e.value)
    lg = superpoint_rt.LightGlue(weights[("superpoint", "full")][1])
    with pytest.raises(ValueError, match="dim 128"):
        k, d = ref.features(5, 128, SIZE0, 2)
        lg.match({"keypoints": k, "descriptors": d, "image_size": SIZE0},
                 {"keypoints": k, "descriptors": d, "image_size": SIZE0})


def test_hub_repo_through_the_cache(weights, tmp_path):
    """A Hugging Face repo id (transformers' layout, as ETH-CVG/lightglue_superpoint) resolves through the same hub
    cache as SuperPoint's weights: here a cache laid out as huggingface_hub lays it, offline."""
    _, _, st = weights[("superpoint", "full")]
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--ETH-CVG--lightglue_superpoint"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "e3b0").write_bytes(st.read_bytes())
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "model.safetensors").symlink_to("../../blobs/e3b0")
    lg = superpoint_rt.LightGlue("ETH-CVG/lightglue_superpoint", cache_dir=str(tmp_path), local_files_only=True)
    assert lg.layout == "transformers" and lg.input_dim == 256 and lg.descriptor_dim == 256 and lg.num_layers == 9
    assert lg._m.source.endswith(f"snapshots/{commit}/model.safetensors")
    with pytest.raises(FileNotFoundError, match="lightglue_missing"):
        superpoint_rt.LightGlue("ETH-CVG/lightglue_missing", cache_dir=str(tmp_path), local_files_only=True)
