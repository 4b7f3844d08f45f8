"""bench/quality_lib.py (the metrics of bench/quality.py) on synthetic keypoints with known answers.

numpy only: no model, no OpenCV (the homography estimate is the library's exact DLT here; quality.py passes
cv2.findHomography with RANSAC instead). Runs in seconds.
"""

from __future__ import annotations

import math
import os
import pathlib
import sys

import numpy as np
import pytest

SOURCE = pathlib.Path(os.environ.get("SUPERPOINT_RT_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE / "bench"))
import quality  # noqa: E402
import quality_lib as Q  # noqa: E402

W, H = Q.FRAME_W, Q.FRAME_H


def grid_points(step=20):
    """Keypoints 20 px apart over the frame (713 points, more than every top k but the descriptors' 1000)."""
    xs, ys = np.meshgrid(np.arange(step, W - 10, step), np.arange(step, H - 10, step))
    return np.stack([xs.ravel(), ys.ravel()], 1).astype(np.float64)


def unit_descriptors(n, seed=0):
    d = np.random.default_rng(seed).standard_normal((n, 256)).astype(np.float32)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def translation(tx, ty):
    return np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]], np.float64)


def exact_estimate(p1, p2):
    return Q.homography_from_points(p1, p2)


def features(kp, desc):
    return {"keypoints": kp, "descriptors": desc}


def shifted_pair(tx, ty, new_points=0):
    """Image 2 = image 1 shifted by (tx, ty): its keypoints are image 1's, moved, minus those that left the frame;
    new_points > 0 puts that many new points (seen by image 2 only, in the strip the shift uncovered) first."""
    kp1 = grid_points()
    d1 = unit_descriptors(len(kp1))
    kp2 = kp1 + [tx, ty]
    keep = Q.inside(kp2, W, H)
    kp2, d2 = kp2[keep], d1[keep]
    if new_points:
        assert tx > 10
        ys = np.linspace(10, H - 10, new_points)
        kp2 = np.concatenate([np.stack([np.full(new_points, tx / 2), ys], 1), kp2])
        d2 = np.concatenate([unit_descriptors(new_points, seed=9), d2])
    return features(kp1, d1), features(kp2, d2)


# ---------------------------------------------------------------------------------------------------------------------
# Whole pairs with known answers
# ---------------------------------------------------------------------------------------------------------------------
def test_identity_warp_is_perfect():
    f = features(grid_points(), unit_descriptors(len(grid_points())))
    m = Q.pair_metrics(f, f, np.eye(3), exact_estimate)
    assert m["repeatability"] == 1.0
    assert m["localization_error"] == 0.0
    assert m["matches"] == len(f["keypoints"])
    assert [m["mma@1"], m["mma@3"], m["mma@5"]] == [1.0, 1.0, 1.0]
    assert m["matching_score"] == 1.0
    assert m["corner_error"] < 1e-6


def test_known_integer_shift_with_the_true_homography_is_perfect():
    f1, f2 = shifted_pair(37, -12)
    h = translation(37, -12)
    m = Q.pair_metrics(f1, f2, h, exact_estimate)
    assert m["repeatability"] == 1.0  # the points that left the frame are outside the shared region: not counted
    assert m["localization_error"] == 0.0
    assert [m["mma@1"], m["mma@3"], m["mma@5"]] == [1.0, 1.0, 1.0]
    assert m["matching_score"] == 1.0
    assert m["corner_error"] < 1e-6


def test_points_outside_the_shared_region_do_not_count():
    # 50 strong points of image 2 in the strip that image 1 never saw: outside the shared region, so repeatability
    # and matching score (which divides by the points whose true position is in the other image) stay 1.
    f1, f2 = shifted_pair(37, -12, new_points=50)
    m = Q.pair_metrics(f1, f2, translation(37, -12), exact_estimate)
    assert m["repeatability"] == 1.0
    assert m["matching_score"] == 1.0
    # Counted as if they were in the shared region, they are 50 misses.
    rep, _ = Q.repeatability(f1["keypoints"], f2["keypoints"], translation(37, -12), width=W + 37)
    assert rep < 1.0


