#!/usr/bin/env bash
# The README's first command on a fresh Debian 12 root: proves that scripts/install-deps.sh installs everything the
# build and the run need (a prepared machine can hide a missing package; one did: OpenCL for oneDNN's CMake config).
# Called by scripts/test.sh; needs root.
#   bash scripts/check-fresh-root.sh            bootstrap, clone, `bash scripts/run.sh`, check its three outputs
#   FRESH_ROOT_TESTS=1 bash scripts/check-fresh-root.sh
#                                               then also the test command (Release pass) in the same root, after
#                                               run.sh, as a newcomer would type them
# Environment: SUPERPOINT_RT_SHARED (test data, default ../shared), FRESH_ROOT_KEEP=1 keeps the root for a look,
# FRESH_ROOT_ARTIFACTS=DIR (with FRESH_ROOT_TESTS=1): copy the .deb and the wheel that the root's test.sh made to DIR,
# FRESH_ROOT_CPUID_CAP=avx2-novnni (or avx2): the whole run as on an AVX2-only CPU (fresh-root.sh, scripts/as-cpu.sh):
#   FRESH_ROOT_TESTS=1 FRESH_ROOT_CPUID_CAP=avx2-novnni bash scripts/check-fresh-root.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/fresh-root.sh
source "$root/scripts/fresh-root.sh"

fr="$(mktemp -d /tmp/sprt-fresh-XXXXXX)"
cleanup() {
  if [ "${FRESH_ROOT_KEEP:-0}" = "1" ]; then
    echo "check-fresh-root: kept $fr (unmount with: source scripts/fresh-root.sh; fresh_root_destroy $fr)"
  else
    fresh_root_destroy "$fr"
  fi
}
trap cleanup EXIT
start=$(date +%s)

fresh_root_create "$fr"
echo "== in the fresh root: bash scripts/run.sh (the README's first command) ($(( $(date +%s) - start )) s)"
fresh_root_run "$fr" 'bash scripts/run.sh'
echo "check-fresh-root: run.sh took $(( $(date +%s) - start )) s from the start (root made, packages installed, built)"
if [ -n "${FRESH_ROOT_CPUID_CAP:-}" ]; then
  # The cap held: the executable run.sh built sees no AVX-512 (nor AMX), whatever this machine has.
  fresh_root_run "$fr" 'build/src/cli/superpoint-rt info --weights /work/shared/weights/superpoint' > "$fr.info" 2>&1
  grep "CPU units:" "$fr.info"
  grep -q "CPU units: AVX2 yes, FMA yes, AVX-512 no, VNNI no, AVX512-BF16 no, AMX no" "$fr.info" ||
    { echo "check-fresh-root: FRESH_ROOT_CPUID_CAP=$FRESH_ROOT_CPUID_CAP did not hold in the root" >&2; exit 1; }
  rm -f "$fr.info"
fi

echo "== its outputs"
out="$fr/work/main/superpoint_out"
for f in input.png keypoints.png keypoints.json descriptors.npy; do
  [ -s "$out/$f" ] || { echo "check-fresh-root: $out/$f was not written" >&2; exit 1; }
done
# The numbers must agree with each other: N keypoints in the JSON, an (N, 256) float32 array in the .npy.
python3 - "$out" <<'PY'
import json, pathlib, struct, sys
out = pathlib.Path(sys.argv[1])
doc = json.loads((out / "keypoints.json").read_text())
n = len(doc["keypoints"])
assert n > 0, "no keypoints on the synthetic image"
assert len(doc["scores"]) == n, f"{len(doc['scores'])} scores for {n} keypoints"
raw = (out / "descriptors.npy").read_bytes()
assert raw[:6] == b"\x93NUMPY", "descriptors.npy is not a .npy file"
hlen = struct.unpack("<H", raw[8:10])[0]
header = raw[10:10 + hlen].decode("latin1")
assert "'<f4'" in header and f"({n}, 256)" in header, f"descriptors.npy header {header!r} for {n} keypoints"
assert len(raw) == 10 + hlen + n * 256 * 4, "descriptors.npy has the wrong size"
png = (out / "keypoints.png").read_bytes()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "keypoints.png is not a PNG"
print(f"check-fresh-root: run.sh wrote {n} keypoints, descriptors ({n}, 256), keypoints.png {len(png)} bytes")
PY

if [ "${FRESH_ROOT_TESTS:-0}" = "1" ]; then
  echo "== in the fresh root: bash scripts/test.sh (Release pass), after run.sh ($(( $(date +%s) - start )) s)"
  fresh_root_run "$fr" 'SKIP_SANITIZERS=1 SKIP_FUZZ=1 SKIP_FRESH_ROOT=1 bash scripts/test.sh'
  if [ -n "${FRESH_ROOT_ARTIFACTS:-}" ]; then
    mkdir -p "$FRESH_ROOT_ARTIFACTS"
    cp "$fr"/work/main/build/superpoint-rt_*.deb "$fr"/work/main/dist/superpoint_rt-*.whl "$FRESH_ROOT_ARTIFACTS/"
  fi
fi
echo "check-fresh-root: OK in $(( $(date +%s) - start )) s"
