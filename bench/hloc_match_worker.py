#!/usr/bin/env python3
"""hloc's own match_features, timed, for `superpoint-rt bench --matching` (src/cli/bench_match.cpp).

hloc is not part of this repository: --hloc names a checkout of cvg/Hierarchical-Localization (its hloc/ package is
imported from there). It needs torch, h5py, tqdm, packaging and pycolmap in this Python; torch's BLAS decides hloc's
matrix product speed (Debian's python3-torch uses the libblas.so.3 alternative: the netlib reference BLAS unless an
optimised one is installed or put first on LD_LIBRARY_PATH).

    python bench/hloc_match_worker.py --hloc DIR --conf NN-mutual --features F.h5 --pairs P.txt --output M.h5 \
        [--iters 1]

Prints one JSON line: {"ms": [one per call of match_features.main(..., overwrite=True)], "cpu_ms": [the CPU time of
each call, this process and its DataLoader workers], "import_s": s,
"peak_rss_mb": this process, "peak_rss_children_mb": its DataLoader workers, "torch": version, "torch_threads": n}.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hloc", required=True, type=Path, help="a checkout of cvg/Hierarchical-Localization")
    ap.add_argument("--conf", default="NN-mutual")
    ap.add_argument("--features", required=True, type=Path)
    ap.add_argument("--pairs", required=True, type=Path)
    ap.add_argument("--output", required=True, type=Path)
    ap.add_argument("--iters", type=int, default=1)
    a = ap.parse_args()
    if not (a.hloc / "hloc" / "match_features.py").is_file():
        print(f"--hloc {a.hloc}: no hloc/match_features.py there", file=sys.stderr)
        return 2
    sys.path.insert(0, str(a.hloc))
    t0 = time.time()
    import torch
    from hloc import match_features

    import_s = time.time() - t0
    def cpu_ms() -> float:  # this process and its finished children (the DataLoader workers), user + system
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return (s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime) * 1e3

    ms, cpu = [], []
    for _ in range(a.iters):
        t, c = time.perf_counter(), cpu_ms()
        match_features.main(match_features.confs[a.conf], a.pairs, features=a.features, matches=a.output,
                            overwrite=True)
        ms.append((time.perf_counter() - t) * 1e3)
        cpu.append(cpu_ms() - c)
    print(json.dumps({"ms": ms, "cpu_ms": cpu, "import_s": import_s,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "peak_rss_children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                      "torch": torch.__version__, "torch_threads": torch.get_num_threads()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