def test_a_shift_of_3_4_px_the_truth_does_not_know_is_a_5_px_error():
    # The detector moved every point by (3, 4) (5 px, L2) but the ground truth says identity.
    f1, f2 = shifted_pair(3, 4)
    m = Q.pair_metrics(f1, f2, np.eye(3), exact_estimate)
    assert m["repeatability"] == 0.0  # 5 px > 3 px: no point is repeated
    assert math.isnan(m["localization_error"])
    assert [m["mma@1"], m["mma@3"], m["mma@5"]] == [0.0, 0.0, 1.0]
    assert m["matching_score"] == 0.0  # 5 px >= 3 px
    assert m["corner_error"] == pytest.approx(5.0, abs=1e-6)


def test_one_pixel_shift_gives_localisation_error_one():
    f1, f2 = shifted_pair(1, 0)
    rep, loc = Q.repeatability(f1["keypoints"], f2["keypoints"], np.eye(3))
    assert rep == 1.0 and loc == pytest.approx(1.0)


def test_shuffled_descriptors_match_nothing():
    kp = grid_points()
    d = unit_descriptors(len(kp))
    order = np.random.default_rng(1).permutation(len(kp))
    perm = np.empty_like(order)
    perm[order] = np.roll(order, 1)  # a derangement: no point keeps its own descriptor
    m = Q.pair_metrics(features(kp, d), features(kp, d[perm]), np.eye(3), exact_estimate)
    assert m["repeatability"] == 1.0  # the detector is perfect; only the descriptors are wrong
    assert m["matches"] > 0
    assert [m["mma@1"], m["mma@3"], m["mma@5"]] == [0.0, 0.0, 0.0]  # points are 20 px apart
    assert m["matching_score"] == 0.0
    assert m["corner_error"] > 5.0


# ---------------------------------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------------------------------
def test_repeatability_counts_only_the_top_k_of_the_shared_region():
    kp = grid_points()
    # Image 2: the first 100 points of a different set (far from every image-1 point), then image 1's points.
    junk = kp[:100] + [10, 10]
    rep, _ = Q.repeatability(kp, np.concatenate([junk, kp]), np.eye(3), k=100)
    assert rep == 0.0  # image 2's top 100 are all junk; image 1's top 100 have no partner among them
    rep, _ = Q.repeatability(kp, np.concatenate([kp, junk]), np.eye(3), k=100)
    assert rep == 1.0
    # Half-and-half: 50 good then 50 junk in image 2's top 100 (the junk is 14 px from the grid, beyond 3 px).
    mixed = np.concatenate([kp[:50], junk[:50], kp[50:]])
    rep, _ = Q.repeatability(kp, mixed, np.eye(3), k=100)
    assert rep == pytest.approx((50 + 50) / 200)


def test_repeatability_with_no_shared_point_is_nan():
    rep, loc = Q.repeatability(np.zeros((0, 2)), np.zeros((0, 2)), np.eye(3))
    assert math.isnan(rep) and math.isnan(loc)


def test_mutual_nn_requires_both_directions():
    d1 = np.array([[1, 0], [0.8, 0.6]], np.float32)
    d2 = np.array([[1, 0]], np.float32)
    i1, i2 = Q.mutual_nn(d1, d2)
    assert i1.tolist() == [0] and i2.tolist() == [0]


def test_corner_error_of_a_known_offset():
    assert Q.corner_error(translation(3, 4), np.eye(3)) == pytest.approx(5.0)
    assert Q.corner_error(np.eye(3), None) == math.inf


