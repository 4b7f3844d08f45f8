"""End-to-end tests of `superpoint-rt serve` (issue 4), driven the way a user would: urllib / http.client / raw
sockets from Python's standard library, numpy to decode the arrays.

Each server is started on 127.0.0.1 with --port 0 (the bound port is read from its stdout), the tests wait for
/readyz, and the server is always stopped (SIGTERM, then SIGKILL if it hangs). The reference for every response is
`superpoint-rt extract --format npz` of the same file with the same parameters.
"""

import base64
import http.client
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib

import numpy as np
import pytest

CLI = os.environ.get("SUPERPOINT_RT_CLI", "")
SHARED = os.environ.get("SUPERPOINT_RT_SHARED") or os.environ.get("SUPERPOINT_RT_SHARED_DEFAULT", "")
WEIGHTS = os.path.join(SHARED, "weights", "superpoint")
IMAGES = os.path.join(SHARED, "images")

PNG_640 = "icl_250.png"  # 640x480 RGB PNG
JPG_SMALL = "pt_piazza_san_marco_18627786_5929294590.jpg"  # 501x380 JPEG
GRAY_PNG = "skimage_coins.png"  # 384x303 gray PNG
JPG_MID = "lg_DSC_0410.JPG"  # 1024x682 JPEG
JPG_BIG = "monstree_IMG_1027.JPG"  # 4032x3024 JPEG: slow enough to keep a worker busy


def test_environment():
    # Not a skip: a missing executable or data set is a failure.
    assert CLI and os.access(CLI, os.X_OK), "SUPERPOINT_RT_CLI must name the built superpoint-rt executable"
    assert os.path.isfile(os.path.join(WEIGHTS, "model.safetensors")), f"no weights under {WEIGHTS}"


def image_bytes(name):
    with open(os.path.join(IMAGES, name), "rb") as f:
        return f.read()


