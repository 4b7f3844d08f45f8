"""Metrics and pair generation of bench/quality.py, in numpy only (tested by tests/quality/ without OpenCV or a model).

Conventions: keypoints are (N, 2) float arrays of [x, y] pixel positions, pixel centres at integers (the convention
of the product's 640x480 network frame and of cv2.warpPerspective); keypoint arrays are sorted by descending score
(as the product and the PyTorch reference return them), so "top k" is the first k rows. A homography H (3x3) maps
image-1 pixels to image-2 pixels: p2 ~ H @ [x1, y1, 1].

The protocol is the SuperPoint paper's (DeTone et al. 2018, section 5.2 and its evaluation code,
superpoint/evaluations/{detector,descriptor}_evaluation.py), each function says which part it follows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

# ---------------------------------------------------------------------------------------------------------------------
# The protocol's constants (one place; quality.py and docs/BENCHMARKS.md quote these).
# ---------------------------------------------------------------------------------------------------------------------
FRAME_W, FRAME_H = 640, 480  # the hf preset's network frame: the pairs are fed at this size (resize = identity)
REPEATABILITY_TOP_K = 300  # paper, 480x640 images: the 300 best points in the shared region
REPEATABILITY_EPS = 3.0  # px, L2 (paper: "correct if within epsilon = 3")
DESCRIPTOR_TOP_K = 1000  # paper, descriptor / homography evaluation: the 1000 best points of each image
MMA_THRESHOLDS = (1.0, 3.0, 5.0)  # px, L2 reprojection error of a mutual-NN match (D2-Net's MMA)
HOMOGRAPHY_THRESHOLDS = (1.0, 3.0, 5.0)  # px, mean corner error (paper: epsilon = 1, 3, 5)
MATCHING_SCORE_EPS = 3.0  # px, as the paper's compute_matching_score
RANSAC_REPROJ_PX = 3.0  # cv2.findHomography(..., cv2.RANSAC) default, as the paper's evaluation code
FIDELITY_TOP_K = 500  # issue 12: top-500 keypoints of a mode against fp32's on the same image
FIDELITY_EPS = 2.0  # px, L-inf
SAME_POSITION_EPS = 0.5  # px, L-inf: "the same pixel", for the descriptor cosine


# ---------------------------------------------------------------------------------------------------------------------
# Homographies
# ---------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HomographyRanges:
    """The random homography of SuperPoint's sample_homography (superpoint/models/homographies.py, allow_artifacts
    False), with the geometry in pixels (the original rotates in [0, 1]^2 coordinates, which shears a 4:3 frame).

    Image 2 is a quadrilateral of image 1 warped to the full frame. The quadrilateral starts as the centred rectangle
    of patch_ratio times the frame, then:
      * perspective: the left and right edges are shortened or lengthened symmetrically by dy and move sideways by
        dl and dr, each ~ N(0, perspective/2) truncated at 2 sigma, in fractions of the height / width (capped at the
        margin, as the original does);
      * scale about its centre by one of n_scales draws of N(1, scaling/2) truncated at 2 sigma, or 1, chosen
        uniformly among those that keep it inside the frame;
      * a uniform translation within the room left;
      * a rotation about its centre by one of n_angles angles evenly spaced in [-max_angle_deg, max_angle_deg], or 0,
        chosen uniformly among those that keep it inside.
    Image 2 never samples outside image 1 (no black borders); image 2 magnifies by about 1 / (patch_ratio * scale).
    """

    patch_ratio: float = 0.65
    perspective: float = 0.1
    scaling: float = 0.2
    max_angle_deg: float = 25.0
    n_scales: int = 5
    n_angles: int = 25

    def to_dict(self) -> dict:
        return asdict(self)


def truncated_normal(rng: np.random.Generator, mean: float, std: float, size=None) -> np.ndarray:
    """N(mean, std) truncated at 2 std (tf.truncated_normal, which sample_homography uses), by rejection."""
    n = 1 if size is None else int(np.prod(size))
    out = np.empty(0)
    while out.size < n:
        z = rng.standard_normal(2 * n + 8)
        out = np.concatenate([out, z[np.abs(z) <= 2.0]])
    v = mean + std * out[:n]
    return v[0] if size is None else v.reshape(size)


def homography_from_points(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The homography mapping src (N >= 4, 2) onto dst, least squares on the DLT equations with H[2, 2] = 1."""
    src = np.asarray(src, np.float64)
    dst = np.asarray(dst, np.float64)
    if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 2 or len(src) < 4:
        raise ValueError(f"homography_from_points needs two (N >= 4, 2) arrays, got {src.shape} and {dst.shape}")
    x, y = src[:, 0], src[:, 1]
    u, v = dst[:, 0], dst[:, 1]
    z, o = np.zeros_like(x), np.ones_like(x)
    a = np.concatenate([np.stack([x, y, o, z, z, z, -u * x, -u * y], 1),
                        np.stack([z, z, z, x, y, o, -v * x, -v * y], 1)])
    b = np.concatenate([u, v])
    h = np.linalg.lstsq(a, b, rcond=None)[0]
    return np.append(h, 1.0).reshape(3, 3)


