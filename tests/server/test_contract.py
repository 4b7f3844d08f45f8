"""The HTTP contract of `superpoint-rt serve` (issue 14): SPEC §4's status codes, 405 for every method a route does
not answer, the batch limits (parts, time), one definition of every limit (help, /v1/info, docs/SERVING.md) and
the OpenAPI document served at /openapi.json (docs/openapi.json itself)."""

import json
import os
import re
import socket
import subprocess
import time

import pytest

from test_server import (CLI, IMAGES, JPG_BIG, JPG_SMALL, PNG_640, WEIGHTS, Server, assert_error, image_bytes,
                         multipart, post_image, request)

SOURCE = os.environ.get("SUPERPOINT_RT_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def srv():
    # One worker and a short --timeout-s: a batch of large images outlives its deadline (test_batch_deadline).
    s = Server("--workers", "1", "--max-batch-parts", "3", "--timeout-s", "0.3", "--threads", "2", warmup="none")
    try:
        yield s
    finally:
        assert s.stop() == 0, s.stderr()


def batch(srv, names_or_bytes, query=""):
    fields = [("image", n if isinstance(n, str) else f"part{i}", image_bytes(n) if isinstance(n, str) else n)
              for i, n in enumerate(names_or_bytes)]
    body, ctype = multipart(fields)
    return request(srv, "POST", "/v1/keypoints/batch" + query, body, {"Content-Type": ctype})


def metric_value(srv, name):
    text = request(srv, "GET", "/metrics")[2].decode()
    return float([ln for ln in text.splitlines() if ln.startswith(name + " ")][0].split()[1])


# --- SPEC §4 error table ---------------------------------------------------------------------------------------


def test_undecodable_bytes_are_400_not_415(srv):
    # SPEC: 400 undecodable image; 415 is for the Content-Type. Bytes of no image format are undecodable.
    for body in [b"just some text, not an image", b"GIF87?not really" + b"\0" * 64, os.urandom(2000)]:
        for ctype in ["application/octet-stream", "image/jpeg"]:
            msg = assert_error(*post_image(srv, body, content_type=ctype), 400)
            assert "JPEG" in msg  # names the formats supported
    status, _, resp = batch(srv, [b"hello world", PNG_640], "?max_keypoints=5")
    assert status == 200
    results = json.loads(resp)["results"]
    assert results[0]["error"]["code"] == 400 and len(results[1]["keypoints"]) == 5
    # The Content-Type is still what 415 is for.
    assert_error(*post_image(srv, JPG_SMALL, content_type="text/plain"), 415)
    assert_error(*request(srv, "POST", "/v1/keypoints/batch", image_bytes(JPG_SMALL), {"Content-Type": "image/jpeg"}),
                 415)


def raw_exchange(port, data, timeout=10):
    """Sends raw bytes; returns the first response's status line, headers (lower-case names) and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, f"connection closed without a response: {buf!r}"
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(body) < n:
            chunk = s.recv(65536)
            assert chunk
            body += chunk
        return int(lines[0].split(" ")[1]), headers, body[:n]


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "PRI", "FOO", "trace"])
def test_unknown_methods_get_405_with_allow(srv, method):
    for path, allow in [("/v1/keypoints", "POST"), ("/v1/keypoints/batch", "POST"), ("/healthz", "GET, HEAD"),
                        ("/v1/info?x=1", "GET, HEAD")]:
        req = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        status, headers, body = raw_exchange(srv.port, req)
        assert status == 405, (method, path, status, body)
        assert headers["allow"] == allow
        err = json.loads(body)["error"]
        assert err["code"] == 405 and method in err["message"]
    req = f"{method} /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
    assert raw_exchange(srv.port, req)[0] == 404
    # A TRACE with a body: answered, and the client is told not to reuse the connection (the body is unread).
    status, headers, _ = raw_exchange(srv.port, b"TRACE /v1/keypoints HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
    assert status == 405 and headers["connection"] == "close"
    # The standard methods a route does not serve (HEAD is GET without a body).
    for m in ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"]:
        status, headers, _ = request(srv, m, "/v1/keypoints/batch")
        assert status == 405 and headers["Allow"] == "POST", m
    for m in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]:
        status, headers, _ = request(srv, m, "/openapi.json", b"" if m == "POST" else None)
        assert status == 405 and headers["Allow"] == "GET, HEAD", m


def test_tiny_threshold_is_a_valid_number(srv):
    # strtof reports underflow (ERANGE) for 1e-300, but the value (0) is inside [0, 1]: not a 422.
    status, _, body = post_image(srv, PNG_640, "?keypoint_threshold=1e-300&max_keypoints=3")
    assert status == 200, body[:300]
    assert len(json.loads(body)["keypoints"]) == 3
    assert_error(*post_image(srv, PNG_640, "?keypoint_threshold=1e300"), 422)


# --- batch limits ----------------------------------------------------------------------------------------------


def test_batch_parts_over_the_limit_is_413_before_decoding(srv):
    decoded = metric_value(srv, "superpoint_rt_images_decoded_total")
    t0 = time.time()
    status, headers, body = batch(srv, [JPG_SMALL] * 4)  # --max-batch-parts 3
    msg = assert_error(status, headers, body, 413)
    assert "4" in msg and "3" in msg and "--max-batch-parts" in msg
    assert time.time() - t0 < 5
    assert metric_value(srv, "superpoint_rt_images_decoded_total") == decoded  # nothing was decoded
    status, _, body = batch(srv, [b"x", b"y", b"z"])  # at the limit: answered per image
    assert status == 200 and [r["error"]["code"] for r in json.loads(body)["results"]] == [400, 400, 400]


def test_batch_deadline_holds_per_image(srv):
    # --timeout-s 0.3 and 3 images of 4032x3024: the first starts at once; the later ones would start after the
    # deadline and get 504 entries instead of holding the worker (and a SIGTERM drain) for as long as they take.
    t0 = time.time()
    status, _, body = batch(srv, [JPG_BIG] * 3, "?max_keypoints=10")
    elapsed = time.time() - t0
    assert status == 200, body[:300]
    results = json.loads(body)["results"]
    assert len(results[0]["keypoints"]) == 10
    codes = [r.get("error", {}).get("code", 200) for r in results]
    assert codes[-1] == 504, codes
    assert codes == sorted(codes), codes  # once the deadline passed, every later image is refused
    late = [r for r in results if "error" in r]
    assert all("--timeout-s" in r["error"]["message"] for r in late)
    single = [r for r in results if "error" not in r]
    per_image = max(sum(r["timing_ms"].values()) for r in single) / 1000
    assert elapsed < 0.3 + len(single) * per_image + 5, (elapsed, per_image)


# --- one definition of every limit ------------------------------------------------------------------------------


def help_limits():
    out = subprocess.run([CLI, "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    section = out.split("Limits", 1)[1].splitlines()[1:]
    flags, fixed = {}, {}
    for ln in section:
        if m := re.match(r"^  (--[a-z-]+) (\S+)", ln):
            flags[m.group(1)] = m.group(2)
        elif m := re.match(r"^  \(fixed\) ([a-z_]+) .*\((\d+)\)$", ln):
            fixed[m.group(1)] = int(m.group(2))
    return flags, fixed


def test_limits_help_info_and_docs_agree():
    flags, fixed = help_limits()
    assert {"--max-body-mb", "--max-pixels", "--max-batch-parts", "--workers", "--queue", "--timeout-s",
            "--connections"} <= set(flags), flags
    # A server with every default: /v1/info answers before the model is ready.
    proc = subprocess.Popen([CLI, "serve", "--port", "0", "--weights", WEIGHTS, "--warmup", "none"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1])

        class Base:
            base = f"http://127.0.0.1:{port}"
        status, _, body = request(Base, "GET", "/v1/info")
        assert status == 200
        limits = json.loads(body)["limits"]
    finally:
        proc.terminate()
        proc.wait(60)
    assert limits["max_body_bytes"] == float(flags["--max-body-mb"]) * 1024 * 1024
    assert limits["max_pixels"] == int(flags["--max-pixels"]) == 178956970
    assert limits["max_batch_parts"] == int(flags["--max-batch-parts"])
    assert limits["workers"] == int(flags["--workers"]) and limits["queue"] == int(flags["--queue"])
    assert limits["timeout_s"] == float(flags["--timeout-s"])
    assert limits["connections"] == limits["workers"] + limits["queue"] + 16
    for key, value in fixed.items():
        assert limits[key] == value, key
    # docs/SERVING.md lists each limit with its default.
    with open(os.path.join(SOURCE, "docs", "SERVING.md")) as f:
        doc = f.read()
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(--[a-z-]+)` \| `([^`]+)`", doc, re.M)}
    for flag, value in flags.items():
        if flag == "--connections":
            assert table[flag] == "workers + queue + 16"
        else:
            assert table.get(flag) == value, (flag, table.get(flag), value)
    for key, value in fixed.items():
        assert re.search(rf"^\| `{key}` \| `{value}`", doc, re.M), key
    for key in limits:
        assert f"`{key}`" in doc, key


def test_openapi_document_is_the_docs_file(srv):
    status, headers, body = request(srv, "GET", "/openapi.json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    with open(os.path.join(SOURCE, "docs", "openapi.json"), "rb") as f:
        assert body == f.read()
    doc = json.loads(body)
    assert doc["openapi"].startswith("3.")
    # Every route the server answers is documented, and every documented operation exists on the server.
    status, _, body = request(srv, "GET", "/v2/nothing")
    routes = re.findall(r"(GET|POST) (/[a-z0-9/._]+)", json.loads(body)["error"]["message"].split("(routes:")[1])
    assert {(m.lower(), p) for m, p in routes} == {(m, p) for p, ops in doc["paths"].items() for m in ops}
    # The documented parameter ranges are the server's (SPEC §2).
    params = doc["components"]["parameters"]
    assert params["max_keypoints"]["schema"]["minimum"] == -1 and params["max_keypoints"]["schema"]["maximum"] == 307200
    assert params["nms_radius"]["schema"]["maximum"] == 32
