"""`superpoint-rt extract --preset NAME` against an independent PyTorch + OpenCV reference of hloc's and LightGlue's
SuperPoint request paths (tests/presets/reference_presets.py; SPEC.md §2b; the rules are in fidelity.py):

- hloc:superpoint_aachen / _max / _inloc: identical keypoints except near-ties (threshold, k-th score, NMS
  competitor, each within 1e-5), equal float32 coordinates, scores within 1e-5, descriptors within 1e-4, hloc's
  order (raster when <= 4096 pass, else by score);
- lightglue: keypoint F1 at 2 px >= 0.99, mean descriptor cosine >= 0.999;
- `extract --preset hloc:superpoint_aachen --output feats.h5 --as-half` equal to the file hloc's
  extract_features.main(as_half=True) writes (names, datasets, dtypes, shapes, values, uncertainty, image_size);
- the network input planes of the reference against our float resizes (private binding
  superpoint_rt._core._resize_float; skipped when the Python module is not built, as our CLI cannot dump its plane);
- EXIF orientation: files given orientation tags (JPEG APP1, PNG eXIf) read as each tool reads them (hloc's
  read_image ignores the tag since its #373, LightGlue's applies it) and as the exif_orientation parameter asks;
- the checks themselves fail on perturbed outputs.

ctest runs a subset of ../shared/images per preset (CI time). Every image, every preset, with a table:

  cd /work/lead && .venv/bin/python tests/presets/fidelity.py --cli build-ref/src/cli/superpoint-rt

(or SUPERPOINT_RT_PRESETS_ALL=1 with this pytest file). Needs torch (python3-torch), cv2 (python3-opencv 4.6), h5py.
"""

from __future__ import annotations

import copy
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cv2  # noqa: E402  (required)
import h5py  # noqa: E402
import torch  # noqa: E402

import fidelity as FID  # noqa: E402
import reference_presets as R  # noqa: E402

SUBSETS = {
    # 12 MP JPEG with EXIF orientation 6 (INTER_AREA 4:1), > 4096 points (score order), gray PNG (no resize),
    # portrait JPEG (non-integer INTER_AREA)
    "hloc:superpoint_aachen": ["monstree_IMG_1027.JPG", "lg_DSC_0410.JPG", "skimage_coins.png",
                               "pt_london_bridge_19481797_2295892421.jpg"],
    # enlarging: INTER_LINEAR to 1600 x 1101
    "hloc:superpoint_max": ["opencv_box.png"],
    # 2040 x 1530 -> 1600 x 1200 (INTER_AREA), and a small image left as is (nms radius 4)
    "hloc:superpoint_inloc": ["roma_toronto_A.jpg", "pt_piazza_san_marco_18627786_5929294590.jpg"],
    # gray PNG enlarged, 1024 wide (no resize), 12 MP EXIF downscale (the blur), RGB PNG
    "lightglue": ["skimage_coins.png", "lg_DSC_0410.JPG", "monstree_IMG_1027.JPG", "tum_fr3_1341847980.722988.png"],
}
H5_PRESET = "hloc:superpoint_aachen"
H5_IMAGES = ["lg_DSC_0410.JPG", "skimage_coins.png", "pt_london_bridge_19481797_2295892421.jpg"]


def shared() -> pathlib.Path:
    d = FID.shared_dir()
    if not (d / "weights" / "superpoint" / "model.safetensors").is_file():
        pytest.fail(f"test data not found in {d} (set $SUPERPOINT_RT_SHARED to the shared folder)")
    return d


def cli() -> str:
    p = os.environ.get("SUPERPOINT_RT_CLI")
    if not p or not os.access(p, os.X_OK):
        pytest.fail(f"$SUPERPOINT_RT_CLI = {p!r} is not an executable superpoint-rt (run through ctest)")
    return p


def images_for(preset: str) -> list[pathlib.Path]:
    if os.environ.get("SUPERPOINT_RT_PRESETS_ALL"):
        return FID.all_images()
    out = [shared() / "images" / n for n in SUBSETS[preset]]
    for p in out:
        if not p.is_file():
            pytest.fail(f"test image {p} is missing")
    return out


@pytest.fixture(scope="module")
def net():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    return R.load_net(shared() / "weights" / "superpoint")


