#!/usr/bin/env bash
# CI check of the wheel (docs/INSTALL.md): `pip wheel .` makes superpoint_rt-<version>-<tags>.whl, whose version is
# the project version of CMakeLists.txt; scripts/check-pip-install.sh installs that wheel into a fresh venv and runs
# the quickstart example. With --fresh-root, the wheel is also installed on a FRESH Debian 12 root that has only the
# RUNTIME libraries the extension links (no -dev package, no compiler): the package list is not written by hand but
# computed by dpkg-shlibdeps from the wheel's _core module, and printed.
#   bash scripts/check-wheel.sh [--fresh-root]      (--fresh-root needs root and mmdebstrap, scripts/fresh-root.sh)
#   bash scripts/check-wheel.sh --wheel WHEEL       only the fresh-root part, with that wheel, in a root it makes
#   bash scripts/check-wheel.sh --in-root DIR WHEEL  only the in-root part, in a root the caller made with
#                                                    `fresh_root_create DIR --no-repo` (and removes)
# Environment: PYTHON (default /usr/bin/python3), JOBS, SUPERPOINT_RT_SHARED (default ../shared), KEEP=1,
# WHEEL_DIR (copy the wheel there: scripts/test.sh takes it out of the fresh root that built it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-/usr/bin/python3}"
fail() { echo "check-wheel: $*" >&2; exit 1; }
version="$(sed -nE 's/^project\(superpoint_rt VERSION ([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' "$root/CMakeLists.txt")"
work="$(mktemp -d /tmp/sprt-wheel-XXXXXX)"
[ "${KEEP:-0}" = "1" ] || trap 'rm -rf "$work"' EXIT
start=$(date +%s)

runtime_packages() {  # wheel -> the Debian packages of the shared libraries its _core module loads
  local whl="$1" d="$work/shlibdeps"
  rm -rf "$d" && mkdir -p "$d/debian" && touch "$d/debian/control"
  (cd "$d" && "$py" -m zipfile -e "$whl" unpacked >/dev/null)
  local core
  core="$(ls "$d"/unpacked/superpoint_rt/_core*.so)"
  (cd "$d" && dpkg-shlibdeps -O "unpacked/superpoint_rt/$(basename "$core")" 2>/dev/null) |
    sed -n 's/^shlibs:Depends=//p' | tr ',' '\n' | sed -E 's/^ *([^ ]+).*/\1/' | sort -u | tr '\n' ' '
}

in_root() {  # root dir, wheel
  local fr="$1" whl="$2" pkgs
  pkgs="$(runtime_packages "$whl")"
  [ -n "$pkgs" ] || fail "dpkg-shlibdeps found no libraries for $(basename "$whl")"
  echo "== runtime packages of $(basename "$whl") (dpkg-shlibdeps): $pkgs"
  mkdir -p "$fr/tmp/sprt-wheel"
  cp "$whl" "$root/examples/quickstart.py" "$root/examples/_common.py" "$fr/tmp/sprt-wheel/"
  echo "== in the fresh root: python3-venv and those runtime libraries only, then the wheel and the quickstart"
  # shellcheck source=scripts/fresh-root.sh
  source "$root/scripts/fresh-root.sh"
  fresh_root_run "$fr" "cd /tmp/sprt-wheel && apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv $pkgs >/dev/null &&
    if dpkg -l | awk '/^ii/ {print \$2}' | grep -E -- '-dev(:|\$)|^(gcc|g\+\+|cmake)\$'; then
      echo 'check-wheel: the root has -dev packages or a compiler' >&2; exit 1; fi &&
    python3 -m venv venv && venv/bin/pip install -q --disable-pip-version-check ./$(basename "$whl") &&
    SUPERPOINT_RT_SHARED=/work/shared venv/bin/python quickstart.py --out-dir out &&
    test -s out/keypoints.json && test -s out/descriptors.npy && test -s out/keypoints.png"
}

if [ "${1:-}" = "--in-root" ]; then
  in_root "${2:?--in-root needs DIR}" "$(readlink -f "${3:?--in-root needs the wheel}")"
  echo "check-wheel: OK in $(( $(date +%s) - start )) s"
  exit 0
fi

if [ "${1:-}" = "--wheel" ]; then
  whl="$(readlink -f "${2:?--wheel needs the wheel}")"
else
  echo "== pip wheel $root"
  "$py" -m venv "$work/venv"
  "$work/venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  # The build folder is build-pip/ in the checkout (pyproject.toml), shared with check-pip-install.sh: incremental.
  # With ccache (scripts/build.sh), the wheel's tree is build-wheel/, at the depth of build/, with build/'s flags
  # (warnings as errors), so that the library's objects come from build/'s compile instead of a second one.
  ccache_env=()
  if command -v ccache >/dev/null && [ -f "$root/build/CMakeCache.txt" ]; then
    # The compilers by build/'s names too: ccache keys on the compiler's name, and scikit-build-core would otherwise
    # call g++ as x86_64-linux-gnu-g++ where build/ calls it c++ (0 hits of 104 until it did).
    ccache_env=(CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$root"
      SKBUILD_BUILD_DIR="$root/build-wheel" SKBUILD_CMAKE_DEFINE="SUPERPOINT_RT_WERROR=ON"
      CC="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$root/build/CMakeCache.txt")"
      CXX="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$root/build/CMakeCache.txt")")
    ccache -z >/dev/null
  fi
  env "${ccache_env[@]}" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}" \
    "$work/venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/dist" "$root"
  [ ${#ccache_env[@]} -eq 0 ] || echo "ccache during the wheel's build: $(ccache -s | grep -iE 'hits|misses' | tr -s ' ' |
    tr '\n' ';')"
  whl="$(ls "$work"/dist/superpoint_rt-*.whl)"
  echo "$(basename "$whl"): $(du -h "$whl" | cut -f1)"
  case "$(basename "$whl")" in
    "superpoint_rt-$version-"*) ;;
    *) fail "$(basename "$whl") does not carry the project version $version (CMakeLists.txt)" ;;
  esac
  # The wheel holds the Python package only: no headers, no libsuperpoint_rt, no executable.
  extra="$("$py" -m zipfile -l "$whl" | awk 'NR > 1 {print $1}' | grep -vE '^superpoint_rt/|^superpoint_rt-[^/]+\.dist-info/' || true)"
  [ -z "$extra" ] || fail "$(basename "$whl") holds more than the package:"$'\n'"$extra"

  INSTALL_FROM="$whl" bash "$root/scripts/check-pip-install.sh"
  if [ -n "${WHEEL_DIR:-}" ]; then
    mkdir -p "$WHEEL_DIR" && rm -f "$WHEEL_DIR"/superpoint_rt-*.whl && cp "$whl" "$WHEEL_DIR/"
  fi
fi

if [ "${1:-}" = "--fresh-root" ] || [ "${1:-}" = "--wheel" ]; then
  # shellcheck source=scripts/fresh-root.sh
  source "$root/scripts/fresh-root.sh"
  fr="$(mktemp -d /tmp/sprt-wheel-root-XXXXXX)"
  trap 'fresh_root_destroy "$fr"; [ "${KEEP:-0}" = "1" ] || rm -rf "$work"' EXIT
  fresh_root_create "$fr" --no-repo
  in_root "$fr" "$whl"
fi
echo "check-wheel: OK in $(( $(date +%s) - start )) s"
