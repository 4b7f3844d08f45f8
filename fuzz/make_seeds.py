#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses: OUT/<harness>/<name>, small valid (and a few broken) inputs.

    make_seeds.py OUT [--shared DIR]

Images come from Pillow (every format and mode the decoders take, a few pixels wide), plus small crops of the
images in DIR/images (../shared), re-encoded with their EXIF / ICC data, and the header bytes of the originals; the
rest (HTTP requests, safetensors, config.json, hub responses, NPZ/NPY) is written here byte by byte, and hloc's
HDF5 feature and match files by h5py (in memory). Nothing here is committed: ctest (the fuzz_make_seeds fixture) and
scripts/fuzz.sh run this. Deterministic: the same files each run.
Needs numpy, Pillow and h5py (the test venv).
"""
import argparse
import io
import json
import os
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

# Keep these in step with the separators of fuzz_weights.cpp, fuzz_hub.cpp and the parameter bytes of
# fuzz_decode_plane.cpp.
CONFIG_SEPARATOR = b"\n--config.json--\n"
RESPONSE_SEPARATOR = b"\r\n--next-response--\r\n"


class Corpus:
    def __init__(self, out: Path):
        self.out = out

    def add(self, harness: str, name: str, data: bytes):
        d = self.out / harness
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)


def pattern(w, h, mode):
    """A deterministic picture with edges and gradients (so JPEG has AC coefficients, PNG filters vary)."""
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1)).astype(np.uint8)
    g = (y * 255 // max(h - 1, 1)).astype(np.uint8)
    b = (((x // 3 + y // 2) % 2) * 255).astype(np.uint8)
    im = Image.fromarray(np.stack([r, g, b], axis=-1), "RGB")
    return im if mode == "RGB" else im.convert(mode)


def encode(im, fmt, **kw):
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def raw_png(w, h, bit_depth, color_type, rows, interlace=0, extra=b""):
    """A PNG written by hand, for modes Pillow does not write (16-bit colour, interlaced)."""
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, interlace)
    raw = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra + png_chunk(b"IDAT", zlib.compress(raw)) +
            png_chunk(b"IEND", b""))


def image_seeds(shared: Path):
    """(name, bytes) of every image seed."""
    s = []
    for w, h in [(7, 5), (16, 16), (33, 17)]:
        tag = f"{w}x{h}"
        rgb = pattern(w, h, "RGB")
        gray = rgb.convert("L")
        # JPEG: gray, colour with each subsampling, progressive, optimised Huffman tables, restart intervals, CMYK.
        s.append((f"gray_{tag}.jpg", encode(gray, "JPEG", quality=90)))
        for sub in (0, 1, 2):
            s.append((f"rgb_sub{sub}_{tag}.jpg", encode(rgb, "JPEG", quality=85, subsampling=sub)))
        s.append((f"progressive_{tag}.jpg", encode(rgb, "JPEG", progressive=True, quality=75)))
        s.append((f"optimized_{tag}.jpg", encode(rgb, "JPEG", optimize=True)))
        s.append((f"cmyk_{tag}.jpg", encode(rgb.convert("CMYK"), "JPEG")))
        # PNG: every mode Pillow writes, plus 16-bit and interlaced files by hand.
        for mode in ("1", "L", "LA", "P", "RGB", "RGBA", "I;16"):
            im = rgb.convert("L").convert(mode) if mode == "I;16" else rgb.convert(mode)
            s.append((f"{mode.replace(';', '')}_{tag}.png", encode(im, "PNG")))
        s.append((f"P_trns_{tag}.png", encode(rgb.convert("P"), "PNG", transparency=3)))
        rows16 = [bytes(np.full(w * 3, (y * 4099) & 0xFFFF, ">u2").tobytes()) for y in range(h)]
        s.append((f"rgb16_{tag}.png", raw_png(w, h, 16, 2, rows16)))
        rows_la16 = [bytes(np.arange(w * 2, dtype=">u2").tobytes()) for _ in range(h)]
        s.append((f"la16_{tag}.png", raw_png(w, h, 16, 4, rows_la16)))
        # GIF: still, transparent, two frames.
        s.append((f"still_{tag}.gif", encode(rgb.convert("P"), "GIF")))
        s.append((f"trns_{tag}.gif", encode(rgb.convert("P"), "GIF", transparency=0)))
        s.append((f"anim_{tag}.gif", encode(rgb.convert("P"), "GIF", save_all=True,
                                             append_images=[gray.convert("P")], duration=10, loop=0)))
        # BMP: 1, 8 (palette), 24 and 32 bits.
        for mode in ("1", "L", "P", "RGB", "RGBA"):
            s.append((f"{mode}_{tag}.bmp", encode(rgb.convert(mode), "BMP")))
        # WebP: lossy, lossless, with alpha.
        s.append((f"lossy_{tag}.webp", encode(rgb, "WEBP", quality=70)))
        s.append((f"lossless_{tag}.webp", encode(rgb, "WEBP", lossless=True)))
        s.append((f"alpha_{tag}.webp", encode(rgb.convert("RGBA"), "WEBP")))
        # TIFF: modes x compressions, both byte orders are produced by libtiff only as native: add a big-endian one.
        for mode in ("1", "L", "RGB", "RGBA", "CMYK", "I;16", "P"):
            im = rgb.convert("L").convert(mode) if mode == "I;16" else rgb.convert(mode)
            comps = ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits") if mode != "1" else ("raw", "group4")
            for comp in comps:
                s.append((f"{mode.replace(';', '')}_{comp}_{tag}.tif", encode(im, "TIFF", compression=comp)))
        s.append((f"jpeg_{tag}.tif", encode(rgb, "TIFF", compression="jpeg")))
        # PNM: the binary ones from Pillow, the ASCII ones by hand.
        s.append((f"P4_{tag}.pbm", encode(rgb.convert("1"), "PPM")))
        s.append((f"P5_{tag}.pgm", encode(gray, "PPM")))
        s.append((f"P6_{tag}.ppm", encode(rgb, "PPM")))
        g = np.asarray(gray)
        s.append((f"P2_{tag}.pgm", (f"P2\n# comment\n{w} {h}\n255\n" +
                                     "\n".join(" ".join(map(str, r)) for r in g) + "\n").encode()))
        s.append((f"P3_{tag}.ppm", (f"P3\n{w} {h}\n255\n" +
                                     " ".join(map(str, np.asarray(rgb).ravel())) + "\n").encode()))
        s.append((f"P1_{tag}.pbm", (f"P1\n{w} {h}\n" +
                                     "\n".join(" ".join("1" if v < 128 else "0" for v in r) for r in g) +
                                     "\n").encode()))
    s.append(("maxval_1000.pgm", b"P5 2 2 1000\n" + struct.pack(">4H", 0, 300, 700, 1000)))
    s.append(("empty", b""))
    s.append(("jpeg_soi_only.jpg", b"\xff\xd8\xff"))
    # Small crops of the shared images, re-encoded as the original's format with its EXIF / ICC data, and the first
    # 4 KB of a few originals (real camera markers: EXIF, ICC, quantisation and Huffman tables).
    images = shared / "images"
    if images.is_dir():
        for i, p in enumerate(sorted(images.iterdir())):
            if p.suffix.lower() not in (".jpg", ".jpeg", ".png") or i % 3:
                continue
            with Image.open(p) as im:
                fmt = im.format
                info = {k: im.info[k] for k in ("exif", "icc_profile") if k in im.info}
                x0, y0 = im.width // 3, im.height // 3
                crop = im.crop((x0, y0, x0 + 24, y0 + 20))
                crop.load()
            s.append((f"crop_{p.stem}.{fmt.lower()}", encode(crop, fmt, **info)))
            if fmt == "JPEG":
                s.append((f"head_{p.stem}.jpg", p.read_bytes()[:4096]))
    return s


def exif_seeds(imgs):
    """JPEGs with an EXIF APP1 segment, PNGs with an eXIf chunk, and a bare TIFF IFD0, each with orientation 6."""
    ifd = b"II*\0" + struct.pack("<IH", 8, 2) + struct.pack("<HHII", 0x010F, 2, 6, 38) \
        + struct.pack("<HHIHH", 0x0112, 3, 1, 6, 0) + struct.pack("<I", 0) + b"Canon\0"
    s = [("exif_ifd0.tif", ifd)]
    for name, data in imgs:
        if name.endswith("16x16.jpg") and data[:2] == b"\xff\xd8":
            s.append(("exif6_" + name, data[:2] + b"\xff\xe1" + struct.pack(">H", len(ifd) + 8) + b"Exif\0\0" + ifd
                      + data[2:]))
        if name.endswith("16x16.png") and data[:8] == b"\x89PNG\r\n\x1a\n":
            at = data.index(b"IDAT") - 4
            s.append(("exif6_" + name, data[:at] + png_chunk(b"eXIf", ifd) + data[at:]))
    return s


def http_seeds(png: bytes, jpg: bytes):
    def req(method, target, headers=(), body=b""):
        head = f"{method} {target} HTTP/1.1\r\nHost: localhost:8000\r\n"
        for k, v in headers:
            head += f"{k}: {v}\r\n"
        if body or method in ("POST", "PUT"):
            head += f"Content-Length: {len(body)}\r\n"
        return head.encode() + b"\r\n" + body

    def multipart(fields, boundary="sprtBoundary7MA4YWxk"):
        out = b""
        for name, filename, ctype, data in fields:
            out += f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"".encode()
            if filename:
                out += f"; filename=\"{filename}\"".encode()
            out += b"\r\n"
            if ctype:
                out += f"Content-Type: {ctype}\r\n".encode()
            out += b"\r\n" + data + b"\r\n"
        out += f"--{boundary}--\r\n".encode()
        return out, f"multipart/form-data; boundary={boundary}"

    s = []
    s.append(("post_png", req("POST", "/v1/keypoints", [("Content-Type", "image/png")], png)))
    s.append(("post_jpg_params", req(
        "POST", "/v1/keypoints?max_keypoints=10&keypoint_threshold=0.01&nms_radius=3&return_descriptors=false"
        "&grayscale=true&format=npz", [("Content-Type", "image/jpeg")], jpg)))
    s.append(("post_octet_accept_npz", req("POST", "/v1/keypoints", [("Content-Type", "application/octet-stream"),
                                                                      ("Accept", "application/x-npz")], jpg)))
    s.append(("post_bad_params", req("POST", "/v1/keypoints?max_keypoints=abc&nms_radius=99&x=1&x=2&a%20b=c+d",
                                     [("Content-Type", "image/png")], png)))
    body, ctype = multipart([("image", "a.png", "image/png", png), ("other", None, None, b"text")])
    s.append(("multipart", req("POST", "/v1/keypoints", [("Content-Type", ctype)], body)))
    body, ctype = multipart([("image", "a.png", "image/png", png), ("image", "b.jpg", "image/jpeg", jpg),
                             ("image", "", None, b"not an image")])
    s.append(("batch", req("POST", "/v1/keypoints/batch?max_keypoints=5", [("Content-Type", ctype)], body)))
    body, ctype = multipart([("image0", "a.png", "image/png", png), ("image1", "b.jpg", "image/jpeg", jpg)])
    s.append(("match", req("POST", "/v1/match?conf=NN-ratio&ratio=0.9&distance=0.7&mutual=false&max_keypoints=5",
                           [("Content-Type", ctype)], body)))
    # LightGlue's fields (a harness server has no --matcher-weights: 422 naming the flag, after every field is parsed).
    s.append(("match_lightglue", req("POST", "/v1/match?matcher=lightglue&depth_confidence=0.9&width_confidence=-1"
                                     "&filter_threshold=0.2&max_keypoints=5", [("Content-Type", ctype)], body)))
    s.append(("match_lightglue_nn_field", req("POST", "/v1/match?matcher=lightglue&ratio=0.8",
                                              [("Content-Type", ctype)], body)))
    body, ctype = multipart([("image0", "a.png", "image/png", png), ("image0", "b.png", None, png)])
    s.append(("match_bad_fields", req("POST", "/v1/match?conf=superglue", [("Content-Type", ctype)], body)))
    chunked = f"{len(png):x}\r\n".encode() + png + b"\r\n0\r\n\r\n"
    s.append(("chunked", req("POST", "/v1/keypoints", [("Content-Type", "image/png"),
                                                         ("Transfer-Encoding", "chunked")]).replace(
        b"Content-Length: 0\r\n", b"") + chunked))
    s.append(("form", req("POST", "/v1/keypoints", [("Content-Type", "application/x-www-form-urlencoded")],
                          b"image=abc&x=1")))
    s.append(("expect_continue", req("POST", "/v1/keypoints", [("Content-Type", "image/png"),
                                                                 ("Expect", "100-continue")], png)))
    s.append(("empty_body", req("POST", "/v1/keypoints", [("Content-Type", "image/png")])))
    s.append(("text_body", req("POST", "/v1/keypoints", [("Content-Type", "text/plain; charset=utf-8")], b"hello")))
    for path in ("/healthz", "/readyz", "/v1/info", "/metrics", "/openapi.json", "/nope"):
        s.append((f"get_{path.strip('/').replace('/', '_') or 'root'}", req("GET", path)))
    s.append(("put_keypoints", req("PUT", "/v1/keypoints", [("Content-Type", "image/png")], png)))
    s.append(("head_healthz", req("HEAD", "/healthz")))
    s.append(("options", req("OPTIONS", "/v1/keypoints/batch")))
    s.append(("pipelined", req("GET", "/healthz", [("Connection", "keep-alive")]) +
              req("POST", "/v1/keypoints", [("Content-Type", "image/jpeg")], jpg) + req("GET", "/metrics")))
    s.append(("range", req("GET", "/v1/info", [("Range", "bytes=0-10,20-30")])))
    s.append(("gzip_accept", req("GET", "/v1/info", [("Accept-Encoding", "gzip, br")])))
    return s


def safetensors(tensors, metadata=None):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def weight_seeds(shared: Path):
    s = []
    tiny_cfg = {"encoder_hidden_sizes": [1, 1, 1, 1], "decoder_hidden_size": 1, "keypoint_decoder_dim": 65,
                "descriptor_decoder_dim": 1}
    e, d = tiny_cfg["encoder_hidden_sizes"], tiny_cfg["decoder_hidden_size"]
    shapes = {}
    for i in range(4):
        cin = 1 if i == 0 else e[i - 1]
        shapes[f"encoder.conv_blocks.{i}.conv_a"] = (e[i], cin, 3)
        shapes[f"encoder.conv_blocks.{i}.conv_b"] = (e[i], e[i], 3)
    shapes["keypoint_decoder.conv_score_a"] = (d, e[3], 3)
    shapes["keypoint_decoder.conv_score_b"] = (65, d, 1)
    shapes["descriptor_decoder.conv_descriptor_a"] = (d, e[3], 3)
    shapes["descriptor_decoder.conv_descriptor_b"] = (tiny_cfg["descriptor_decoder_dim"], d, 1)
    for dt, np_dt in (("F32", "<f4"), ("F16", "<f2"), ("F64", "<f8")):
        t = {}
        for name, (o, i, k) in shapes.items():
            t["superpoint." + name + ".weight"] = (dt, (o, i, k, k), np.linspace(-1, 1, o * i * k * k).astype(np_dt).tobytes())
            t["superpoint." + name + ".bias"] = (dt, (o,), np.zeros(o, np_dt).tobytes())
        s.append((f"tiny_{dt}", safetensors(t, {"format": "pt"}) + CONFIG_SEPARATOR + json.dumps(tiny_cfg).encode()))
    bf16 = (np.array([1.0, -2.5, 0.0, 65504.0], "<f4").view("<u4") >> 16).astype("<u2").tobytes()
    s.append(("bf16", safetensors({"a": ("BF16", (2, 2), bf16), "empty": ("F32", (0, 3), b"")})))
    s.append(("bad_dtype", safetensors({"a": ("I64", (1,), b"\0" * 8)})))
    cfg = shared / "weights" / "superpoint" / "config.json"
    if cfg.is_file():
        s.append(("config.json", cfg.read_bytes()))
    s.append(("config_legacy.json", json.dumps({"hidden_sizes": [64, 64, 128, 128, 256], "descriptor_dim": 256,
                                                "keypoint_threshold": 0.01, "max_keypoints": 1024,
                                                "nms_radius": 4}).encode()))
    st = shared / "weights" / "superpoint" / "model.safetensors"
    if st.is_file():
        with st.open("rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            if n < 65536:
                s.append(("real_header_truncated", struct.pack("<Q", n) + f.read(n) + b"\0" * 64))
    return s


def hub_seeds():
    commit = "0123456789abcdef0123456789abcdef01234567"
    cfg = b'{"model_type": "superpoint"}'
    st = safetensors({"x": ("F32", (1,), b"\0\0\0\0")})

    def head(etag, size, extra=""):
        return (f"HTTP/1.1 200 OK\r\nX-Repo-Commit: {commit}\r\nETag: \"{etag}\"\r\nContent-Length: {size}\r\n"
                f"{extra}\r\n").encode()

    def get(body, extra=""):
        return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body

    def seq(*responses):
        return RESPONSE_SEPARATOR.join(responses)

    s = []
    s.append(("ok", seq(head("a" * 40, len(cfg)), get(cfg), head("b" * 64, len(st)), get(st))))
    s.append(("linked_etag_cdn", seq(
        head("a" * 40, len(cfg)), get(cfg),
        (f"HTTP/1.1 302 Found\r\nX-Repo-Commit: {commit}\r\nX-Linked-Etag: \"{'c' * 64}\"\r\n"
         f"X-Linked-Size: {len(st)}\r\nLocation: https://cdn-lfs.example.co/blob?sig=1\r\nContent-Length: 0\r\n\r\n"
         ).encode(),
        get(st))))
    s.append(("relative_redirect", seq(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /fuzz-org/fuzz-model/resolve/main/config.json?r=1\r\n"
        b"Content-Length: 0\r\n\r\n",
        head("a" * 40, len(cfg), "Connection: close\r\n"), get(cfg), head("b" * 64, len(st)), get(st))))
    s.append(("entry_not_found", (f"HTTP/1.1 404 Not Found\r\nX-Error-Code: EntryNotFound\r\nX-Repo-Commit: {commit}"
                                  f"\r\nX-Error-Message: Entry not found\r\nContent-Length: 5\r\n\r\nnope.").encode()))
    s.append(("unauthorized", b"HTTP/1.1 401 Unauthorized\r\nX-Error-Code: GatedRepo\r\nContent-Length: 0\r\n\r\n"))
    s.append(("no_commit", b"HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 3\r\n\r\n"))
    s.append(("truncated_get", seq(head("a" * 40, 100), b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")))
    s.append(("chunked_get", seq(head("a" * 40, len(cfg)),
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                 f"{len(cfg):x}\r\n".encode() + cfg + b"\r\n0\r\n\r\n",
                                 head("b" * 64, len(st)), get(st))))
    s.append(("weak_etag_continue", seq(
        b"HTTP/1.1 100 Continue\r\n\r\n" + head("a" * 40, len(cfg)).replace(b'ETag: "', b'ETag: W/"'), get(cfg))))
    return s


def npz_seeds():
    s = []
    arrays = {
        "f4": np.arange(6, dtype="<f4").reshape(2, 3), "f8": np.array([1.5, -2.0]), "f2": np.ones(3, "<f2"),
        "i1": np.array([-1, 2], "i1"), "i2": np.array([300], "<i2"), "i4": np.arange(4, dtype="<i4"),
        "i8": np.array([[1], [2]], "<i8"), "u1": np.array([255], "u1"), "u2": np.array([1], "<u2"),
        "u4": np.array([7], "<u4"), "u8": np.array([9], "<u8"), "b1": np.array([True, False]),
        "scalar": np.array(3.0, "<f4"), "empty": np.zeros((0, 256), "<f4"),
    }
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    s.append(("savez.npz", buf.getvalue()))
    buf = io.BytesIO()
    np.savez_compressed(buf, keypoints=np.arange(8, dtype="<f4").reshape(4, 2), scores=np.ones(4, "<f4"))
    s.append(("savez_compressed.npz", buf.getvalue()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:  # zip64 members, as numpy writes for large arrays
        with z.open("a.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, np.arange(5, dtype="<i8"))
    s.append(("zip64.npz", buf.getvalue()))
    for version in ((1, 0), (2, 0), (3, 0)):
        b = io.BytesIO()
        np.lib.format.write_array(b, np.arange(12, dtype="<f4").reshape(3, 4), version=version)
        s.append((f"v{version[0]}.npy", b.getvalue()))
    b = io.BytesIO()
    np.lib.format.write_array(b, np.ones((2, 2), ">f4"))
    s.append(("big_endian.npy", b.getvalue()))
    return s


def multipart_seeds(png: bytes):
    """fuzz_multipart's inputs: a Content-Type value, '\\n', a body."""
    def body(parts, boundary="b0undary", preamble=b"", epilogue=b"", sep=b"\r\n"):
        out = preamble
        for headers, data in parts:
            out += b"--" + boundary.encode() + sep + b"".join(h + sep for h in headers) + sep + data + sep
        return out + b"--" + boundary.encode() + b"--" + epilogue
    disp = b'Content-Disposition: form-data; name="image"; filename="a.png"'
    ctype = b"multipart/form-data; boundary=b0undary\n"
    return [("one", ctype + body([([disp, b"Content-Type: image/png"], png)])),
            ("two_fields", ctype + body([([disp], png), ([b"content-disposition: form-data; name=other"], b"x")])),
            ("preamble_epilogue", ctype + body([([disp], b"abc")], preamble=b"junk\r\n", epilogue=b"\r\nmore")),
            ("quoted_boundary", b'multipart/form-data; charset=utf-8; boundary="q \\"b"\n' +
             body([([disp], b"q")], boundary='q "b')),
            ("empty_part", ctype + body([([b'Content-Disposition: form-data; name=""'], b"")])),
            ("escaped_name", ctype + body([([b'Content-Disposition: form-data; name="a\\"b"; filename="c\\\\d"'],
                                            b"--b0undar")])),
            ("no_close", ctype + b"--b0undary\r\n" + disp + b"\r\n\r\nabc"),
            ("lf_only", ctype + body([([disp], b"x")], sep=b"\n"))]


