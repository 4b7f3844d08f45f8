#!/usr/bin/env bash
# CI check of the Debian package (docs/INSTALL.md): CPack makes superpoint-rt_<version>_<arch>.deb from a build
# folder; in a FRESH Debian 12 root, `apt-get install ./superpoint-rt_*.deb` must pull in every runtime library
# through the package's Depends (nothing else is installed first), `superpoint-rt info` must run there, and then,
# with a compiler, cmake and pkg-config added, the consumer example must build against /usr with find_package and
# with pkg-config and run (scripts/check-install.sh --installed /usr). Needs root and mmdebstrap (scripts/fresh-root.sh).
#   bash scripts/check-deb.sh [BUILD_DIR]          cpack in BUILD_DIR (default build/, built first), a fresh root,
#                                                  the checks, the root removed
#   bash scripts/check-deb.sh --in-root DIR DEB    only the in-root part, in a root the caller made with
#                                                  `fresh_root_create DIR --no-repo` (and removes)
#   bash scripts/check-deb.sh --deb-only [BUILD_DIR]   only make the .deb and print its control fields
#   bash scripts/check-deb.sh --deb FILE           a fresh root, the checks with the given .deb (scripts/test.sh
#                                                  takes it out of the fresh root that built it), the root removed
# Environment: SUPERPOINT_RT_SHARED (test data, default ../shared), FRESH_ROOT_KEEP=1 keeps the root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/fresh-root.sh
source "$root/scripts/fresh-root.sh"
fail() { echo "check-deb: $*" >&2; exit 1; }

make_deb() {  # build folder -> prints the path of the .deb
  local build="$1"
  [ -f "$build/CPackConfig.cmake" ] || fail "$build has no CPackConfig.cmake (configure it with SUPERPOINT_RT_INSTALL=ON)"
  grep -q '^SUPERPOINT_RT_SHARED:BOOL=ON' "$build/CMakeCache.txt" || fail "$build is not a shared-library build"
  ninja -C "$build" -j"${JOBS:-$(nproc)}" superpoint_rt_shared superpoint-rt >&2
  rm -f "$build"/superpoint-rt_*.deb
  (cd "$build" && cpack -G DEB >&2)
  local deb
  deb="$(ls "$build"/superpoint-rt_*.deb)"
  [ "$(echo "$deb" | wc -l)" = 1 ] || fail "cpack made $(echo "$deb" | wc -l) packages in $build"
  echo "$deb"
}

show_deb() {
  local deb="$1"
  echo "== $(basename "$deb")" >&2
  dpkg-deb -f "$deb" Package Version Architecture Depends Suggests >&2
  dpkg-deb -c "$deb" | awk '{print "  " $6 ($7 ? " " $7 " " $8 : "")}' >&2
  case "$(basename "$deb")" in
    superpoint-rt_*_amd64.deb | superpoint-rt_*_"$(dpkg --print-architecture)".deb) ;;
    *) fail "unexpected file name $(basename "$deb")" ;;
  esac
  dpkg-deb -f "$deb" Depends | grep -q 'libdnnl' || fail "$(basename "$deb"): Depends does not name oneDNN"
}

in_root() {  # root dir, .deb
  local fr="$1" deb="$2"
  mkdir -p "$fr/tmp/sprt-deb/scripts" "$fr/tmp/sprt-deb/examples"
  cp "$deb" "$fr/tmp/sprt-deb/"
  # What check-install.sh --installed reads: itself, the consumer example and the project version.
  cp "$root/scripts/check-install.sh" "$fr/tmp/sprt-deb/scripts/"
  cp -r "$root/examples/cpp" "$fr/tmp/sprt-deb/examples/"
  cp "$root/CMakeLists.txt" "$fr/tmp/sprt-deb/"
  local name
  name="$(basename "$deb")"
  echo "== in the fresh root: apt-get install ./$name (nothing else installed first)"
  fresh_root_run "$fr" "cd /tmp/sprt-deb && apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ./$name >/dev/null &&
    superpoint-rt --version && superpoint-rt info --weights /work/shared/weights/superpoint --local-files-only"
  echo "== in the fresh root: a compiler, cmake and pkg-config, then the consumer example against /usr"
  fresh_root_run "$fr" "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      g++ cmake ninja-build pkg-config >/dev/null &&
    SUPERPOINT_RT_SHARED=/work/shared bash /tmp/sprt-deb/scripts/check-install.sh --installed /usr"
}

start=$(date +%s)
case "${1:-}" in
  --in-root)
    in_root "${2:?--in-root needs DIR}" "${3:?--in-root needs the .deb}"
    ;;
  --deb-only)
    show_deb "$(make_deb "${2:-$root/build}")"
    ;;
  *)
    if [ "${1:-}" = "--deb" ]; then
      deb="$(readlink -f "${2:?--deb needs the .deb}")"
    else
      deb="$(make_deb "${1:-$root/build}")"
    fi
    show_deb "$deb"
    fr="$(mktemp -d /tmp/sprt-deb-root-XXXXXX)"
    cleanup() {
      if [ "${FRESH_ROOT_KEEP:-0}" = "1" ]; then echo "check-deb: kept $fr" >&2; else fresh_root_destroy "$fr"; fi
    }
    trap cleanup EXIT
    fresh_root_create "$fr" --no-repo
    in_root "$fr" "$deb"
    ;;
esac
echo "check-deb: OK in $(( $(date +%s) - start )) s"
