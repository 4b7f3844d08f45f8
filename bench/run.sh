#!/usr/bin/env bash
# The benchmark against ONNX Runtime, in one command (docs/BENCHMARKS.md):
#
#   bash bench/run.sh [run_bench.py options, e.g. --rounds 7 --iters 4 --threads 1,2 --ort-only]
#
# 1. bench/setup-peers.sh: bench/.venv with onnxruntime, onnx, numpy (idempotent; the build never installs them)
# 2. the Release build in build/ (configured if needed), target sprt_bench only   [skipped with --ort-only]
# 3. bench/export_onnx.py: the ONNX graph from the safetensors -> bench/out/, checked against the golden dense npz
# 4. bench/run_bench.py: the interleaved measurement; table on stdout, JSON in bench/out/
#
# Environment: SUPERPOINT_RT_SHARED (test data, default ../shared beside the checkout), SPRT_BENCH_BUILD_DIR
# (default build), SPRT_BENCH_JOBS (ninja -j, default ninja's choice).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
shared="${SUPERPOINT_RT_SHARED:-$repo/../shared}"
build="${SPRT_BENCH_BUILD_DIR:-build}"
py="$repo/bench/.venv/bin/python"

bash bench/setup-peers.sh

ort_only=0
for arg in "$@"; do
  [[ "$arg" == "--ort-only" ]] && ort_only=1
done
if ((!ort_only)); then
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSUPERPOINT_RT_BENCH=ON
  elif ! grep -q '^SUPERPOINT_RT_BENCH:BOOL=ON' "$build/CMakeCache.txt"; then
    cmake -S . -B "$build" -DSUPERPOINT_RT_BENCH=ON
  fi
  if grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$build/CMakeCache.txt"; then :; else
    echo "run.sh: note: $build is not a Release build; the numbers will not be representative" >&2
  fi
  ninja -C "$build" ${SPRT_BENCH_JOBS:+-j"$SPRT_BENCH_JOBS"} sprt_bench
fi

mkdir -p bench/out
"$py" bench/export_onnx.py --weights "$shared/weights/superpoint" --out bench/out/superpoint_480x640.onnx \
  --check "$shared/golden/dense/berlin01_1600x900.jpg.npz"

exec "$py" bench/run_bench.py --sprt-bench "$build/bench/sprt_bench" --weights "$shared/weights/superpoint" \
  --image "$shared/images/berlin01_1600x900.jpg" --pixels "$shared/golden/dense/berlin01_1600x900.jpg.npz" \
  --onnx bench/out/superpoint_480x640.onnx "$@"