def test_homography_accuracy_counts_failed_estimates_as_wrong():
    rows = [{"repeatability": 1.0, "localization_error": 0.5, "matching_score": 0.5, "mma@1": 1.0, "mma@3": 1.0,
             "mma@5": 1.0, "matches": 10, "corner_error": e} for e in (0.5, 2.0, 4.0, math.inf)]
    s = Q.summarize_pairs(rows)
    assert [s["h_acc@1"], s["h_acc@3"], s["h_acc@5"]] == [0.25, 0.5, 0.75]
    rows[0]["repeatability"] = math.nan  # a pair without shared points is left out of the mean
    assert Q.summarize_pairs(rows)["repeatability"] == 1.0


def test_homography_accuracy_over_several_ransac_seeds():
    # One estimate per seed: every (pair, seed) counts once; a failed estimate among them counts as wrong.
    f = features(grid_points(), unit_descriptors(len(grid_points())))
    m = Q.pair_metrics(f, f, np.eye(3), lambda p1, p2: [exact_estimate(p1, p2), translation(3, 4), None])
    assert m["corner_error"] < 1e-6
    assert m["corner_errors"][1] == pytest.approx(5.0) and m["corner_errors"][2] == math.inf
    base = {"repeatability": 1.0, "localization_error": 0.5, "matching_score": 0.5, "mma@1": 1.0, "mma@3": 1.0,
            "mma@5": 1.0, "matches": 10}
    rows = [{**base, "corner_error": e[0], "corner_errors": e} for e in ([0.5, 2.0], [4.0, math.inf])]
    s = Q.summarize_pairs(rows)
    assert [s["h_acc@1"], s["h_acc@3"], s["h_acc@5"]] == [0.25, 0.5, 0.75]
    assert s["ransac_seeds"] == 2


def test_paired_difference_of_two_models_on_the_same_pairs():
    base = {"repeatability": 0.5, "localization_error": 0.5, "matching_score": 0.5, "mma@1": 1.0, "mma@3": 1.0,
            "mma@5": 1.0, "matches": 10}
    a = [{**base, "corner_error": e[0], "corner_errors": e} for e in ([0.5, 4.0], [4.0, math.inf], [0.5, 0.5])]
    b = [{**base, "corner_error": e[0], "corner_errors": e} for e in ([0.5, 0.5], [4.0, 4.0], [4.0, 0.5])]
    # h_acc@3 per pair: a 0.5, 0, 1; b 1, 0, 0.5 -> differences -0.5, 0, 0.5: mean 0, sample std 0.5.
    mean, se = Q.paired_difference(a, b, "h_acc@3")
    assert mean == pytest.approx(0.0) and se == pytest.approx(0.5 / math.sqrt(3))
    # The mean is summarize_pairs' difference; a failed estimate (inf) is wrong at every threshold.
    mean5, _ = Q.paired_difference(a, b, "h_acc@5")
    assert mean5 == pytest.approx(Q.summarize_pairs(a)["h_acc@5"] - Q.summarize_pairs(b)["h_acc@5"])
    assert mean5 == pytest.approx(-1 / 6)
    # Other metrics per pair; a nan on either side drops that pair.
    a[0]["repeatability"] = math.nan
    b[1]["repeatability"] = 0.25
    mean_r, se_r = Q.paired_difference(a, b, "repeatability")  # differences 0.25, 0
    assert mean_r == pytest.approx(0.125) and se_r == pytest.approx(0.125)
    b[1]["repeatability"] = 0.5
    a[2]["repeatability"] = 0.75
    assert Q.paired_difference(a, b, "repeatability")[0] == pytest.approx(0.125)
    with pytest.raises(ValueError):
        Q.paired_difference(a, b[:2], "h_acc@3")


