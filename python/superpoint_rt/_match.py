"""Matching, the hloc way: hloc's nearest-neighbour matcher (hloc/matchers/nearest_neighbor.py) on two feature sets
in memory, over hloc's files (features.h5 + pairs.txt -> matches.h5, as hloc's match_features), and the pair lists
of hloc's pairs_from_exhaustive / pairs_from_sequential. The same C++ code as `superpoint-rt pairs` and
`superpoint-rt match` (src/match/; docs/MATCHING.md).

    import superpoint_rt
    with superpoint_rt.SuperPoint.from_pretrained() as model:
        a, b = model(["a.jpg", "b.jpg"])
    matches, scores = superpoint_rt.match(a, b, conf="NN-mutual")   # (K, 2) indices into a and b, (K,) scores

    superpoint_rt.pairs_from_exhaustive("features.h5", output="pairs.txt")
    report = superpoint_rt.match_features("features.h5", "pairs.txt", "matches.h5", conf="NN-ratio")
"""

from __future__ import annotations

import json
import math
import numbers
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._params import check_bool, check_int, check_threads

PathLike = Union[str, "os.PathLike[str]"]
_INT32_MAX = 2**31 - 1
Pair = Tuple[str, str]

#: The matcher's parameters from the C++ table (include/superpoint_rt/match.hpp): name -> spec dict (type, min, max,
#: choices, range, help).
MATCH_SPECS: Dict[str, Dict[str, Any]] = {s["name"]: s for s in _core.MATCH_PARAM_SPECS}
#: hloc's nearest-neighbour confs: name -> {output, ratio, distance, mutual} (0 = off).
MATCH_CONFS: Dict[str, Dict[str, Any]] = _core.MATCH_CONFS


def _match_params(conf: Any, ratio: Any, distance: Any, mutual: Any) -> Dict[str, Any]:
    """The given matcher parameters, type- and range-checked against the table (None = the conf's value)."""
    if not isinstance(conf, str):
        raise TypeError(f"conf must be a str ({MATCH_SPECS['conf']['range']}), got {type(conf).__name__} {conf!r}")
    if conf not in MATCH_CONFS:
        raise ValueError(f"conf: {conf!r} is not one of {MATCH_SPECS['conf']['range']}")
    out: Dict[str, Any] = {"conf": conf}
    for name, v in (("ratio", ratio), ("distance", distance)):
        if v is None:
            continue
        spec = MATCH_SPECS[name]
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a number ({spec['range']}) or None, got {type(v).__name__} {v!r}")
        if not (spec["min"] <= float(v) <= spec["max"]) or math.isnan(float(v)):
            raise ValueError(f"{name} = {v!r} is out of range ({spec['range']})")
        out[name] = float(v)
    if mutual is not None:
        out["mutual"] = check_bool("mutual", mutual)
    return out


