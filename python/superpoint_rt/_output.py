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
        keypoints: float32 (N, 2), [x, y] in pixels of the ORIGINAL image (after the EXIF rotation when
            exif_orientation applies it: lightglue's default), in the preset's convention (hf: network position times ``scale``; hloc / lightglue:
            (p + 0.5) * scale - 0.5).
        scores: float32 (N,), in (0, 1]; hf: descending (ties in raster order y, then x); hloc / lightglue: raster
            order unless max_keypoints cut the list (then descending), as those tools return them.
        descriptors: float32 (N, 256) unit-L2 rows in the order of ``keypoints``, or None (return_descriptors=False).
        image_size: (height, width) of the original image.
        scale: (sx, sy) = (width / network width, height / network height), float32 values.
        timing_ms: wall-clock milliseconds of this call: decode, preprocess, forward, postprocess.
        network_size: (height, width) of the network frame the image was resized to (640x480 for hf).

    ``out["keypoints"]`` etc. work as for the Hugging Face post-processing result; ``len(out)`` is N.
    """

    __slots__ = ("keypoints", "scores", "descriptors", "image_size", "scale", "timing_ms", "network_size")

    def __init__(self, keypoints: Any, scores: Any, descriptors: Optional[Any], image_size: Tuple[int, int],
                 scale: Tuple[float, float], timing_ms: Dict[str, float],
                 network_size: Tuple[int, int] = (480, 640)) -> None:
        self.keypoints = keypoints
        self.scores = scores
        self.descriptors = descriptors
        self.image_size = image_size
        self.scale = scale
        self.timing_ms = timing_ms
        self.network_size = network_size

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

    def to_lightglue(self) -> Dict[str, Any]:
        """The dict LightGlue's matcher takes for one image (torch tensors, batch of 1): keypoints (1, N, 2),
        keypoint_scores (1, N), descriptors (1, N, 256), image_size (1, 2) as [W, H] (float), as
        ``SuperPoint.extract`` returns it: ``matcher({"image0": a.to_lightglue(), "image1": b.to_lightglue()})``.
        Needs torch; descriptors are required."""
        import torch  # optional dependency: only this method needs it

        d = self.numpy()
        if d["descriptors"] is None:
            raise ValueError("to_lightglue needs descriptors: call the model with return_descriptors=True")
        h, w = self.image_size
        return {
            "keypoints": torch.from_numpy(np.ascontiguousarray(d["keypoints"]))[None],
            "keypoint_scores": torch.from_numpy(np.ascontiguousarray(d["scores"]))[None],
            "descriptors": torch.from_numpy(np.ascontiguousarray(d["descriptors"]))[None],
            "image_size": torch.tensor([[float(w), float(h)]], dtype=torch.float32),
        }

    def to_cv2_keypoints(self, size: float = 8.0) -> list:
        """The keypoints as ``cv2.KeyPoint`` objects (pt = (x, y), response = score, ``size`` = the network's 8-pixel
        cell by default), e.g. for ``cv2.drawKeypoints`` or OpenCV matchers with ``self.descriptors``. Needs
        OpenCV (cv2)."""
        import cv2  # optional dependency: only this method needs it

        d = self.numpy()
        return [cv2.KeyPoint(float(x), float(y), float(size), -1.0, float(s))
                for (x, y), s in zip(d["keypoints"].tolist(), d["scores"].tolist())]

    def __repr__(self) -> str:
        d = "None" if self.descriptors is None else f"({self.descriptors.shape[0]}, {self.descriptors.shape[1]})"
        return (f"SuperPointOutput(n={len(self)}, image_size={self.image_size}, scale=({self.scale[0]:.4f}, "
                f"{self.scale[1]:.4f}), descriptors={d})")
