"""SuperPointOutput: the features of one image (SPEC §2 "Output").

The arrays are numpy views of the C++ engine's buffers (no copy; they stay valid as long as any of them is referenced)
or, with return_tensors="pt", torch tensors sharing that memory (torch.from_numpy). They are writable, and each output
owns its own buffers: changing one output never changes another.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np

_KEYS = ("keypoints", "scores", "descriptors")


class SuperPointOutput:
    """Keypoints, scores and descriptors of one image.

    Attributes:
        keypoints: float32 (N, 2), [x, y] in pixels of the ORIGINAL image (network-frame position times ``scale``).
        scores: float32 (N,), in (0, 1], sorted in descending order (ties in raster order y, then x).
        descriptors: float32 (N, 256) unit-L2 rows in the order of ``keypoints``, or None (return_descriptors=False).
        image_size: (height, width) of the original image.
        scale: (sx, sy) = (width / 640, height / 480), float32 values.
        timing_ms: wall-clock milliseconds of this call: decode, preprocess, forward, postprocess.

    ``out["keypoints"]`` etc. work as for the Hugging Face post-processing result; ``len(out)`` is N.
    """

    __slots__ = ("keypoints", "scores", "descriptors", "image_size", "scale", "timing_ms")

    def __init__(self, keypoints: Any, scores: Any, descriptors: Optional[Any], image_size: Tuple[int, int],
                 scale: Tuple[float, float], timing_ms: Dict[str, float]) -> None:
        self.keypoints = keypoints
        self.scores = scores
        self.descriptors = descriptors
        self.image_size = image_size
        self.scale = scale
        self.timing_ms = timing_ms

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def __getitem__(self, key: str) -> Any:
        if key in _KEYS or key in ("image_size", "scale", "timing_ms"):
            return getattr(self, key)
        raise KeyError(f"{key!r} (the keys are {', '.join(_KEYS)}; image_size, scale and timing_ms also work)")

    def __contains__(self, key: object) -> bool:
        return key in _KEYS

    def keys(self) -> Tuple[str, ...]:
        return _KEYS

    def __iter__(self) -> Iterator[str]:
        # Iterates over the keys, as a dict would (len() is the keypoint count, as in the seed API).
        return iter(_KEYS)

    def numpy(self) -> Dict[str, Any]:
        """keypoints, scores, descriptors (None when not computed) as numpy arrays, plus image_size and scale."""
        def np_(v: Any) -> Any:
            if v is None or isinstance(v, np.ndarray):
                return v
            return v.detach().cpu().numpy()  # a torch tensor (return_tensors="pt")

        return {"keypoints": np_(self.keypoints), "scores": np_(self.scores), "descriptors": np_(self.descriptors),
                "image_size": self.image_size, "scale": self.scale}

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-friendly dict (lists of Python floats, exactly the float32 values)."""
        d = self.numpy()
        return {
            "keypoints": d["keypoints"].tolist(),
            "scores": d["scores"].tolist(),
            "descriptors": None if d["descriptors"] is None else d["descriptors"].tolist(),
            "image_size": list(self.image_size),
            "scale": [float(s) for s in self.scale],
            "timing_ms": dict(self.timing_ms),
        }

    def __repr__(self) -> str:
        d = "None" if self.descriptors is None else f"({self.descriptors.shape[0]}, {self.descriptors.shape[1]})"
        return (f"SuperPointOutput(n={len(self)}, image_size={self.image_size}, scale=({self.scale[0]:.4f}, "
                f"{self.scale[1]:.4f}), descriptors={d})")
