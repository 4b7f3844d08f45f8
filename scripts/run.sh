#!/usr/bin/env bash
# The main job: set up, build, and extract SuperPoint keypoints from an image.
#   bash scripts/run.sh [IMAGE] [--out-dir DIR] [extract options]
# Without IMAGE the program draws a synthetic test image. Writes DIR/keypoints.png (the picture),
# DIR/keypoints.json and DIR/descriptors.npy (default DIR: superpoint_out/).
# Weights: $SUPERPOINT_RT_WEIGHTS (a local folder with config.json + model.safetensors, or a hub repo id); default
# ../shared/weights/superpoint when it exists, else the hub repo magic-leap-community/superpoint (cache, then
# download from $HF_ENDPOINT).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
JOBS="${JOBS:-$(nproc)}" bash "$root/scripts/build.sh" "$root/build" -DSUPERPOINT_RT_TESTS=OFF -DSUPERPOINT_RT_BENCH=OFF
if [ -z "${SUPERPOINT_RT_WEIGHTS:-}" ] && [ -f "$root/../shared/weights/superpoint/model.safetensors" ]; then
  export SUPERPOINT_RT_WEIGHTS="$root/../shared/weights/superpoint"
fi
exec "$root/build/src/cli/superpoint-rt" quickstart "$@"
