#!/usr/bin/env bash
# Configures and builds superpoint-rt (Release, warnings as errors) into build/ or the folder given as $1.
# Extra arguments are passed to cmake. Used by run.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/build}"
shift || true
# ccache (scripts/install-deps.sh) when present: CCACHE_BASEDIR makes its keys relative to the build folder, so a
# second tree with the same flags (the wheel's, scripts/check-wheel.sh) finds these objects.
launcher=()
if command -v ccache >/dev/null && [ ! -f "$dir/CMakeCache.txt" ]; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
export CCACHE_BASEDIR="$root"
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DSUPERPOINT_RT_WERROR=ON \
  -DSUPERPOINT_RT_TEST_PYTHON="$root/.venv/bin/python" "${launcher[@]}" "$@" >/dev/null
ninja -C "$dir" -j"${JOBS:-$(nproc)}"
