#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang, ASan + UBSan) and runs each for a bounded time.
#   bash scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]      default 30 s, every harness (scripts/test.sh: 10 s,
#                                                                its CI length; campaigns: minutes to hours each)
#   bash scripts/fuzz.sh --build-only [SECONDS] [HARNESS...]  only build them (and the seeds)
#   harnesses: decode decode_plane decode_cv2 http multipart query weights hub npz pairs h5 pth (fuzz/CMakeLists.txt SUPERPOINT_RT_FUZZ_HARNESSES)
# Environment: FUZZ_BUILD_DIR (default build-fuzz/ in the repository), SUPERPOINT_RT_SHARED (images for the seeds,
# default ../shared), FUZZ_PYTHON (for fuzz/make_seeds.py; default .venv/bin/python, else python3), JOBS,
# FUZZ_SAVE_DIR (where failing inputs are copied, as <dir>/<name>/; default fuzz/regressions),
# FUZZ_JOBS (harnesses fuzzed side by side, default one per core), FUZZ_SEED (libFuzzer's -seed; unset: random),
# FUZZ_KEEP_GOING=1 (campaigns: libFuzzer's fork mode, which records each crash, OOM or timeout and goes on fuzzing
# instead of stopping at the first; the exit status is still 1 when any was found).
# Each harness runs with -rss_limit_mb=2048 -timeout=10 (and -malloc_limit_mb=256 for the image harnesses) over
# its working corpus (FUZZ_BUILD_DIR/fuzz/corpus/<name>, kept between runs), the seeds (remade when the generator
# changes) and fuzz/regressions/<name>/, with its dictionary. Printed per harness: executions, coverage (cov: edges,
# ft: features), corpus size, result. A crash, OOM, timeout or leak
# copies the input into fuzz/regressions/<name>/ (libFuzzer's name: crash-<sha1>, oom-<sha1>, ...) so that ctest
# replays it from then on (fuzz_replay_<name>), and the script exits 1 after running the remaining harnesses.
# Several runs may share the build folder (the configure + build step takes a lock).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_only=0
if [ "${1:-}" = "--build-only" ]; then  # build the harnesses and the seeds, fuzz nothing (scripts/test.sh)
  build_only=1
  shift
fi
seconds="${1:-30}"
shift || true
all=(decode decode_plane decode_cv2 http multipart query weights hub npz pairs h5 pth)
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [[ " ${all[*]} " == *" $h "* ]] || { echo "fuzz.sh: unknown harness '$h' (known: ${all[*]})" >&2; exit 2; }
done
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -ge 1 ] || { echo "fuzz.sh: SECONDS must be a positive integer" >&2; exit 2; }
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
save="${FUZZ_SAVE_DIR:-$root/fuzz/regressions}"
mode=()
[ "${FUZZ_KEEP_GOING:-0}" = 1 ] && mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
# FUZZ_SEED=N: libFuzzer's -seed, so that a short run explores the same inputs each time (scripts/test.sh's CI length:
# a verdict that does not change with the draw); unset, every run draws its own (campaigns).
seed=()
[ -n "${FUZZ_SEED:-}" ] && seed=(-seed="$FUZZ_SEED")
shared="${SUPERPOINT_RT_SHARED:-$root/../shared}"
python="${FUZZ_PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
mkdir -p "$build"

# Configure + build only the harnesses (not the tests, CLI, benchmarks or Python module). RelWithDebInfo: optimised
# like the code that ships, with line numbers in the sanitizer reports. A folder configured already with the harnesses
# on is built as it is: scripts/test.sh's sanitizer tree (build-san/) holds the harnesses and the ASan + UBSan tests
# over one compile of the library.
(
  flock 9
  if ! grep -qs '^SUPERPOINT_RT_FUZZ:BOOL=ON$' "$build/CMakeCache.txt"; then
    launcher=()
    if command -v ccache >/dev/null; then
      launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    fi
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" -DSUPERPOINT_RT_FUZZ=ON -DSUPERPOINT_RT_SANITIZE=ON \
      -DSUPERPOINT_RT_TESTS=OFF -DSUPERPOINT_RT_CLI=OFF -DSUPERPOINT_RT_BENCH=OFF -DSUPERPOINT_RT_PYTHON=OFF >/dev/null
  fi
  CCACHE_BASEDIR="$root" ninja -C "$build" -j"${JOBS:-$(nproc)}" "${harnesses[@]/#/fuzz_}"
  # The seeds are remade when the generator changed (not under a harness that is reading them: runs may overlap).
  if [ ! -f "$build/fuzz/seeds/.stamp" ] || [ "$root/fuzz/make_seeds.py" -nt "$build/fuzz/seeds/.stamp" ]; then
    rm -rf "$build/fuzz/seeds"
    "$python" "$root/fuzz/make_seeds.py" "$build/fuzz/seeds" --shared "$shared" >/dev/null
    touch "$build/fuzz/seeds/.stamp"
  fi
) 9>"$build/.fuzz.lock"

