#!/usr/bin/env python3
"""Soak test of `superpoint-rt serve` on loopback (issue 14): a bounded run of mixed traffic that stops by itself.

It starts its own server (--port 0) and sends, from --concurrency client threads for --duration seconds:
  valid        a real image of ../shared/images with random parameters (raw body or multipart)       200
  batch        2-4 real images in one multipart request                                               200
  huge         headers that declare enormous sides (PNG 100000x100000, a real JPEG patched to 65500^2) 413
  header_only  a PNG of IHDR + IEND (no pixel data), a JPEG cut after its header, a truncated file     400
  garbage      random bytes (400), the same as text/plain (415)                                       400 / 415
  aspect       extreme aspect ratios: 1x30000, 30000x1, 2x20000 RGB, 1x1 PNGs                         200
  parts        a batch of more than --max-batch-parts parts                                           413
  params       a bad query field                                                                      422
  method       TRACE / an unknown method token                                                       405
  slow         a valid image whose body trickles in over ~2 s                                          200
  vanish_body  headers and half the body, then the client closes                                     (none)
  vanish_resp  a full request, then the client reads a few bytes of the answer and closes             (none)
With --mixed-frames (issue 19 §5) every valid request has another network frame and another image size: a random
preset (hf, hloc:superpoint_aachen / _inloc / _max, lightglue) with a random `resize` WxH, `resize_max` (and
`resize_force`) or none, on a generated PNG of random size (sides 16 .. --max-side): each request may plan a network
frame the server has not seen, so plans, the shared workspace and the pooled buffers churn all the time.
Every answered request must get one of the statuses listed for its kind; 503 (queue full, memory budget) and 504
(--timeout-s) are documented for every image request and counted separately. At the end the process must be
alive, /healthz 200, nothing counted in flight, and the resident size (VmRSS from /proc/PID/status, sampled with no
request in flight) at the end within --rss-tolerance (5 %) of the one after warm-up (the first 20 % of the run,
10 s to 300 s). With --mixed-frames both samples are taken after the same fixed sequence of frames (the plan cache
and the workspace then hold the same plans: what they hold is "sized by the plans in use", not a leak), and every
sample of the run must stay under the server's memory budget (--memory-budget-mb) plus its resident size at start.

  bench/soak_server.py --cli build/src/cli/superpoint-rt --duration 1800 --concurrency 4   # the full soak
  bench/soak_server.py --cli build/src/cli/superpoint-rt --duration 600 --mixed-frames     # issue 19's soak
  bench/soak_server.py --cli build/src/cli/superpoint-rt --duration 60                     # CI (tests/server)
Exit status 0 when every check holds; the summary (JSON with --json FILE) gives requests by kind and status.
"""

import argparse
import io
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Documented statuses per kind (docs/SERVING.md "Errors"); OVERLOAD is allowed for every image request.
EXPECTED = {
    "valid": {200}, "frames": {200}, "batch": {200}, "huge": {413}, "header_only": {400}, "garbage": {400, 415},
    "aspect": {200}, "parts": {413}, "params": {422}, "method": {405}, "slow": {200},
}
OVERLOAD = {503, 504}


# --- request bodies -------------------------------------------------------------------------------------------

def png(width, height, channels=1, rng=None):
    """A valid 8-bit PNG (gray or RGB) of random pixels."""
    rng = rng or random
    color = {1: 0, 3: 2}[channels]
    row = width * channels
    raw = b"".join(b"\0" + rng.randbytes(row) for _ in range(height))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b"")


def png_header_only(width, height):
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def jpeg_sof_offset(data):
    """Offset of the SOFn segment of a JPEG (its height/width follow at +5 / +7)."""
    i = 2
    while i + 4 <= len(data):
        assert data[i] == 0xFF, "not a JPEG marker"
        marker = data[i + 1]
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            return i
        i += 2 + length
    raise ValueError("no SOF marker")


def jpeg_with_sides(data, width, height):
    off = jpeg_sof_offset(data)
    b = bytearray(data)
    b[off + 5:off + 9] = struct.pack(">HH", height, width)
    return bytes(b)


