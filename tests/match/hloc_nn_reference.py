"""A reference of hloc's nearest-neighbour matcher, written for these tests from hloc's code (not copied): hloc
commit c13273b (2025-12), hloc/matchers/nearest_neighbor.py (NearestNeighbor._forward, find_nn, mutual_check) and
hloc/match_features.py (FeaturePairsDataset: datasets read with .float(); writer_fn: matches0 .short(),
matching_scores0 .half()).

Each torch operation is done in numpy with the same float32 rounding:
  sim = einsum("bdn,bdm->bnm", d0, d1)                  -> given by the caller (its summation order is the GEMM's)
  sim_nn, ind_nn = sim.topk(2 if ratio else 1)          -> argmax (ties: the lowest index; torch leaves it open) and
                                                           the second largest value of the multiset
  dist_nn = 2 * (1 - sim_nn)                            -> float32
  mask &= dist_nn[0] <= ratio**2 * dist_nn[1]          -> the Python float's square rounded to float32 (torch casts a
  mask &= dist_nn[0] <= distance**2                        Python scalar to the tensor's dtype), product in float32
  matches = where(mask, ind, -1); scores = where(mask, (sim + 1) / 2, 0)
  mutual_check: keep m0[i] where m1[m0[i]] == i (scores untouched)
  ratio off when either side has one descriptor; `if ratio:` / `if distance:` (0 and None are off).
hloc returns matches0 of shape (D,) when a side has no descriptor (torch.full(descriptors0.shape[:2], -1)); here, as in
superpoint-rt, n0 entries: that is the one place where the shape differs.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

F32 = np.float32


def similarity(d0: np.ndarray, d1: np.ndarray) -> np.ndarray:
    """(N0, N1) float32 similarity of (N0, D) and (N1, D) descriptors, each dot product computed in float64 and rounded
    once: the exactly rounded value, which any float32 GEMM approaches within its summation error."""
    return (d0.astype(np.float64) @ d1.astype(np.float64).T).astype(F32)


def find_nn(sim: np.ndarray, ratio: Optional[float], distance: Optional[float]) -> Tuple[np.ndarray, np.ndarray]:
    best_i = np.argmax(sim, axis=1)
    best = sim[np.arange(sim.shape[0]), best_i]
    mask = np.ones(sim.shape[0], dtype=bool)
    d1 = F32(2) * (F32(1) - best)
    if ratio:
        second = np.partition(sim, -2, axis=1)[:, -2]
        d2 = F32(2) * (F32(1) - second)
        mask &= d1 <= F32(ratio ** 2) * d2
    if distance:
        mask &= d1 <= F32(distance ** 2)
    matches = np.where(mask, best_i, -1)
    scores = np.where(mask, (best + F32(1)) / F32(2), F32(0)).astype(F32)
    return matches, scores


def mutual_check(m0: np.ndarray, m1: np.ndarray) -> np.ndarray:
    loop = m1[np.where(m0 > -1, m0, 0)]
    ok = (m0 > -1) & (np.arange(len(m0)) == loop)
    return np.where(ok, m0, -1)


def nearest_neighbor(sim: np.ndarray, ratio: Optional[float] = None, distance: Optional[float] = None,
                     mutual: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """(matches0 (N0,) int64, matching_scores0 (N0,) float32) from a (N0, N1) float32 similarity matrix."""
    n0, n1 = sim.shape
    if n0 == 0 or n1 == 0:
        return np.full(n0, -1, np.int64), np.zeros(n0, F32)
    if n0 == 1 or n1 == 1:
        ratio = None
    m0, s0 = find_nn(sim, ratio, distance)
    if mutual:
        m1, _ = find_nn(sim.T, ratio, distance)
        m0 = mutual_check(m0, m1)
    return m0.astype(np.int64), s0


CONFS = {"NN-mutual": dict(ratio=None, distance=None, mutual=True),
         "NN-ratio": dict(ratio=0.8, distance=None, mutual=True),
         "NN-superpoint": dict(ratio=None, distance=0.7, mutual=True)}


def _top2(s: np.ndarray, axis: int) -> Tuple[np.ndarray, np.ndarray]:
    p = -np.partition(-s, 1, axis=axis)
    return (p[:, 0], p[:, 1]) if axis == 1 else (p[0], p[1])


def near_tie_rows(sim: np.ndarray, ratio: Optional[float], distance: Optional[float], mutual: bool,
                  eps: float) -> np.ndarray:
    """Rows whose decision can change when every similarity moves by at most eps: the best and second best of the row
    within 2 eps, a row's ratio or distance test within its rounding of the threshold, or (mutual) the same for the
    column of the row's best."""
    n0, n1 = sim.shape
    rows = np.zeros(n0, dtype=bool)
    if n0 == 0 or n1 == 0:
        return rows
    s = sim.astype(np.float64)
    use_ratio = bool(ratio) and n0 > 1 and n1 > 1

    def near(best: np.ndarray, second: Optional[np.ndarray]) -> np.ndarray:
        out = np.zeros(best.shape, dtype=bool)
        if second is not None:
            out |= best - second <= 2 * eps
        d1 = 2 * (1 - best)
        if distance:
            out |= np.abs(d1 - distance ** 2) <= 4 * eps
        if use_ratio and second is not None:
            out |= np.abs(d1 - ratio ** 2 * 2 * (1 - second)) <= 4 * eps
        return out

    best_i = np.argmax(s, axis=1)
    rows |= near(*(_top2(s, 1) if n1 > 1 else (s[:, 0], None)))
    if mutual:
        cols = near(*(_top2(s, 0) if n0 > 1 else (s[0], None)))
        rows |= cols[best_i]
    return rows