[ "$build_only" = 1 ] && { echo "fuzz.sh: built ${harnesses[*]/#/fuzz_} in $build"; exit 0; }

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# One harness: fuzz it for $seconds, copy what it found to fuzz/regressions, and leave its summary line (and a
# .failed mark) in $results. Harnesses run side by side, FUZZ_JOBS at a time (default: one per core): each libFuzzer
# process uses one core.
results="$(mktemp -d /tmp/sprt-fuzz-XXXXXX)"
trap 'rm -rf "$results"' EXIT
run_harness() {
  local h="$1" corpus artifacts regressions saved log dict malloc_limit rc last execs crashes cov ft corp found a \
    result line
  corpus="$build/fuzz/corpus/$h"
  artifacts="$build/fuzz/artifacts/$h"
  regressions="$root/fuzz/regressions/$h"
  saved="$save/$h"
  log="$build/fuzz/logs/$h.log"
  mkdir -p "$corpus" "$artifacts" "$regressions" "$saved" "$(dirname "$log")"
  rm -f "$artifacts"/*
  dict="$root/fuzz/dict/$h.dict"
  # The image harnesses decode at most 512x512 pixels (fuzz_util.hpp kMaxPixels), under 1 MiB of pixels: a single
  # allocation over 256 MiB there is sized by a header field, not by the pixels (an amplification), and is reported
  # as an OOM. The other harnesses allocate at most a few times their input; libFuzzer's default (the RSS limit).
  malloc_limit=2048
  case "$h" in decode | decode_plane | decode_cv2) malloc_limit=256 ;; esac
  # libhdf5 mallocs some structures at the size their header in the file states, before reading them (fuzz/README.md):
  # returned null or never touched in a real process. fuzz_h5 makes ASan return null too; only the RSS limit applies.
  [ "$h" = h5 ] && malloc_limit=1048576
  [ "$h" = decode_plane ] || [ "$h" = decode_cv2 ] && dict="$root/fuzz/dict/decode.dict"
  set +e
  # The outer timeout only guards against a hang of libFuzzer itself; -max_total_time ends a normal run.
  timeout --kill-after=30 $((seconds + 300)) "$build/fuzz/fuzz_$h" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -malloc_limit_mb="$malloc_limit" -timeout=10 -dict="$dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
    "${seed[@]}" "${mode[@]}" "$corpus" "$build/fuzz/seeds/$h" "$regressions" >"$log" 2>&1
  rc=$?
  set -e
  # Stats: the last status line (#<runs> ... cov: ft: corp:), whose run count fork mode also prints as "#<runs>:".
  # (|| true: a missing line leaves the field empty, printed as '?', instead of ending the script under pipefail.)
  last=$(grep -E '^#[0-9]+:?[[:space:]].*cov: ' "$log" | tail -1 || true)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' <<<"$last" | tr -d '#' || true)
  crashes=$(grep -oE 'oom/timeout/crash: [0-9]+/[0-9]+/[0-9]+' <<<"$last" | cut -d' ' -f2 || true)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
  corp=$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
  found=()
  for a in "$artifacts"/*; do
    [ -f "$a" ] || continue
    cp "$a" "$saved/"
    found+=("$(basename "$a")")
  done
  result=ok
  # A harness that reports no executions did not fuzz (a missing binary, a libFuzzer that refused its flags): that
  # is a failure, never an "ok" with nothing run.
  if [ $rc -eq 0 ] && [ ${#found[@]} -eq 0 ] && { [ -z "$execs" ] || [ "$execs" = 0 ]; }; then
    result="FAILED (no executions reported in $log)"
  elif [ ${#found[@]} -gt 0 ] || [ $rc -ne 0 ]; then
    result="FAILED (exit $rc${found:+; ${#found[@]} input(s) saved to $saved/: ${found[*]:0:3}}$([ ${#found[@]} -gt 3 ] && echo ' ...' || true))"
    grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|FUZZ_CHECK|SUMMARY' "$log" | head -5 || true
  fi
  line=$(printf '%-13s execs %-10s cov %-6s ft %-7s corpus %-6s %s%s' "$h" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" "${crashes:+oom/timeout/crash $crashes }" "$result")
  echo "$line" >"$results/$h.line"
  [ "$result" = ok ] || : >"$results/$h.failed"
}

jobs_max="${FUZZ_JOBS:-$(nproc)}"
echo "== ${#harnesses[@]} harness(es), $seconds s each, $jobs_max at a time (logs: $build/fuzz/logs/)"
running=0
for h in "${harnesses[@]}"; do
  if [ "$running" -ge "$jobs_max" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_harness "$h" &
  running=$((running + 1))
done
wait || true
failed=()
summary=()
for h in "${harnesses[@]}"; do
  if [ ! -f "$results/$h.line" ]; then  # the function itself failed: never a silent pass
    summary+=("$(printf '%-13s FAILED (no result: see %s)' "$h" "$build/fuzz/logs/$h.log")")
    failed+=("$h")
    continue
  fi
  summary+=("$(cat "$results/$h.line")")
  [ -f "$results/$h.failed" ] && failed+=("$h")
done

echo "== fuzz summary ($seconds s per harness)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failures in ${failed[*]}: reproduce with $build/fuzz/fuzz_<name> fuzz/regressions/<name>/<file>" >&2
  exit 1
fi
