#!/usr/bin/env python3
"""Whether other threads' calls slow the network down: the forward's time and how busy it keeps the cores, before and
after other threads of the process ran requests or a match (issue 21 item 5; src/util/compute_thread.hpp).

    python bench/bench_openmp_teams.py [--weights DIR] [--precision fp32] [--threads 2] [--rounds 4] [--calls 12]
                                       [--callers 4]

libgomp gives every thread that opens an OpenMP parallel region a team of its own, kept while that thread lives, and
once it manages more threads than there are cores it spins only ~100 iterations at a barrier before it sleeps. The
library opens every multi-threaded region on one compute thread, so the phases below should read alike. Each phase
runs `rounds` rounds of `calls` single requests on the 480x640 plane (the red channel of the berlin JPEG's top left
corner) from this thread and reports per round the median wall ms and the median of CPU ms / wall ms (process CPU:
every thread; 2.0 = two cores busy all the time):

    alone           only this thread has called the model
    after match     this thread ran superpoint_rt.match (two threads) once
    after callers   `callers` other threads each ran one request and are still alive

Requires the superpoint_rt package (pip install . or PYTHONPATH=<build>/python/stage) and numpy.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import threading
import time
from pathlib import Path

import superpoint_rt as sp


def cpu_ms() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1000.0


def main() -> None:
    shared = Path(os.environ.get("SUPERPOINT_RT_SHARED", "../shared"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=str(shared / "weights" / "superpoint"))
    ap.add_argument("--image", default=str(shared / "images" / "berlin01_1600x900.jpg"))
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--callers", type=int, default=4)
    a = ap.parse_args()

    model = sp.SuperPoint.from_pretrained(a.weights, precision=a.precision, threads=a.threads)
    plane = sp.read_image(a.image)[:480, :640, 0].copy()
    feats = model(a.image)
    model(plane)

    def phase(name: str) -> None:
        for _ in range(a.rounds):
            ms, busy = [], []
            for _ in range(a.calls):
                c0, t0 = cpu_ms(), time.perf_counter()
                model(plane)
                wall = (time.perf_counter() - t0) * 1000.0
                ms.append(wall)
                busy.append((cpu_ms() - c0) / wall)
            print(f"{name:14s} {statistics.median(ms):7.1f} ms  {statistics.median(busy):.3f} cores busy", flush=True)

    print(f"superpoint_rt {sp.__version__}, {a.precision}, {a.threads} threads, {os.cpu_count()} logical CPUs")
    phase("alone")
    sp.match(feats, feats, threads=2)
    phase("after match")
    release = threading.Event()

    def caller() -> None:
        model(plane)
        release.wait()

    ts = [threading.Thread(target=caller) for _ in range(a.callers)]
    for t in ts:
        t.start()
    time.sleep(1.0)
    phase("after callers")
    release.set()
    for t in ts:
        t.join()


if __name__ == "__main__":
    main()