@pytest.fixture(scope="module")
def outputs(net, tmp_path_factory):
    """preset -> [(image, reference, ours)], the CLI run once per preset on its images; computed lazily."""
    cache: dict[str, list] = {}

    def get(preset: str):
        if preset not in cache:
            d = tmp_path_factory.mktemp(preset.replace(":", "_"))
            imgs = images_for(preset)
            FID.run_cli(cli(), imgs, preset, d)
            cache[preset] = [(img, R.run_image(net, img, preset), FID.load_ours(d, img)) for img in imgs]
        return cache[preset]

    return get


@pytest.mark.parametrize("preset", list(R.PRESETS))
def test_preset_fidelity(preset, outputs):
    failures, orders = [], set()
    for img, ref, ours in outputs(preset):
        c = FID.compare(ref, ours, preset)
        failures += [f"{img.name}: {b}" for b in c["bad"]]
        orders.add(c.get("order"))
        assert c["n_ref"] > 100, f"{img.name}: only {c['n_ref']} reference keypoints, a weak test image"
    assert not failures, f"{preset}: " + "\n".join(failures)
    if preset == "hloc:superpoint_aachen" and not os.environ.get("SUPERPOINT_RT_PRESETS_ALL"):
        assert orders == {"raster", "score"}, "the subset must exercise both of hloc's orders"


