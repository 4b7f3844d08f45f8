#!/usr/bin/env bash
# CI check of the Python packaging: `pip install .` in a FRESH plain venv (no system site-packages; scikit-build-core,
# pybind11 and numpy come from PyPI), then the quickstart example from another directory, then the check that the
# package imports with numpy only. Called by scripts/test.sh.
#   bash scripts/check-pip-install.sh [VENV_DIR]      (default: a temporary folder, removed at the end)
# Environment: PYTHON (default /usr/bin/python3), JOBS (build parallelism, default nproc), KEEP_VENV=1 keeps it,
# INSTALL_FROM (what pip installs: default the checkout; scripts/check-wheel.sh gives a built wheel).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-/usr/bin/python3}"
venv="${1:-$(mktemp -d /tmp/sprt-pip-XXXXXX)/venv}"
work="$(mktemp -d /tmp/sprt-pip-run-XXXXXX)"
cleanup() {
  rm -rf "$work"
  if [ -z "${1:-}" ] && [ "${KEEP_VENV:-0}" != "1" ]; then rm -rf "$(dirname "$venv")"; fi
}
trap 'cleanup "${1:-}"' EXIT
start=$(date +%s)

echo "== fresh venv: $venv"
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip

src="${INSTALL_FROM:-$root}"
echo "== pip install $src"
# The build uses the project's CMake (scikit-build-core); its build folder is build-pip/ in the checkout, so a second
# run is incremental.
CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}" "$venv/bin/python" -m pip install -q --disable-pip-version-check "$src"

echo "== quickstart from another directory"
cd "$work"
# Weights: $SUPERPOINT_RT_WEIGHTS, else ../shared/weights/superpoint beside the checkout (the example finds it).
"$venv/bin/python" "$root/examples/quickstart.py" --out-dir "$work/out"
for f in keypoints.png keypoints.json descriptors.npy; do
  [ -s "$work/out/$f" ] || { echo "check-pip-install: $work/out/$f was not written" >&2; exit 1; }
done

echo "== the installed package"
"$venv/bin/python" - <<'PY'
import pathlib, sys
import superpoint_rt
pkg = pathlib.Path(superpoint_rt.__file__).parent
assert "site-packages" in str(pkg), f"imported from {pkg}, not from the installed wheel"
assert (pkg / "py.typed").is_file() and (pkg / "_core.pyi").is_file(), "type information missing"
assert "PIL" not in sys.modules and "torch" not in sys.modules
print("superpoint_rt", superpoint_rt.__version__, "from", pkg)
PY
echo "check-pip-install: OK in $(( $(date +%s) - start )) s"