def sample_homography(rng: np.random.Generator, width: int = FRAME_W, height: int = FRAME_H,
                      ranges: HomographyRanges = HomographyRanges()) -> tuple[np.ndarray, dict]:
    """A random H mapping image-1 pixels to image-2 pixels (see HomographyRanges), and what was drawn:
    {"scale", "angle_deg", "perspective": [dy, dl, dr], "translation": [tx, ty] px}."""
    r = ranges
    wh = np.array([width - 1, height - 1], np.float64)  # corners on the corner pixels' centres
    # Image 2's corners, and where they come from in image 1 (src), in the order TL, BL, BR, TR.
    dst = np.array([[0, 0], [0, 1], [1, 1], [1, 0]], np.float64) * wh
    m = (1 - r.patch_ratio) / 2
    src = (m + r.patch_ratio * np.array([[0, 0], [0, 1], [1, 1], [1, 0]], np.float64)) * wh
    ok_in = lambda q: np.all((q >= 0) & (q <= wh), axis=(-2, -1))  # noqa: E731
    dy = dl = dr = 0.0
    if r.perspective > 0:
        amp = min(r.perspective, m)
        dy, dl, dr = (float(truncated_normal(rng, 0.0, amp / 2)) for _ in range(3))
        src = src + np.array([[dl, dy], [dl, -dy], [dr, dy], [dr, -dy]]) * wh
    scale = 1.0
    if r.scaling > 0:
        scales = np.concatenate([[1.0], truncated_normal(rng, 1.0, r.scaling / 2, (r.n_scales,))])
        c = src.mean(0)
        cand = (src - c)[None] * scales[:, None, None] + c
        i = int(rng.choice(np.nonzero(ok_in(cand))[0]))  # index 0 (scale 1) is always valid
        src, scale = cand[i], float(scales[i])
    lo, hi = src.min(0), wh - src.max(0)
    t = rng.uniform(-lo, hi)
    src = src + t
    angle = 0.0
    if r.max_angle_deg > 0:
        ang = np.concatenate([[0.0], np.radians(np.linspace(-r.max_angle_deg, r.max_angle_deg, r.n_angles))])
        c = src.mean(0)
        rot = np.stack([np.stack([np.cos(ang), -np.sin(ang)], 1), np.stack([np.sin(ang), np.cos(ang)], 1)], 1)
        cand = np.einsum("kij,nj->kni", rot, src - c) + c
        i = int(rng.choice(np.nonzero(ok_in(cand))[0]))  # index 0 (no rotation) is always valid
        src, angle = cand[i], float(np.degrees(ang[i]))
    info = {"scale": scale, "angle_deg": angle, "perspective": [dy, dl, dr], "translation": [float(v) for v in t]}
    return homography_from_points(src, dst), info


def warp_points(points: np.ndarray, h: np.ndarray) -> np.ndarray:
    p = np.asarray(points, np.float64).reshape(-1, 2)
    q = np.concatenate([p, np.ones((len(p), 1))], 1) @ np.asarray(h, np.float64).T
    return q[:, :2] / q[:, 2:3]


