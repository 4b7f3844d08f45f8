#!/usr/bin/env bash
# Sets up and runs every test: formatting, the Release build (warnings as errors) with all gtest and pytest suites
# through ctest, `pip install .` in a fresh venv, then the tests built with AddressSanitizer + UndefinedBehaviorSanitizer.
#   bash scripts/test.sh            everything (what CI runs)
#   SKIP_SANITIZERS=1 bash scripts/test.sh   the Release pass only
# Test data: ../shared (or $SUPERPOINT_RT_SHARED); outputs go to temporary folders.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export SUPERPOINT_RT_SHARED="${SUPERPOINT_RT_SHARED:-$root/../shared}"
bash scripts/install-deps.sh
bash scripts/setup-venv.sh

echo "== clang-format"
files=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh' 2>/dev/null || true)
if [ -n "$files" ]; then
  # shellcheck disable=SC2086
  clang-format --dry-run -Werror $files
fi

echo "== Release build + tests"
bash scripts/build.sh "$root/build"
ctest --test-dir "$root/build" --output-on-failure -j2 --timeout 1800

echo "== pip install . in a fresh venv + the quickstart example"
bash scripts/check-pip-install.sh

if [ "${SKIP_SANITIZERS:-0}" != "1" ]; then
  echo "== ASan + UBSan build + tests"
  BUILD_TYPE=RelWithDebInfo bash scripts/build.sh "$root/build-asan" -DSUPERPOINT_RT_SANITIZE=ON \
    -DSUPERPOINT_RT_BENCH=OFF -DSUPERPOINT_RT_PYTHON=OFF
  # libgomp keeps its thread pool alive at exit: not a leak of ours.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
  LSAN_OPTIONS="suppressions=$root/tests/lsan.supp" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir "$root/build-asan" --output-on-failure -j2 --timeout 3600 -LE nosan
fi
echo "== all tests passed"
