"""An independent PyTorch + OpenCV reference of the SuperPoint request paths of hloc and LightGlue (SPEC.md §2b),
written from their published code, to check `superpoint-rt extract --preset NAME` against.

Sources (read, not copied; every step below is re-written in plain torch / numpy / cv2):
- hloc `hloc/extract_features.py`: confs superpoint_aachen / superpoint_max / superpoint_inloc, ImageDataset
  (read_image -> float32 -> resize when resize_force or max(W, H) > resize_max to round(W*s) x round(H*s),
  s = resize_max / max(W, H), resize_image "cv2_area" -> INTER_LINEAR when enlarging -> [None] -> / 255.0),
  main() (keypoints (kp + 0.5) * (original / resized).astype(float32) - 0.5, uncertainty = detection_noise (2.0)
  * scales.mean(), as_half: every float32 array -> float16, one HDF5 group per image name with datasets
  keypoints / scores / descriptors (256 x N, as SuperGlue returns them) / image_size, keypoints.attrs
  ["uncertainty"], h5py.File(path, "a", libver="latest"));
- hloc `hloc/utils/io.py` read_image: cv2.imread(path, IMREAD_GRAYSCALE | IMREAD_IGNORE_ORIENTATION) (since hloc's
  "Don't autorotate images on load (#373)", 2024-11: the stored pixels; exif_orientation=True gives older hloc's
  plain IMREAD_GRAYSCALE, which OpenCV rotates by the EXIF orientation);
- hloc `hloc/extractors/superpoint.py` (fix_sampling False, keypoint_threshold 0.005, remove_borders 4) over
  SuperGlue `models/superpoint.py`: softmax(65) minus dustbin, depth-to-space, simple_nms (2 rounds),
  nonzero(s > thr) (raster order), remove_borders on the score map's H x W, top_k_keypoints (torch.topk, sorted)
  only when more than k pass, flip (y, x) -> (x, y), sample_descriptors ((kp - s/2 + 0.5) / (w*s - s/2 - 0.5),
  *2 - 1, grid_sample bilinear align_corners=True, L2 normalise);
- LightGlue `lightglue/utils.py` read_image (cv2 IMREAD_COLOR, which applies the EXIF orientation; BGR -> RGB), numpy_image_to_torch (image / 255.
  in float64 -> float32), ImagePreprocessor (kornia resize(img, 1024, side="long", antialias=True,
  align_corners=None); scale = (new_w / w, new_h / h)), Extractor.extract ((kp + 0.5) / scale - 0.5);
  `lightglue/superpoint.py` (nms_radius 4, detection_threshold 0.0005, remove_borders 4 by setting the border
  scores to -1 after NMS, where(scores > thr), top_k when max_num_keypoints (2048 here) is exceeded,
  kornia rgb_to_grayscale w_r*r + w_g*g + w_b*b with 0.299 / 0.587 / 0.114);
- kornia resize: tests/resize/kornia_reference.py (imported; written from kornia's affwarp.py / gaussian.py).

The network: SuperGlue's layer names (conv1a ... convDb), loaded from the Hugging Face safetensors by renaming
(encoder.conv_blocks.0.conv_a -> conv1a, ..., keypoint_decoder.conv_score_a -> convPa, ...).

Usage:
  python tests/presets/reference_presets.py --help
  python tests/presets/reference_presets.py run --preset lightglue --out DIR IMAGE...     (one .npz per image)
  python tests/presets/reference_presets.py h5 --preset hloc:superpoint_aachen -o feats.h5 IMAGE...
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import struct
import sys
from dataclasses import dataclass, replace

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "resize"))
import kornia_reference  # noqa: E402  (tests/resize/kornia_reference.py)


@dataclass(frozen=True)
class Preset:
    kind: str  # "hloc" or "lightglue"
    nms_radius: int
    threshold: float
    max_keypoints: int  # -1: no limit
    resize_max: int
    resize_force: bool = False
    border: int = 4
    detection_noise: float = 2.0  # hloc's SuperPoint.detection_noise
    exif_orientation: bool = False  # whether the tool's image reader applies the EXIF orientation


PRESETS = {
    "hloc:superpoint_aachen": Preset("hloc", 3, 0.005, 4096, 1024),
    "hloc:superpoint_max": Preset("hloc", 3, 0.005, 4096, 1600, resize_force=True),
    "hloc:superpoint_inloc": Preset("hloc", 4, 0.005, 4096, 1600),
    "lightglue": Preset("lightglue", 4, 0.0005, 2048, 1024, exif_orientation=True),
}


# ----------------------------------------------------------------------------------------------------------------
# Network
# ----------------------------------------------------------------------------------------------------------------
_HF_TO_SG = {
    "encoder.conv_blocks.0.conv_a": "conv1a", "encoder.conv_blocks.0.conv_b": "conv1b",
    "encoder.conv_blocks.1.conv_a": "conv2a", "encoder.conv_blocks.1.conv_b": "conv2b",
    "encoder.conv_blocks.2.conv_a": "conv3a", "encoder.conv_blocks.2.conv_b": "conv3b",
    "encoder.conv_blocks.3.conv_a": "conv4a", "encoder.conv_blocks.3.conv_b": "conv4b",
    "keypoint_decoder.conv_score_a": "convPa", "keypoint_decoder.conv_score_b": "convPb",
    "descriptor_decoder.conv_descriptor_a": "convDa", "descriptor_decoder.conv_descriptor_b": "convDb",
}


def read_safetensors(path) -> dict[str, torch.Tensor]:
    raw = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    kinds = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(raw, dtype=kinds[info["dtype"]], count=(b - a) // np.dtype(kinds[info["dtype"]]).itemsize,
                            offset=8 + n + a)
        out[name] = torch.from_numpy(arr.astype(np.float32).reshape(info["shape"]))
    return out


class SuperPointNet(nn.Module):
    """SuperPoint v1 with SuperGlue's layer names; forward returns the 65-channel logits and raw descriptors."""

    def __init__(self):
        super().__init__()
        c = [1, 64, 64, 128, 128]
        for i, (cin, cout) in enumerate(zip(c[:-1], c[1:]), start=1):
            setattr(self, f"conv{i}a", nn.Conv2d(cin, cout, 3, 1, 1))
            setattr(self, f"conv{i}b", nn.Conv2d(cout, cout, 3, 1, 1))
        self.convPa = nn.Conv2d(128, 256, 3, 1, 1)
        self.convPb = nn.Conv2d(256, 65, 1, 1, 0)
        self.convDa = nn.Conv2d(128, 256, 3, 1, 1)
        self.convDb = nn.Conv2d(256, 256, 1, 1, 0)

    def forward(self, x):
        for i in range(1, 5):
            x = F.relu(getattr(self, f"conv{i}a")(x))
            x = F.relu(getattr(self, f"conv{i}b")(x))
            if i < 4:
                x = F.max_pool2d(x, 2, 2)
        logits = self.convPb(F.relu(self.convPa(x)))
        desc = self.convDb(F.relu(self.convDa(x)))
        return logits, desc