def inside(points: np.ndarray, width: int, height: int) -> np.ndarray:
    """Which points lie in the image (SuperPoint's filter_keypoints: 0 <= p <= size - 1)."""
    p = np.asarray(points, np.float64).reshape(-1, 2)
    return (p[:, 0] >= 0) & (p[:, 0] <= width - 1) & (p[:, 1] >= 0) & (p[:, 1] <= height - 1)


# ---------------------------------------------------------------------------------------------------------------------
# Detector metrics
# ---------------------------------------------------------------------------------------------------------------------
def repeatability(kp1: np.ndarray, kp2: np.ndarray, h: np.ndarray, width: int = FRAME_W, height: int = FRAME_H,
                  k: int = REPEATABILITY_TOP_K, eps: float = REPEATABILITY_EPS) -> tuple[float, float]:
    """(repeatability, localisation error) as the paper's compute_repeatability.

    The points of each image that fall inside the other one under h (the shared region) are kept, then the k best of
    each; image-1 points are warped into image 2. A point is repeated when the nearest point of the other set is
    within eps (L2); repeatability = (repeated in 1 + repeated in 2) / (N1 + N2); localisation error = the mean of
    those nearest distances over the repeated points of both sets (nan when none is repeated). Repeatability is nan
    when the shared region holds no point of either image.
    """
    w1 = warp_points(kp1, h)
    w1 = w1[inside(w1, width, height)][:k]
    p2 = np.asarray(kp2, np.float64).reshape(-1, 2)
    p2 = p2[inside(warp_points(p2, np.linalg.inv(h)), width, height)][:k]
    n1, n2 = len(w1), len(p2)
    if n1 + n2 == 0:
        return math.nan, math.nan
    if n1 == 0 or n2 == 0:
        return 0.0, math.nan
    d = np.linalg.norm(w1[:, None, :] - p2[None, :, :], axis=2)
    m1, m2 = d.min(1), d.min(0)
    c1, c2 = m1 <= eps, m2 <= eps
    count = int(c1.sum() + c2.sum())
    loc = float((m1[c1].sum() + m2[c2].sum()) / count) if count else math.nan
    return count / (n1 + n2), loc