def _descriptors(x: Any, which: str) -> np.ndarray:
    """(N, D) float32 descriptors of a SuperPointOutput, a dict with "descriptors", a numpy array or a torch tensor."""
    d = x
    if hasattr(x, "descriptors") and not isinstance(x, np.ndarray):
        d = x.descriptors
    elif isinstance(x, dict):
        if "descriptors" not in x:
            raise ValueError(f"{which}: the dict has no 'descriptors'")
        d = x["descriptors"]
    if d is None:
        raise ValueError(f"{which} has no descriptors: extract with return_descriptors=True")
    if hasattr(d, "detach"):  # a torch tensor
        d = d.detach().cpu().numpy()
    a = np.asarray(d)
    if a.ndim == 3 and a.shape[0] == 1:  # a batch of one, as LightGlue's dicts hold them
        a = a[0]
    if a.ndim != 2:
        raise ValueError(f"{which} must be (N, D) descriptors, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{which} must hold floats, got {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float32)


def match(a: Any, b: Any, conf: str = "NN-mutual", *, ratio: Optional[float] = None,
          distance: Optional[float] = None, mutual: Optional[bool] = None, threads: int = 0,
          return_matches0: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Matches the descriptors of `a` against `b` with hloc's nearest-neighbour matcher.

    `a`, `b`: SuperPointOutput objects (extracted with descriptors), dicts with "descriptors", or (N, D) arrays
    (numpy, torch). `conf`: hloc's match_features conf, "NN-mutual" (mutual nearest neighbours), "NN-ratio" (and
    Lowe's ratio test at 0.8), "NN-superpoint" (and distance <= 0.7); `ratio`, `distance`, `mutual` override it
    (0 = off). `threads`: compute threads (0 = all cores).

    Returns (matches, scores): matches (K, 2) int64, each row (i, j) with i in a and j in b, in increasing i; scores
    (K,) float32, hloc's matching scores (sim + 1) / 2. With return_matches0=True returns hloc's raw form instead:
    matches0 (N0,) int32 (-1 = no match) and matching_scores0 (N0,) float32 (not zeroed by the mutual check, as in
    hloc). Equal to hloc's on every keypoint except near-ties of similarity (docs/MATCHING.md).
    """
    params = _match_params(conf, ratio, distance, mutual)
    threads = check_threads(threads, 0)
    check_bool("return_matches0", return_matches0)
    m0, s0 = _core.match_arrays(_descriptors(a, "a"), _descriptors(b, "b"), params, threads)
    if return_matches0:
        return m0, s0
    i = np.nonzero(m0 >= 0)[0]
    return np.stack([i, m0[i].astype(np.int64)], axis=1).reshape(-1, 2), s0[i]


def match_features(features: PathLike, pairs: PathLike, output: PathLike, conf: str = "NN-mutual", *,
                   ratio: Optional[float] = None, distance: Optional[float] = None, mutual: Optional[bool] = None,
                   features_ref: Optional[PathLike] = None, overwrite: bool = False, threads: int = 0,
                   cache_mb: int = 2048, progress: bool = False) -> Dict[str, Any]:
    """hloc's match_features.main(confs[conf], pairs, features, matches=output) with the nearest-neighbour confs, in
    C++: writes hloc's matches file (a group per pair with matches0 int16 and matching_scores0 float16); pairs
    already in `output` are skipped (either order), unless `overwrite`. Returns the report: listed, unique, skipped,
    matched, images_read, matches, seconds."""
    params = _match_params(conf, ratio, distance, mutual)
    report = _core.match_files(os.fspath(features), os.fspath(pairs), os.fspath(output),
                               os.fspath(features_ref) if features_ref is not None else "", params,
                               check_threads(threads, 0), check_bool("overwrite", overwrite),
                               check_int("cache_mb", cache_mb, 1, 1 << 24),
                               check_bool("progress", progress))
    return json.loads(report)


def _names(source: Union[PathLike, Sequence[str]]) -> List[str]:
    if isinstance(source, (str, os.PathLike)):
        return list(_core.feature_names(os.fspath(source)))  # sorted, as hloc's list_h5_names (unsorted there)
    names = list(source)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"image names must be str, got {type(n).__name__} {n!r}")
    return names


def _finish(pairs: List[Pair], output: Optional[PathLike]) -> List[Pair]:
    if output is not None:
        _core.write_pairs(os.fspath(output), pairs)
    return pairs


def pairs_from_exhaustive(names: Union[PathLike, Sequence[str]], output: Optional[PathLike] = None) -> List[Pair]:
    """Every pair (names[i], names[j]), i < j, as hloc's pairs_from_exhaustive. `names`: a features file (its images,
    sorted) or a list of names (in that order). Written to `output` in hloc's format when given."""
    return _finish([tuple(p) for p in _core.pairs_exhaustive(_names(names))], output)


def pairs_from_sequential(names: Union[PathLike, Sequence[str]], window: int = 10, *, quadratic: bool = False,
                          loop_stride: int = 0, output: Optional[PathLike] = None) -> List[Pair]:
    """A sequence (video) in the order of `names`: each image with the next `window`; `quadratic` adds (i, i + 2^k)
    for 2^k > window (hloc's pairs_from_sequential quadratic_overlap); `loop_stride` > 0 pairs every
    loop_stride-th image with every other such key frame (loop closure). Same as `superpoint-rt pairs --sequential`."""
    pairs = _core.pairs_sequential(_names(names), check_int("window", window, 1, _INT32_MAX),
                                   check_bool("quadratic", quadratic),
                                   check_int("loop_stride", loop_stride, 0, _INT32_MAX, " (0 = off)"))
    return _finish([tuple(p) for p in pairs], output)


def read_pairs(path: PathLike) -> List[Pair]:
    """The pairs of a pairs file, as hloc's parse_retrieval reads it (in file order)."""
    return [tuple(p) for p in _core.read_pairs(os.fspath(path))]


def read_matches(path: PathLike, name0: str, name1: str) -> Tuple[np.ndarray, np.ndarray]:
    """hloc's get_matches: (matches (K, 2) int64, scores (K,) float32) of a pair of a matches file, found in either
    order (or with hloc's old '_' separator); a reversed pair's columns are swapped."""
    return _core.read_matches(os.fspath(path), name0, name1)
