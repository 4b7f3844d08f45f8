#!/usr/bin/env bash
# Sets up and runs every test: formatting; on a fresh Debian 12 root, the README's first command and then the Release
# build (warnings as errors) with all gtest and pytest suites through ctest, the installed C++ package and its
# consumer example, the .deb and the wheel (in a fresh venv); the .deb and the wheel again, each on a fresh root of
# its own; the libFuzzer harnesses for a bounded time; the tests built with AddressSanitizer + UBSan.
#   bash scripts/test.sh                     everything (what CI runs)
#   SKIP_FRESH_ROOT=1 bash scripts/test.sh   the Release pass on this machine, in build/ (incremental, quicker)
#   SKIP_SANITIZERS=1 / SKIP_FUZZ=1          leave those stages out (the closing line names what was skipped)
# Test data: ../shared (or $SUPERPOINT_RT_SHARED); outputs go to temporary folders.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export SUPERPOINT_RT_SHARED="${SUPERPOINT_RT_SHARED:-$root/../shared}"
start=$(date +%s)
stage() { echo "== $1 ($(( $(date +%s) - start )) s)"; }
skipped=()

bash scripts/install-deps.sh --test
bash scripts/setup-venv.sh

stage "clang-format"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
[ ${#files[@]} -gt 0 ] || { echo "test.sh: git lists no C++ files: not a checkout?" >&2; exit 1; }
clang-format --dry-run -Werror "${files[@]}"
echo "${#files[@]} files formatted"

if [ "${SKIP_FRESH_ROOT:-0}" != "1" ]; then
  # The Release pass runs on a fresh Debian 12 root (mmdebstrap), after the README's first command, exactly as a
  # newcomer types them: that proves install-deps.sh on a new machine, and that the test command still runs every
  # test in a build folder that run.sh configured first. The root's test.sh is this script with SKIP_FRESH_ROOT=1.
  stage "fresh Debian 12 root: bash scripts/run.sh, then bash scripts/test.sh (Release pass)"
  artifacts="$(mktemp -d /tmp/sprt-artifacts-XXXXXX)"
  trap 'rm -rf "$artifacts"' EXIT
  FRESH_ROOT_TESTS=1 FRESH_ROOT_ARTIFACTS="$artifacts" bash scripts/check-fresh-root.sh

  # The packages that root made, each on a root of its own: the .deb must bring its runtime libraries through its
  # Depends; the wheel must run where only the runtime libraries (no -dev package, no compiler) are installed.
  stage "the .deb on a fresh root: apt-get install, superpoint-rt info, the C++ consumer example"
  bash scripts/check-deb.sh --deb "$(ls "$artifacts"/superpoint-rt_*.deb)"
  stage "the wheel on a fresh root with the runtime libraries only: the quickstart example"
  bash scripts/check-wheel.sh --wheel "$(ls "$artifacts"/superpoint_rt-*.whl)"
else
  # Every option the tests need is set here, explicitly: a build folder configured earlier by run.sh (tests off)
  # keeps its cache, and ctest would then find no test at all. --no-tests=error makes that a failure, not a pass.
  stage "Release build + tests"
  bash scripts/build.sh "$root/build" -DSUPERPOINT_RT_TESTS=ON -DSUPERPOINT_RT_CLI=ON -DSUPERPOINT_RT_BENCH=ON \
    -DSUPERPOINT_RT_PYTHON=ON -DSUPERPOINT_RT_SANITIZE=OFF
  ctest --test-dir "$root/build" --output-on-failure --no-tests=error -j2 --timeout 1800

  stage "cmake --install into a temporary prefix + the C++ consumer example (find_package and pkg-config)"
  bash scripts/check-install.sh "$root/build"
  stage "the .deb (CPack)"
  bash scripts/check-deb.sh --deb-only "$root/build"
  stage "pip wheel . + pip install of it in a fresh venv + the quickstart example"
  WHEEL_DIR="$root/dist" bash scripts/check-wheel.sh
  skipped+=("fresh-root")
fi

if [ "${SKIP_FUZZ:-0}" != "1" ]; then
  stage "libFuzzer harnesses, ${FUZZ_SECONDS:-30} s each"
  bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
else
  skipped+=("fuzz")
fi

if [ "${SKIP_SANITIZERS:-0}" != "1" ]; then
  stage "ASan + UBSan build + tests"
  BUILD_TYPE=RelWithDebInfo bash scripts/build.sh "$root/build-asan" -DSUPERPOINT_RT_SANITIZE=ON \
    -DSUPERPOINT_RT_TESTS=ON -DSUPERPOINT_RT_CLI=ON -DSUPERPOINT_RT_BENCH=OFF -DSUPERPOINT_RT_PYTHON=OFF
  # libgomp keeps its thread pool alive at exit: not a leak of ours.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
  LSAN_OPTIONS="suppressions=$root/tests/lsan.supp" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir "$root/build-asan" --output-on-failure --no-tests=error -j2 --timeout 3600 -LE nosan
else
  skipped+=("sanitizers")
fi

if [ ${#skipped[@]} -gt 0 ]; then
  echo "== all tests passed, but these stages were skipped on request: ${skipped[*]} ($(( $(date +%s) - start )) s)"
else
  echo "== all tests passed ($(( $(date +%s) - start )) s)"
fi
