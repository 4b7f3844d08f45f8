#!/usr/bin/env python3
"""The hostile requests of issue 32 against one `superpoint-rt serve`, each with the server's resident memory
before it and at its peak (VmHWM, reset with /proc/PID/clear_refs before the request), its answer, its time, and
whether GET /healthz kept answering 200 meanwhile (polled every 50 ms with a 2 s timeout).

Rows (the issue's table; sizes are arguments, the defaults are the test's short ones):
  chunked      a body sent with Transfer-Encoding: chunked, far over --max-body-mb
  gzip         a small gzip body (Content-Encoding: gzip) that inflates to many MB
  gzip_png     a gzipped PNG (Content-Encoding: gzip)
  line         a huge request line
  header       a huge header line
  dribble      100 clients sending their headers a byte at a time
  dense        an 8x8 PNG with every keypoint of a resize frame asked for (max_keypoints=-1, threshold 0, radius 0)
  match        4 x /v1/match of two tiny PNGs with every keypoint at 640x480
  sigterm      SIGTERM while those matches run: seconds until the process exits

  bench/attack_server.py --cli build/src/cli/superpoint-rt [--rows chunked,gzip] [--json out.json]

tests/server/test_limits.py imports the functions below (one definition of each attack) and asserts on them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib

MiB = 1 << 20


# --- the server and its memory -------------------------------------------------------------------------------------


class Server:
    """`superpoint-rt serve` on a free loopback port, ready (or failed) when the constructor returns."""

    def __init__(self, cli, weights, *args, warmup="none", threads=2, env=None):
        cmd = [cli, "serve", "--host", "127.0.0.1", "--port", "0", "--weights", weights, "--warmup", warmup,
               "--threads", str(threads), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        line = self.proc.stdout.readline().strip()
        if "listening on http://127.0.0.1:" not in line:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.port = int(line.rsplit(":", 1)[1])
        self.stderr_lines = []
        threading.Thread(target=lambda: self.stderr_lines.extend(self.proc.stderr), daemon=True).start()
        deadline = time.time() + 180
        while get(self.port, "/readyz")[0] != 200:
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"server not ready: {''.join(self.stderr_lines)[-2000:]}")
            time.sleep(0.1)

    def rss_mb(self):
        return status_kb(self.proc.pid, "VmRSS") / 1024

    def reset_peak(self):
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident size (Linux >= 4.0)

    def peak_mb(self):
        return status_kb(self.proc.pid, "VmHWM") / 1024

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        return int(next(ln for ln in f if ln.startswith(key + ":")).split()[1])


def get(port, path, timeout=2.0):
    """(status, body) of a GET; (-1, error) when there is no answer in time."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body
    except (OSError, http.client.HTTPException) as e:
        return -1, repr(e).encode()