def query_seeds():
    return [("params", b"max_keypoints=10&keypoint_threshold=0.01&nms_radius=3&resize=640x480&format=npz"),
            ("escapes", b"a=%41%4a&b=x+y%20z&%zz=%&c&&d="),
            ("nul", b"max_keypoints=5%00tail&no%00pe=1"),
            ("utf8", "preset=caf%C3%A9&x=\u00e9".encode()),
            ("many", b"&".join(b"f%d=%d" % (i, i) for i in range(70)))]


def pairs_seeds():
    return [("exhaustive.txt", b"a.jpg b.jpg\na.jpg c.jpg\nb.jpg c.jpg"),
            ("crlf_tabs.txt", b"db/1.jpg\tq/2.jpg\r\n\n  x y  \n"),
            ("cr.txt", b"a.jpg b.jpg\ra.jpg c.jpg\r\rb.jpg c.jpg\r"),
            ("repeats.txt", b"a b\nb a\na b\nc c\n"),
            ("unicode.txt", "caf\u00e9.jpg\u00a0b.jpg\nc\u3000d\ne\u2003f\n".encode()),
            ("bad_lines.txt", b"a b c\nd\n \t\n"),
            ("long_name.txt", b"a " + b"x" * 5000 + b"\n")]


def h5_file(fill, **kw):
    """The bytes of an HDF5 file that h5py writes in memory (no disk) with `fill(file)`."""
    import h5py  # the test venv (scripts/setup-venv.sh)

    buf = io.BytesIO()
    with h5py.File(buf, "w", **kw) as f:
        fill(f)
    return buf.getvalue()


