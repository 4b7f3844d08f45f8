"""Short runs of bench/soak_server.py (the 30-minute soak of docs/SERVING.md, for 20 s; issue 19's 10-minute soak
with --mixed-frames, for 15 s: the test command's lengths; SUPERPOINT_RT_SOAK_S and SUPERPOINT_RT_SOAK_FRAMES_S set
longer ones, and bench/soak_server.py runs the full soaks): mixed valid, hostile, slow and vanishing clients against one `superpoint-rt serve`,
with mixed frames every valid request another preset, network frame and image size; only documented statuses, the
process alive and exiting 0 on SIGTERM, the resident size with nothing in flight within 5 % of the one after warm-up
(10 % with mixed frames, see MIXED_FRAMES_RSS_TOLERANCE), and with mixed frames every sample under the memory budget.

Under AddressSanitizer the resident size is not the program's (the allocator quarantines freed memory, 256 MB by
default), so that one check is off there, explicitly; every other check runs."""

import json
import os
import subprocess
import sys
import tempfile

import pytest
from test_server import CLI, IMAGES, WEIGHTS

SOURCE = os.environ.get("SUPERPOINT_RT_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DURATION = os.environ.get("SUPERPOINT_RT_SOAK_S", "20")
MIXED_FRAMES_DURATION = os.environ.get("SUPERPOINT_RT_SOAK_FRAMES_S", "15")
# With mixed frames the quiescent resident size depends on the traffic's history, not only on what is live: three
# identical 30 s runs measured it after warm-up at 215, 220 and 231 MB, and the end against it at -1.6 %, +1.9 % and
# +3.6 % (the server gives free heap pages back when idle, server.cpp trim_when_idle). 10 % still fails a leak of a
# plan or a context per request (tens of MB in these 20 s); the 10-minute soak of issue 19 keeps 5 %.
MIXED_FRAMES_RSS_TOLERANCE = "0.10"


def built_with_asan(path):
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


@pytest.mark.parametrize("mixed_frames", [False, True], ids=["traffic", "mixed_frames"])
def test_soak_short(mixed_frames):
    asan = built_with_asan(CLI)
    duration = MIXED_FRAMES_DURATION if mixed_frames else DURATION
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "soak.json")
        r = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "soak_server.py"), "--cli", CLI,
                            "--weights", WEIGHTS, "--images", IMAGES, "--duration", duration, "--concurrency", "4",
                            "--json", out] + (["--mixed-frames", "--max-side", "800"] if mixed_frames else [])
                           # Under ASan the RSS baseline is not checked, so its warm-up (10 s at least by default)
                           # only has to leave time for the load: a fifth of the (shorter) run.
                           + (["--rss-tolerance", "inf", "--warmup", str(float(duration) / 5)] if asan else
                              ["--rss-tolerance", MIXED_FRAMES_RSS_TOLERANCE] if mixed_frames else []),
                           capture_output=True, text=True, timeout=float(duration) + 400)
        print(r.stdout, r.stderr[-5000:])
        assert r.returncode == 0, f"soak failed:\n{r.stdout[-6000:]}\n{r.stderr[-4000:]}"
        with open(out) as f:
            summary = json.load(f)
    assert all(summary["checks"].values()), summary["checks"]
    kinds = summary["by_kind"]
    # The run really mixed its kinds: valid answers and hostile inputs refused with their documented codes.
    assert kinds["frames" if mixed_frames else "valid"].get("200", 0) >= 1, kinds
    refused = sum(kinds.get(k, {}).get(c, 0) for k, c in [("huge", "413"), ("header_only", "400"),
                                                             ("garbage", "400"), ("parts", "413")])
    assert refused >= 1, kinds