class Health:
    """Polls /healthz every 50 ms while it runs; `failures` counts answers that were not 200 within 2 s."""

    def __init__(self, port):
        self.port, self.polls, self.failures, self.worst_s = port, 0, 0, 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            t0 = time.time()
            ok = get(self.port, "/healthz")[0] == 200
            self.worst_s = max(self.worst_s, time.time() - t0)
            self.polls += 1
            self.failures += not ok
            self._stop.wait(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def measured(srv, row, fn):
    """Runs fn() (which returns a dict) with the peak reset before it and /healthz polled during it."""
    time.sleep(0.3)
    idle = srv.rss_mb()
    srv.reset_peak()
    t0 = time.time()
    with Health(srv.port) as h:
        out = fn()
    out.update(row=row, seconds=round(time.time() - t0, 2), rss_idle_mb=round(idle, 1),
               rss_peak_mb=round(srv.peak_mb(), 1), healthz_polls=h.polls, healthz_failures=h.failures,
               healthz_worst_s=round(h.worst_s, 3))
    return out


# --- raw HTTP -------------------------------------------------------------------------------------------------------


def read_status(sock, timeout=120.0):
    """The status of the first answer on `sock` (-1 when the connection ends without one)."""
    sock.settimeout(timeout)
    buf = b""
    try:
        while b"\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return -1
            buf += chunk
    except OSError:
        return -1
    return int(buf.split(b" ", 2)[1])


def send_then_status(port, head, body_pieces, timeout=120.0):
    """Sends `head`, then each piece of `body_pieces` (an iterable) until the server stops reading; the answer's status
    and the bytes sent. The answer is read on its own thread, so a server that answers early is seen at once."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    result = {}
    reader = threading.Thread(target=lambda: result.update(status=read_status(s, timeout)), daemon=True)
    reader.start()
    sent = 0
    try:
        s.sendall(head)
        for piece in body_pieces:
            if "status" in result:
                break
            s.sendall(piece)
            sent += len(piece)
    except OSError:
        pass
    reader.join(timeout)
    s.close()
    return {"status": result.get("status", -1), "sent_mb": round(sent / MiB, 1)}


def png_bytes(w, h, gray=0):
    raw = zlib.compress(b"".join(b"\0" + bytes([gray]) * w for _ in range(h)), 9)

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", raw) + chunk(b"IEND", b""))


# --- the rows -------------------------------------------------------------------------------------------------------


def attack_chunked(port, total_mb=100, piece_kb=1024):
    head = (b"POST /v1/keypoints HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"\0" * (piece_kb * 1024)
    framed = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    n = total_mb * 1024 // piece_kb
    out = send_then_status(port, head, (framed for _ in range(n)))
    return out


def gzip_of_zeros(inflated_mb):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip wrapper
    block = b"\0" * MiB
    return b"".join(z.compress(block) for _ in range(inflated_mb)) + z.flush()



def attack_gzip(port, inflated_mb=100, body=None):
    body = gzip_of_zeros(inflated_mb) if body is None else body
    head = (f"POST /v1/keypoints HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    out = send_then_status(port, head, [body])
    out["body_mb"] = round(len(body) / MiB, 2)
    return out


def gzip_bytes(data):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()


def attack_gzip_png(port):
    return attack_gzip(port, body=gzip_bytes(png_bytes(64, 48, 100)))


def attack_line(port, total_mb=100):
    piece = b"a" * MiB
    return send_then_status(port, b"GET /", (piece for _ in range(total_mb)))


def attack_header(port, total_mb=100):
    piece = b"a" * MiB
    return send_then_status(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: ", (piece for _ in range(total_mb)))


def attack_dribble(port, clients=100, seconds=6.0):
    """`clients` connections each sending a request's header one byte every 0.5 s for `seconds`."""
    text = b"POST /v1/keypoints HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nX-Pad: " + b"a" * 1000
    socks = []
    for _ in range(clients):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    t_end = time.time() + seconds
    i = 0
    while time.time() < t_end:
        for s in socks:
            try:
                s.send(text[i:i + 1])
            except OSError:
                pass
        i += 1
        time.sleep(0.5)
    for s in socks:
        s.close()
    return {"status": 0, "clients": len(socks)}


def dense_query(side):
    return f"?max_keypoints=-1&keypoint_threshold=0&nms_radius=0&resize={side}x{side}"


def attack_dense(port, side=512, timeout=300.0):
    """The dense request; the answer is read and dropped as it arrives."""
    png = png_bytes(8, 8)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v1/keypoints" + dense_query(side), body=png, headers={"Content-Type": "image/png"})
        r = c.getresponse()
        n = 0
        while chunk := r.read(MiB):
            n += len(chunk)
        return {"status": r.status, "answer_mb": round(n / MiB, 1), "retry_after": r.getheader("Retry-After")}
    except (OSError, http.client.HTTPException) as e:
        return {"status": -1, "error": repr(e)}
    finally:
        c.close()


def match_body():
    boundary = "sprt-attack-boundary"
    png = png_bytes(8, 8)
    out = b""
    for name in ("image0", "image1"):
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{name}.png"\r\n'
                f"Content-Type: image/png\r\n\r\n").encode() + png + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


MATCH_QUERY = "?max_keypoints=-1&keypoint_threshold=0&nms_radius=0"


