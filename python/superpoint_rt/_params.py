"""Parameter checks of every Python entry point: the per-request parameters (SPEC §2: names, defaults, types and
ranges) and the numeric / boolean options of from_pretrained, warmup, BatchExtractor / extract_folder and
calibration. Every entry point checks its arguments here, before any work, so that one value gets one verdict
everywhere (e.g. max_keypoints=1.9 or True is a TypeError in model(...) and in extract_folder(...) alike).

The request parameters match the C++ engine's table (Params::validate), the CLI and the HTTP server. Nothing is
clamped or coerced: a value of the wrong type raises TypeError (bool is not an int, 1.0 is not an int, "3" is not a
number), a value out of range (or NaN) raises ValueError, an unknown name raises TypeError; every message names the
parameter, the value and the allowed range.
"""

from __future__ import annotations

import difflib
import math
import numbers
from typing import Any, Dict, Tuple

from . import _core

# The engine's limits (include/superpoint_rt/features.hpp, Params): defined once, in C++.
MAX_KEYPOINTS_MAX: int = _core.MAX_KEYPOINTS_MAX
NMS_RADIUS_MAX: int = _core.NMS_RADIUS_MAX
#: Options of the loading and list calls (not request parameters).
NUM_WORKERS_MAX = 1024
THREADS_MAX = 4096
INT64_MAX = 2**63 - 1

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


def check_int(name: str, v: Any, lo: int, hi: int, note: str = "") -> int:
    """An int (or numpy integer) in [lo, hi], as a Python int."""
    # bool is an int subclass in Python; True as a keypoint count is a mistake, not 1. Floats are refused even when
    # integral (1.0): the parameter is a count.
    if _is_bool(v) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int in [{lo}, {hi}]{note}, got {type(v).__name__} {v!r}")
    v = int(v)
    if v < lo or v > hi:
        raise ValueError(f"{name} = {v} is out of range [{lo}, {hi}]{note}")
    return v


def check_bool(name: str, v: Any) -> bool:
    """True or False (or a numpy bool); 0 / 1 / "yes" / None are refused."""
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


def check_num_workers(v: Any, name: str = "num_workers") -> int:
    """Threads that decode and resize the next images of a list (0 = none: the calling thread does it)."""
    return check_int(name, v, 0, NUM_WORKERS_MAX)


def check_threads(v: Any, lo: int) -> int:
    """Network compute threads: lo = 1 where None means all cores (from_pretrained), 0 where 0 does (batch)."""
    return check_int("threads", v, lo, THREADS_MAX, " (0 = all cores)" if lo == 0 else "")


def check_max_pixels(v: Any) -> int:
    return check_int("max_pixels", v, 1, INT64_MAX)


def check_request(max_keypoints: Any, keypoint_threshold: Any, nms_radius: Any, return_descriptors: Any, bgr: Any,
                  grayscale: Any, descriptors_name: str = "return_descriptors"
                  ) -> Tuple[int, float, int, bool, bool, bool]:
    """resolve() for callers that take the request parameters as arguments (BatchExtractor.extract names
    return_descriptors `descriptors`, as the CLI's --no-descriptors does)."""
    if descriptors_name != "return_descriptors":
        check_bool(descriptors_name, return_descriptors)
    return resolve({"max_keypoints": max_keypoints, "keypoint_threshold": keypoint_threshold,
                    "nms_radius": nms_radius, "return_descriptors": return_descriptors, "bgr": bgr,
                    "grayscale": grayscale})


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
        mk if type(mk) is int and -1 <= mk <= MAX_KEYPOINTS_MAX else check_int(
            "max_keypoints", mk, -1, MAX_KEYPOINTS_MAX, " (-1 = all keypoints)"),
        th if type(th) is float and 0.0 <= th <= 1.0 else check_threshold(th),
        r if type(r) is int and 0 <= r <= NMS_RADIUS_MAX else check_int("nms_radius", r, 0, NMS_RADIUS_MAX),
        rd if rd is True or rd is False else check_bool("return_descriptors", rd),
        bgr if bgr is True or bgr is False else check_bool("bgr", bgr),
        gray if gray is True or gray is False else check_bool("grayscale", gray),
    )
