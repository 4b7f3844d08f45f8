"""decode_image_cv2 (src/image/decode_cv2.hpp) against OpenCV itself: superpoint_rt._core._decode_cv2(data, color)
must equal cv2.imdecode(data, IMREAD_COLOR)[..., ::-1] / cv2.imdecode(data, IMREAD_GRAYSCALE) pixel for pixel, for
every file of ../shared/images and for synthetic files of each format and variant (EXIF orientations included), and
_decode_cv2(data, color, apply_orientation=False) must equal the same with IMREAD_IGNORE_ORIENTATION (hloc's
read_image since its #373).

It lives in tests/python/ (not tests/image/) because it needs the Python module, which the sanitizer build does not
build (tests/CMakeLists.txt runs tests/python/ only where it is built). cv2 is Debian's python3-opencv 4.6 (the venv
has the system site packages); it is required, not optional: without it the comparison cannot be made.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from conftest import shared_dir

import cv2  # noqa: E402  (required: see the module docstring)
from superpoint_rt import _core

assert cv2.__version__.startswith("4.6."), f"these expectations are OpenCV 4.6's, found {cv2.__version__}"


def cv2_decode(data: bytes, color: bool, apply_orientation: bool = True):
    flags = (cv2.IMREAD_COLOR if color else cv2.IMREAD_GRAYSCALE) | (
        0 if apply_orientation else cv2.IMREAD_IGNORE_ORIENTATION)
    a = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if a is None:
        return None
    return np.ascontiguousarray(a[..., ::-1]) if color else a


def assert_like_cv2(data: bytes, what: str) -> None:
    for color, apply in ((False, True), (True, True), (False, False), (True, False)):
        ref = cv2_decode(data, color, apply)
        assert ref is not None, f"{what}: cv2 cannot decode it (a test file must be one OpenCV reads)"
        ours = _core._decode_cv2(data, color, apply_orientation=apply)
        mode = ("COLOR" if color else "GRAYSCALE") + ("" if apply else " | IGNORE_ORIENTATION")
        assert ours.shape == ref.shape, f"{what} {mode}: shape {ours.shape}, cv2 {ref.shape}"
        diff = ours != ref
        if color:
            diff = diff.any(axis=2)
        assert not diff.any(), (f"{what} {mode}: {int(diff.sum())} of {diff.size} pixels differ from cv2 "
                                f"(max |d| {int(np.abs(ours.astype(int) - ref.astype(int)).max())})")


def test_every_shared_image_equals_cv2_imdecode_and_imread():
    images = sorted(p for p in (shared_dir() / "images").iterdir() if p.suffix.lower() in (".jpg", ".png"))
    assert len(images) >= 40, f"expected the shared images, found {len(images)}"
    for p in images:
        assert_like_cv2(p.read_bytes(), p.name)
    # cv2.imread (what hloc and LightGlue call) gives imdecode's pixels; the rotated file proves the orientation.
    p = shared_dir() / "images" / "monstree_IMG_1027.JPG"
    rgb = cv2.imread(str(p), cv2.IMREAD_COLOR)[..., ::-1]
    assert np.array_equal(_core._decode_cv2(p.read_bytes(), True), rgb)
    assert np.array_equal(_core._decode_cv2(p.read_bytes(), False), cv2.imread(str(p), cv2.IMREAD_GRAYSCALE))
    assert rgb.shape[0] > rgb.shape[1], "monstree_IMG_1027.JPG has Orientation=6: cv2 returns it portrait"
    stored = cv2.imread(str(p), cv2.IMREAD_GRAYSCALE | cv2.IMREAD_IGNORE_ORIENTATION)  # hloc's read_image
    assert stored.shape == (3024, 4032)
    assert np.array_equal(_core._decode_cv2(p.read_bytes(), False, apply_orientation=False), stored)


# ---- synthetic files ---------------------------------------------------------------------------------------------

def pattern(h: int = 29, w: int = 43, seed: int = 0) -> np.ndarray:
    """Smooth gradients plus noise: exercises chroma upsampling and every luma rounding case."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 127 // max(w + h - 2, 1)], -1)
    return np.clip(base + rng.integers(-40, 41, (h, w, 3)), 0, 255).astype(np.uint8)