def load_net(weights_dir) -> SuperPointNet:
    sd = read_safetensors(pathlib.Path(weights_dir) / "model.safetensors")
    mapped = {}
    for k, v in sd.items():
        layer, param = k.rsplit(".", 1)
        mapped[f"{_HF_TO_SG[layer]}.{param}"] = v
    net = SuperPointNet()
    net.load_state_dict(mapped, strict=True)
    return net.eval()


# ----------------------------------------------------------------------------------------------------------------
# Post-processing (SuperGlue / LightGlue)
# ----------------------------------------------------------------------------------------------------------------
def _max_pool(x, r):
    return F.max_pool2d(x, kernel_size=2 * r + 1, stride=1, padding=r)


def nms(scores: torch.Tensor, r: int) -> torch.Tensor:
    """simple_nms on a (1, H, W) map: local maxima, then two rounds that revive maxima outside suppressed areas."""
    zero = torch.zeros_like(scores)
    is_max = scores == _max_pool(scores, r)
    for _ in range(2):
        suppressed = _max_pool(is_max.float(), r) > 0
        rest = torch.where(suppressed, zero, scores)
        is_max = is_max | ((rest == _max_pool(rest, r)) & ~suppressed)
    return torch.where(is_max, scores, zero)


def score_map(logits: torch.Tensor) -> torch.Tensor:
    """(1, 65, h, w) logits -> (1, 8h, 8w) heat map: softmax, drop the dustbin, cell (r, s) -> pixel (8i+r, 8j+s)."""
    p = torch.softmax(logits, 1)[:, :-1]
    b, _, h, w = p.shape
    return p.reshape(b, 8, 8, h, w).permute(0, 3, 1, 4, 2).reshape(b, h * 8, w * 8)


def sample(kp_xy: torch.Tensor, desc: torch.Tensor) -> torch.Tensor:
    """SuperGlue sample_descriptors for (N, 2) float keypoints in network pixels; returns (N, 256)."""
    _, c, h, w = desc.shape
    g = kp_xy - 8 / 2 + 0.5
    g = g / torch.tensor([w * 8 - 8 / 2 - 0.5, h * 8 - 8 / 2 - 0.5]).to(g)[None]
    g = g * 2 - 1
    d = F.grid_sample(desc, g.view(1, 1, -1, 2), mode="bilinear", align_corners=True)
    return F.normalize(d.reshape(1, c, -1), p=2, dim=1)[0].t().contiguous()


