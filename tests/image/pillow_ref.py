#!/usr/bin/env python3
"""Pillow reference for tests/image (run with Debian's python3 + Pillow 9.4, the same libjpeg-turbo/libpng).

  pillow_ref.py gen DIR         write synthetic test images (every format / mode the decoders handle) into DIR
  pillow_ref.py dump OUT FILE.. for each FILE write OUT/<i>.bin (the expected pixels) and a line in OUT/index.tsv:
                                "<i>\tok\t<w>\t<h>\t<channels>" or "<i>\terror\t<message>"

Expected pixels = Image.open(f) followed by convert("RGB"), except the modes superpoint-rt returns as a gray
plane: "L", "1", "LA" (and PNG 16-bit gray+alpha, which Pillow opens as RGBA with R=G=B) -> the L values; 16-bit
gray ("I", "I;16*") -> value >> 8 (the documented difference: Pillow's convert("RGB") clips at 255 instead).
"""
import io
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image


def expected(path):
    im = Image.open(path)
    rawmode = im.tile[0][3] if im.tile else None
    if isinstance(rawmode, tuple):
        rawmode = rawmode[0]
    im.load()
    mode = im.mode
    if mode in ("L", "1", "LA"):
        return np.asarray(im.convert("L"), dtype=np.uint8)
    if mode in ("I", "I;16", "I;16B", "I;16L"):
        return (np.asarray(im).astype(np.int64) >> 8).clip(0, 255).astype(np.uint8)
    if im.format == "PNG" and rawmode == "LA;16B":
        return np.asarray(im.convert("RGB"), dtype=np.uint8)[:, :, 0].copy()
    return np.asarray(im.convert("RGB"), dtype=np.uint8)


def dump(out, files):
    lines = []
    for i, f in enumerate(files):
        try:
            a = expected(f)
            ch = 1 if a.ndim == 2 else a.shape[2]
            with open(os.path.join(out, f"{i}.bin"), "wb") as fh:
                fh.write(np.ascontiguousarray(a).tobytes())
            lines.append(f"{i}\tok\t{a.shape[1]}\t{a.shape[0]}\t{ch}")
        except Exception as e:  # noqa: BLE001 - any Pillow failure is an "error" expectation
            msg = str(e).replace("\t", " ").replace("\n", " ")
            lines.append(f"{i}\terror\t{msg}")
    with open(os.path.join(out, "index.tsv"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# Synthetic images


def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)


def raw_png(w, h, depth, ctype, raw_rows, extra=b""):
    raw = b"".join(b"\0" + r for r in raw_rows)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def bmp(w, h, bits, rows_bottom_up, palette=None, compression=0, masks=None, header=40, top_down=False, data=None):
    """A BMP by hand (Pillow cannot write 4-bit, 16-bit, bit-field, RLE or OS/2 files)."""
    stride = ((w * bits + 31) >> 3) & ~3
    if data is None:
        data = b"".join(r.ljust(stride, b"\0") for r in rows_bottom_up)
    pal = b""
    ncolors = 0
    if palette is not None:
        ncolors = len(palette)
        pal = b"".join(bytes([b, g, r]) + (b"" if header == 12 else b"\0") for (r, g, b) in palette)
    if header == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, bits)
    else:
        hh = (2**32 - h) if top_down else h
        info = struct.pack("<IiIHHIIiiII", header, w, hh, 1, bits, compression, len(data), 2835, 2835, ncolors, 0)
        if header > 40:
            m = list(masks or (0, 0, 0)) + [0] * 4
            info += struct.pack("<IIII", *m[:4])
            info = info.ljust(header, b"\0")
        elif masks is not None:
            info += struct.pack("<III", *masks[:3])
    off = 14 + len(info) + len(pal)
    return b"BM" + struct.pack("<IHHI", off + len(data), 0, 0, off) + info + pal + data


