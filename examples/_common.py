"""Shared by the examples: where the weights and the demo images are, found from this file's location so that the
examples run from any directory."""

from __future__ import annotations

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("SUPERPOINT_RT_SHARED", REPO.parent / "shared"))
HUB_REPO = "magic-leap-community/superpoint"


def weights() -> str:
    """$SUPERPOINT_RT_WEIGHTS (a local folder or a hub repo id), else ../shared/weights/superpoint beside the
    repository when present, else the Hugging Face repo (cache, then download)."""
    w = os.environ.get("SUPERPOINT_RT_WEIGHTS")
    if w:
        return w
    local = SHARED / "weights" / "superpoint"
    return str(local) if (local / "model.safetensors").is_file() else HUB_REPO


def demo_image(name: str):
    """The path of a demo photograph in ../shared/images, or None when it is not there."""
    p = SHARED / "images" / name
    return str(p) if p.is_file() else None
