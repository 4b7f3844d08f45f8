"""Schemathesis hooks of tests/server/test_schemathesis.py (loaded through $SCHEMATHESIS_HOOKS): what an OpenAPI 3.0
document cannot say about this API, so that every check, positive_data_acceptance and negative_data_rejection
included, holds the server to the document everywhere else.

- Image bytes. A binary body cannot be constrained to "a decodable image": the media types of the bodies and of the
  multipart `image` parts (docs/openapi.json: image/*, application/octet-stream) get real images made here, so valid
  cases are really valid. The images are square, 16 to 48 pixels a side: every `resize` / `resize_max` the schema
  allows then gives a frame of at least 8 pixels a side (a thinner frame is the documented 422 of a panorama, a
  property of the image, not of the query).
- Three rules relate two query fields (docs/SERVING.md, the fields' descriptions): a `resize` frame together with a
  `resize_max` above 0, `grayscale=false` with a preset other than hf, and `exif_orientation=true` with hf (Pillow
  never rotates) are 422. Cases generated as valid that break one are dropped (tests/server/test_contract.py checks
  the three 422s).
- /v1/match's `matcher` selects whose fields apply: `conf`, `ratio`, `distance`, `mutual` with `matcher=lightglue`,
  or `depth_confidence`, `width_confidence`, `filter_threshold` without it, are 422 (the fields' descriptions say
  so). Cases generated as valid that mix them are dropped (tests/server/test_lightglue.py checks those 422s); the
  server under test has LightGlue weights, so `matcher=lightglue` itself is valid.
- The batch route answers each image in its 200 (SERVING.md): a part that is no image (what a negative multipart
  case becomes on the wire: a part is bytes, whatever type Schemathesis meant) is refused in its entry. A
  negative_data_rejection failure on that route is dropped only when the response refused every image that way.
"""

from __future__ import annotations

import io
import json
import re

import numpy as np
import schemathesis
from hypothesis import strategies as st
from PIL import Image

_NN_FIELDS = ("conf", "ratio", "distance", "mutual")
_LIGHTGLUE_FIELDS = ("depth_confidence", "width_confidence", "filter_threshold")
_FALSE = re.compile(r"^([Ff][Aa][Ll][Ss][Ee]|0)$")
_TRUE = re.compile(r"^([Tt][Rr][Uu][Ee]|1)$")


def _image(side: int, mode: str, fmt: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:side, 0:side]
    base = ((x * 7 + y * 13) % 64 * 4).astype(np.uint8)  # edges and gradients: some keypoints
    noise = rng.integers(0, 32, (side, side), dtype=np.uint8)
    plane = base + noise
    im = Image.fromarray(plane, "L") if mode == "L" else Image.fromarray(np.stack([plane, base, noise], -1), "RGB")
    buf = io.BytesIO()
    im.save(buf, fmt)
    return buf.getvalue()


PNGS = [_image(16, "L", "PNG", 1), _image(48, "RGB", "PNG", 2)]
JPEGS = [_image(32, "RGB", "JPEG", 3), _image(24, "L", "JPEG", 4)]

# Every image subtype (the bytes decide the format, the Content-Type only has to be image/*): without this,
# Schemathesis sends its own file samples for some subtypes, e.g. a 1 x 1 WebP, whose own-size frame is under 8 pixels.
schemathesis.openapi.media_type("image/*", st.sampled_from(PNGS + JPEGS))
schemathesis.openapi.media_type("application/octet-stream", st.sampled_from(PNGS + JPEGS))


def _mode(case):
    meta = case.meta
    return None if meta is None else meta.generation.mode


@schemathesis.hook
def filter_case(context, case):
    mode = _mode(case)
    if mode is None or not mode.is_positive or not isinstance(case.query, dict):
        return True
    q = case.query
    resize, resize_max = q.get("resize"), str(q.get("resize_max", "0"))
    if isinstance(resize, str) and resize != "none" and resize_max not in ("0", "None"):
        return False
    grayscale, exif = q.get("grayscale"), q.get("exif_orientation")
    if q.get("preset", "hf") != "hf" and isinstance(grayscale, str) and _FALSE.match(grayscale):
        return False
    if q.get("preset", "hf") == "hf" and isinstance(exif, str) and _TRUE.match(exif):
        return False
    theirs = _NN_FIELDS if q.get("matcher") == "lightglue" else _LIGHTGLUE_FIELDS
    if any(name in q for name in theirs):
        return False
    return True


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if case.path != "/v1/keypoints/batch" or response.status_code != 200 or failure.code != "ST201":
        return True  # ST201: negative_data_rejection's "schema-violating request accepted"
    try:
        results = json.loads(response.content)["results"]
    except (ValueError, KeyError, TypeError):
        return True
    refused = bool(results) and all(400 <= r.get("error", {}).get("code", 200) < 500 for r in results)
    return not refused