def gen(out):
    rng = np.random.default_rng(1234)
    W, H = 67, 45  # odd sizes: row padding, partial MCUs, odd interlace passes

    def save(im, name, **kw):
        im.save(os.path.join(out, name), **kw)

    rgb = Image.fromarray(rng.integers(0, 256, (H, W, 3), dtype=np.uint8), "RGB")
    # Smooth content too, so that lossy codecs are exercised on something natural.
    yy, xx = np.mgrid[0:H, 0:W]
    smooth = np.stack([(xx * 255 // W), (yy * 255 // H), ((xx + yy) * 255 // (W + H))], -1).astype(np.uint8)
    smooth_rgb = Image.fromarray(smooth, "RGB")
    gray = Image.fromarray(rng.integers(0, 256, (H, W), dtype=np.uint8), "L")
    alpha = Image.fromarray(rng.integers(0, 256, (H, W), dtype=np.uint8), "L")
    rgba = rgb.copy()
    rgba.putalpha(alpha)
    la = Image.merge("LA", (gray, alpha))
    pal = rgb.quantize(colors=200)
    pal16 = rgb.quantize(colors=16)
    pal2 = rgb.quantize(colors=2)
    bw = gray.point(lambda v: 255 if v > 127 else 0).convert("1")

    # JPEG
    save(smooth_rgb, "jpeg_rgb_q90.jpg", quality=90)
    save(rgb, "jpeg_rgb_444.jpg", quality=95, subsampling=0)
    save(rgb, "jpeg_rgb_422.jpg", quality=80, subsampling=1)
    save(smooth_rgb, "jpeg_rgb_progressive.jpg", quality=85, progressive=True)
    save(gray, "jpeg_gray.jpg", quality=90)
    save(rgb.convert("CMYK"), "jpeg_cmyk.jpg", quality=90)
    save(Image.new("RGB", (1, 1), (10, 200, 30)), "jpeg_1x1.jpg")
    save(smooth_rgb.resize((1, 5000)), "jpeg_1x5000.jpg")
    # PNG
    save(rgb, "png_rgb.png")
    save(rgba, "png_rgba.png")
    save(gray, "png_l.png")
    save(la, "png_la.png")
    save(pal, "png_p.png")
    save(pal16, "png_p4.png", bits=4)
    save(pal2, "png_p1.png", bits=1)
    pt = pal.copy()
    pt.info["transparency"] = bytes(rng.integers(0, 256, 200, dtype=np.uint8))
    save(pt, "png_p_trns.png")
    save(bw, "png_1bit.png")
    with open(os.path.join(out, "png_rgb_adam7.png"), "wb") as fh:
        # Pillow cannot write interlaced PNG: build one with numpy (filter 0 per pass).
        fh.write(adam7_png(np.asarray(rgb)))
    a16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
    save(Image.fromarray(a16.astype(np.int32), "I").convert("I;16"), "png_gray16.png")
    rgb16 = rng.integers(0, 65536, (H, W, 3), dtype=np.uint16)
    with open(os.path.join(out, "png_rgb16.png"), "wb") as fh:
        fh.write(raw_png(W, H, 16, 2, [r.astype(">u2").tobytes() for r in rgb16]))
    rgba16 = rng.integers(0, 65536, (H, W, 4), dtype=np.uint16)
    with open(os.path.join(out, "png_rgba16.png"), "wb") as fh:
        fh.write(raw_png(W, H, 16, 6, [r.astype(">u2").tobytes() for r in rgba16]))
    la16 = rng.integers(0, 65536, (H, W, 2), dtype=np.uint16)
    with open(os.path.join(out, "png_la16.png"), "wb") as fh:
        fh.write(raw_png(W, H, 16, 4, [r.astype(">u2").tobytes() for r in la16]))
    for bits in (2, 4):
        v = rng.integers(0, 1 << bits, (H, W), dtype=np.uint8)
        rows = [np.packbits(np.unpackbits(r[:, None], axis=1)[:, 8 - bits :].reshape(-1)).tobytes() for r in v]
        with open(os.path.join(out, f"png_gray{bits}.png"), "wb") as fh:
            fh.write(raw_png(W, H, bits, 0, rows))
    # Palette shorter than the indices used (Pillow: gray ramp past the palette).
    with open(os.path.join(out, "png_p_short_palette.png"), "wb") as fh:
        fh.write(raw_png(6, 1, 8, 3, [bytes([0, 1, 2, 7, 200, 255])], chunk(b"PLTE", bytes([10, 20, 30, 40, 50, 60]))))
    save(Image.new("L", (1, 1), 77), "png_1x1.png")
    save(gray.resize((1, 5000)), "png_1x5000.png")
    save(gray.resize((5000, 1)), "png_5000x1.png")
    # GIF
    save(pal, "gif_p.gif")
    save(gray, "gif_l.gif")
    save(rgb.quantize(colors=64), "gif_interlaced.gif", interlace=True)
    frames = [rgb.quantize(colors=100), smooth_rgb.quantize(colors=50), gray.convert("RGB").quantize(colors=30)]
    frames[0].save(os.path.join(out, "gif_animated.gif"), save_all=True, append_images=frames[1:], duration=100)
    with open(os.path.join(out, "gif_small_first_frame.gif"), "wb") as fh:
        fh.write(gif_by_hand(W, H, (5, 7, 20, 11), transparency=None, rng=rng))
    with open(os.path.join(out, "gif_small_first_frame_trns.gif"), "wb") as fh:
        fh.write(gif_by_hand(W, H, (3, 2, 30, 30), transparency=9, rng=rng))
    with open(os.path.join(out, "gif_frame_outside_screen.gif"), "wb") as fh:
        fh.write(gif_by_hand(20, 10, (15, 6, 12, 9), transparency=None, rng=rng))
    with open(os.path.join(out, "gif_no_palette.gif"), "wb") as fh:
        fh.write(gif_by_hand(W, H, (0, 0, W, H), transparency=None, rng=rng, palette=False))
    save(Image.new("P", (1, 1), 0), "gif_1x1.gif")
    # BMP
    save(rgb, "bmp_24.bmp")
    save(gray, "bmp_l.bmp")
    save(pal, "bmp_p8.bmp")
    save(bw, "bmp_1.bmp")
    save(rgba, "bmp_32_rgba.bmp")
    idx4 = rng.integers(0, 16, (H, W), dtype=np.uint8)
    pal4 = [tuple(int(c) for c in rng.integers(0, 256, 3)) for _ in range(16)]
    rows4 = [np.packbits(np.unpackbits(r[:, None], axis=1)[:, 4:].reshape(-1)).tobytes() for r in idx4[::-1]]
    with open(os.path.join(out, "bmp_4.bmp"), "wb") as fh:
        fh.write(bmp(W, H, 4, rows4, pal4))
    idx1 = rng.integers(0, 2, (H, W), dtype=np.uint8)
    rows1 = [np.packbits(r).tobytes() for r in idx1[::-1]]
    with open(os.path.join(out, "bmp_1_color.bmp"), "wb") as fh:
        fh.write(bmp(W, H, 1, rows1, [(200, 10, 20), (5, 100, 250)]))
    idx8 = rng.integers(0, 256, (H, W), dtype=np.uint8)
    pal8 = [tuple(int(c) for c in rng.integers(0, 256, 3)) for _ in range(40)]  # indices past 40: gray ramp
    with open(os.path.join(out, "bmp_8_short_palette_topdown.bmp"), "wb") as fh:
        fh.write(bmp(W, H, 8, [r.tobytes() for r in idx8], pal8, top_down=True))
    with open(os.path.join(out, "bmp_8_os2.bmp"), "wb") as fh:
        fh.write(bmp(W, H, 8, [r.tobytes() for r in idx8[::-1]], pal8, header=12))
    px16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
    with open(os.path.join(out, "bmp_16_555.bmp"), "wb") as fh:
        fh.write(bmp(W, H, 16, [r.astype("<u2").tobytes() for r in px16[::-1]]))
    with open(os.path.join(out, "bmp_16_565.bmp"), "wb") as fh:
        fh.write(bmp(W, H, 16, [r.astype("<u2").tobytes() for r in px16[::-1]], compression=3,
                     masks=(0xF800, 0x7E0, 0x1F)))
    px32 = rng.integers(0, 2**32, (H, W), dtype=np.uint32)
    for name, masks in (("bgrx", (0xFF0000, 0xFF00, 0xFF, 0)), ("xbgr", (0xFF000000, 0xFF0000, 0xFF00, 0)),
                        ("rgba", (0xFF, 0xFF00, 0xFF0000, 0xFF000000))):
        with open(os.path.join(out, f"bmp_32_bitfields_{name}.bmp"), "wb") as fh:
            fh.write(bmp(W, H, 32, [r.astype("<u4").tobytes() for r in px32[::-1]], compression=3, masks=masks,
                         header=124))
    with open(os.path.join(out, "bmp_32_bitfields_v3.bmp"), "wb") as fh:
        fh.write(bmp(W, H, 32, [r.astype("<u4").tobytes() for r in px32[::-1]], compression=3,
                     masks=(0xFF0000, 0xFF00, 0xFF)))
    # RLE8 / RLE4: runs, absolute runs (odd length -> padding), end of line, end of bitmap.
    rle8 = bytearray()
    for y in range(H):
        rle8 += bytes([5, (y * 7) % 256, 0, 3, 1, 2, 3, 0, 4, 9, 0, 0])  # run 5, absolute 3 (+pad), run 4, EOL
    rle8 += b"\x00\x01"
    with open(os.path.join(out, "bmp_rle8.bmp"), "wb") as fh:
        fh.write(bmp(12, H, 8, None, pal8, compression=1, data=bytes(rle8)))
    rle4 = bytearray()
    for y in range(H):
        rle4 += bytes([5, 0x3A, 0, 4, 0x12, 0x34, 3, 0x7C, 0, 0])  # run 5, absolute 4, run 3, EOL
    rle4 += b"\x00\x01"
    with open(os.path.join(out, "bmp_rle4.bmp"), "wb") as fh:
        fh.write(bmp(12, H, 4, None, pal4, compression=2, data=bytes(rle4)))
    save(Image.new("RGB", (1, 1), (1, 2, 3)), "bmp_1x1.bmp")
    # WebP
    save(smooth_rgb, "webp_lossy.webp", quality=80)
    save(rgb, "webp_lossless.webp", lossless=True)
    rgba_s = smooth_rgb.copy()
    rgba_s.putalpha(alpha)
    save(rgba_s, "webp_lossy_alpha.webp", quality=70)
    save(rgba, "webp_lossless_alpha.webp", lossless=True)
    save(Image.new("RGB", (1, 1), (9, 99, 199)), "webp_1x1.webp", lossless=True)
    # TIFF
    save(rgb, "tiff_rgb.tif")
    save(rgb, "tiff_rgb_lzw.tif", compression="tiff_lzw")
    save(rgb, "tiff_rgb_deflate.tif", compression="tiff_adobe_deflate")
    save(rgb, "tiff_rgb_packbits.tif", compression="packbits")
    save(gray, "tiff_l.tif")
    save(gray, "tiff_l_lzw.tif", compression="tiff_lzw")
    save(pal, "tiff_p.tif")
    save(rgba, "tiff_rgba.tif")
    save(bw, "tiff_1.tif")
    save(bw, "tiff_1_g4.tif", compression="group4")
    save(rgb.convert("CMYK"), "tiff_cmyk.tif")
    save(Image.fromarray(a16.astype(np.int32), "I").convert("I;16"), "tiff_gray16.tif")
    save(Image.new("L", (1, 1), 200), "tiff_1x1.tif")
    # PNM
    save(bw, "pnm_p4.pbm")
    save(gray, "pnm_p5.pgm")
    save(rgb, "pnm_p6.ppm")
    g = np.asarray(gray)
    c = np.asarray(rgb)
    b = np.asarray(bw)

    def write(name, data):
        with open(os.path.join(out, name), "wb") as fh:
            fh.write(data)

    write("pnm_p1.pbm", b"P1\n# comment\n%d %d\n" % (W, H) + "\n".join(
        " ".join("0" if v else "1" for v in row) for row in b).encode() + b"\n")
    write("pnm_p1_compact.pbm", b"P1 %d %d\n" % (W, H) + "".join(
        "".join("0" if v else "1" for v in row) for row in b).encode())
    write("pnm_p2.pgm", b"P2\n%d %d\n255\n" % (W, H) + " ".join(str(v) for v in g.reshape(-1)).encode() + b"\n")
    g100 = (g.astype(np.int64) * 100) // 255
    write("pnm_p2_max100.pgm", b"P2\n%d # c\n%d\n100\n" % (W, H) + " ".join(str(v) for v in g100.reshape(-1)).encode())
    write("pnm_p3.ppm", b"P3\n%d %d\n255\n" % (W, H) + " ".join(str(v) for v in c.reshape(-1)).encode() + b"\n")
    c1000 = (c.astype(np.int64) * 1000) // 255
    write("pnm_p3_max1000.ppm", b"P3\n%d %d\n1000\n" % (W, H) + " ".join(str(v) for v in c1000.reshape(-1)).encode())
    write("pnm_p5_max100.pgm", b"P5\n%d %d\n100\n" % (W, H) + g.tobytes())  # values > maxval clip to 255
    write("pnm_p5_16bit.pgm", b"P5\n%d %d\n65535\n" % (W, H) + a16.astype(">u2").tobytes())
    write("pnm_p5_max1000.pgm", b"P5 %d %d 1000\n" % (W, H) + ((a16 % 1001).astype(">u2")).tobytes())
    write("pnm_p6_max200.ppm", b"P6\n%d %d\n200\n" % (W, H) + c.tobytes())
    write("pnm_p6_16bit.ppm", b"P6\n%d %d\n65535\n" % (W, H) + rgb16.astype(">u2").tobytes())
    write("pnm_p6_max4000.ppm", b"P6\n%d %d\n4000\n" % (W, H) + (rgb16 % 4001).astype(">u2").tobytes())
    write("pnm_1x1.ppm", b"P6 1 1 255\n\x01\x02\x03")


def adam7_png(a):
    h, w, _ = a.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        raw += b"".join(b"\0" + r.tobytes() for r in sub)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def gif_by_hand(sw, sh, rect, transparency, rng, palette=True):
    """A GIF whose first frame covers only `rect` (x, y, w, h), optionally with a transparent index, plus a second
    frame; the LZW data comes from Pillow's encoder (a saved single-frame GIF of the frame's pixels)."""
    x, y, w, h = rect
    idx = rng.integers(0, 32, (h, w), dtype=np.uint8)
    fr = Image.fromarray(idx, "P")
    fr.putpalette([int(v) for v in rng.integers(0, 256, 96)])
    buf = io.BytesIO()
    fr.save(buf, "GIF", optimize=False, interlace=False)
    d = buf.getvalue()
    # Pull the image data (after the image descriptor and its min-code-size byte) out of Pillow's file.
    pos = d.index(b",", 13 + (3 << ((d[10] & 7) + 1)) if d[10] & 0x80 else 13)
    lzw = d[pos + 10 :]
    lzw = lzw[: len(lzw) - 1]  # drop the trailer ';'
    out = b"GIF89a" + struct.pack("<HH", sw, sh)
    if palette:
        out += bytes([0x80 | 4, 0, 0]) + bytes(int(v) for v in rng.integers(0, 256, 96))
    else:
        out += bytes([0, 0, 0])
    if transparency is not None:
        out += b"!\xf9\x04" + bytes([1, 0, 0, transparency, 0])
    out += b"," + struct.pack("<HHHH", x, y, w, h) + b"\x00" + lzw
    out += b"," + struct.pack("<HHHH", 0, 0, 2, 2) + b"\x00" + b"\x02\x02\x44\x01\x00"  # second frame
    return out + b";"


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3:])
    else:
        sys.exit("usage: pillow_ref.py gen DIR | dump OUT FILE...")
