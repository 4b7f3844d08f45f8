#!/usr/bin/env bash
# Sets up and runs every test: formatting; on a fresh Debian 12 root, the README's first command and then the Release
# build (warnings as errors) with all gtest and pytest suites through ctest, the installed C++ package and its
# consumer example, the .deb and the wheel (in a fresh venv); the .deb and the wheel again, each on a fresh root of
# its own; the libFuzzer harnesses for a short time each; the tests built with AddressSanitizer + UBSan.
#   bash scripts/test.sh                     everything (what CI runs)
#   SKIP_FRESH_ROOT=1 bash scripts/test.sh   the Release pass on this machine, in build/ (incremental, quicker)
#   SKIP_SANITIZERS=1 / SKIP_FUZZ=1          leave those stages out (the closing line names what was skipped)
#   FUZZ_SECONDS=N                           seconds per libFuzzer harness (default 10, the CI length; campaigns:
#                                            bash scripts/fuzz.sh 600)
# Test data: ../shared (or $SUPERPOINT_RT_SHARED); outputs go to temporary folders.
#
# Time (2 cores): what is CPU-bound runs in the foreground; the host's other build (one clang tree with the ASan +
# UBSan tests and the libFuzzer harnesses) runs at nice 19 while the fresh root's Release pass runs, so it takes
# only the cycles that pass leaves idle (package downloads and unpacking, tests that wait on servers and sockets);
# the .deb's and the wheel's fresh roots (mostly package installs) run while the fuzzers and the ASan tests do. One
# bootstrap of Debian (mmdebstrap) serves the three fresh roots. Every stage's wall time is printed at the end,
# failed or not.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export SUPERPOINT_RT_SHARED="${SUPERPOINT_RT_SHARED:-$root/../shared}"
start=$(date +%s)
skipped=()
work="$(mktemp -d /tmp/sprt-test-XXXXXX)"