class Server:
    """A running `superpoint-rt serve` process."""

    def __init__(self, *extra, warmup="minimal"):
        assert CLI, "SUPERPOINT_RT_CLI is not set"
        self.errlog = tempfile.TemporaryFile()
        cmd = [CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--weights", WEIGHTS, "--warmup", warmup,
               "--threads", "2", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.errlog, text=True)
        line = self._read_line(timeout=30)
        assert "listening on http://127.0.0.1:" in line, f"unexpected first line {line!r}"
        self.port = int(line.rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 180
        while True:
            status, _, _ = request(self, "GET", "/readyz")
            if status == 200:
                break
            assert status == 503, status
            assert self.proc.poll() is None, f"server exited: {self.stderr()}"
            assert time.time() < deadline, "server not ready after 180 s"
            time.sleep(0.2)

    def _read_line(self, timeout):
        out = []
        t = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        assert out, f"no output from the server within {timeout} s: {self.stderr()}"
        return out[0].strip()

    def stderr(self):
        self.errlog.seek(0)
        return self.errlog.read().decode(errors="replace")

    def stop(self, timeout=60):
        """SIGTERM and wait; returns the exit code (SIGKILL and fail when it hangs)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"server did not stop within {timeout} s after SIGTERM")
        return self.proc.returncode


def request(srv, method, path, body=None, headers=None, timeout=120):
    """(status, headers, body bytes) with urllib; HTTP errors are returned, not raised."""
    req = urllib.request.Request(srv.base + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except (ConnectionError, urllib.error.URLError):
        return -1, {}, b""


def post_image(srv, name_or_bytes, query="", content_type="image/octet-stream", headers=None):
    body = image_bytes(name_or_bytes) if isinstance(name_or_bytes, str) else name_or_bytes
    h = {"Content-Type": content_type} if content_type else {}
    h.update(headers or {})
    return request(srv, "POST", "/v1/keypoints" + query, body, h)


def multipart(fields):
    """A multipart/form-data body from [(name, filename, bytes)], as a browser or requests would send it."""
    boundary = "----sprt-test-boundary-7d3f"
    out = io.BytesIO()
    for name, filename, data in fields:
        out.write(f"--{boundary}\r\n".encode())
        out.write(f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'.encode())
        out.write(b"Content-Type: application/octet-stream\r\n\r\n")
        out.write(data)
        out.write(b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


_ref_cache = {}


def reference(name, flags=()):
    """The CLI's float32 result for an image file: dict of numpy arrays."""
    key = (name, tuple(flags))
    if key not in _ref_cache:
        with tempfile.TemporaryDirectory() as d:
            cmd = [CLI, "extract", os.path.join(IMAGES, name), "--out", d, "--format", "npz", "--weights", WEIGHTS,
                   "--quiet", *flags]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            with np.load(os.path.join(d, name + ".npz")) as z:
                _ref_cache[key] = {k: z[k] for k in z.files}
    return _ref_cache[key]


def check_json_result(res, ref, descriptors=True):
    kp = np.asarray(res["keypoints"], dtype=np.float64).reshape(-1, 2)
    sc = np.asarray(res["scores"], dtype=np.float64)
    assert kp.shape == ref["keypoints"].shape
    # Rounded to 3 / 6 decimals on the server: within half a unit of the last place of the exact float32 values.
    np.testing.assert_array_less(np.abs(kp - ref["keypoints"].astype(np.float64)), 0.0005 + 1e-9)
    np.testing.assert_array_less(np.abs(sc - ref["scores"].astype(np.float64)), 0.0000005 + 1e-12)
    assert res["image_size"] == [int(v) for v in ref["image_size"]]
    assert res["scale"] == pytest.approx([float(v) for v in ref["scale"]], rel=1e-7)
    assert set(res["timing_ms"]) >= {"decode", "preprocess", "forward", "postprocess"}
    if descriptors:
        d = res["descriptors"]
        assert d["dtype"] == "float16" and d["shape"] == [len(sc), 256]
        arr = np.frombuffer(base64.b64decode(d["data"]), dtype="<f2").reshape(d["shape"])
        # Bit-identical to numpy's own float32 -> float16 conversion (round to nearest even) of the CLI output.
        np.testing.assert_array_equal(arr.view(np.uint16), ref["descriptors"].astype(np.float16).view(np.uint16))
    else:
        assert res["descriptors"] is None


def check_npz_result(body, ref, descriptors=True):
    with np.load(io.BytesIO(body)) as z:
        assert z["keypoints"].dtype == np.float32 and z["scores"].dtype == np.float32
        np.testing.assert_array_equal(z["keypoints"], ref["keypoints"])
        np.testing.assert_array_equal(z["scores"], ref["scores"])
        np.testing.assert_array_equal(z["image_size"], ref["image_size"])
        if descriptors:
            assert z["descriptors"].dtype == np.float16
            np.testing.assert_array_equal(z["descriptors"].view(np.uint16),
                                          ref["descriptors"].astype(np.float16).view(np.uint16))
        else:
            assert "descriptors" not in z.files


def assert_error(status, headers, body, code):
    assert status == code, (status, body[:300])
    assert headers["Content-Type"].startswith("application/json")
    err = json.loads(body)["error"]
    assert err["code"] == code and isinstance(err["message"], str) and err["message"]
    return err["message"]


@pytest.fixture(scope="module")
def srv():
    s = Server("--workers", "2", "--queue", "32", "--max-body-mb", "8", "--max-pixels", "40000000")
    try:
        yield s
    finally:
        assert s.stop() == 0, s.stderr()


# --- service endpoints -----------------------------------------------------------------------------------------


def cpuinfo_flags():
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])


def cpuinfo_units_line():
    """The units string (superpoint-rt info's "CPU units:" line) built from /proc/cpuinfo, independently of the
    product's CPUID reading, with the SUPERPOINT_RT_ISA cap applied as util/cpu.hpp documents it (avx2 and
    avx2-novnni hide the AVX-512 units, scalar every unit), or else scripts/as-cpu.sh's SPRT_CPUID_CAP (CPUID capped,
    while /proc/cpuinfo lists the machine's flags)."""
    f = cpuinfo_flags()
    cap = os.environ.get("SUPERPOINT_RT_ISA") or os.environ.get("SPRT_CPUID_CAP", "")
    y = cap != "scalar"
    z = y and not cap.startswith("avx2")
    yn = lambda b: "yes" if b else "no"  # noqa: E731
    avx512 = all(x in f for x in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))
    return (f"AVX2 {yn(y and 'avx2' in f)}, FMA {yn(y and 'fma' in f)}, AVX-512 {yn(z and avx512)}, "
            f"VNNI {yn(z and 'avx512_vnni' in f)}, AVX512-BF16 {yn(z and 'avx512_bf16' in f)}, "
            f"AMX {yn(z and 'amx_tile' in f)}")


