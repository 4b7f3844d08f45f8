#!/usr/bin/env bash
# Configures and builds superpoint-rt (Release, warnings as errors) into build/ or the folder given as $1.
# Extra arguments are passed to cmake. Used by run.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/build}"
shift || true
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DSUPERPOINT_RT_WERROR=ON \
  -DSUPERPOINT_RT_TEST_PYTHON="$root/.venv/bin/python" "$@" >/dev/null
ninja -C "$dir" -j"${JOBS:-$(nproc)}"