def panoramas(folder: pathlib.Path) -> list[pathlib.Path]:
    """A 17000 x 450 JPEG made of strips of the shared photos (7.7 MP: well inside max_pixels, wider than 16384; at
    450 rows its 1024 x 27 frame has keypoints, where a 300-row one's 1024 x 18 frame has none above the threshold)
    and its 450 x 17000 transpose."""
    from PIL import Image

    names = [p for p in FID.all_images() if p.suffix.lower() == ".jpg"]
    wide = Image.new("RGB", (17000, 450))
    x, i = 0, 0
    while x < wide.width:
        im = Image.open(names[i % len(names)]).convert("RGB")
        strip = im.resize((max(1, im.width * wide.height // im.height), wide.height))
        wide.paste(strip, (x, 0))
        x += strip.width
        i += 1
    out = [folder / "pano_17000x450.jpg", folder / "pano_450x17000.jpg"]
    wide.save(out[0], quality=90)
    wide.transpose(Image.Transpose.ROTATE_90).save(out[1], quality=90)
    return out


@pytest.mark.parametrize("preset", list(R.PRESETS))
def test_wide_and_tall_images(preset, net, tmp_path):
    """Issue 19 §3: panoramas that hloc and LightGlue take (a side over 16384, once refused by a limit on the source
    side of the float resizes) give the reference's frame (1024 x 27, 1600 x 42 for _max / _inloc), network input and
    output under the same fidelity rule."""
    imgs = panoramas(tmp_path)
    out = tmp_path / "ours"
    FID.run_cli(cli(), imgs, preset, out)
    n = R.PRESETS[preset].resize_max
    short = 27 if n == 1024 else 42  # round (hloc) / int (kornia) of 450 * n / 17000
    for img, frame in zip(imgs, [(short, n), (n, short)]):
        ref = R.run_image(net, img, preset)
        assert ref["plane"].shape == frame, (img.name, ref["plane"].shape)
        check_plane(preset, img, ref)
        c = FID.compare(ref, FID.load_ours(out, img), preset)
        assert not c["bad"], f"{preset} {img.name}: {c['bad']}"
        assert c["n_ref"] > 10, f"{img.name}: only {c['n_ref']} reference keypoints, a weak test image"


def test_presets_differ(outputs):
    """The presets really run different request paths: frames and point counts differ between them."""
    by_preset = {p: {img.name: ref for img, ref, _ in outputs(p)} for p in ("hloc:superpoint_aachen", "lightglue")}
    a = by_preset["hloc:superpoint_aachen"]["skimage_coins.png"]
    b = by_preset["lightglue"]["skimage_coins.png"]
    assert a["plane"].shape == (303, 384) and b["plane"].shape == (808, 1024)


def _find(outputs, preset, name):
    for img, ref, ours in outputs(preset):
        if img.name == name:
            return ref, copy.deepcopy(ours)
    raise KeyError(name)


def test_checks_fail_on_perturbed_outputs(outputs):
    """Each rule of the comparison catches the defect it is there for."""
    P = "hloc:superpoint_aachen"
    for name, order in (("lg_DSC_0410.JPG", "score"), ("skimage_coins.png", "raster")):
        ref, ours = _find(outputs, P, name)
        assert not FID.compare(ref, ours, P)["bad"]
        assert FID.compare(ref, ours, P)["order"] == order

        def bad_after(edit):
            o = copy.deepcopy(ours)
            edit(o)
            return FID.compare(ref, o, P)["bad"]

        def swap(o):  # two points with clearly different scores / raster positions
            i = int(np.argmax(o["scores"]))
            j = int(np.argmin(o["scores"]))
            for k in ("keypoints", "scores", "descriptors"):
                o[k][[i, j]] = o[k][[j, i]]

        def nudge_xy(o):
            o["keypoints"][5, 0] = np.nextafter(o["keypoints"][5, 0], np.float32(1e9))

        def score(o):
            o["scores"][7] += 2e-5

        def desc(o):
            o["descriptors"][9, 100] += 2e-4

        def drop_strong(o):
            i = int(np.argmax(o["scores"]))
            for k in ("keypoints", "scores", "descriptors"):
                o[k] = np.delete(o[k], i, axis=0)

        def move_one_pixel(o):  # a keypoint one network pixel off
            o["keypoints"][3] = (o["keypoints"][3] + ref["out_scale"]).astype(np.float32)

        for edit in (swap, nudge_xy, score, desc, drop_strong, move_one_pixel):
            assert bad_after(edit), f"{name}: {edit.__name__} not detected"

    ref, ours = _find(outputs, "lightglue", "tum_fr3_1341847980.722988.png")
    assert not FID.compare(ref, ours, "lightglue")["bad"]
    o = copy.deepcopy(ours)
    o["keypoints"] = o["keypoints"] + np.float32(2.5)
    assert any("F1" in b for b in FID.compare(ref, o, "lightglue")["bad"])
    o = copy.deepcopy(ours)
    o["descriptors"][::20] = -o["descriptors"][::20]
    assert any("cosine" in b for b in FID.compare(ref, o, "lightglue")["bad"])


def check_plane(preset, img, ref):
    """The reference's network input against our float resize of the same decoded pixels (our CLI cannot dump the
    plane the engine feeds the network, so this checks the resize kernel the preset selects); skipped when the Python
    module (superpoint_rt._core._resize_float) is not built."""
    try:
        from superpoint_rt import _core
    except ImportError as e:
        pytest.skip(f"superpoint_rt Python module not built ({e}): the network-input comparison needs "
                    "superpoint_rt._core._resize_float")
    p = R.PRESETS[preset]
    h, w = ref["plane"].shape
    if p.kind == "hloc":
        gray = cv2.imread(str(img), R.imread_flags(cv2.IMREAD_GRAYSCALE, p.exif_orientation)).astype(np.float32)
        if gray.shape == (h, w):
            ours = gray / 255.0
        else:
            kind = "cv2_linear" if (gray.shape[1] < w or gray.shape[0] < h) else "cv2_area"
            ours = _core._resize_float(np.ascontiguousarray(gray), w, h, kind) / 255.0
        np.testing.assert_array_equal(ours, ref["plane"], err_msg=f"{preset} {img.name}")
    else:
        rgb = cv2.imread(str(img), R.imread_flags(cv2.IMREAD_COLOR, p.exif_orientation))[..., ::-1]
        ch = [np.ascontiguousarray((rgb[..., c] / 255.0).astype(np.float32)) for c in range(3)]
        if ch[0].shape != (h, w):
            ch = [_core._resize_float(c, w, h, "kornia_antialias") for c in ch]
        gray = (np.float32(0.299) * ch[0] + np.float32(0.587) * ch[1]) + np.float32(0.114) * ch[2]
        err = float(np.abs(gray - ref["plane"]).max())
        assert err <= 1e-5, f"{preset} {img.name}: network input differs by {err}"


@pytest.mark.parametrize("preset", list(R.PRESETS))
def test_network_input_plane(preset, outputs):
    """The reference's network input against our float resize of the same decoded pixels (check_plane)."""
    for img, ref, _ in outputs(preset):
        check_plane(preset, img, ref)


def _exif_ifd(orientation: int) -> bytes:
    """A little-endian TIFF header + IFD0 with one entry: Orientation (0x0112, SHORT) = orientation."""
    return b"II*\0" + struct.pack("<IH", 8, 1) + struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0) + b"\0" * 4


def _with_orientation(data: bytes, orientation: int) -> bytes:
    """The file with an EXIF orientation tag and its pixel data unchanged: a JPEG gets an APP1 "Exif" segment right
    after SOI (the first APP1, the one OpenCV reads), a PNG an eXIf chunk before IDAT."""
    ifd = _exif_ifd(orientation)
    if data[:2] == b"\xff\xd8":
        return data[:2] + b"\xff\xe1" + struct.pack(">H", len(ifd) + 8) + b"Exif\0\0" + ifd + data[2:]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    import zlib
    chunk = struct.pack(">I", len(ifd)) + b"eXIf" + ifd + struct.pack(">I", zlib.crc32(b"eXIf" + ifd))
    at = data.index(b"IDAT") - 4
    return data[:at] + chunk + data[at:]


# Small files (fast on 2 cores): orientations 6 (quarter turn), 3 (half turn) and 5 (transpose) on a JPEG, 8 on a
# PNG (an eXIf chunk); the reader's own setting gets more of them than the flipped one.
JPEG_SMALL = "pt_piazza_san_marco_18627786_5929294590.jpg"
EXIF_CASES = [("hloc:superpoint_aachen", None, [(JPEG_SMALL, 6), (JPEG_SMALL, 5), ("xfeat_ref.png", 8)]),
              ("hloc:superpoint_aachen", True, [(JPEG_SMALL, 6), (JPEG_SMALL, 3)]),
              ("lightglue", None, [(JPEG_SMALL, 6), ("xfeat_ref.png", 8)]),
              ("lightglue", False, [(JPEG_SMALL, 6)])]


@pytest.mark.parametrize("preset,flag,exif_files", EXIF_CASES, ids=[f"{p}-{f}" for p, f, _ in EXIF_CASES])
def test_exif_rotated_files(net, tmp_path, preset, flag, exif_files):
    """Each tool's reader on EXIF-rotated files: hloc (today) reads the stored pixels, LightGlue rotates; the
    exif_orientation parameter turns either way. The reference is cv2.imread with the reader's flags."""
    src = tmp_path / "src"
    src.mkdir()
    files = []
    for name, o in exif_files:
        f = src / f"o{o}_{name}"
        f.write_bytes(_with_orientation((shared() / "images" / name).read_bytes(), o))
        files.append((f, o))
    extra = [] if flag is None else ["--exif-orientation" if flag else "--no-exif-orientation"]
    out = tmp_path / "out"
    FID.run_cli(cli(), [f for f, _ in files], preset, out, extra)
    applied = R.PRESETS[preset].exif_orientation if flag is None else flag
    failures = []
    for f, o in files:
        stored = cv2.imread(str(f), cv2.IMREAD_GRAYSCALE | cv2.IMREAD_IGNORE_ORIENTATION).shape  # (H, W)
        want_hw = stored[::-1] if applied and o >= 5 else stored
        ref = R.run_image(net, f, preset, exif_orientation=flag)
        ours = FID.load_ours(out, f)
        assert tuple(ref["image_size"][::-1]) == tuple(want_hw), f"{f.name}: reference reads {ref['image_size']}"
        if tuple(ours["image_size"]) != tuple(want_hw):
            failures.append(f"{f.name}: image_size (h, w) {tuple(ours['image_size'])}, expected {want_hw}")
            continue
        c = FID.compare(ref, ours, preset)
        failures += [f"{f.name}: {b}" for b in c["bad"]]
        assert c["n_ref"] > 100, f"{f.name}: only {c['n_ref']} reference keypoints"
    assert not failures, f"{preset} exif_orientation={flag}: " + "\n".join(failures)


def _h5_dump(path) -> dict:
    out = {}
    with h5py.File(path, "r") as fd:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = (obj.dtype, obj.shape, obj[()], {k: (v, np.asarray(v).dtype) for k, v in obj.attrs.items()})
        fd.visititems(visit)
    return out


def _within(ours16, ref32, tol):
    """float16 values stored from a float32 within tol of ref32 (one float16 rounding either side)."""
    ulp = np.spacing(np.maximum(np.abs(ref32), np.abs(ours16.astype(np.float32))).astype(np.float16)).astype(
        np.float64)
    return np.abs(ours16.astype(np.float64) - ref32.astype(np.float64)) <= tol + ulp / 2 + 1e-12


def test_hloc_h5(net, outputs, tmp_path):
    imgs = [shared() / "images" / n for n in H5_IMAGES]
    ours_h5, ref_h5 = tmp_path / "ours.h5", tmp_path / "ref.h5"
    cmd = [cli(), "extract", *map(str, imgs), "--preset", H5_PRESET, "--output", str(ours_h5), "--as-half",
           "--weights", str(shared() / "weights" / "superpoint"), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
    R.write_hloc_h5(net, imgs, [p.name for p in imgs], H5_PRESET, ref_h5, as_half=True)
    ref_d, ours_d = _h5_dump(ref_h5), _h5_dump(ours_h5)
    assert sorted(ours_d) == sorted(ref_d), "group / dataset names differ"
    errors = []
    npz = {img.name: (ref, ours) for img, ref, ours in outputs(H5_PRESET)}
    for img in imgs:
        g = img.name
        for k in ("keypoints", "scores", "descriptors", "image_size"):
            rd, od = ref_d[f"{g}/{k}"], ours_d[f"{g}/{k}"]
            if rd[0] != od[0]:
                errors.append(f"{g}/{k}: dtype {od[0]} (hloc {rd[0]})")
            if sorted(rd[3]) != sorted(od[3]):
                errors.append(f"{g}/{k}: attributes {sorted(od[3])} (hloc {sorted(rd[3])})")
        ua, ub = ref_d[f"{g}/keypoints"][3].get("uncertainty"), ours_d[f"{g}/keypoints"][3].get("uncertainty")
        if ub is None or ua[1] != ub[1] or float(ua[0]) != float(ub[0]):
            errors.append(f"{g}: uncertainty {ub} (hloc {ua})")
        if not np.array_equal(ref_d[f"{g}/image_size"][2], ours_d[f"{g}/image_size"][2]):
            errors.append(f"{g}: image_size {ours_d[g + '/image_size'][2]} (hloc {ref_d[g + '/image_size'][2]})")
        kr, ko = ref_d[f"{g}/keypoints"][2], ours_d[f"{g}/keypoints"][2]
        so = ours_d[f"{g}/scores"][2]
        do = ours_d[f"{g}/descriptors"][2]
        # Rows are paired by the fidelity rule (FID.compare on the float32 outputs of the same images), whether or
        # not the counts are equal: a near-tie may drop a point or swap two rows of equal count (score order), and
        # both are what SPEC allows. The h5 rows are the npz rows (the same engine, deterministic), checked first.
        if g not in npz:
            errors.append(f"{g}: not among the npz outputs of {H5_PRESET}, so its rows cannot be paired")
            continue
        ref_npz, ours_npz = npz[g]
        c = FID.compare(ref_npz, ours_npz, H5_PRESET)
        if c["bad"]:
            errors.append(f"{g}: the float32 outputs fail the fidelity rule: {c['bad']}")
            continue
        if not np.array_equal(ko, ours_npz["keypoints"].astype(np.float16)):
            errors.append(f"{g}: the h5 keypoints are not the npz keypoints in the same order")
            continue
        ri, oi = c["pairs"]
        if not np.array_equal(kr[ri], ko[oi]):
            n = int(np.any(kr[ri] != ko[oi], axis=1).sum())
            j = int(np.flatnonzero(np.any(kr[ri] != ko[oi], axis=1))[0])
            errors.append(f"{g}: {n} keypoints differ, e.g. row {j}: {ko[oi][j].tolist()} (hloc {kr[ri][j].tolist()})")
        if not np.all(_within(so[oi], ref_npz["scores"][ri], FID.SCORE_TOL)):
            errors.append(f"{g}: scores beyond 1e-5 (+ float16 rounding)")
        if not np.all(_within(do[:, oi], ref_npz["descriptors"][ri].T, FID.DESC_TOL)):
            errors.append(f"{g}: descriptors beyond 1e-4 (+ float16 rounding)")
        # the reference file is hloc's: float16 of the float32 reference
        assert np.array_equal(kr, ref_npz["keypoints"].astype(np.float16))
    assert not errors, "\n".join(errors)