_cli_info = {}


def library_precisions():
    """What runs here by the library's own answer, as `superpoint-rt info` prints it (the same function behind
    /v1/info's "precisions"): {precision: runs} and the fastest precision. Never re-derived from CPU flags."""
    if not _cli_info:
        out = subprocess.run([CLI, "info", "--weights", WEIGHTS, "--threads", "1"], capture_output=True, text=True,
                             timeout=120).stdout
        runs = {}
        for line in out.splitlines():
            if line.startswith("precision ") and ":" in line:
                name, rest = line[len("precision "):].split(":", 1)
                runs[name] = rest.strip().startswith("runs;")
            elif line.startswith("fastest precision here: "):
                _cli_info["fastest"] = line.split(": ", 1)[1].strip()
        _cli_info["runs"] = runs
        assert set(runs) == {"fp32", "bf16", "int8"} and "fastest" in _cli_info, out
    return _cli_info["runs"], _cli_info["fastest"]


def test_int8_with_calibration_images():
    """serve --precision int8 --calibration: the server says so in /v1/info and answers requests."""
    args = ("--precision", "int8", "--calibration", os.path.join(IMAGES, "icl_250.png"), "--warmup", "none")
    if not library_precisions()[0]["int8"]:  # int8 does not run here: the server must refuse to start
        proc = subprocess.run([CLI, "serve", "--port", "0", "--weights", WEIGHTS, *args], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode != 0 and 'precision "int8" needs' in proc.stderr, proc.stderr
        return
    srv = Server(*args)
    try:
        status, _, body = request(srv, "GET", "/v1/info")
        info = json.loads(body)
        assert status == 200 and info["precision"] == "int8" and info["calibration"] == "1 image(s)", info
        status, _, body = post_image(srv, PNG_640, "?max_keypoints=50")
        assert status == 200 and len(json.loads(body)["keypoints"]) == 50
    finally:
        assert srv.stop() == 0


def test_health_ready_info_metrics(srv):
    status, _, body = request(srv, "GET", "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, _, body = request(srv, "GET", "/readyz")
    assert status == 200
    status, _, body = request(srv, "GET", "/v1/info")
    info = json.loads(body)
    assert status == 200 and info["ready"] is True
    assert info["backend"] and info["precision"] == "fp32" and "revision" in info and info["model"] == WEIGHTS
    assert "calibration" not in info  # int8 only
    # The CPU's units, as /proc/cpuinfo names them (independent of the product's CPUID reading).
    assert info["cpu_units"] == cpuinfo_units_line(), info["cpu_units"]
    # What runs here and the fastest precision: the library's answer, the same as `superpoint-rt info` prints.
    runs, fastest = library_precisions()
    assert info["fastest_precision"] == fastest
    assert [p["precision"] for p in info["precisions"]] == ["fp32", "bf16", "int8"]
    assert {p["precision"]: p["runs"] for p in info["precisions"]} == runs
    assert info["limits"]["max_body_bytes"] == 8 * 1024 * 1024 and info["limits"]["max_pixels"] == 40000000
    # /v1/match's fields and hloc's confs, from the matcher's table.
    assert set(info["match"]["params"]) == {"conf", "ratio", "distance", "mutual", "matcher"}
    assert info["match"]["lightglue"]["loaded"] is False  # no --matcher-weights (tests/server/test_lightglue.py)
    assert info["match"]["confs"]["NN-ratio"] == {"ratio": 0.8, "distance": 0.0, "mutual": True}
    assert post_image(srv, PNG_640, "?max_keypoints=5")[0] == 200
    # A request is counted right after its response is written, so the client may see /metrics a moment earlier.
    deadline = time.time() + 10
    while True:
        status, headers, body = request(srv, "GET", "/metrics")
        text = body.decode()
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        if 'endpoint="/v1/keypoints",status="200"' in text or time.time() > deadline:
            break
        time.sleep(0.05)
    for name in ["superpoint_rt_http_requests_total{endpoint=\"/v1/keypoints\",status=\"200\"}",
                 "superpoint_rt_http_request_duration_seconds_bucket{endpoint=\"/v1/keypoints\",le=\"+Inf\"}",
                 "superpoint_rt_queue_depth ", "superpoint_rt_in_flight_requests ",
                 "superpoint_rt_images_decoded_total "]:
        assert name in text, name
    decoded = [ln for ln in text.splitlines() if ln.startswith("superpoint_rt_images_decoded_total ")]
    assert int(decoded[0].split()[1]) >= 1


# --- equality with the library --------------------------------------------------------------------------------

CASES = [
    (PNG_640, "", []),
    (JPG_SMALL, "", []),
    (GRAY_PNG, "", []),
    (JPG_MID, "?max_keypoints=100&nms_radius=2&keypoint_threshold=0.01",
     ["--max-keypoints", "100", "--nms-radius", "2", "--keypoint-threshold", "0.01"]),
    (PNG_640, "?grayscale=true&max_keypoints=-1", ["--grayscale", "--max-keypoints", "-1"]),
]


@pytest.mark.parametrize("name,query,flags", CASES)
def test_json_equals_cli(srv, name, query, flags):
    status, headers, body = post_image(srv, name, query, content_type="image/jpeg")
    assert status == 200, body[:300]
    assert headers["Content-Type"] == "application/json"
    check_json_result(json.loads(body), reference(name, flags))


@pytest.mark.parametrize("name,query,flags", CASES[:2] + CASES[3:4])
def test_npz_equals_cli(srv, name, query, flags):
    q = query + ("&" if query else "?") + "format=npz"
    status, headers, body = post_image(srv, name, q)
    assert status == 200 and headers["Content-Type"] == "application/x-npz"
    check_npz_result(body, reference(name, flags))
    # The Accept header selects the same body.
    status, headers, body2 = post_image(srv, name, query, headers={"Accept": "application/x-npz"})
    assert status == 200 and headers["Content-Type"] == "application/x-npz"
    check_npz_result(body2, reference(name, flags))


def test_no_descriptors(srv):
    ref = reference(JPG_SMALL, ["--no-descriptors"])
    status, _, body = post_image(srv, JPG_SMALL, "?return_descriptors=false")
    assert status == 200
    check_json_result(json.loads(body), ref, descriptors=False)
    status, _, body = post_image(srv, JPG_SMALL, "?return_descriptors=0&format=npz")
    check_npz_result(body, ref, descriptors=False)


def test_multipart_single(srv):
    body, ctype = multipart([("image", JPG_SMALL, image_bytes(JPG_SMALL))])
    status, _, resp = request(srv, "POST", "/v1/keypoints", body, {"Content-Type": ctype})
    assert status == 200, resp[:300]
    check_json_result(json.loads(resp), reference(JPG_SMALL))


def post_match(srv, fields, query=""):
    body, ctype = multipart(fields)
    return request(srv, "POST", "/v1/match" + query, body, {"Content-Type": ctype})


def test_match_two_images(srv):
    # Against tests/match/hloc_nn_reference.py (hloc's nearest_neighbor in numpy) on the CLI's float32 descriptors: it
    # needs neither the Python extension (absent from the sanitizer build) nor our matcher.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "match"))
    import hloc_nn_reference as ref

    a, b = "pt_piazza_san_marco_06795901_3725050516.jpg", JPG_SMALL
    status, _, body = post_match(srv, [("image0", a, image_bytes(a)), ("image1", b, image_bytes(b))],
                                 "?conf=NN-ratio&ratio=0.9&max_keypoints=512")
    assert status == 200, body[:300]
    res = json.loads(body)
    flags = ["--max-keypoints", "512"]
    ra, rb = reference(a, flags), reference(b, flags)
    check_json_result(res["image0"], ra)
    check_json_result(res["image1"], rb)
    assert res["match"] == {"conf": "NN-ratio", "ratio": 0.9, "distance": 0.0, "mutual": True}
    sim = ref.similarity(np.asarray(ra["descriptors"], np.float32), np.asarray(rb["descriptors"], np.float32))
    m0, s0 = ref.nearest_neighbor(sim, ratio=0.9, distance=None, mutual=True)
    near = ref.near_tie_rows(sim, 0.9, None, True, 256 * 2.0 ** -24)  # a GEMM's rounding may decide these rows
    got = {i: j for i, j in res["matches"]}
    assert len(got) == len(res["matches"]) > 0
    for i in range(len(m0)):
        if near[i]:
            continue
        assert got.get(i, -1) == m0[i], f"row {i}"
    assert res["matches"] == sorted(res["matches"])  # in image0's order, as the (K, 2) arrays of the Python API
    want = {i: s0[i] for i in range(len(m0)) if m0[i] >= 0 and not near[i]}
    for (i, _), sc in zip(res["matches"], res["scores"]):
        if i in want:
            assert abs(sc - float(want[i])) <= 256 * 2.0 ** -24, f"row {i}: {sc} against {want[i]}"  # sim rounding
    assert res["timing_ms"]["match"] >= 0


@pytest.mark.parametrize("fields,query,code,word", [
    (["image0"], "", 400, "'image1'"), (["image0", "image0", "image1"], "", 400, "'image0'"),
    (["image0", "image1"], "?ratio=2", 422, "ratio"), (["image0", "image1"], "?conf=superglue", 422, "conf"),
    (["image0", "image1"], "?mutual=maybe", 422, "mutual"), (["image0", "image1"], "?format=npz", 422, "format"),
    (["image0", "image1"], "?return_descriptors=false", 422, "return_descriptors"),
    (["image0", "image1"], "?ratio=0.5&ratio=0.6", 422, "ratio")])
def test_match_errors(srv, fields, query, code, word):
    msg = assert_error(*post_match(srv, [(f, JPG_SMALL, image_bytes(JPG_SMALL)) for f in fields], query), code)
    assert word in msg
    msg = assert_error(*request(srv, "POST", "/v1/match", image_bytes(JPG_SMALL), {"Content-Type": "image/jpeg"}), 415)
    assert "image0" in msg
    # The matcher's fields belong to /v1/match only.
    assert "conf" in assert_error(*post_image(srv, JPG_SMALL, "?conf=NN-mutual"), 422)


def test_batch_in_order_with_error_entry(srv):
    files = [("image", PNG_640, image_bytes(PNG_640)), ("image", "bad.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 40),
             ("image", JPG_SMALL, image_bytes(JPG_SMALL)), ("image", "notes.txt", b"hello world"),
             ("image", GRAY_PNG, image_bytes(GRAY_PNG))]
    body, ctype = multipart(files)
    status, _, resp = request(srv, "POST", "/v1/keypoints/batch?max_keypoints=200", body, {"Content-Type": ctype})
    assert status == 200, resp[:300]
    results = json.loads(resp)["results"]
    assert len(results) == 5
    flags = ["--max-keypoints", "200"]
    check_json_result(results[0], reference(PNG_640, flags))
    assert results[1]["error"]["code"] == 400
    check_json_result(results[2], reference(JPG_SMALL, flags))
    assert results[3]["error"]["code"] == 400  # bytes of no image format: undecodable (SPEC §4), not 415
    check_json_result(results[4], reference(GRAY_PNG, flags))


def test_keep_alive_reuses_connection(srv):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        data = image_bytes(JPG_SMALL)
        sockets = set()
        for _ in range(3):
            conn.request("POST", "/v1/keypoints?max_keypoints=10", body=data, headers={"Content-Type": "image/jpeg"})
            r = conn.getresponse()
            assert r.status == 200
            assert len(json.loads(r.read())["scores"]) == 10
            sockets.add(id(conn.sock))
        assert len(sockets) == 1 and conn.sock is not None  # one TCP connection served all three
    finally:
        conn.close()


# --- errors -------------------------------------------------------------------------------------------------------


def huge_png_header(w, h):
    """A PNG whose header claims w x h pixels, with no pixel data: refused before any decoding."""
    def chunk(tag, data):
        return len(data).to_bytes(4, "big") + tag + data + zlib.crc32(tag + data).to_bytes(4, "big")
    ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def test_error_400_empty_and_undecodable(srv):
    assert_error(*post_image(srv, b""), 400)
    truncated = image_bytes(JPG_SMALL)[:2000]
    assert_error(*post_image(srv, truncated), 400)
    assert_error(*post_image(srv, b"\x89PNG\r\n\x1a\n" + b"\x00" * 100), 400)


def test_error_413_body_and_pixels(srv):
    msg = assert_error(*post_image(srv, b"\xff\xd8\xff" + b"\0" * (9 * 1024 * 1024)), 413)
    assert "8388608" in msg
    msg = assert_error(*post_image(srv, huge_png_header(8000, 6000)), 413)  # 48 MP > --max-pixels 40 MP
    assert "40000000" in msg and "8000x6000" in msg
    # The library's own limit would let this through; the server still answers a normal image afterwards.
    assert post_image(srv, JPG_SMALL, "?max_keypoints=1")[0] == 200


def test_error_415(srv):
    assert_error(*post_image(srv, JPG_SMALL, content_type="text/plain"), 415)
    msg = assert_error(*post_image(srv, JPG_SMALL, content_type="application/x-www-form-urlencoded"), 415)
    assert "Content-Type" in msg


@pytest.mark.parametrize("query,word", [
    ("?foo=1", "foo"), ("?max_keypoints=abc", "max_keypoints"), ("?max_keypoints=1.5", "max_keypoints"),
    ("?max_keypoints=307201", "max_keypoints"), ("?max_keypoints=-2", "max_keypoints"),
    ("?keypoint_threshold=x", "keypoint_threshold"), ("?keypoint_threshold=nan", "keypoint_threshold"),
    ("?keypoint_threshold=1.5", "keypoint_threshold"), ("?nms_radius=33", "nms_radius"),
    ("?return_descriptors=maybe", "return_descriptors"), ("?grayscale=2", "grayscale"),
    ("?format=xml", "format"), ("?nms_radius=1&nms_radius=2", "nms_radius"), ("?bgr=true", "bgr"),
])
def test_error_422_names_the_parameter(srv, query, word):
    msg = assert_error(*post_image(srv, JPG_SMALL, query), 422)
    assert word in msg


def test_error_404_405(srv):
    assert_error(*request(srv, "GET", "/v2/nothing"), 404)
    assert_error(*request(srv, "POST", "/nothing", b"x", {"Content-Type": "image/png"}), 404)
    status, headers, body = request(srv, "GET", "/v1/keypoints")
    assert_error(status, headers, body, 405)
    assert headers["Allow"] == "POST"
    assert_error(*request(srv, "POST", "/healthz", b"", {}), 405)
    assert_error(*request(srv, "DELETE", "/v1/keypoints/batch"), 405)


# --- misbehaving clients ------------------------------------------------------------------------------------------


def raw_request_head(port, length, ctype="image/jpeg", path="/v1/keypoints?max_keypoints=50"):
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n").encode()


def read_http_response(sock):
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body


def test_slow_client(srv):
    data = image_bytes(JPG_SMALL)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as s:
        s.sendall(raw_request_head(srv.port, len(data)))
        step = len(data) // 20 + 1
        for i in range(0, len(data), step):  # ~2 s for the body, in 20 pieces
            s.sendall(data[i:i + step])
            time.sleep(0.1)
        status, body = read_http_response(s)
    assert status == 200
    check_json_result(json.loads(body), reference(JPG_SMALL, ["--max-keypoints", "50"]))


def metric(srv, name):
    text = request(srv, "GET", "/metrics")[2].decode()
    return float([ln for ln in text.splitlines() if ln.startswith(name + " ")][0].split()[1])


def test_client_disconnects(srv):
    data = image_bytes(JPG_MID)
    for _ in range(10):  # mid-body
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(raw_request_head(srv.port, len(data)) + data[:len(data) // 3])
        s.close()
    for _ in range(5):  # after the body, before the answer
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(raw_request_head(srv.port, len(data)) + data)
        s.close()
    for _ in range(5):  # in the middle of the headers
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"POST /v1/keypoints HTTP/1.1\r\nContent-Le")
        s.close()
    # Still serving, correct answers, and nothing left counted in flight once the dropped requests are done
    # (only the /metrics request itself).
    status, _, body = post_image(srv, JPG_SMALL, "?max_keypoints=50")
    assert status == 200
    check_json_result(json.loads(body), reference(JPG_SMALL, ["--max-keypoints", "50"]))
    deadline = time.time() + 30
    while metric(srv, "superpoint_rt_in_flight_requests") > 1:
        assert time.time() < deadline, "requests of disconnected clients still counted in flight"
        time.sleep(0.2)
    assert srv.proc.poll() is None


def test_eight_concurrent_clients(srv):
    names = [PNG_640, JPG_SMALL, GRAY_PNG, JPG_MID]
    results = {}
    errors = []

    def client(i):
        try:
            for k in range(3):
                name = names[(i + k) % len(names)]
                status, _, body = post_image(srv, name, "?max_keypoints=300")
                results[(i, k)] = (name, status, body)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors and len(results) == 24
    for name, status, body in results.values():
        assert status == 200, body[:300]
        check_json_result(json.loads(body), reference(name, ["--max-keypoints", "300"]))


# --- overload, timeouts, shutdown (servers of their own) --------------------------------------------------------


def concurrent_posts(srv, n, name, query="?max_keypoints=10"):
    data = image_bytes(name)
    barrier = threading.Barrier(n)
    out = [None] * n

    def go(i):
        barrier.wait()
        out[i] = post_image(srv, data, query)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return out


def test_503_when_queue_full():
    s = Server("--workers", "1", "--queue", "1", warmup="none")
    try:
        out = concurrent_posts(s, 6, JPG_BIG)
        codes = [o[0] for o in out]
        assert set(codes) <= {200, 503}, codes
        assert codes.count(200) >= 2 and codes.count(503) >= 1, codes  # 1 running + 1 queued; the rest refused
        for status, headers, body in out:
            if status == 503:
                assert headers["Retry-After"] == "1"
                assert_error(status, headers, body, 503)
        deadline = time.time() + 10
        while 'endpoint="/v1/keypoints",status="503"' not in request(s, "GET", "/metrics")[2].decode():
            assert time.time() < deadline, "503s not counted in /metrics"
            time.sleep(0.05)
    finally:
        assert s.stop() == 0, s.stderr()


def test_504_when_waiting_too_long():
    s = Server("--workers", "1", "--queue", "8", "--timeout-s", "0.05", warmup="none")
    try:
        out = concurrent_posts(s, 4, JPG_BIG)
        codes = [o[0] for o in out]
        assert set(codes) <= {200, 504}, codes
        assert codes.count(200) >= 1 and codes.count(504) >= 1, codes
        for status, headers, body in out:
            if status == 504:
                assert_error(status, headers, body, 504)
    finally:
        assert s.stop() == 0, s.stderr()


def test_graceful_shutdown():
    s = Server("--workers", "2", warmup="none")
    data = image_bytes(JPG_SMALL)
    try:
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        sock.sendall(raw_request_head(s.port, len(data)) + data[:1000])  # in flight: headers received
        time.sleep(0.3)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        # A new request after the signal is refused while the old one is still being received.
        status, headers, body = post_image(s, JPG_SMALL)
        assert_error(status, headers, body, 503)
        assert request(s, "GET", "/readyz")[0] == 503
        sock.sendall(data[1000:])  # the in-flight request finishes normally
        status, body = read_http_response(sock)
        sock.close()
        assert status == 200
        check_json_result(json.loads(body), reference(JPG_SMALL, ["--max-keypoints", "50"]))
        s.proc.wait(30)
        assert s.proc.returncode == 0, s.stderr()
        assert "stopped" in s.stderr()
    finally:
        s.stop()