def pil_bytes(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def tiff_ifd(orientation: int, little: bool = True, before: list[tuple[int, int, int, int]] | None = None) -> bytes:
    """A TIFF header + IFD0 holding `before` entries (tag, type, count, value) and then Orientation."""
    e = "<" if little else ">"
    entries = list(before or []) + [(0x0112, 3, 1, orientation)]
    out = (b"II" if little else b"MM") + struct.pack(e + "HI", 42, 8) + struct.pack(e + "H", len(entries))
    for tag, typ, count, value in entries:
        if typ == 3:
            out += struct.pack(e + "HHIHH", tag, typ, count, value, 0)
        else:
            out += struct.pack(e + "HHII", tag, typ, count, value)
    return out + struct.pack(e + "I", 0)


def jpeg_with_app1(jpeg: bytes, *payloads: bytes) -> bytes:
    segs = b"".join(b"\xff\xe1" + struct.pack(">H", len(p) + 2) + p for p in payloads)
    return jpeg[:2] + segs + jpeg[2:]


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_insert(png: bytes, chunk: bytes, before: bytes = b"IDAT") -> bytes:
    i = png.index(before) - 4
    return png[:i] + chunk + png[i:]


RGB = pattern()
JPEG = pil_bytes(Image.fromarray(RGB), "JPEG", quality=90)


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("little", [True, False])
def test_jpeg_exif_orientation(orientation, little):
    data = jpeg_with_app1(JPEG, b"Exif\0\0" + tiff_ifd(orientation, little))
    assert_like_cv2(data, f"JPEG orientation {orientation} {'II' if little else 'MM'}")
    ours = _core._decode_cv2(data, True)
    assert ours.shape[:2] == ((43, 29) if orientation >= 5 else (29, 43))
    assert _core._decode_cv2(data, True, apply_orientation=False).shape[:2] == (29, 43)


def test_jpeg_exif_quirks_as_opencv():
    cases = {
        # OpenCV reads the FIRST APP1 only: an XMP segment before the EXIF one hides its orientation.
        "xmp first": jpeg_with_app1(JPEG, b"http://ns.adobe.com/xap/1.0/\0<x/>", b"Exif\0\0" + tiff_ifd(6)),
        # A string entry pointing past the data stops OpenCV's parse before the Orientation entry.
        "bad string first": jpeg_with_app1(JPEG, b"Exif\0\0" + tiff_ifd(6, before=[(0x010F, 2, 100, 5000)])),
        # An unknown tag is skipped; a good rational (XResolution) too.
        "unknown + rational": jpeg_with_app1(JPEG, b"Exif\0\0" + tiff_ifd(8, before=[(0x9999, 4, 1, 0),
                                                                                      (0x011A, 5, 1, 8)])),
        "orientation 9": jpeg_with_app1(JPEG, b"Exif\0\0" + tiff_ifd(9)),
        "truncated IFD": jpeg_with_app1(JPEG, b"Exif\0\0" + tiff_ifd(6)[:20]),
        "no TIFF mark": jpeg_with_app1(JPEG, b"Exif\0\0II\x2b\0" + tiff_ifd(6)[4:]),
    }
    for what, data in cases.items():
        assert_like_cv2(data, what)
    assert _core._decode_cv2(cases["xmp first"], True).shape[:2] == (29, 43)
    assert _core._decode_cv2(cases["unknown + rational"], True).shape[:2] == (43, 29)


def test_jpeg_variants():
    im = Image.fromarray(RGB)
    for sub in (0, 1, 2):
        assert_like_cv2(pil_bytes(im, "JPEG", quality=85, subsampling=sub), f"JPEG subsampling {sub}")
    assert_like_cv2(pil_bytes(im, "JPEG", quality=85, progressive=True), "progressive JPEG")
    assert_like_cv2(pil_bytes(im.convert("L"), "JPEG", quality=85), "gray JPEG")
    assert_like_cv2(pil_bytes(im.convert("CMYK"), "JPEG", quality=95), "CMYK JPEG")
    big = pattern(301, 517, seed=3)  # several MCU rows and a partial last MCU
    assert_like_cv2(pil_bytes(Image.fromarray(big), "JPEG", quality=75), "JPEG 517x301")


def test_png_variants():
    im = Image.fromarray(RGB)
    gray16 = (RGB[..., 0].astype(np.uint16) * 257 + np.arange(43, dtype=np.uint16)) .astype(np.uint16)
    rgba = np.dstack([RGB, RGB[..., 1]])
    files = {
        "RGB": pil_bytes(im, "PNG"),
        "RGBA": pil_bytes(Image.fromarray(rgba, "RGBA"), "PNG"),
        "P": pil_bytes(im.quantize(64), "PNG"),
        "P + tRNS": pil_bytes(im.quantize(16), "PNG", transparency=3),
        "P 4-bit": pil_bytes(im.quantize(16), "PNG", bits=4),
        "L": pil_bytes(im.convert("L"), "PNG"),
        "LA": pil_bytes(im.convert("LA"), "PNG"),
        "1-bit": pil_bytes(im.convert("1"), "PNG"),
        "L 16-bit": pil_bytes(Image.fromarray(gray16), "PNG"),
        "RGB 16-bit": cv2.imencode(".png", (RGB.astype(np.uint16) * 257 + 77)[..., ::-1])[1].tobytes(),
        "RGBA 16-bit": cv2.imencode(".png", (rgba.astype(np.uint16) * 251))[1].tobytes(),
        "RGB + tRNS": pil_bytes(im, "PNG", transparency=(10, 20, 30)),
    }
    files["RGB + gAMA"] = png_insert(files["RGB"], png_chunk(b"gAMA", struct.pack(">I", 45455 * 2)))
    files["L + gAMA"] = png_insert(files["L"], png_chunk(b"gAMA", struct.pack(">I", 100000)))
    for o in (3, 6):  # eXIf before and after the image data (OpenCV 4.6 applies both)
        files[f"eXIf {o} before IDAT"] = png_insert(files["RGB"], png_chunk(b"eXIf", tiff_ifd(o)))
        files[f"eXIf {o} after IDAT"] = png_insert(files["RGB"], png_chunk(b"eXIf", tiff_ifd(o, False)), b"IEND")
    for what, data in files.items():
        assert_like_cv2(data, f"PNG {what}")
    assert _core._decode_cv2(files["eXIf 6 after IDAT"], False).shape == (43, 29)


def test_bmp_webp_tiff_pnm():
    im = Image.fromarray(RGB)
    files = {
        "BMP 24-bit": pil_bytes(im, "BMP"),
        "BMP 32-bit": cv2.imencode(".bmp", np.dstack([RGB[..., ::-1], RGB[..., 0]]))[1].tobytes(),
        "BMP 8-bit palette": pil_bytes(im.quantize(50), "BMP"),
        "BMP 8-bit gray": pil_bytes(im.convert("L"), "BMP"),
        "BMP 1-bit": pil_bytes(im.convert("1"), "BMP"),
        "WebP lossy": pil_bytes(im, "WEBP", quality=80),
        "WebP lossless": pil_bytes(im, "WEBP", lossless=True),
        "WebP alpha": pil_bytes(Image.fromarray(np.dstack([RGB, RGB[..., 2]]), "RGBA"), "WEBP", quality=70),
        "TIFF RGB": pil_bytes(im, "TIFF"),
        "TIFF LZW": pil_bytes(im, "TIFF", compression="tiff_lzw"),
        "TIFF deflate": pil_bytes(im, "TIFF", compression="tiff_adobe_deflate"),
        "TIFF gray": pil_bytes(im.convert("L"), "TIFF"),
        "TIFF palette": pil_bytes(im.quantize(40), "TIFF"),
        "PGM": pil_bytes(im.convert("L"), "PPM"),
        "PPM": pil_bytes(im, "PPM"),
        "PBM": pil_bytes(im.convert("1"), "PPM"),
        "PPM ascii": b"P3\n3 2\n255\n" + b" ".join(str(v).encode() for v in RGB[:2, :3].ravel()) + b"\n",
        "PGM ascii": b"P2\n# c\n3 2\n255\n" + b" ".join(str(v).encode() for v in RGB[:2, :3, 0].ravel()) + b"\n",
    }
    for o in range(1, 9):  # OpenCV 4.6's TIFF decoder applies a TIFF's own Orientation tag, even with IGNORE
        t = Image.fromarray(RGB)
        exif = t.getexif()
        exif[0x0112] = o
        files[f"TIFF orientation {o}"] = pil_bytes(t, "TIFF", exif=exif)
    files["WebP with EXIF 6 (not applied)"] = pil_bytes(im, "WEBP", lossless=True, exif=b"Exif\0\0" + tiff_ifd(6))
    for what, data in files.items():
        assert_like_cv2(data, what)


def test_gif_not_in_opencv_decodes_with_the_cv2_conversions():
    # OpenCV 4.6 has no GIF reader (imdecode returns None); we decode it (decode_cv2.hpp) and convert as OpenCV
    # converts: the 14-bit luma of the frame's RGB for GRAYSCALE.
    data = pil_bytes(Image.fromarray(RGB).quantize(64), "GIF")
    assert cv2_decode(data, True) is None
    rgb = _core._decode_cv2(data, True)
    assert np.array_equal(rgb, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    expect = ((r * 4899 + g * 9617 + b * 1868 + 8192) >> 14).astype(np.uint8)
    assert np.array_equal(_core._decode_cv2(data, False), expect)


def test_errors_and_limits():
    with pytest.raises(ValueError, match="truncated"):
        _core._decode_cv2(JPEG[: len(JPEG) // 2], False)  # OpenCV pads with gray; we refuse (decode_cv2.hpp)
    with pytest.raises(ValueError, match="PNG.*<memory>|<memory>.*PNG"):
        _core._decode_cv2(pil_bytes(Image.fromarray(RGB), "PNG")[:60], True)
    with pytest.raises(ValueError, match="not in a supported format"):
        _core._decode_cv2(b"not an image at all", True)
    with pytest.raises(ValueError, match="1247"):  # 43 x 29 = 1247 pixels, refused before decoding
        _core._decode_cv2(jpeg_with_app1(JPEG, b"Exif\0\0" + tiff_ifd(6)), True, 1000)
