#!/usr/bin/env bash
# Installs the benchmark's peers into bench/.venv (gitignored): onnxruntime (the CPU peer), openvino (the CPU peer
# at fp32, bf16 and int8) with nncf (its int8: post-training quantisation), onnx (to build the peers' graph from our
# safetensors), numpy, opencv-python-headless (warping and RANSAC for bench/quality.py and fidelity_precision.py),
# pillow (quality.py's image pairs; the PyTorch peer's reference.py). Never run by the build; run by bench/run.sh or
# by hand.
#
#   bash bench/setup-peers.sh               # onnxruntime + openvino + nncf + onnx + numpy + opencv + pillow
#   bash bench/setup-peers.sh --with-torch  # also PyPI's torch (large: the default wheel carries CUDA
#                                           # libraries; only its CPU path is measured)
#   bash bench/setup-peers.sh --with-ncnn   # also ncnn and pnnx (its converter; 11 + 29 MB of wheels, 115 MB
#                                           # installed). pnnx is installed without its declared dependency torch:
#                                           # its binary converts our ONNX graph on its own
#   bash bench/setup-peers.sh --with-mnn    # also MNN with its converter (18 MB wheel, 57 MB installed). Its
#                                           # `mnnconvert` script pip-installs a telemetry package into the first
#                                           # Python on PATH: bench/peer_worker.py calls the compiled converter
#                                           # module (_tools) instead; never run the script
#
# Idempotent: an existing venv that already imports every requested package is left as it is (no network).
# $SPRT_BENCH_PYTHON picks the interpreter that creates the venv (default /usr/bin/python3, Debian's, the same one
# the project's tests use; any python3 >= 3.9 with the venv module works).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
base_python="${SPRT_BENCH_PYTHON:-/usr/bin/python3}"
[[ -x "$base_python" ]] || base_python="$(command -v python3)"

with_torch=0 with_ncnn=0 with_mnn=0
for arg in "$@"; do
  case "$arg" in
    --with-torch) with_torch=1 ;;
    --with-ncnn) with_ncnn=1 ;;
    --with-mnn) with_mnn=1 ;;
    -h | --help)
      sed -n '2,21p' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "setup-peers.sh: unknown argument '$arg' (expected --with-torch, --with-ncnn, --with-mnn)" >&2
      exit 2
      ;;
  esac
done

modules=(onnxruntime openvino nncf onnx numpy cv2 PIL)
packages=(onnxruntime openvino nncf onnx numpy opencv-python-headless pillow)
if ((with_torch)); then
  modules+=(torch)
  packages+=(torch)
fi
if ((with_ncnn)); then
  modules+=(ncnn)
  packages+=(ncnn)
fi
if ((with_mnn)); then
  modules+=(_tools) # MNN's compiled converter (the runtime is the same wheel's MNN)
  packages+=(MNN)
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup-peers: creating $venv with $base_python" >&2
  "$base_python" -m venv "$venv"
fi

missing=()
for i in "${!modules[@]}"; do
  if ! "$venv/bin/python" -c "import ${modules[$i]}" >/dev/null 2>&1; then
    missing+=("${packages[$i]}")
  fi
done

if ((${#missing[@]})); then
  echo "setup-peers: installing ${missing[*]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi
# pnnx's __init__ imports torch, so it is looked up, not imported; --no-deps: its binary needs no torch for ONNX.
if ((with_ncnn)) && ! "$venv/bin/python" -c "import importlib.util, sys; sys.exit(not importlib.util.find_spec('pnnx'))"; then
  echo "setup-peers: installing pnnx (without torch) into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps pnnx
fi

"$venv/bin/python" - <<'EOF'
import importlib.metadata
import cv2, nncf, numpy, onnx, onnxruntime, openvino
extra = ""
for name, dist in (("ncnn", "ncnn"), ("pnnx", "pnnx"), ("MNN", "MNN"), ("torch", "torch")):
    try:
        extra += f", {name} {importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        pass
print(f"setup-peers: numpy {numpy.__version__}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__} "
      f"({', '.join(onnxruntime.get_available_providers())}), openvino {openvino.__version__}, "
      f"nncf {nncf.__version__}, opencv {cv2.__version__}{extra}")
EOF