# ---- stage clock: every stage's wall time, printed at the end (also when a stage fails)
stage_lines=()
current="" current_start=0
end_stage() {
  if [ -n "$current" ]; then
    stage_lines+=("$(printf '%6d s  %s' $(($(date +%s) - current_start)) "$current")")
    current=""
  fi
}
stage() {
  end_stage
  current="$1"
  current_start=$(date +%s)
  echo "== $1 ($((current_start - start)) s)"
}
report() {
  local rc=$?
  end_stage
  if [ ${#stage_lines[@]} -gt 0 ]; then
    echo "== stage times (wall clock; [bg] = in the background, beside the stages above it)"
    printf '%s\n' "${stage_lines[@]}"
    printf '%6d s  total\n' $(($(date +%s) - start))
  fi
  # Background jobs still running (a foreground stage failed): stop them.
  local pids
  pids="$(jobs -p)"
  [ -z "$pids" ] || kill $pids 2>/dev/null || true
  rm -rf "$work"
  return $rc
}
trap report EXIT

# ---- background stages: bg NAME CMD... runs CMD with its output in a log; bg_wait NAME prints the log and fails
# when CMD failed. Their wall times are stage lines too.
declare -A bg_pid bg_start
bg() {
  local name="$1"
  shift
  bg_start[$name]=$(date +%s)
  echo "== [bg] $name ($((bg_start[$name] - start)) s)"
  ("$@") >"$work/$name.log" 2>&1 &
  bg_pid[$name]=$!
}
bg_wait() {
  local name="$1" rc=0
  wait "${bg_pid[$name]}" || rc=$?
  echo "== [bg] $name: its output"
  cat "$work/$name.log"
  stage_lines+=("$(printf '%6d s  [bg] %s' $(($(date +%s) - bg_start[$name])) "$name")")
  if [ $rc -ne 0 ]; then
    echo "test.sh: [bg] $name failed (exit $rc)" >&2
    return $rc
  fi
}

stage "set-up: system packages and the test venv"
bash scripts/install-deps.sh --test
bash scripts/setup-venv.sh

stage "clang-format"
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
[ ${#files[@]} -gt 0 ] || { echo "test.sh: git lists no C++ files: not a checkout?" >&2; exit 1; }
clang-format --dry-run -Werror "${files[@]}"
echo "${#files[@]} files formatted"

# One clang tree for the sanitizers, build-san/: the library compiled once with AddressSanitizer + UBSan and
# libFuzzer's coverage (-fsanitize=fuzzer-no-link), linked into the gtest programs, the CLI, the fuzz replays and the
# libFuzzer harnesses. (GCC 12 took 3x clang's time per file with ASan + UBSan at -O2, e.g. src/server/transport.cpp
# 102 s against 31 s, and the harnesses needed clang's build of the library anyway.) Without the sanitizer stage the
# harnesses build alone in build-fuzz/ (scripts/fuzz.sh's default).
# Line tables only (-gline-tables-only, not -g): the sanitizers' reports and the symbolizer need file:line, not
# types and variables, and the tree builds about 13 % faster (model/weights.cpp: 12.0 s against 13.9 s).
san_build() {
  BUILD_TYPE=RelWithDebInfo bash scripts/build.sh "$root/build-san" -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" -DSUPERPOINT_RT_SANITIZE=ON \
    -DSUPERPOINT_RT_FUZZ=ON -DSUPERPOINT_RT_TESTS=ON -DSUPERPOINT_RT_CLI=ON -DSUPERPOINT_RT_BENCH=OFF \
    -DSUPERPOINT_RT_PYTHON=OFF
}
fuzz_dir="$root/build-fuzz"
[ "${SKIP_SANITIZERS:-0}" = "1" ] || fuzz_dir="$root/build-san"
host_builds() {  # the sanitizer tree, then the harnesses' seeds (each skipped when its stage is)
  if [ "${SKIP_SANITIZERS:-0}" != "1" ]; then san_build; fi
  if [ "${SKIP_FUZZ:-0}" != "1" ]; then FUZZ_BUILD_DIR="$fuzz_dir" bash scripts/fuzz.sh --build-only; fi
}

if [ "${SKIP_FRESH_ROOT:-0}" != "1" ]; then
  # One Debian bootstrap for the three fresh roots (scripts/fresh-root.sh: each is a new copy of it).
  stage "Debian 12 bootstrap for the fresh roots (mmdebstrap, once)"
  # shellcheck source=scripts/fresh-root.sh
  source scripts/fresh-root.sh
  fresh_root_tarball "$work/root.tar"
  export FRESH_ROOT_TARBALL="$work/root.tar"

  if [ "${SKIP_FUZZ:-0}" != "1" ] || [ "${SKIP_SANITIZERS:-0}" != "1" ]; then
    bg "host builds at nice 19: libFuzzer harnesses, ASan + UBSan tests" nice -n 19 bash -c "set -euo pipefail; \
      $(declare -f san_build host_builds); root='$root'; fuzz_dir='$fuzz_dir'; cd '$root'; host_builds"
  fi

  # The Release pass runs on a fresh Debian 12 root, after the README's first command, exactly as a newcomer types
  # them: that proves install-deps.sh on a new machine, and that the test command still runs every test in a build
  # folder that run.sh configured first. The root's test.sh is this script with SKIP_FRESH_ROOT=1.
  stage "fresh Debian 12 root: bash scripts/run.sh, then bash scripts/test.sh (Release pass)"
  artifacts="$work/artifacts"
  FRESH_ROOT_TESTS=1 FRESH_ROOT_ARTIFACTS="$artifacts" bash scripts/check-fresh-root.sh

  # The packages that root made, each on a root of its own: the .deb must bring its runtime libraries through its
  # Depends; the wheel must run where only the runtime libraries (no -dev package, no compiler) are installed.
  end_stage
  bg "the .deb on a fresh root: apt-get install, superpoint-rt info, the C++ consumer example" \
    bash scripts/check-deb.sh --deb "$(ls "$artifacts"/superpoint-rt_*.deb)"
  bg "the wheel on a fresh root with the runtime libraries only: the quickstart example" \
    bash scripts/check-wheel.sh --wheel "$(ls "$artifacts"/superpoint_rt-*.whl)"
else
  # Every option the tests need is set here, explicitly: a build folder configured earlier by run.sh (tests off)
  # keeps its cache, and ctest would then find no test at all. --no-tests=error makes that a failure, not a pass.
  stage "Release build"
  bash scripts/build.sh "$root/build" -DSUPERPOINT_RT_TESTS=ON -DSUPERPOINT_RT_CLI=ON -DSUPERPOINT_RT_BENCH=ON \
    -DSUPERPOINT_RT_PYTHON=ON -DSUPERPOINT_RT_SANITIZE=OFF
  stage "Release tests (ctest -j$(nproc))"
  ctest --test-dir "$root/build" --output-on-failure --no-tests=error -j"$(nproc)" --timeout 1800

  stage "cmake --install into a temporary prefix + the C++ consumer example (find_package and pkg-config)"
  bash scripts/check-install.sh "$root/build"
  stage "the .deb (CPack)"
  bash scripts/check-deb.sh --deb-only "$root/build"
  stage "pip wheel . + pip install of it in a fresh venv + the quickstart example"
  WHEEL_DIR="$root/dist" bash scripts/check-wheel.sh
  skipped+=("fresh-root")
  if [ "${SKIP_FUZZ:-0}" != "1" ] || [ "${SKIP_SANITIZERS:-0}" != "1" ]; then
    stage "host builds: libFuzzer harnesses, ASan + UBSan tests"
    host_builds
  fi
fi

if [ -n "${bg_pid["host builds at nice 19: libFuzzer harnesses, ASan + UBSan tests"]:-}" ]; then
  bg_wait "host builds at nice 19: libFuzzer harnesses, ASan + UBSan tests"
fi

if [ "${SKIP_FUZZ:-0}" != "1" ]; then
  stage "libFuzzer harnesses, ${FUZZ_SECONDS:-10} s each, side by side"
  # A fixed seed: the short run is a check whose verdict does not depend on the draw (a libhdf5 crash of a known
  # class, fuzz/README.md, turned up in one 10 s run of four); the campaigns (bash scripts/fuzz.sh 600) draw freely.
  FUZZ_SEED="${FUZZ_SEED:-1}" FUZZ_BUILD_DIR="$fuzz_dir" bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
else
  skipped+=("fuzz")
fi

# What the sanitizer pass leaves to the Release pass, where each runs in full: tests that repeat whole forwards or
# sweeps for a numerical or concurrency property, 6-12x their Release time under ASan since the forward runs in our
# instrumented Winograd kernels (the precisions' quality, the bench, every shared JPEG against Pillow, the lanes'
# and lists' bit-identity stress, calibration from images, the heap-growth count, the two-thread JPEG sweep, the
# golden sets but the default one, exhaustive half conversions, the fp32 Winograd reference against the direct
# convolution: the fast kernels' tests run that reference here) and the scalar-capped reruns (the scalar kernels
# are the references the fast ones are tested against, in this pass too). Their code still runs under ASan here, in
# the cheaper tests of the same areas: every kernel against its reference on random and awkward shapes, each
# decoder on synthetic files of every layout, the engine's API and lane tests on single images, every 4th golden
# image of the default set, the server's soak and attacks, the fuzz replays.
# (Clang's tree runs every OpenMP region on LLVM's libomp, oneDNN's included: its GOMP_* calls bind there. That is how
# this pass found the matcher's reliance on a thread taking its blocks in increasing order, which libomp's
# schedule(dynamic) does not keep: src/match/matcher.cpp.)
asan_skip='^(Cli\.BenchPrintsOneTableAndJson|Precision\.(Int8|Bf16|Mixed).*|JpegResized\.EveryPlaneOfEverySharedJpeg.*|'\
'JpegTwoThreads\.(SharedJpegs.*|EverySplitOfSyntheticFiles)|JpegChannel\.EveryChannelOfEverySharedJpeg.*|'\
'ImageDecode\.SharedImagesMatchPillow|Lists\.(PipelineKeepsOrder.*|ASinkGetsRunEachs.*|RunEachReportsPerImage.*)|'\
'RunEach\.(LanesGiveEachImage.*|ConcurrentRequestsAndListsInLanes.*|WaitsForItsTasksWhenSubmitThrowsInLanes)|'\
'Options\.Int8CalibrationImagesSetTheRanges|Heap\.NoGrowthPerCallAfterWarmup|Threads\.ConcurrentCallsOnOneModel.*|'\
'Sets/Golden\.EveryImagePassesTheFidelityRule/(all|nms0|nms12|nms2|ntsc|thr015)|Half\.(Exhaustive.*|MatchesNumpy.*)|'\
'WinoF32\.ReferenceIsTheConvolution|isa_scalar_.*)$'
if [ "${SKIP_SANITIZERS:-0}" != "1" ]; then
  stage "ASan + UBSan tests (ctest -j$(nproc))"
  san_build  # up to date (the background build), or built here when there was none
  # libgomp and libomp keep their thread pools alive at exit: not a leak of ours. The soak runs 8 + 6 s here (20 + 15
  # in the Release pass): every request is several times slower under ASan.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
  LSAN_OPTIONS="suppressions=$root/tests/lsan.supp" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  SUPERPOINT_RT_SOAK_S=8 SUPERPOINT_RT_SOAK_FRAMES_S=6 SUPERPOINT_RT_GOLDEN_EVERY=4 \
    ctest --test-dir "$root/build-san" --output-on-failure --no-tests=error -j"$(nproc)" --timeout 3600 -LE nosan \
    -E "$asan_skip"
else
  skipped+=("sanitizers")
fi
end_stage

for name in "${!bg_pid[@]}"; do
  case "$name" in host*) continue ;; esac
  bg_wait "$name"
done

if [ ${#skipped[@]} -gt 0 ]; then
  echo "== all tests passed, but these stages were skipped on request: ${skipped[*]} ($(($(date +%s) - start)) s)"
else
  echo "== all tests passed ($(($(date +%s) - start)) s)"
fi
