"""Schemathesis (property-based API testing from the OpenAPI document) against a live `superpoint-rt serve`, with
EVERY check: each response of generated requests, valid and invalid (query values, bodies, multipart batches,
methods the document does not list), must conform to docs/openapi.json as the server serves it at /openapi.json
(status code documented for the operation, content type, headers, body schema, 405 with Allow); every request the
document calls valid must be accepted (positive_data_acceptance: 200, or a documented refusal that depends on sizes
the schema cannot see: 413 for a network frame over --max-frame-pixels, 503 / 504 under load) and every invalid one
refused with a documented 4xx (negative_data_rejection); no 5xx other than the documented 503 / 504.

schemathesis_hooks.py supplies what OpenAPI 3.0 cannot say for the valid cases (a decodable image as the body, the
three rules between query fields); its docstring says why each is needed.

Bounded: a few examples per operation (-n), a time budget (--max-time), a fixed seed (reproducible in CI; set
SUPERPOINT_RT_SCHEMATHESIS_SEED to explore others). Small --max-batch-parts, --timeout-s and --max-frame-pixels
(640 x 480: generated frames stay small, and larger ones take the 413 path) keep generated requests cheap; what
they refuse is documented too.
"""

import os
import subprocess
import sys
import tempfile
import time

from test_server import Server

SEED = os.environ.get("SUPERPOINT_RT_SCHEMATHESIS_SEED", "20261203")
ST = os.path.join(os.path.dirname(sys.executable), "st")
HERE = os.path.dirname(os.path.abspath(__file__))

# The statuses a check accepts beyond its own defaults: what the document promises for requests the schema cannot
# judge (sizes: 413; load: 503, 504). Everything else is Schemathesis's default for every check.
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "413", "503", "504"]

[checks.negative_data_rejection]
expected-statuses = ["400", "405", "413", "415", "422", "503", "504"]

[checks.not_a_server_error]
expected-statuses = ["2xx", "3xx", "4xx", "503", "504"]
"""


def test_schemathesis_conformance():
    assert os.access(ST, os.X_OK), f"schemathesis is not installed next to {sys.executable} (scripts/setup-venv.sh)"
    # LightGlue weights (random, a narrow network: tests/lightglue/lg_reference.py), so that /v1/match?matcher=lightglue
    # is a valid request whose answers are checked against the document too.
    lg_dir = tempfile.TemporaryDirectory()
    weights = os.path.join(lg_dir.name, "superpoint_lightglue.pth")
    sys.path.insert(0, os.path.join(HERE, "..", "lightglue"))
    import lg_reference

    lg_reference.save_pth(lg_reference.random_model(256, seed=5, early=True, prune=True, descriptor_dim=32), weights)
    srv = Server("--workers", "2", "--max-batch-parts", "4", "--timeout-s", "5", "--max-frame-pixels", "307200",
                 "--matcher-weights", weights, warmup="minimal")
    try:
        cmd = [ST, "run", f"{srv.base}/openapi.json", "--checks", "all",
               "--phases", "examples,coverage,fuzzing", "--mode", "all", "--max-examples", "6", "--max-time", "30",
               "--workers", "1", "--seed", SEED, "--generation-database", "none", "--request-timeout", "60",
               "--max-response-time", "60", "--no-color"]
        env = dict(os.environ, SCHEMATHESIS_HOOKS="schemathesis_hooks",
                   PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "schemathesis.toml"), "w") as f:
                f.write(CONFIG)
            t0 = time.time()
            r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=300)
            elapsed = time.time() - t0
        print(r.stdout[-20000:], r.stderr[-5000:])
        assert r.returncode == 0, f"schemathesis failed (exit {r.returncode}):\n{r.stdout[-8000:]}\n{r.stderr[-2000:]}"
        assert "7 selected / 7 total" in r.stdout  # every operation of the document was exercised
        assert elapsed < 180, elapsed
        assert srv.proc.poll() is None
    finally:
        assert srv.stop() == 0, srv.stderr()
        lg_dir.cleanup()