WAIT_S = 600.0  # how long a client waits for a match, and the sigterm row for the exit (--wait-s)


def post_match(port, query=MATCH_QUERY, timeout=None):
    timeout = WAIT_S if timeout is None else timeout
    body, ctype = match_body()
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v1/match" + query, body=body, headers={"Content-Type": ctype})
        r = c.getresponse()
        data = r.read()
        status = r.status
    except (OSError, http.client.HTTPException):
        status, data = -1, b""
    finally:
        c.close()
    msg = ""
    if status != 200 and data[:1] == b"{":
        msg = json.loads(data)["error"]["message"]
    return {"status": status, "seconds": round(time.time() - t0, 2), "message": msg[:200]}


def attack_match(port, clients=4, query=MATCH_QUERY):
    results = [None] * clients

    def go(i):
        results[i] = post_match(port, query)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"status": sorted({r["status"] for r in results}), "answers": results}


def attack_sigterm(srv, clients=4, query=MATCH_QUERY, after_s=1.0):
    threads = [threading.Thread(target=post_match, args=(srv.port, query), daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(after_s)
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        srv.proc.wait(WAIT_S)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        srv.proc.wait()
        return {"status": "still running, killed", "exit_s": f"> {WAIT_S:g}"}
    return {"status": srv.proc.returncode, "exit_s": round(time.time() - t0, 2)}


# --- the command line ---------------------------------------------------------------------------------------------


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.environ.get("SUPERPOINT_RT_SHARED", os.path.join(here, "..", "..", "shared"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--weights", default=os.path.join(shared, "weights", "superpoint"))
    ap.add_argument("--rows", default="chunked,gzip,gzip_png,line,header,dribble,dense,match,sigterm")
    ap.add_argument("--body-mb", type=int, default=100, help="bytes sent by the body and line rows")
    ap.add_argument("--side", type=int, default=512, help="the dense row's resize frame")
    ap.add_argument("--budget-mb", type=int, default=1024, help="--memory-budget-mb of the dense and match rows")
    ap.add_argument("--timeout-s", type=float, default=10, help="--timeout-s of the match rows")
    ap.add_argument("--wait-s", type=float, default=600.0, help="the longest wait for a match or for the exit")
    ap.add_argument("--json")
    a = ap.parse_args()
    globals()["WAIT_S"] = a.wait_s
    rows = a.rows.split(",")
    out = []

    def report(r):
        print(json.dumps(r), flush=True)
        out.append(r)

    body_rows = [r for r in rows if r in ("chunked", "gzip", "gzip_png", "line", "header", "dribble")]
    if body_rows:
        srv = Server(a.cli, a.weights, "--max-body-mb", "10", "--workers", "2")
        try:
            fns = {"chunked": lambda: attack_chunked(srv.port, a.body_mb),
                   "gzip": lambda: attack_gzip(srv.port, a.body_mb),
                   "gzip_png": lambda: attack_gzip_png(srv.port),
                   "line": lambda: attack_line(srv.port, a.body_mb),
                   "header": lambda: attack_header(srv.port, a.body_mb),
                   "dribble": lambda: attack_dribble(srv.port)}
            for r in body_rows:
                report(measured(srv, r, fns[r]))
        finally:
            srv.stop()
    if "dense" in rows:
        srv = Server(a.cli, a.weights, "--memory-budget-mb", str(a.budget_mb), "--workers", "2")
        try:
            report(measured(srv, "dense", lambda: attack_dense(srv.port, a.side)))
        finally:
            srv.stop()
    if "match" in rows or "sigterm" in rows:
        flags = ("--memory-budget-mb", str(a.budget_mb), "--workers", "4", "--timeout-s", str(a.timeout_s))
        if "match" in rows:
            srv = Server(a.cli, a.weights, *flags)
            try:
                report(measured(srv, "match", lambda: attack_match(srv.port)))
            finally:
                srv.stop()
        if "sigterm" in rows:
            srv = Server(a.cli, a.weights, *flags)
            r = attack_sigterm(srv)
            r["row"] = "sigterm"
            report(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
