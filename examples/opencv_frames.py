#!/usr/bin/env python3
"""SuperPoint on OpenCV frames: BGR arrays with bgr=True, keypoints as cv2.KeyPoint, drawn with cv2.drawKeypoints.

    python examples/opencv_frames.py [VIDEO] [--frames N] [--out-dir DIR]

Reads up to N frames of VIDEO (any file cv2.VideoCapture opens), or makes frames by panning over a demo photograph
(../shared/images beside the repository, or a synthetic picture). Runs them through model.iter (a generator: frames
are decoded while the model works), writes DIR/frame_XXX.png with the keypoints drawn. Needs opencv-python; without
it, it says so and exits with status 0.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import demo_image, weights  # noqa: E402

from superpoint_rt import SuperPoint, read_image, synthetic_image  # noqa: E402


def frames_from_video(cv2, path: str, n: int):
    cap = cv2.VideoCapture(path)
    if not cap.isOpened():
        raise SystemExit(f"cannot open video {path}")
    try:
        for _ in range(n):
            ok, frame = cap.read()  # BGR, uint8 (H, W, 3)
            if not ok:
                return
            yield frame
    finally:
        cap.release()


def panning_frames(n: int):
    src = demo_image("berlin01_1600x900.jpg")
    rgb = read_image(src) if src else synthetic_image(1600, 900)
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])  # OpenCV order, as cv2.imread gives
    for k in range(n):
        x = 40 * k
        yield bgr[100:100 + 720, x:x + 960]  # a strided view: no copy needed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("video", nargs="?")
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--out-dir", default="opencv_frames_out")
    args = ap.parse_args()
    try:
        import cv2
    except ImportError:
        print("opencv_frames.py: opencv-python (cv2) is not installed: skipping (pip install opencv-python)")
        return 0

    frames = frames_from_video(cv2, args.video, args.frames) if args.video else panning_frames(args.frames)
    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = []
    with SuperPoint.from_pretrained(weights(), warmup_variants="minimal") as model:
        for k, (frame, out) in enumerate(zip_frames(frames, model)):
            kps = [cv2.KeyPoint(float(x), float(y), 8, -1, float(s)) for (x, y), s in
                   zip(out.keypoints.tolist(), out.scores.tolist())]
            drawn = cv2.drawKeypoints(frame, kps, None, color=(0, 255, 0))
            cv2.imwrite(str(out_dir / f"frame_{k:03d}.png"), drawn)
            kept.append(len(kps))
    print(f"{len(kept)} frames, keypoints per frame: {kept} -> {out_dir}/")
    return 0


def zip_frames(frames, model):
    """(frame, output) pairs: the frames are kept for drawing while model.iter reads them in groups."""
    held = []

    def tee():
        for f in frames:
            held.append(f)
            yield f

    for out in model.iter(tee(), bgr=True, num_workers=2):
        yield held.pop(0), out


if __name__ == "__main__":
    sys.exit(main())