def hloc_features(f, names, dim, n, dtype, **ds_kw):
    """hloc's extract_features layout: one group per image (names may hold '/': nested groups), descriptors dim-major
    (dim, n), keypoints (n, 2) with the "uncertainty" attribute, scores (n,), image_size (2,) int64 (width, height)."""
    rng = np.random.default_rng(n * 31 + dim)
    for k, name in enumerate(names):
        g = f.create_group(name)
        kp = g.create_dataset("keypoints", data=(rng.random((n, 2)) * [40, 30]).astype(dtype), **ds_kw)
        kp.attrs["uncertainty"] = 2.0
        g.create_dataset("scores", data=rng.random(n).astype(dtype), **ds_kw)
        d = rng.standard_normal((dim, n)).astype(dtype)
        g.create_dataset("descriptors", data=d / np.maximum(np.linalg.norm(d, axis=0), 1e-6).astype(dtype), **ds_kw)
        g.create_dataset("image_size", data=np.array([40 + k, 30], np.int64))


def hloc_matches(f, pairs, n0, n1, sep="/", **ds_kw):
    """hloc's match_features layout: group names_to_pair(name0, name1) ('/' in names made '-'), matches0 (n0,) int16
    (-1: no match), matching_scores0 (n0,) float16."""
    for k, (a, b) in enumerate(pairs):
        g = f.create_group(a.replace("/", "-") + sep + b.replace("/", "-"))
        m = np.full(n0, -1, np.int16)
        m[k % 2::2] = np.arange(len(m[k % 2::2])) % n1
        g.create_dataset("matches0", data=m, **ds_kw)
        g.create_dataset("matching_scores0", data=np.linspace(0, 1, n0).astype(np.float16), **ds_kw)