def detect(net: SuperPointNet, image: torch.Tensor, p: Preset) -> dict:
    """Keypoints in the network frame (x, y float32, hloc / LightGlue order), scores, (N, 256) descriptors, and the
    dense maps the fidelity tests use to tell ambiguous points (pre-NMS scores, the k-th score)."""
    with torch.no_grad():
        logits, desc = net(image)
        heat = score_map(logits)
        kept = nms(heat, p.nms_radius)
        H, W = kept.shape[-2:]
        b = p.border
        if p.kind == "lightglue":  # scores on the border set to -1, then where(> thr)
            kept = kept.clone()
            kept[:, :b] = -1
            kept[:, :, :b] = -1
            kept[:, -b:] = -1
            kept[:, :, -b:] = -1
            yx = torch.nonzero(kept[0] > p.threshold)
        else:  # nonzero(> thr) then remove_borders
            yx = torch.nonzero(kept[0] > p.threshold)
            m = (yx[:, 0] >= b) & (yx[:, 0] < H - b) & (yx[:, 1] >= b) & (yx[:, 1] < W - b)
            yx = yx[m]
        s = kept[0][yx[:, 0], yx[:, 1]]
        n_pass = len(s)
        kth = None
        if 0 <= p.max_keypoints < n_pass:
            s, idx = torch.topk(s, p.max_keypoints, dim=0, sorted=True)
            yx = yx[idx]
            kth = float(s[-1])
        kp = torch.flip(yx, [1]).float()
        d = sample(kp, F.normalize(desc, p=2, dim=1))
    return {"kp_net": kp.numpy(), "scores": s.numpy().astype(np.float32), "descriptors": d.numpy(),
            "heat": heat[0].numpy(), "n_pass": n_pass, "kth": kth, "truncated": kth is not None}


# ----------------------------------------------------------------------------------------------------------------
# Request paths
# ----------------------------------------------------------------------------------------------------------------
def imread_flags(mode: int, exif_orientation: bool) -> int:
    """cv2.imread flags: hloc's read_image adds IMREAD_IGNORE_ORIENTATION (#373); LightGlue's does not."""
    return mode if exif_orientation else mode | cv2.IMREAD_IGNORE_ORIENTATION


def hloc_input(path, p: Preset):
    """hloc ImageDataset.__getitem__ with grayscale=True: the (H, W) float32 network plane and original (W, H)."""
    img = cv2.imread(str(path), imread_flags(cv2.IMREAD_GRAYSCALE, p.exif_orientation))
    if img is None:
        raise ValueError(f"Cannot read image {path}.")
    img = img.astype(np.float32)
    size = img.shape[:2][::-1]
    if p.resize_max and (p.resize_force or max(size) > p.resize_max):
        scale = p.resize_max / max(size)
        new = tuple(int(round(x * scale)) for x in size)
        interp = cv2.INTER_AREA
        if size[0] < new[0] or size[1] < new[1]:
            interp = cv2.INTER_LINEAR
        img = cv2.resize(img, new, interpolation=interp)
    return img / 255.0, np.array(size)


def lightglue_input(path, p: Preset):
    """LightGlue load_image + ImagePreprocessor + rgb_to_grayscale: the (h, w) float32 plane, the scale and (W, H)."""
    bgr = cv2.imread(str(path), imread_flags(cv2.IMREAD_COLOR, p.exif_orientation))
    if bgr is None:
        raise IOError(f"Could not read image at {path}.")
    rgb = bgr[..., ::-1].transpose(2, 0, 1)
    img = torch.tensor(rgb / 255.0, dtype=torch.float)[None]  # (1, 3, H, W)
    h, w = img.shape[-2:]
    nw, nh = kornia_reference.long_side_size(w, h, p.resize_max)
    # kornia blurs each channel alone (a depthwise filter): resize the channels as a batch of planes
    img = kornia_reference.resize_antialias(img.reshape(3, 1, h, w), (nh, nw)).reshape(1, 3, nh, nw)
    scale = torch.Tensor([img.shape[-1] / w, img.shape[-2] / h])
    r, g, b_ = img[0].unbind(0)
    gray = 0.299 * r + 0.587 * g + 0.114 * b_
    return gray.numpy(), scale.numpy(), np.array([w, h])