def multipart(parts):
    boundary = "soak-" + os.urandom(8).hex()
    out = io.BytesIO()
    for name, data in parts:
        out.write(f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"{name}\"\r\n"
                  "Content-Type: application/octet-stream\r\n\r\n".encode())
        out.write(data)
        out.write(b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


# --- HTTP over raw sockets (so that slow and vanishing clients are possible) -------------------------------------

def head(method, path, port, ctype, length, extra=""):
    h = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    if ctype:
        h += f"Content-Type: {ctype}\r\n"
    if length is not None:
        h += f"Content-Length: {length}\r\n"
    return (h + extra + "\r\n").encode()


def read_status(sock):
    """Reads one response (to its Content-Length: a server that left the request unread may keep the connection
    open); returns its status and body."""
    data = b""
    length = None
    while True:
        if length is None and b"\r\n\r\n" in data:
            m = re.search(rb"\r\ncontent-length:\s*(\d+)", data.partition(b"\r\n\r\n")[0], re.I)
            length = int(m.group(1)) if m else -1
        if length is not None and length >= 0 and len(data.partition(b"\r\n\r\n")[2]) >= length:
            break
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    if not data:
        raise ConnectionError("no response")
    status = int(data.split(b" ", 2)[1])
    return status, data.partition(b"\r\n\r\n")[2]


def exchange(port, method, path, body=b"", ctype="application/octet-stream", timeout=180, trickle_s=0.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head(method, path, port, ctype, len(body) if body is not None else None))
        if trickle_s > 0 and body:
            pieces = 20
            step = len(body) // pieces + 1
            for i in range(0, len(body), step):
                s.sendall(body[i:i + step])
                time.sleep(trickle_s / pieces)
        elif body:
            s.sendall(body)
        return read_status(s)


def http_get(port, path, timeout=30):
    return exchange(port, "GET", path, None, None, timeout)


# --- the server -------------------------------------------------------------------------------------------------

class Server:
    def __init__(self, cli, weights, extra):
        cmd = [cli, "serve", "--host", "127.0.0.1", "--port", "0", "--weights", weights, *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise SystemExit(f"soak: the server did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.stderr_lines = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.time() + 300
        while True:
            try:
                if http_get(self.port, "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("soak: the server never became ready:\n" + "".join(self.stderr_lines))
            time.sleep(0.2)

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def metric(self, name):
        text = http_get(self.port, "/metrics")[1].decode()
        return float([ln for ln in text.splitlines() if ln.startswith(name + " ")][0].split()[1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


# --- traffic ----------------------------------------------------------------------------------------------------

PRESETS = ["hf", "hloc:superpoint_aachen", "hloc:superpoint_inloc", "hloc:superpoint_max", "lightglue"]


def frame_query(rng, max_side):
    """A random request frame: a preset, and a fixed `resize`, a `resize_max` (maybe forced) or the preset's rule."""
    q = [f"preset={rng.choice(PRESETS)}", "max_keypoints=512"]
    r = rng.random()
    if r < 0.35:
        q.append(f"resize={rng.randint(16, max_side)}x{rng.randint(16, max_side)}")
    elif r < 0.7:  # the images' aspect is at most 4:1: the short side stays >= 20 (SERVING.md: under 8 is 422)
        q += ["resize=none", f"resize_max={rng.randint(80, max_side)}"]
        if rng.random() < 0.5:
            q.append("resize_force=true")
    return "?" + "&".join(q)


def frame_image(rng, max_side):
    """A PNG of random size (sides 16 .. max_side, aspect at most 4:1), gray or RGB, random pixels."""
    w = rng.randint(64, max_side)
    h = rng.randint(max(16, w // 4), min(max_side, 4 * w))
    return png(w, h, rng.choice([1, 3]), rng=rng)


def settle_queries(max_side):
    """The fixed sequence sent before each RSS sample of --mixed-frames: 8 square frames, the last max_side x
    max_side, the most pixels any request of the traffic can have, so that the plan cache (8 plans) and the workspace
    (as large as the largest plan that ran) hold the same at every sample, whichever frames came before."""
    sides = [max(16, max_side * k // 8) for k in range(1, 9)]
    return [f"?resize={s}x{s}&max_keypoints=64" for s in sides]


class Traffic:
    WEIGHTS = {"valid": 30, "batch": 6, "huge": 6, "header_only": 6, "garbage": 6, "aspect": 8, "parts": 4,
               "params": 5, "method": 4, "slow": 4, "vanish_body": 8, "vanish_resp": 8}

    def __init__(self, images_dir, max_parts, seed, mixed_frames=False, max_side=1600):
        self.rng = random.Random(seed)
        self.mixed_frames, self.max_side = mixed_frames, max_side
        names = sorted(n for n in os.listdir(images_dir) if n.lower().endswith((".jpg", ".jpeg", ".png")))
        self.images = {}
        for n in names:
            with open(os.path.join(images_dir, n), "rb") as f:
                self.images[n] = f.read()
        self.small = [n for n, b in self.images.items() if len(b) < 700_000]
        jpg = next(b for n, b in self.images.items() if n.lower().endswith(".jpg"))
        self.huge = [png_header_only(100000, 100000), jpeg_with_sides(jpg, 65500, 65500)]
        self.header_only = [png_header_only(640, 480), jpg[:jpeg_sof_offset(jpg) + 20]]
        r = random.Random(seed + 1)
        self.aspect = [png(1, 30000, rng=r), png(30000, 1, rng=r), png(2, 20000, 3, rng=r), png(1, 1, rng=r)]
        self.max_parts = max_parts
        self.kinds = list(self.WEIGHTS)
        self.weights = [self.WEIGHTS[k] for k in self.kinds]

    def largest(self):
        """The largest image file of the traffic (the first by name among equals)."""
        return max(sorted(self.images.items()), key=lambda kv: len(kv[1]))[1]

    def query(self, rng):
        q = []
        if rng.random() < 0.5:
            q.append(f"max_keypoints={rng.choice([-1, 10, 256, 1024, 4096])}")
        if rng.random() < 0.3:
            q.append(f"nms_radius={rng.randint(0, 32)}")
        if rng.random() < 0.3:
            q.append(f"keypoint_threshold={rng.choice([0.0, 0.005, 0.015, 0.5])}")
        if rng.random() < 0.3:
            q.append("return_descriptors=false")
        if rng.random() < 0.2:
            q.append("grayscale=true")
        return ("?" + "&".join(q)) if q else ""

    def one(self, port, rng):
        """Sends one request of a random kind; returns (kind, status or None for a vanished client)."""
        kind = rng.choices(self.kinds, self.weights)[0]
        # Mostly images up to ~2 MP; one in four of any size (12 MP included) keeps large decodes in the mix.
        name = rng.choice(list(self.images) if rng.random() < 0.25 else self.small)
        data = self.images[name]
        if kind == "valid" and self.mixed_frames:
            body = frame_image(rng, self.max_side)
            return "frames", exchange(port, "POST", "/v1/keypoints" + frame_query(rng, self.max_side), body,
                                      "image/png")[0]
        if kind == "valid":
            q = self.query(rng)
            if rng.random() < 0.25:
                body, ctype = multipart([(name, data)])
            else:
                body, ctype = data, rng.choice(["image/jpeg", "application/octet-stream", "image/png"])
            if rng.random() < 0.2:
                q += ("&" if q else "?") + "format=npz"
            return kind, exchange(port, "POST", "/v1/keypoints" + q, body, ctype)[0]
        if kind == "batch":
            picks = [rng.choice(self.small) for _ in range(rng.randint(2, 4))]
            body, ctype = multipart([(n, self.images[n]) for n in picks])
            return kind, exchange(port, "POST", "/v1/keypoints/batch?max_keypoints=256", body, ctype)[0]
        if kind == "huge":
            return kind, exchange(port, "POST", "/v1/keypoints", rng.choice(self.huge))[0]
        if kind == "header_only":
            cut = data[:rng.randint(64, 600)]  # a real file cut inside its header
            return kind, exchange(port, "POST", "/v1/keypoints", rng.choice(self.header_only + [cut]))[0]
        if kind == "garbage":
            body = rng.randbytes(rng.randint(1, 50_000))
            return kind, exchange(port, "POST", "/v1/keypoints", body, rng.choice(["image/png", "text/plain"]))[0]
        if kind == "aspect":
            return kind, exchange(port, "POST", "/v1/keypoints?max_keypoints=64", rng.choice(self.aspect))[0]
        if kind == "parts":
            n = self.max_parts + rng.randint(1, 50)
            body, ctype = multipart([("tiny.png", self.aspect[3])] * n)
            return kind, exchange(port, "POST", "/v1/keypoints/batch", body, ctype)[0]
        if kind == "params":
            q = rng.choice(["?max_keypoints=-2", "?nms_radius=33", "?keypoint_threshold=nan", "?foo=1",
                            "?grayscale=maybe", "?format=xml"])
            return kind, exchange(port, "POST", "/v1/keypoints" + q, data)[0]
        if kind == "method":
            return kind, exchange(port, rng.choice(["TRACE", "FOO"]), rng.choice(["/v1/keypoints", "/healthz"]),
                                  None, None)[0]
        if kind == "slow":
            small = self.images[rng.choice(self.small)]
            return kind, exchange(port, "POST", "/v1/keypoints?max_keypoints=128", small, trickle_s=2.0)[0]
        if kind == "vanish_body":
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(head("POST", "/v1/keypoints", port, "image/jpeg", len(data)))
                s.sendall(data[:rng.randint(0, len(data) - 1)])
            return kind, None
        if kind == "vanish_resp":
            with socket.create_connection(("127.0.0.1", port), timeout=180) as s:
                small = self.images[rng.choice(self.small)]
                s.sendall(head("POST", "/v1/keypoints?max_keypoints=-1", port, "image/png", len(small)) + small)
                if rng.random() < 0.5:
                    s.recv(64)  # the start of the answer, then gone
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
            return kind, None
        raise AssertionError(kind)


def run_load(server, traffic, seconds, concurrency, counts, failures, lock, seed):
    stop_at = time.time() + seconds

    def client(i):
        rng = random.Random(seed * 1000 + i)
        while time.time() < stop_at:
            try:
                kind, status = traffic.one(server.port, rng)
            except (OSError, ValueError) as e:
                kind, status = "error", repr(e)[:120]
            with lock:
                counts.setdefault(kind, {})
                key = "closed" if status is None else str(status)
                counts[kind][key] = counts[kind].get(key, 0) + 1
                if kind == "error" or (status is not None and status not in EXPECTED[kind] | OVERLOAD):
                    failures.append((kind, status))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def drain(server, seconds=120):
    deadline = time.time() + seconds
    while server.metric("superpoint_rt_in_flight_requests") > 1:  # the /metrics request itself
        if time.time() > deadline:
            raise RuntimeError(f"requests still in flight {seconds} s after the load stopped")
        time.sleep(0.2)


def quiescent_rss(server, settle, settle_s=2.0):
    """VmRSS once nothing is in flight (the vanished clients' requests included); `settle`: (query, body) requests
    sent one after the other first, so that the server's caches (plans, the warm context's buffers) hold the same at
    every sample. They are sent once the load's last requests are done: on an idle server each must get 200 (a 503
    there was a budget accounting bug: a tiny frame's per-pixel workspace applied to large frames)."""
    drain(server)
    for q, body in settle:
        status = exchange(server.port, "POST", "/v1/keypoints" + q, body, "application/octet-stream")[0]
        if status != 200:
            raise RuntimeError(f"settle request {q} got {status} on an idle server")
    drain(server)
    time.sleep(settle_s)
    return server.rss_kb()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.environ.get("SUPERPOINT_RT_CLI", os.path.join(ROOT, "build/src/cli/superpoint-rt")))
    shared = os.environ.get("SUPERPOINT_RT_SHARED") or os.path.join(ROOT, "..", "shared")
    ap.add_argument("--weights", default=os.path.join(shared, "weights", "superpoint"))
    ap.add_argument("--images", default=os.path.join(shared, "images"))
    ap.add_argument("--duration", type=float, default=1800, help="seconds of load (default 30 min)")
    ap.add_argument("--concurrency", type=int, default=4, help="client threads (default 4)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds before the RSS baseline (default 20%%)")
    ap.add_argument("--rss-tolerance", type=float, default=0.05,
                    help="largest relative RSS change after warm-up (inf: no resident-size check, e.g. under ASan)")
    ap.add_argument("--max-batch-parts", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--server-arg", action="append", default=[], help="extra `serve` argument (repeatable)")
    ap.add_argument("--mixed-frames", action="store_true",
                    help="every valid request another frame and image size (issue 19)")
    ap.add_argument("--max-side", type=int, default=1600, help="--mixed-frames: largest image / frame side")
    ap.add_argument("--memory-budget-mb", type=int, default=2048, help="the server's --memory-budget-mb")
    a = ap.parse_args()
    warmup = a.warmup if a.warmup is not None else min(300.0, max(10.0, 0.2 * a.duration))
    if warmup >= a.duration:
        ap.error("--warmup must be shorter than --duration")

    traffic = Traffic(a.images, a.max_batch_parts, a.seed, a.mixed_frames, a.max_side)
    server = Server(a.cli, a.weights, ["--workers", "2", "--queue", "16", "--threads", "2", "--warmup", "minimal",
                                       "--timeout-s", "30", "--max-batch-parts", str(a.max_batch_parts),
                                       "--memory-budget-mb", str(a.memory_budget_mb), *a.server_arg])
    # Mixed traffic: the largest image twice, so that the warm context keeps the same buffers (up to 64 MiB, those of
    # the last request) at both samples, whichever image came last (a 12 MP photo's are 36 MB: +5.3 % in a loaded
    # 45 s run).
    settle = ([(q, png(64, 48)) for q in settle_queries(a.max_side)] if a.mixed_frames
              else [("", traffic.largest())] * 2)
    counts, failures, lock = {}, [], threading.Lock()
    samples = []
    done = threading.Event()

    def sampler():
        t0 = time.time()
        while not done.wait(1.0):
            try:
                samples.append((round(time.time() - t0, 1), server.rss_kb()))
            except (OSError, RuntimeError):
                return

    threading.Thread(target=sampler, daemon=True).start()
    checks = {}
    try:
        rss_start = server.rss_kb()
        t0 = time.time()
        run_load(server, traffic, warmup, a.concurrency, counts, failures, lock, a.seed)
        rss_warm = quiescent_rss(server, settle)
        run_load(server, traffic, a.duration - (time.time() - t0), a.concurrency, counts, failures, lock, a.seed + 7)
        rss_end = quiescent_rss(server, settle)
        elapsed = time.time() - t0
        checks["alive"] = server.proc.poll() is None and http_get(server.port, "/healthz")[0] == 200
        checks["statuses"] = not failures
        growth = (rss_end - rss_warm) / rss_warm
        checks["rss_flat"] = abs(growth) <= a.rss_tolerance
        # The budget bounds what the engine holds; the process's own code, libraries and request bodies come on top
        # (its size at start, before any request).
        # (--rss-tolerance inf, AddressSanitizer: the resident size is not the program's, neither check applies.)
        if a.mixed_frames and a.rss_tolerance != float("inf"):
            peak = max((s[1] for s in samples), default=0)
            checks["rss_under_budget"] = peak <= rss_start + a.memory_budget_mb * 1024
    finally:
        done.set()
        code = server.stop()
    checks["clean_exit"] = code == 0
    total = sum(sum(v.values()) for v in counts.values())
    summary = {
        "duration_s": round(elapsed, 1), "concurrency": a.concurrency, "requests": total,
        "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(counts.items())},
        "rss_mb": {"start": round(rss_start / 1024, 1), "after_warmup": round(rss_warm / 1024, 1),
                   "end": round(rss_end / 1024, 1), "growth_pct": round(100 * growth, 2),
                   "max_sampled": round(max(s[1] for s in samples) / 1024, 1) if samples else None,
                   "warmup_s": warmup, "memory_budget_mb": a.memory_budget_mb},
        "failures": [f"{k}: {s}" for k, s in failures[:20]], "checks": checks,
    }
    print(json.dumps(summary, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(summary, rss_samples=samples), f)
    if not all(checks.values()):
        print("soak: FAILED " + ", ".join(k for k, v in checks.items() if not v), file=sys.stderr)
        print("".join(server.stderr_lines[-30:]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