def h5_seeds():
    names = ["db/1.jpg", "query/night/2.jpg"]
    pairs = [(names[0], names[1])]
    s = [("features_f16.h5", h5_file(lambda f: hloc_features(f, names, 256, 5, np.float16))),
         ("features_f32_dim8.h5", h5_file(lambda f: hloc_features(f, ["a.jpg", "b.jpg"], 8, 6, np.float32))),
         ("features_f64_v110.h5", h5_file(lambda f: hloc_features(f, ["x/y.png"], 4, 3, np.float64),
                                           libver=("v110", "v110"))),
         ("features_gzip.h5", h5_file(lambda f: hloc_features(f, ["c.jpg"], 16, 8, np.float32, chunks=True,
                                                              compression="gzip", shuffle=True))),
         ("features_empty_record.h5", h5_file(lambda f: hloc_features(f, ["e.jpg"], 256, 0, np.float16))),
         ("matches.h5", h5_file(lambda f: hloc_matches(f, pairs + [(names[1], names[0])], 5, 5))),
         ("matches_old_sep.h5", h5_file(lambda f: hloc_matches(f, [("a.jpg", "b.jpg")], 6, 6, sep="_"))),
         ("matches_gzip_v110.h5", h5_file(lambda f: hloc_matches(f, [("a.jpg", "b.jpg")], 6, 6, chunks=True,
                                                                   compression="gzip"), libver=("v110", "v110")))]

    def both(f):  # a features file that also holds the pairs of its images (the COLMAP export's checks)
        hloc_features(f, names, 8, 5, np.float16)
        hloc_matches(f, pairs, 5, 5)

    s.append(("features_and_matches.h5", h5_file(both)))

    def odd(f):  # links and shapes the readers refuse: soft and external links, a 3-D record, a huge chunked shape
        hloc_features(f, ["ok.jpg"], 4, 2, np.float32)
        f["soft"] = __import__("h5py").SoftLink("/ok.jpg")
        f["ext"] = __import__("h5py").ExternalLink("other.h5", "/ok.jpg")
        f.create_dataset("cube/descriptors", data=np.zeros((2, 2, 2), np.float32))
        f.create_dataset("huge/keypoints", shape=(1 << 20, 2), dtype="f2", chunks=(1024, 2))
        f.create_dataset("huge/image_size", data=np.array([1, 1], np.int64))
        f.create_dataset("str/descriptors", data=np.array([b"ab", b"cd"]))

    s.append(("refused.h5", h5_file(odd)))
    return s


