#!/usr/bin/env bash
# Runs a command as if on a narrower x86 CPU: every library in it (ours, oneDNN, ONNX Runtime's MLAS, OpenVINO, ncnn,
# MNN, numpy, torch) detects the CPU by its own CPUID code and sees the cap. tests/tools/cpuid_cap.c says how and
# what a capped run does not change (the core's microarchitecture).
#
#   bash scripts/as-cpu.sh avx2-novnni COMMAND [ARGS...]   # AVX2 + FMA only: AMD Zen 2/3, Intel before Alder Lake
#   bash scripts/as-cpu.sh avx2 COMMAND [ARGS...]          # the same plus AVX-VNNI where this CPU has it
#   bash scripts/as-cpu.sh --check                         # exit 0 if this machine can cap (CPUID faulting)
#   bash scripts/as-cpu.sh --build LIB                     # compile the library to LIB (for a chroot: fresh-root.sh)
#   bash scripts/as-cpu.sh --env CAP LIB                   # print the VAR=value words that arm LIB with CAP
#
# It needs CPUID faulting (Intel CPUs since Ivy Bridge and KVM guests on them; /proc/cpuinfo flag cpuid_fault).
# Where the kernel refuses it, the command does not run and the exit status is 97, never an uncapped run.
# SPRT_CPUID_CAP_LIB names a prebuilt library (the build tree's tests/tools/libsprt_cpuid_cap.so); otherwise the
# library is compiled from source into a temporary folder (a C compiler is all it needs).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

build_lib() {
  "${CC:-cc}" -O2 -shared -fPIC -o "$1" "$repo/tests/tools/cpuid_cap.c" -ldl
}

# The environment that arms the library (LD_AUDIT before any library's constructor, LD_PRELOAD under the program's
# own signal handlers: tests/tools/cpuid_cap.c). AddressSanitizer programs: ASan's own SIGSEGV handler would take the
# CPUID traps (handle_segv=0 leaves them to the cap), and LeakSanitizer's tracer thread fails under CPUID faulting
# (detect_leaks=0): a capped ASan run checks memory errors and UB, not leaks (the uncapped ASan pass does). Programs
# without ASan ignore the variable.
cap_env() {
  local cap="$1" lib="$2"
  echo "SPRT_CPUID_CAP=$cap LD_AUDIT=$lib${LD_AUDIT:+:$LD_AUDIT} LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}" \
    "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:detect_leaks=0"
}

case "${1:-}" in
  --build) build_lib "$2"; exit 0 ;;
  --env) cap_env "$2" "$3"; exit 0 ;;
esac

lib="${SPRT_CPUID_CAP_LIB:-}"
if [[ -z "$lib" ]]; then
  dir="$(mktemp -d "${TMPDIR:-/tmp}/sprt-cpuid-cap.XXXXXX")"
  trap 'rm -rf "$dir"' EXIT
  lib="$dir/libsprt_cpuid_cap.so"
  build_lib "$lib"
fi

# The probe: a capped process that does nothing (the library exits 97 with a message where the cap cannot hold).
if ! SPRT_CPUID_CAP=avx2 LD_AUDIT="$lib" LD_PRELOAD="$lib" /usr/bin/env true; then
  echo "as-cpu.sh: this machine cannot cap CPUID; nothing was run" >&2
  exit 97
fi
if [[ "${1:-}" == --check ]]; then
  exit 0
fi
if [[ $# -lt 2 ]]; then
  echo "usage: as-cpu.sh avx2|avx2-novnni COMMAND [ARGS...] | --check | --build LIB | --env CAP LIB" >&2
  exit 2
fi
cap="$1"
shift
# Not exec: the trap above removes the temporary library when the command ends. The words have no spaces (paths of
# our making, and ASAN_OPTIONS as ASan reads it: colon-separated).
# shellcheck disable=SC2046
env $(cap_env "$cap" "$lib") "$@"