def test_f1_at_2px_linf_on_hand_made_sets():
    ref = np.array([[100, 100], [200, 100], [300, 100], [400, 100]], np.float64)
    # (2, 2) off: 2.83 px in L2 but 2 in L-inf -> a match; (2.5, 0) off -> not; one point missing.
    got = np.array([[100, 100], [202, 102], [302.5, 100]], np.float64)
    tp = 2
    assert Q.keypoint_f1(got, ref) == pytest.approx(2 * tp / (3 + 4))
    assert Q.keypoint_f1(ref, ref) == 1.0
    assert Q.keypoint_f1(np.zeros((0, 2)), np.zeros((0, 2))) == 1.0
    assert Q.keypoint_f1(np.zeros((0, 2)), ref) == 0.0
    # One-to-one: two points next to one reference point count once.
    assert Q.keypoint_f1(np.array([[100, 100], [101, 100]], np.float64), ref[:1]) == pytest.approx(2 * 1 / 3)


def test_descriptor_cosine_at_the_same_pixel_only():
    kp = np.array([[10, 10], [50, 10], [90, 10]], np.float64)
    d = np.eye(3, 256, dtype=np.float32)
    other = d.copy()
    other[1] = 0
    other[1, 5] = 1  # orthogonal to d[1]
    kp_moved = kp.copy()
    kp_moved[2] += [1, 0]  # moved one pixel: not compared
    c = Q.descriptor_cosine(kp_moved, other, kp, d)
    assert c.tolist() == pytest.approx([1.0, 0.0])


def test_sampled_homographies_are_seeded_and_stay_inside_image_1():
    a, info = Q.sample_homography(np.random.default_rng([0, 7]))
    b, _ = Q.sample_homography(np.random.default_rng([0, 7]))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, Q.sample_homography(np.random.default_rng([0, 8]))[0])
    r = Q.HomographyRanges()
    for i in range(50):
        h, info = Q.sample_homography(np.random.default_rng([1, i]))
        corners = np.array([[0, 0], [W - 1, 0], [0, H - 1], [W - 1, H - 1]], np.float64)
        src = Q.warp_points(corners, np.linalg.inv(h))  # where image 2's corners come from
        assert Q.inside(src, W, H).all()  # no black border in image 2
        assert abs(info["angle_deg"]) <= r.max_angle_deg + 1e-9
        assert 1 - r.scaling <= info["scale"] <= 1 + r.scaling


def test_homography_from_points_recovers_a_projective_map():
    h = np.array([[0.9, 0.1, 20], [-0.05, 1.1, -10], [1e-4, -2e-4, 1]])
    p = np.random.default_rng(3).uniform(0, 600, (12, 2))
    assert np.allclose(Q.homography_from_points(p, Q.warp_points(p, h)), h, atol=1e-8)


# ---------------------------------------------------------------------------------------------------------------------
# The harness's comparison with fp32 and its targets (quality.py imports no OpenCV at module level)
# ---------------------------------------------------------------------------------------------------------------------
def test_fidelity_and_targets():
    kp = grid_points()[:600]
    d = unit_descriptors(len(kp))
    fp32 = {("frame", "a"): features(kp, d)}
    moved = kp.copy()
    moved[:25] += [3, 0]  # 25 of the top 500 moved beyond 2 px: F1 = 475 / 500
    fid = quality.fidelity({("frame", "a"): features(moved, d)}, fp32)
    assert fid["f1@2_mean"] == pytest.approx(0.95) and fid["f1@2_min"] == pytest.approx(0.95)
    assert fid["cos_mean"] == pytest.approx(1.0)

    summary = {m: 0.5 for m in quality.POINT_METRICS}
    base = {"status": "ok", "summary": summary, "fidelity": {"f1@2_mean": 0.996, "f1@2_min": 0.98}}
    assert quality.check_targets("bf16", base, {"summary": summary})["pass"]
    worse = dict(base, summary=dict(summary, **{"h_acc@3": 0.5 - 0.006}))  # 0.6 point below fp32
    assert not quality.check_targets("bf16", worse, {"summary": summary})["pass"]
    assert quality.check_targets("int8", worse, {"summary": summary})["pass"]  # int8 allows 1 point
    low_min = dict(base, fidelity={"f1@2_mean": 0.996, "f1@2_min": 0.96})
    assert not quality.check_targets("bf16", low_min, {"summary": summary})["pass"]