def pth_file(pickle_bytes, storages=(), prefix="archive", byteorder=True):
    """A torch.save zip archive: <prefix>/data.pkl, <prefix>/data/<key> per storage, stored (not compressed)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", pickle_bytes)
        if byteorder:
            z.writestr(f"{prefix}/byteorder", "little")
        for key, data in storages:
            z.writestr(f"{prefix}/data/{key}", data)
        z.writestr(f"{prefix}/version", "3\n")
    return buf.getvalue()


def pth_seeds():
    """State dicts as torch.save writes them (when torch is importable: Debian's python3-torch in the test venv), a
    tiny LightGlue in cvg's names, and pickles the reader must refuse (other globals, opcodes, extents)."""
    s = []
    try:
        import torch

        def saved(obj):
            b = io.BytesIO()
            torch.save(obj, b)
            return b.getvalue()

        g = torch.Generator().manual_seed(0)
        s.append(("float_half_bf16.pth", saved({"a": torch.randn(3, 4, generator=g), "b": torch.randn(5).half(),
                                                "c": torch.randn(2, 2).bfloat16(),
                                                "view": torch.arange(12.0).reshape(3, 4)[:, 1:3]})))
        d, hd = 8, 4
        sd = {"posenc.Wr.weight": torch.randn(hd // 2, 2, generator=g)}
        for i in range(2):
            t = f"transformers.{i}."
            for blk, shapes in (("self_attn", {"Wqkv": (3 * d, d), "out_proj": (d, d)}),
                                ("cross_attn", {"to_qk": (d, d), "to_v": (d, d), "to_out": (d, d)})):
                for name, shape in shapes.items():
                    sd[t + f"{blk}.{name}.weight"] = torch.randn(*shape, generator=g)
                    sd[t + f"{blk}.{name}.bias"] = torch.randn(shape[0], generator=g)
                for j, shape in ((0, (2 * d, 2 * d)), (1, (2 * d,)), (3, (d, 2 * d))):
                    sd[t + f"{blk}.ffn.{j}.weight"] = torch.randn(*shape, generator=g)
                    sd[t + f"{blk}.ffn.{j}.bias"] = torch.randn(shape[0], generator=g)
            sd[f"log_assignment.{i}.matchability.weight"] = torch.randn(1, d, generator=g)
            sd[f"log_assignment.{i}.matchability.bias"] = torch.randn(1, generator=g)
            sd[f"log_assignment.{i}.final_proj.weight"] = torch.randn(d, d, generator=g)
            sd[f"log_assignment.{i}.final_proj.bias"] = torch.randn(d, generator=g)
        sd["token_confidence.0.token.0.weight"] = torch.randn(1, d, generator=g)
        sd["token_confidence.0.token.0.bias"] = torch.randn(1, generator=g)
        s.append(("lightglue_tiny.pth", saved(sd)))
    except ImportError:
        pass
    s.append(("os_system.pth", pth_file(b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.")))
    s.append(("list.pth", pth_file(b"\x80\x02]q\x00.")))
    s.append(("past_storage.pth", pth_file(
        b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n"
        b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQK\x02K\x03\x85K\x01\x85"
        b"\x89ccollections\nOrderedDict\n)Rtq\x02Rs.", [("0", b"\x00" * 16)])))
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SUPERPOINT_RT_SHARED", "../shared")))
    a = ap.parse_args()
    c = Corpus(a.out)
    imgs = image_seeds(a.shared)
    for name, data in imgs:
        c.add("decode", name, data)
    # The cv2 decode harness: the same images, plus EXIF orientations (fuzz_decode_cv2.cpp).
    for name, data in imgs + exif_seeds(imgs):
        c.add("decode_cv2", name, data)
    # The plane harness takes 4 parameter bytes (channel, output width - 1, output height - 1, the two-thread mode:
    # see fuzz_decode_plane.cpp), then a JPEG. Each JPEG comes with the one-thread mode and one of the others.
    jpegs = [(n, d) for n, d in imgs if d[:3] == b"\xff\xd8\xff"]
    for i, (name, data) in enumerate(jpegs):
        params = [i % 4, (5 * i + 7) % 64, (3 * i + 4) % 64]
        c.add("decode_plane", name, bytes(params + [0]) + data)
        c.add("decode_plane", "split_" + name, bytes(params + [1 + i % 3 + ((7 * i) % 64 << 2)]) + data)
    png = dict(imgs)["RGB_16x16.png"]
    jpg = dict(imgs)["rgb_sub2_16x16.jpg"]
    for name, data in http_seeds(png, jpg):
        c.add("http", name, data)
    for name, data in multipart_seeds(png):
        c.add("multipart", name, data)
    for name, data in query_seeds():
        c.add("query", name, data)
    for name, data in weight_seeds(a.shared):
        c.add("weights", name, data)
    for name, data in hub_seeds():
        c.add("hub", name, data)
    for name, data in npz_seeds():
        c.add("npz", name, data)
    for name, data in pairs_seeds():
        c.add("pairs", name, data)
    for name, data in h5_seeds():
        c.add("h5", name, data)
    for name, data in pth_seeds():
        c.add("pth", name, data)
    for h in sorted(p.name for p in a.out.iterdir() if p.is_dir()):
        n = sum(1 for _ in (a.out / h).iterdir())
        print(f"{h}: {n} seeds")


if __name__ == "__main__":
    main()