# ---------------------------------------------------------------------------------------------------------------------
# Descriptor metrics
# ---------------------------------------------------------------------------------------------------------------------
def nearest_neighbours(d1: np.ndarray, d2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of each row's nearest row of the other set, by L2 on unit descriptors (= the largest dot product)."""
    sim = np.asarray(d1, np.float32) @ np.asarray(d2, np.float32).T
    return np.argmax(sim, axis=1), np.argmax(sim, axis=0)


def mutual_nn(d1: np.ndarray, d2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mutual nearest neighbours: (indices in set 1, indices in set 2)."""
    if len(d1) == 0 or len(d2) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    nn12, nn21 = nearest_neighbours(d1, d2)
    i1 = np.nonzero(nn21[nn12] == np.arange(len(d1)))[0]
    return i1, nn12[i1]


def match_errors(kp1: np.ndarray, kp2: np.ndarray, i1: np.ndarray, i2: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Reprojection error (L2, px) of each match: |h(kp1[i1]) - kp2[i2]|."""
    return np.linalg.norm(warp_points(np.asarray(kp1)[i1], h) - np.asarray(kp2, np.float64)[i2].reshape(-1, 2),
                          axis=1)


def mma(errors: np.ndarray, thresholds=MMA_THRESHOLDS) -> list[float]:
    """Mean matching accuracy: the fraction of matches within each threshold (0 when there is no match)."""
    e = np.asarray(errors)
    return [float(np.mean(e <= t)) if len(e) else 0.0 for t in thresholds]


def matching_score(kp1: np.ndarray, d1: np.ndarray, kp2: np.ndarray, d2: np.ndarray, h: np.ndarray,
                   width: int = FRAME_W, height: int = FRAME_H, eps: float = MATCHING_SCORE_EPS) -> float:
    """The paper's compute_matching_score: in each direction every point is matched to its nearest descriptor of the
    other image (no mutual check); score = correct matches (reprojection error < eps) of points whose true position
    lies in the other image / number of such points; the mean of the two directions."""
    if len(kp1) == 0 or len(kp2) == 0:
        return 0.0
    nn12, nn21 = nearest_neighbours(d1, d2)
    scores = []
    for ka, kb, nn, hab in ((kp1, kp2, nn12, h), (kp2, kp1, nn21, np.linalg.inv(h))):
        true = warp_points(ka, hab)
        vis = inside(true, width, height)
        correct = np.linalg.norm(true - np.asarray(kb, np.float64)[nn], axis=1) < eps
        scores.append(float(np.sum(correct & vis) / max(int(vis.sum()), 1)))
    return (scores[0] + scores[1]) / 2


def corner_error(h_true: np.ndarray, h_est: np.ndarray | None, width: int = FRAME_W,
                 height: int = FRAME_H) -> float:
    """Mean L2 distance of the image's 4 corners mapped by h_true and by h_est (inf when no estimate)."""
    if h_est is None:
        return math.inf
    c = np.array([[0, 0], [width - 1, 0], [0, height - 1], [width - 1, height - 1]], np.float64)
    return float(np.mean(np.linalg.norm(warp_points(c, h_true) - warp_points(c, h_est), axis=1)))


def homography_accuracy(errors, thresholds=HOMOGRAPHY_THRESHOLDS) -> list[float]:
    e = np.asarray(errors, np.float64)
    return [float(np.mean(e <= t)) if len(e) else math.nan for t in thresholds]


# ---------------------------------------------------------------------------------------------------------------------
# Agreement of a precision with fp32 on the same image
# ---------------------------------------------------------------------------------------------------------------------
def _linf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64).reshape(-1, 2)
    b = np.asarray(b, np.float64).reshape(-1, 2)
    return np.abs(a[:, None, :] - b[None, :, :]).max(2)


def _mutual_within(a: np.ndarray, b: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """One-to-one pairs (ia, ib): mutual nearest points (L-inf) at most eps apart."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    d = _linf(a, b)
    nab, nba = d.argmin(1), d.argmin(0)
    ia = np.nonzero((nba[nab] == np.arange(len(a))) & (d[np.arange(len(a)), nab] <= eps))[0]
    return ia, nab[ia]


def keypoint_f1(kp: np.ndarray, kp_ref: np.ndarray, eps: float = FIDELITY_EPS) -> float:
    """F1 of kp against kp_ref (both already cut to their top k): a true positive is a one-to-one pair of mutual
    nearest points at most eps apart (L-inf); precision = TP / |kp|, recall = TP / |kp_ref|. Two empty sets agree
    (1.0); one empty set against a non-empty one scores 0."""
    if len(kp) == 0 and len(kp_ref) == 0:
        return 1.0
    tp = len(_mutual_within(kp, kp_ref, eps)[0])
    return 2.0 * tp / (len(kp) + len(kp_ref))  # = 2PR / (P + R)


def descriptor_cosine(kp: np.ndarray, desc: np.ndarray, kp_ref: np.ndarray, desc_ref: np.ndarray,
                      eps: float = SAME_POSITION_EPS) -> np.ndarray:
    """Cosines between the descriptors of keypoints found at the same pixel (L-inf <= eps) in both sets (a point that
    moved would measure the move, not the arithmetic)."""
    ia, ib = _mutual_within(kp, kp_ref, eps)
    a = np.asarray(desc, np.float64)[ia]
    b = np.asarray(desc_ref, np.float64)[ib]
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.sum(a * b, axis=1) / np.where(den > 0, den, 1.0)


# ---------------------------------------------------------------------------------------------------------------------
# One pair, all metrics (the homography estimate is passed in: quality.py uses cv2.findHomography with RANSAC)
# ---------------------------------------------------------------------------------------------------------------------
def pair_metrics(f1: dict, f2: dict, h: np.ndarray, estimate_homography, width: int = FRAME_W,
                 height: int = FRAME_H) -> dict:
    """f1, f2: {"keypoints": (N, 2) sorted by score, "descriptors": (N, 256)}; h maps image 1 to image 2;
    estimate_homography(points1, points2) -> 3x3 or None, or a list of them (one per RANSAC seed: "corner_errors"
    then holds one error per estimate, "corner_error" the first). Descriptor metrics use the DESCRIPTOR_TOP_K best
    points."""
    rep, loc = repeatability(f1["keypoints"], f2["keypoints"], h, width, height)
    k1, d1 = f1["keypoints"][:DESCRIPTOR_TOP_K], f1["descriptors"][:DESCRIPTOR_TOP_K]
    k2, d2 = f2["keypoints"][:DESCRIPTOR_TOP_K], f2["descriptors"][:DESCRIPTOR_TOP_K]
    i1, i2 = mutual_nn(d1, d2)
    err = match_errors(k1, k2, i1, i2, h)
    h_est = estimate_homography(np.asarray(k1, np.float64)[i1], np.asarray(k2, np.float64)[i2]) if len(i1) >= 4 \
        else None
    errors = [corner_error(h, e, width, height) for e in h_est] if isinstance(h_est, list) else \
        [corner_error(h, h_est, width, height)]
    out = {"repeatability": rep, "localization_error": loc, "matches": int(len(i1)),
           "matching_score": matching_score(k1, d1, k2, d2, h, width, height), "corner_error": errors[0]}
    if isinstance(h_est, list):
        out["corner_errors"] = errors
    for t, v in zip(MMA_THRESHOLDS, mma(err)):
        out[f"mma@{t:g}"] = v
    return out


def summarize_pairs(rows: list[dict]) -> dict:
    """Means over pairs (nan entries skipped: a pair without a shared point has no repeatability) and the homography
    accuracy at each threshold (a failed estimate counts as wrong), over every (pair, RANSAC seed) when the rows have
    "corner_errors" (then also "ransac_seeds")."""
    out = {}
    for key in ("repeatability", "localization_error", "matching_score", *[f"mma@{t:g}" for t in MMA_THRESHOLDS]):
        v = np.array([r[key] for r in rows], np.float64)
        out[key] = float(np.nanmean(v)) if np.any(~np.isnan(v)) else math.nan
    errors = [e for r in rows for e in r.get("corner_errors", [r["corner_error"]])]
    for t, v in zip(HOMOGRAPHY_THRESHOLDS, homography_accuracy(errors)):
        out[f"h_acc@{t:g}"] = v
    if rows and "corner_errors" in rows[0]:
        out["ransac_seeds"] = len(rows[0]["corner_errors"])
    out["matches"] = float(np.mean([r["matches"] for r in rows])) if rows else math.nan
    out["pairs"] = len(rows)
    return out


def paired_difference(rows: list[dict], base: list[dict], metric: str) -> tuple[float, float]:
    """(mean, standard error) over pairs of rows' metric minus base's on the same pair (both lists in pair order):
    the paired comparison of two models on one protocol. Per pair, h_acc@t is the share of its RANSAC draws within
    t px (a failed estimate is wrong), so the mean is summarize_pairs' difference; other metrics skip pairs where
    either side is nan. The standard error (sample standard deviation / sqrt(pairs)) is how far the mean difference
    moves with the draw of pairs: a difference within about two of it is not resolved at this number of pairs."""
    if len(rows) != len(base):
        raise ValueError(f"paired_difference: {len(rows)} pairs against {len(base)}")

    def value(r):
        if metric.startswith("h_acc@"):
            t = float(metric.partition("@")[2])
            e = np.asarray(r.get("corner_errors", [r["corner_error"]]), np.float64)
            return float(np.mean(e <= t))
        return float(r[metric])

    d = np.array([value(a) - value(b) for a, b in zip(rows, base)], np.float64)
    d = d[~np.isnan(d)]
    if len(d) == 0:
        return math.nan, math.nan
    se = float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan
    return float(np.mean(d)), se
