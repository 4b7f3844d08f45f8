"""Per-request parameters (SPEC §2): names, defaults, types and ranges, checked before any work.

The same table is used by the C++ engine (Params::validate), the CLI and the HTTP server. Nothing is clamped: a
value of the wrong type raises TypeError, a value out of range (or NaN) raises ValueError, an unknown name raises
TypeError; every message names the parameter, the value and the allowed range.
"""

from __future__ import annotations

import difflib
import math
import numbers
from typing import Any, Dict, Tuple

MAX_KEYPOINTS_MAX = 307200
NMS_RADIUS_MAX = 32

#: name -> default (the request parameters of SPEC §2).
DEFAULTS: Dict[str, Any] = {
    "max_keypoints": 1024,
    "keypoint_threshold": 0.005,
    "nms_radius": 4,
    "return_descriptors": True,
    "bgr": False,
    "grayscale": False,
}
#: Call options that are not request parameters.
CALL_OPTIONS = ("num_workers", "return_tensors")


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool) or type(v).__name__ == "bool_"  # numpy.bool_ without importing numpy here


def _int(name: str, v: Any, lo: int, hi: int, note: str = "") -> int:
    # bool is an int subclass in Python; True as a keypoint count is a mistake, not 1. Floats are refused even when
    # integral (1.0): the parameter is a count.
    if _is_bool(v) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int in [{lo}, {hi}]{note}, got {type(v).__name__} {v!r}")
    v = int(v)
    if v < lo or v > hi:
        raise ValueError(f"{name} = {v} is out of range [{lo}, {hi}]{note}")
    return v


def _bool(name: str, v: Any) -> bool:
    if not _is_bool(v):
        raise TypeError(f"{name} must be a bool (True or False), got {type(v).__name__} {v!r}")
    return bool(v)


def check_threshold(v: Any) -> float:
    if _is_bool(v) or not isinstance(v, numbers.Real):
        raise TypeError(f"keypoint_threshold must be a float in [0, 1], got {type(v).__name__} {v!r}")
    f = float(v)
    if math.isnan(f) or f < 0.0 or f > 1.0:
        raise ValueError(f"keypoint_threshold = {f!r} is out of range [0, 1]")
    return f


def check_num_workers(v: Any) -> int:
    if _is_bool(v) or not isinstance(v, numbers.Integral):
        raise TypeError(f"num_workers must be an int >= 0, got {type(v).__name__} {v!r}")
    v = int(v)
    if v < 0 or v > 1024:
        raise ValueError(f"num_workers = {v} is out of range [0, 1024]")
    return v


def unknown_parameter(name: str) -> TypeError:
    valid = list(DEFAULTS) + list(CALL_OPTIONS)
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(f"unknown parameter {name!r}{hint}; the parameters are: {', '.join(valid)}")


def resolve(params: Dict[str, Any]) -> Tuple[int, float, int, bool, bool, bool]:
    """Checks the request parameters in ``params`` (which holds no other keys) and returns them in _core's order:
    (max_keypoints, keypoint_threshold, nms_radius, return_descriptors, bgr, grayscale)."""
    mk = params.get("max_keypoints", 1024)
    th = params.get("keypoint_threshold", 0.005)
    r = params.get("nms_radius", 4)
    rd = params.get("return_descriptors", True)
    bgr = params.get("bgr", False)
    gray = params.get("grayscale", False)
    # The common case (defaults or plain values) is a handful of type checks: this runs on every call.
    return (
        mk if type(mk) is int and -1 <= mk <= MAX_KEYPOINTS_MAX else _int(
            "max_keypoints", mk, -1, MAX_KEYPOINTS_MAX, " (-1 = all keypoints)"),
        th if type(th) is float and 0.0 <= th <= 1.0 else check_threshold(th),
        r if type(r) is int and 0 <= r <= NMS_RADIUS_MAX else _int("nms_radius", r, 0, NMS_RADIUS_MAX),
        rd if rd is True or rd is False else _bool("return_descriptors", rd),
        bgr if bgr is True or bgr is False else _bool("bgr", bgr),
        gray if gray is True or gray is False else _bool("grayscale", gray),
    )
