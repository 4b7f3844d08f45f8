"""LightGlue (cvg/LightGlue's matcher) in C++: the same call as cvg's ``LightGlue`` on the features of
``SuperPointOutput.to_lightglue()`` (or DISK / ALIKED features with their weights), without torch.

    import superpoint_rt
    matcher = superpoint_rt.LightGlue("superpoint_lightglue.pth")          # cvg's .pth, a .safetensors, or a HF repo
    with superpoint_rt.SuperPoint.from_pretrained() as model:
        a, b = model(["a.jpg", "b.jpg"], preset="lightglue")
    out = matcher({"image0": a.to_lightglue(), "image1": b.to_lightglue()})
    out["matches"][0]   # (K, 2) indices into a and b, as cvg's

docs/MATCHING.md ("LightGlue") says what runs and how exact it is.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import numpy as np

from . import _core
from ._params import check_int


def _numpy(x: Any, name: str, ndim: int) -> np.ndarray:
    """x as float32, without the batch dimension of one that cvg's dicts add ((1, ...) of ndim + 1 dims)."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.ndim == ndim + 1:
        if a.shape[0] != 1:
            raise ValueError(f"{name}: a batch of {a.shape[0]}; LightGlue matches one pair at a time")
        a = a[0]
    if not np.issubdtype(a.dtype, np.floating) and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must hold numbers, got {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float32)


def _image(d: Any, which: str):
    if not isinstance(d, dict):
        raise TypeError(f"{which} must be a dict with 'keypoints', 'descriptors' and 'image_size'")
    for k in ("keypoints", "descriptors"):
        if k not in d:
            raise ValueError(f"{which} has no '{k}'")
    kpts = _numpy(d["keypoints"], f"{which}['keypoints']", 2).reshape(-1, 2)
    desc = _numpy(d["descriptors"], f"{which}['descriptors']", 2)
    if desc.ndim != 2:
        raise ValueError(f"{which}['descriptors'] must be (N, D) or (1, N, D), got shape {desc.shape}")
    w = h = 0.0  # no image_size: cvg's normalize_keypoints takes the keypoints' extent (cvg ignores "image")
    if d.get("image_size") is not None:  # [W, H], as cvg's normalize_keypoints takes it
        size = _numpy(d["image_size"], f"{which}['image_size']", 1).reshape(-1)
        if size.shape != (2,):
            raise ValueError(f"{which}['image_size'] must be [W, H]")
        w, h = float(size[0]), float(size[1])
    return kpts, desc, w, h


# depth_confidence, width_confidence, filter_threshold: names, ranges and defaults from the library's one table
# (superpoint_rt/lightglue.hpp lightglue_param_specs, LightGlueOptions), as the CLI flags and the HTTP fields.
_PARAMS = {p["name"]: p for p in _core.lightglue_params()}


def _param(name: str, value: Any) -> float:
    p = _PARAMS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number ({p['range']}), got {type(value).__name__}")
    x = float(value)
    if not (p["min"] <= x <= p["max"]):
        raise ValueError(f"{name}: {x} is out of range (allowed: {p['range']})")
    return x


class LightGlue:
    """cvg's LightGlue matcher on the CPU, exact to its PyTorch code (docs/MATCHING.md).

    `weights`: a cvg .pth file (e.g. ``superpoint_lightglue.pth``, ``aliked_lightglue.pth``; read without
    unpickling), a .safetensors file in cvg's or transformers' key layout, a folder with model.safetensors, or a
    Hugging Face repo id ("ETH-CVG/lightglue_superpoint", through the same cache as SuperPoint's weights).
    `depth_confidence`, `width_confidence` (-1 = off) and `filter_threshold` as cvg's conf; `threads` 0 = all cores.
    """

    def __init__(self, weights: "str | os.PathLike[str]", *,
                 depth_confidence: float = _PARAMS["depth_confidence"]["default"],
                 width_confidence: float = _PARAMS["width_confidence"]["default"],
                 filter_threshold: float = _PARAMS["filter_threshold"]["default"], threads: int = 0,
                 revision: Optional[str] = None, cache_dir: Optional[str] = None,
                 local_files_only: bool = False) -> None:
        self._m = _core.LightGlueMatcher(os.fspath(weights), revision or "", os.fspath(cache_dir or ""),
                                         bool(local_files_only))
        self.depth_confidence = _param("depth_confidence", depth_confidence)
        self.width_confidence = _param("width_confidence", width_confidence)
        self.filter_threshold = _param("filter_threshold", filter_threshold)
        self.threads = check_int("threads", threads, 0, 1 << 16, " (0 = all cores)")

    @property
    def input_dim(self) -> int:
        return self._m.input_dim

    @property
    def descriptor_dim(self) -> int:
        """The network's width d (256): input_proj maps input_dim to it where they differ."""
        return self._m.descriptor_dim

    @property
    def num_layers(self) -> int:
        return self._m.num_layers

    @property
    def layout(self) -> str:
        """The weights' key layout: "cvg" or "transformers"."""
        return self._m.layout

    def match(self, image0: Dict[str, Any], image1: Dict[str, Any]) -> Dict[str, Any]:
        """cvg's output for one pair, as numpy: matches0 (M,) int32 (-1 = none), matches1 (N,), matching_scores0 (M,)
        float32, matching_scores1 (N,), matches (K, 2) int64, scores (K,), stop (layers run), prune0, prune1."""
        k0, d0, w0, h0 = _image(image0, "image0")
        k1, d1, w1, h1 = _image(image1, "image1")
        r = self._m.match(k0, d0, w0, h0, k1, d1, w1, h1, self.depth_confidence, self.width_confidence,
                          self.filter_threshold, self.threads)
        m0 = r["matches0"]
        valid = np.nonzero(m0 >= 0)[0]
        r["matches"] = np.stack([valid, m0[valid].astype(np.int64)], axis=1).reshape(-1, 2)
        r["scores"] = r["matching_scores0"][valid]
        return r

    def __call__(self, data: Dict[str, Any]) -> Dict[str, Any]:
        """cvg's ``LightGlue.forward``: ``data = {"image0": {...}, "image1": {...}}`` with keypoints (1, M, 2),
        descriptors (1, M, D) and image_size (1, 2) [W, H] each (what ``SuperPointOutput.to_lightglue()`` gives).
        Returns cvg's keys with a batch dimension of 1 (numpy arrays; "matches" and "scores" as lists of one)."""
        r = self.match(data["image0"], data["image1"])
        out: Dict[str, Any] = {k: r[k][None] for k in ("matches0", "matches1", "matching_scores0",
                                                        "matching_scores1", "prune0", "prune1")}
        out["matches"] = [r["matches"]]
        out["scores"] = [r["scores"]]
        out["stop"] = r["stop"]
        return out

    def __repr__(self) -> str:
        return (f"LightGlue(input_dim={self.input_dim}, layers={self.num_layers}, layout={self.layout!r}, "
                f"depth_confidence={self.depth_confidence}, width_confidence={self.width_confidence})")