def run_image(net: SuperPointNet, path, preset: str, exif_orientation: bool | None = None) -> dict:
    """One image through a preset: keypoints (N, 2) float32 in original pixels, scores (N,), descriptors (N, 256),
    image_size (W, H), the network input plane, and the detection internals (kp_net, heat, kth, n_pass).
    exif_orientation: None = the tool's own reader; True / False = apply / ignore the EXIF orientation."""
    p = PRESETS[preset]
    if exif_orientation is not None:
        p = replace(p, exif_orientation=exif_orientation)
    if p.kind == "hloc":
        plane, original = hloc_input(path, p)
        out = detect(net, torch.from_numpy(plane)[None, None], p)
        resized = np.array(plane.shape[::-1])
        scales = (original / resized).astype(np.float32)
        kp = (out["kp_net"] + 0.5) * scales[None] - 0.5
        out["uncertainty"] = p.detection_noise * scales.mean()
    else:
        plane, scale, original = lightglue_input(path, p)
        out = detect(net, torch.from_numpy(plane)[None, None], p)
        kp = ((torch.from_numpy(out["kp_net"]) + 0.5) / torch.from_numpy(scale)[None] - 0.5).numpy()
        scales = (1.0 / scale).astype(np.float32)  # for inverting output coordinates only
    out.update(keypoints=kp.astype(np.float32), image_size=original, plane=plane.astype(np.float32),
               out_scale=scales)
    return out


def to_network_frame(kp: np.ndarray, ref: dict, preset: str) -> np.ndarray:
    """Integer network-frame (x, y) of output keypoints (inverse of the preset's output mapping, rounded)."""
    p = PRESETS[preset]
    if p.kind == "hloc":
        net = (kp.astype(np.float64) + 0.5) / ref["out_scale"][None] - 0.5
    else:
        net = (kp.astype(np.float64) + 0.5) * (ref["plane"].shape[::-1] / ref["image_size"])[None] - 0.5
    return np.rint(net).astype(np.int64)


def write_hloc_h5(net: SuperPointNet, paths, names, preset: str, out_path, as_half: bool = True) -> None:
    """hloc extract_features.main(): one group per image name, written the way main() writes it."""
    import h5py

    p = PRESETS[preset]
    assert p.kind == "hloc", preset
    for path, name in zip(paths, names):
        r = run_image(net, path, preset)
        pred = {"keypoints": r["keypoints"], "scores": r["scores"], "descriptors": np.ascontiguousarray(
            r["descriptors"].T), "image_size": r["image_size"]}
        uncertainty = r["uncertainty"]
        if as_half:
            for k in pred:
                if pred[k].dtype == np.float32:
                    pred[k] = pred[k].astype(np.float16)
        with h5py.File(str(out_path), "a", libver="latest") as fd:
            if name in fd:
                del fd[name]
            grp = fd.create_group(name)
            for k, v in pred.items():
                grp.create_dataset(k, data=v)
            grp["keypoints"].attrs["uncertainty"] = uncertainty


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="presets: " + ", ".join(PRESETS))
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, helptext in (("run", "one .npz per image (keypoints, scores, descriptors (N, 256), image_size, "
                                   "plane, kp_net)"),
                           ("h5", "one HDF5 file in hloc's layout (hloc presets only)")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("images", nargs="+")
        s.add_argument("--preset", required=True, choices=list(PRESETS))
        s.add_argument("--weights", default=None, help="dir with model.safetensors (default ../shared/weights/"
                                                        "superpoint)")
        if name == "run":
            s.add_argument("--out", required=True, help="output folder")
        else:
            s.add_argument("-o", "--output", required=True, help="HDF5 file (appended to, as hloc)")
            s.add_argument("--full-precision", action="store_true", help="as_half=False")
    a = ap.parse_args(argv)
    weights = a.weights or str(HERE.parents[2] / "shared" / "weights" / "superpoint")
    net = load_net(weights)
    if a.cmd == "run":
        os.makedirs(a.out, exist_ok=True)
        for path in a.images:
            r = run_image(net, path, a.preset)
            np.savez(os.path.join(a.out, pathlib.Path(path).stem + ".npz"), keypoints=r["keypoints"],
                     scores=r["scores"], descriptors=r["descriptors"], image_size=r["image_size"],
                     plane=r["plane"], kp_net=r["kp_net"])
            print(f"{path}: {len(r['scores'])} keypoints, input {r['plane'].shape[1]}x{r['plane'].shape[0]}")
    else:
        write_hloc_h5(net, a.images, [pathlib.Path(x).name for x in a.images], a.preset, a.output,
                      as_half=not a.full_precision)
    return 0


if __name__ == "__main__":
    sys.exit(main())
