"""Turns the image objects users pass (paths, bytes, PIL images, numpy arrays, torch tensors) into what the C++
engine reads without copying: a path string, a bytes-like object, or a numpy array of dtype uint8 / float32 and shape
(H, W) or (H, W, C) with C = 1, 3 or 4.

Rules (seed PYTHON.md "Images", SPEC §2):
- numpy: (H, W) gray, (H, W, C) with C = 1 (gray), 3 (RGB, or BGR with bgr=True) or 4 (RGBA / BGRA).
- torch: (H, W), (C, H, W) (torchvision layout) or (H, W, C); C = 1, 3 or 4. When both the first and the last
  dimension could be channels (e.g. (3, 4, 3)), the torchvision layout (C, H, W) wins.
- dtypes: uint8 as is; other integer types must hold values in 0..255 (checked, then converted to uint8); floating
  types must hold values in [0, 1] (float32 is checked by the engine, which rounds nearbyint(v * 255) half to even;
  float16 / float64 are checked here, then converted to float32). bool and complex arrays are refused.
- PIL: mode "L" is the gray plane; "RGB" and "RGBA" as they are (alpha ignored); "1", "LA", "I", "I;16", "F" are
  converted with Pillow to "L" (a gray image stays gray, as the file decoders keep gray files gray); every other mode
  (P, PA, CMYK, YCbCr, LAB, HSV, RGBX, ...) is converted with Pillow's convert("RGB"), as the file path does.
- Non-contiguous arrays (slices, transposes, negative strides) are accepted: rows with a positive stride and packed,
  aligned pixels are read in place, anything else is copied once (numpy.ascontiguousarray).
- Encoded bytes: bytes, bytearray or memoryview; a non-contiguous memoryview (memoryview(data)[::2]) is copied with
  tobytes() (the bytes it shows, in order). _core itself refuses non-contiguous buffers.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any, List

import numpy as np

_GRAY_MODES = ("1", "LA", "La", "I", "I;16", "I;16L", "I;16B", "I;16N", "F")


def _is_torch(obj: Any) -> bool:
    # torch is optional: only look at it when it is already imported (a tensor implies it is).
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _is_pil(obj: Any) -> bool:
    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(obj, pil.Image)


def _check_dtype(a: np.ndarray) -> np.ndarray:
    """Returns an array of dtype uint8 or float32 with the same values, or raises."""
    dt = a.dtype
    if dt == np.uint8 or dt == np.float32:
        return a
    kind = dt.kind
    if kind in "iu":
        if a.size:
            lo, hi = int(a.min()), int(a.max())
            if lo < 0 or hi > 255:
                raise ValueError(
                    f"image array of dtype {dt} has values in [{lo}, {hi}]; integer images must be in 0..255 "
                    "(uint8 range)")
        return a.astype(np.uint8)
    if kind == "f":
        if a.size:
            lo, hi = float(np.min(a)), float(np.max(a))  # NaN propagates into lo/hi
            if not (lo >= 0.0 and hi <= 1.0):
                raise ValueError(
                    f"image array of dtype {dt} has values in [{lo!r}, {hi!r}]; float images must be in [0, 1] "
                    "(no NaN)")
        return a.astype(np.float32)
    raise TypeError(f"image array dtype {dt} is not supported: use uint8, another integer type with values in "
                    "0..255, or a float type with values in [0, 1]")


def _check_shape(a: np.ndarray, what: str) -> np.ndarray:
    if a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (1, 3, 4)):
        if a.shape[0] < 1 or a.shape[1] < 1:
            raise ValueError(f"{what} of shape {tuple(a.shape)} is empty (an image must be at least 1x1)")
        return a
    if a.ndim == 3:
        hint = " (channels first? numpy images are (H, W, C); use a.transpose(1, 2, 0))" if a.shape[0] in (1, 3, 4) else ""
        raise ValueError(f"{what} of shape {tuple(a.shape)} has {a.shape[2]} channels; expected (H, W) or (H, W, C) "
                         f"with C = 1, 3 or 4{hint}")
    raise ValueError(f"{what} of shape {tuple(a.shape)} has {a.ndim} dimensions; expected (H, W) or (H, W, C) "
                     "with C = 1, 3 or 4 (4-D arrays are batches: pass them to model(batch))")


def _from_numpy(a: np.ndarray) -> np.ndarray:
    return _check_dtype(_check_shape(a, "image array"))


def _torch_to_numpy(t: Any, batch: bool = False) -> np.ndarray:
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"image tensor dtype {t.dtype} is not supported: use uint8, another integer type with "
                        "values in 0..255, or a float type with values in [0, 1]")
    a = t.numpy()
    if batch:  # (B, C, H, W) -> (B, H, W, C)
        if a.ndim != 4 or a.shape[1] not in (1, 3, 4):
            raise ValueError(f"image tensor batch of shape {tuple(a.shape)}: expected (B, C, H, W) with C = 1, 3 or 4")
        return a.transpose(0, 2, 3, 1)
    if a.ndim == 3 and a.shape[0] in (1, 3, 4):
        a = a.transpose(1, 2, 0)  # torchvision (C, H, W) -> (H, W, C), read through strides (a copy in _core)
    elif a.ndim == 3 and a.shape[2] not in (1, 3, 4):
        raise ValueError(f"image tensor of shape {tuple(a.shape)}: expected (H, W), (C, H, W) or (H, W, C) with "
                         "C = 1, 3 or 4")
    return _check_dtype(_check_shape(a, "image tensor"))


def _from_pil(im: Any) -> np.ndarray:
    mode = im.mode
    if mode not in ("L", "RGB", "RGBA"):
        im = im.convert("L" if mode in _GRAY_MODES else "RGB")
    return np.asarray(im)


def to_engine(obj: Any) -> Any:
    """One image -> a str path, a bytes-like object, or a uint8/float32 numpy array (H, W[, C])."""
    if isinstance(obj, np.ndarray):
        return _from_numpy(obj)
    if isinstance(obj, str):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        if isinstance(obj, memoryview):
            if obj.nbytes == 0:
                raise ValueError("image bytes (memoryview) are empty")
            if not obj.c_contiguous:
                # _core reads nbytes bytes from the view's pointer: right only for a C-contiguous view (a strided or
                # reversed one, memoryview(data)[::2] or [::-1], has other bytes there). tobytes() copies the bytes
                # the view shows, in its logical order.
                return obj.tobytes()
            return obj
        if len(obj) == 0:
            raise ValueError("image bytes are empty")
        return obj
    if isinstance(obj, os.PathLike):
        return os.fsdecode(obj)
    if _is_pil(obj):
        return _from_pil(obj)
    if _is_torch(obj):
        return _torch_to_numpy(obj)
    if isinstance(obj, io.IOBase) or (hasattr(obj, "read") and callable(obj.read)):
        data = obj.read()
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"file object {obj!r} returned {type(data).__name__}, not bytes (open it in binary mode)")
        if not data:
            raise ValueError(f"file object {obj!r} gave no bytes")
        return data
    raise TypeError(f"unsupported image type {type(obj).__module__}.{type(obj).__qualname__}: pass a path (str or "
                    "pathlib.Path), bytes, a PIL.Image, a numpy array (H, W) / (H, W, C), a torch tensor, or a list "
                    "of these")


def split_batch(images: Any) -> List[Any] | None:
    """A list of images when `images` is a list / tuple / 4-D batch, else None (a single image)."""
    if isinstance(images, (list, tuple)):
        return list(images)
    if isinstance(images, np.ndarray) and images.ndim == 4:
        return [images[i] for i in range(images.shape[0])]
    if _is_torch(images) and images.dim() == 4:
        a = _torch_to_numpy(images, batch=True)
        return [a[i] for i in range(a.shape[0])]
    return None
