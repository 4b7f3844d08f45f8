#!/usr/bin/env bash
# Installs every system package superpoint-rt needs to build and run (and with --test, to test), on Debian 12 as root
# (or with sudo). Idempotent: packages already present are left alone.
#   bash scripts/install-deps.sh           build + run (the README's first command)
#   bash scripts/install-deps.sh --test    also what the test command needs (less the stages its SKIP_* variables skip)
# Python packages are installed into venvs by the scripts that need them (scripts/test.sh, bench/setup-peers.sh),
# never system-wide.
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config ccache   # ccache: rebuilds, and the wheel's build reuses build/'s objects
  libdnnl-dev ocl-icd-opencl-dev               # oneDNN: the convolutions (its CMake config needs OpenCL, which
                                               # libdnnl-dev only recommends and --no-install-recommends drops)
  libjpeg62-turbo-dev libpng-dev libdeflate-dev libgif-dev libwebp-dev libtiff-dev zlib1g-dev   # image decoders
  libcurl4-openssl-dev nlohmann-json3-dev      # hub downloads, JSON
  libboost-dev                                 # HTTP server (Boost.Beast and Asio, header-only)
  libhdf5-dev                                  # hloc feature files
  libsqlite3-dev                               # COLMAP databases (superpoint-rt colmap)
  pybind11-dev python3 python3-dev python3-venv python3-numpy python3-pil   # Python extension; test helpers
)
if [ "${1:-}" = "--test" ]; then
  pkgs+=(
    git clang-format                           # the test command lists tracked files and checks their format
    libgtest-dev wrk                           # C++ tests, HTTP load runs
    file                                       # CPack's DEB generator runs it before dpkg-shlibdeps (check-deb.sh)
    python3-opencv                             # the reference of the cv2-exact decoders (tests/python/test_decode_cv2.py)
    python3-torch                              # the torch reference of kornia's resize (tests/python/test_resize_float.py)
    libopenblas0-pthread                       # BLAS for Debian's numpy and torch (the float64 reference of the bench,
                                               # LightGlue's torch reference): the default libblas3 is netlib's, ~10x slower
  )
  # The stages scripts/test.sh runs with SKIP_SANITIZERS / SKIP_FUZZ / SKIP_FRESH_ROOT unset (the same variables):
  # the fresh root's Release pass skips them, and so skips their packages.
  if [ "${SKIP_SANITIZERS:-0}" != "1" ] || [ "${SKIP_FUZZ:-0}" != "1" ]; then
    pkgs+=(clang libclang-rt-14-dev)           # the sanitizer tree and the libFuzzer harnesses (clang)
  fi
  if [ "${SKIP_FRESH_ROOT:-0}" != "1" ]; then
    pkgs+=(mmdebstrap)                         # the fresh Debian roots (scripts/fresh-root.sh)
  fi
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
