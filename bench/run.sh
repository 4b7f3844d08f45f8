#!/usr/bin/env bash
# The speed table against ONNX Runtime and PyTorch, in one command (docs/BENCHMARKS.md):
#
#   bash bench/run.sh [superpoint-rt bench options, e.g. --rounds 7 --iters 4 --threads 1,2 --precisions fp32]
#
# 1. bench/setup-peers.sh --with-ncnn --with-mnn --with-torch: bench/.venv with onnxruntime, openvino, nncf, ncnn,
#    pnnx, MNN, onnx, numpy, opencv, torch, pillow (idempotent; the build never installs them).
#    SPRT_BENCH_NO_TORCH=1 leaves torch out (its wheel is large).
# 2. the Release build in build/ (configured if needed), target superpoint-rt only
# 3. bench/export_onnx.py: ONNX Runtime's graph from the safetensors -> bench/out/, checked against the golden npz
# 4. superpoint-rt bench: every row in one interleaved run; the table on stdout, everything as JSON in bench/out/
#
# Environment: SUPERPOINT_RT_SHARED (test data, default ../shared beside the checkout), SPRT_BENCH_BUILD_DIR
# (default build), SPRT_BENCH_JOBS (ninja -j, default ninja's choice).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
shared="${SUPERPOINT_RT_SHARED:-$repo/../shared}"
build="${SPRT_BENCH_BUILD_DIR:-build}"

if [[ "${SPRT_BENCH_NO_TORCH:-0}" == 1 ]]; then
  bash bench/setup-peers.sh --with-ncnn --with-mnn
else
  bash bench/setup-peers.sh --with-ncnn --with-mnn --with-torch
fi

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$build/CMakeCache.txt"; then
  echo "run.sh: note: $build is not a Release build; the numbers will not be representative" >&2
fi
ninja -C "$build" ${SPRT_BENCH_JOBS:+-j"$SPRT_BENCH_JOBS"} superpoint-rt

# The ONNX Runtime peer's graph, built from the safetensors and checked against the golden dense outputs of the
# PyTorch reference (bench/peer_worker.py uses this file).
mkdir -p bench/out
bench/.venv/bin/python bench/export_onnx.py --weights "$shared/weights/superpoint" \
  --out bench/out/superpoint_480x640.onnx --check "$shared/golden/dense/berlin01_1600x900.jpg.npz"

stamp="$(date +%Y%m%d-%H%M%S)"
SUPERPOINT_RT_SHARED="$shared" "$build/src/cli/superpoint-rt" bench --weights "$shared/weights/superpoint" \
  --peer-python "$repo/bench/.venv/bin/python" --json "bench/out/bench-$stamp.json" "$@"
cp "bench/out/bench-$stamp.json" bench/out/latest.json
