// Post-processing of the network outputs (SPEC §2 steps 6-12, HF modeling_superpoint.py).
//
// Every fast kernel here has a plain scalar reference (the *_reference functions) with the same results; tests
// compare them on random and awkward shapes.
//
// Layouts: logits Hc x Wc x 65 and descriptors Hc x Wc x D (channels-last, as backend.hpp); heat maps H x W with
// H = 8 Hc, W = 8 Wc, row-major.
// Thread-safety: functions are re-entrant; scratch objects are per thread.
#pragma once

#include <cstdint>
#include <vector>

namespace superpoint_rt::post {

/// Step 6: softmax over the 65 channels of each cell (max-subtracted), dustbin dropped, depth-to-space:
/// heat[8i + r][8j + s] = p[8r + s] of cell (i, j).
void scores_from_logits(const float* logits, int hc, int wc, float* heat);
void scores_from_logits_reference(const float* logits, int hc, int wc, float* heat);

struct NmsScratch {
  std::vector<float> work;  // the kernels' work space (nms_work_floats)
  std::vector<float> map;   // nms_select_keypoints' NMS map when it needs one
};

/// Step 7: HF simple_nms with radius r (window 2r+1, two suppression rounds, -inf padding); r = 0 copies.
/// Separable running max: time independent of r.
void simple_nms(const float* heat, int h, int w, int radius, float* out, NmsScratch& scratch);
/// simple_nms as keypoint selection sees it: wherever simple_nms's output is > threshold, out has the same value, and
/// everywhere else out <= threshold (a score or 0), so select_keypoints(threshold) picks the same keypoints. Faster
/// on real score maps: after the first dense round only the pixels above the threshold that are neither maxima nor
/// suppressed are re-examined (nms_separable.inl). A threshold < 0 or NaN gives simple_nms.
void simple_nms_above(const float* heat, int h, int w, int radius, float threshold, float* out, NmsScratch& scratch);
/// Literal (2r+1)^2 window scan; the reference for tests.
void simple_nms_reference(const float* heat, int h, int w, int radius, float* out);

struct Keypoint {
  int x = 0, y = 0;  // network-frame integer position
  float score = 0;
};

/// Steps 7-10 in one: select_keypoints(simple_nms_above(heat, radius, threshold), threshold, border, max_keypoints)
/// with the same keypoints in the same order, read straight from the NMS mask bits instead of a written and
/// re-scanned 480x640 map (two fewer passes over cold memory after the network).
void nms_select_keypoints(const float* heat, int h, int w, int radius, float threshold, int border, int max_keypoints,
                          std::vector<Keypoint>& out, NmsScratch& scratch);

/// Steps 8-10: score > threshold (strict), border removal (x < b, x >= w - b, y < b, y >= h - b), then the
/// max_keypoints best (-1 = all), sorted by descending score, equal scores in raster order (y, then x).
void select_keypoints(const float* nms, int h, int w, float threshold, int border, int max_keypoints,
                      std::vector<Keypoint>& out);
void select_keypoints_reference(const float* nms, int h, int w, float threshold, int border, int max_keypoints,
                                std::vector<Keypoint>& out);

/// Step 11a: F.normalize of each cell's D-vector in place: v / max(||v||_2, 1e-12).
void normalize_cells(float* desc, int cells, int dim);
/// The plain scalar form of normalize_cells (same bits: every level sums the squares in one fixed order).
void normalize_cells_reference(float* desc, int cells, int dim);

/// Step 11a restricted to the cells step 11b reads: normalize_cells of only the (up to 4) corner cells that
/// sample_descriptors takes for each of the n keypoints (the same taps, so the same float formula decides them).
/// sample_descriptors on the result gives the same bits as after normalize_cells of all hc * wc cells, which it
/// replaces when only the sampled descriptors are returned; the other cells are left as they were (when 4 * n >=
/// hc * wc every cell is normalised: nearly all would be touched anyway). `mark` is
/// per-call scratch (resized to hc * wc). Same size checks as sample_descriptors.
void normalize_sampled_cells(float* desc, int hc, int wc, int dim, const Keypoint* kps, int n,
                             std::vector<std::uint8_t>& mark);

/// Step 11b: HF _sample_descriptors at each keypoint from the L2-normalised dense map (hc x wc x dim):
/// grid_sample bilinear, align_corners=True, zeros padding, fma order of docs/ALGORITHM.md §4, then L2
/// re-normalisation. out: n x dim.
void sample_descriptors(const float* desc, int hc, int wc, int dim, const Keypoint* kps, int n, float* out);
void sample_descriptors_reference(const float* desc, int hc, int wc, int dim, const Keypoint* kps, int n, float* out);

/// Name of the SIMD level the fast kernels use on this CPU ("avx512", "avx2", "scalar").
const char* post_kernel_name() noexcept;

}  // namespace superpoint_rt::post
