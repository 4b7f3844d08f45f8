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

#: The per-request parameters, from the C++ table (include/superpoint_rt/params.hpp): name -> spec dict with type
#: ("int", "float", "bool", "string"), min, max, choices, range (as messages print it) and help.
SPECS: Dict[str, Dict[str, Any]] = {s["name"]: s for s in _core.PARAM_SPECS}
#: preset name -> {parameter: default} (the same table).
PRESETS: Dict[str, Dict[str, Any]] = _core.PRESETS
#: name -> default of the "hf" preset (SPEC §2), plus "preset" itself.
DEFAULTS: Dict[str, Any] = {"preset": "hf", **PRESETS["hf"]}
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


def unknown_parameter(name: str) -> TypeError:
    valid = list(SPECS) + list(CALL_OPTIONS)
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(f"unknown parameter {name!r}{hint}; the parameters are: {', '.join(valid)}")


def _check_one(name: str, v: Any) -> Any:
    spec = SPECS[name]
    t = spec["type"]
    if t == "int":
        return check_int(name, v, int(spec["min"]), int(spec["max"]), f" ({spec['range']})")
    if t == "float":
        if _is_bool(v) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a float ({spec['range']}), got {type(v).__name__} {v!r}")
        f = float(v)
        if math.isnan(f) or f < spec["min"] or f > spec["max"]:
            raise ValueError(f"{name} = {f!r} is out of range [{spec['min']:g}, {spec['max']:g}]")
        return f
    if t == "bool":
        return check_bool(name, v)
    if v is None and name in ("resize",):
        return "none"  # resize=None: the native size (as LightGlue's resize=None)
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a str ({spec['range']}), got {type(v).__name__} {v!r}")
    if spec["choices"] and v not in spec["choices"]:
        raise ValueError(f"{name} = {v!r} is not one of {spec['range']}")
    return v


def resolve(params: Dict[str, Any]) -> Dict[str, Any]:
    """Checks the request parameters in ``params`` (which holds no other keys) against the C++ table and returns the
    explicit ones, typed, for _core (which applies them over the preset's defaults and checks their combination)."""
    out = {}
    for k, v in params.items():
        spec = SPECS.get(k)
        if spec is None:
            raise unknown_parameter(k)
        t = spec["type"]
        # The common case (plain values in range) is one type check: this runs on every call.
        if t == "int" and type(v) is int and spec["min"] <= v <= spec["max"]:
            out[k] = v
        elif t == "bool" and (v is True or v is False):
            out[k] = v
        else:
            out[k] = _check_one(k, v)
    return out
