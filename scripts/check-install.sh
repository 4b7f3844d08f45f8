#!/usr/bin/env bash
# CI check of the C++ installation (docs/INSTALL.md): `cmake --install` into a temporary prefix, then what a consumer
# sees there: the file list, public headers that include nothing private, a shared library with a SONAME that exports
# the public API and hides the rest, a relocatable superpoint-rt with the project's version, and examples/cpp built
# against the prefix with find_package(superpoint_rt) and with `pkg-config --cflags --libs superpoint_rt`, each run
# on an image.
#   bash scripts/check-install.sh [BUILD_DIR]        install BUILD_DIR (default build/; its library and executable
#                                                    are built first) into a temporary prefix, then check it
#   bash scripts/check-install.sh --static [DIR]     configure DIR (default build-static/) with
#                                                    -DSUPERPOINT_RT_SHARED=OFF, build, install, check (the static
#                                                    library's dependencies come from the CMake package / --static)
#   bash scripts/check-install.sh --installed PREFIX check an existing installation only (e.g. /usr after the .deb;
#                                                    scripts/check-deb.sh runs it in a fresh root)
# Environment: SUPERPOINT_RT_SHARED (test data, default ../shared), KEEP=1 keeps the temporary folders, JOBS.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${SUPERPOINT_RT_SHARED:-$root/../shared}"
weights="$shared/weights/superpoint"
image="$shared/images/berlin01_1600x900.jpg"
# The one version (project() in CMakeLists.txt) that the library, the executable and the packages must report.
version="$(sed -nE 's/^project\(superpoint_rt VERSION ([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' "$root/CMakeLists.txt")"
[ -n "$version" ] || { echo "check-install: no project(superpoint_rt VERSION x.y.z) in $root/CMakeLists.txt" >&2; exit 1; }
for f in "$weights/model.safetensors" "$image"; do
  [ -f "$f" ] || { echo "check-install: $f not found (set SUPERPOINT_RT_SHARED)" >&2; exit 1; }
done
fail() { echo "check-install: $*" >&2; exit 1; }

mode=shared build="$root/build" prefix=""
case "${1:-}" in
  --static) mode=static build="${2:-$root/build-static}" ;;
  --installed) mode=installed prefix="${2:?--installed needs a PREFIX}" ;;
  -*) fail "unknown option $1" ;;
  "") ;;
  *) build="$1" ;;
esac
work="$(mktemp -d /tmp/sprt-install-XXXXXX)"
[ "${KEEP:-0}" = "1" ] || trap 'rm -rf "$work"' EXIT
start=$(date +%s)

if [ "$mode" != installed ]; then
  if [ "$mode" = static ]; then
    echo "== configure $build with -DSUPERPOINT_RT_SHARED=OFF"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSUPERPOINT_RT_WERROR=ON \
      -DSUPERPOINT_RT_SHARED=OFF -DSUPERPOINT_RT_TESTS=OFF -DSUPERPOINT_RT_BENCH=OFF -DSUPERPOINT_RT_PYTHON=OFF \
      -DSUPERPOINT_RT_CLI=ON >/dev/null
  fi
  [ -f "$build/CMakeCache.txt" ] || fail "$build is not a configured build folder (scripts/build.sh makes one)"
  grep -q '^SUPERPOINT_RT_INSTALL:BOOL=ON' "$build/CMakeCache.txt" || fail "$build has SUPERPOINT_RT_INSTALL=OFF"
  echo "== build the library and the executable in $build"
  ninja -C "$build" -j"${JOBS:-$(nproc)}" superpoint_rt superpoint-rt \
    "$(grep -q '^SUPERPOINT_RT_SHARED:BOOL=ON' "$build/CMakeCache.txt" && echo superpoint_rt_shared || echo superpoint_rt)"
  prefix="$work/prefix"
  echo "== cmake --install $build --prefix $prefix"
  cmake --install "$build" --prefix "$prefix" >/dev/null
fi

libdir=""
for d in lib lib64 lib/x86_64-linux-gnu; do
  [ -f "$prefix/$d/cmake/superpoint_rt/superpoint_rtConfig.cmake" ] && libdir="$prefix/$d"
done
[ -n "$libdir" ] || fail "no lib*/cmake/superpoint_rt/superpoint_rtConfig.cmake under $prefix"

if [ "$mode" != installed ]; then
  echo "== installed files"
  (cd "$prefix" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort)
fi
for f in bin/superpoint-rt include/superpoint_rt/superpoint.hpp; do
  [ -e "$prefix/$f" ] || fail "$prefix/$f is not installed"
done
for f in superpoint_rtConfig.cmake superpoint_rtConfigVersion.cmake superpoint_rtTargets.cmake; do
  [ -f "$libdir/cmake/superpoint_rt/$f" ] || fail "$libdir/cmake/superpoint_rt/$f is not installed"
done
[ -f "$libdir/pkgconfig/superpoint_rt.pc" ] || fail "$libdir/pkgconfig/superpoint_rt.pc is not installed"
ls "$prefix"/share/doc/superpoint-rt/LICENSE >/dev/null || fail "the licence is not installed"
if find "$prefix" -path '*weights*' -o -name '*.safetensors' | grep -q .; then fail "weights are installed"; fi

echo "== public headers include only the standard library and each other"
# A consumer has no oneDNN, Boost or src/ headers: an installed header that includes one cannot be compiled.
bad="$(grep -Hn '^[[:space:]]*#[[:space:]]*include' "$prefix"/include/superpoint_rt/*.hpp |
  grep -Ev '#[[:space:]]*include[[:space:]]*(<[a-z_0-9]+>|"superpoint_rt/[a-z_]+\.hpp")' || true)"
[ -z "$bad" ] || fail "installed headers include private or third-party headers:"$'\n'"$bad"
ls "$prefix"/include/superpoint_rt/ | grep -vE '^(colmap|errors|features|image|params|superpoint)\.hpp$' |
  sed 's/^/  note: also installed: /' || true

lib="$(ls "$libdir"/libsuperpoint_rt.so.*.*.* 2>/dev/null | head -1 || true)"
if [ -n "$lib" ]; then
  echo "== $lib: SONAME and exported symbols"
  soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
  [ -n "$soname" ] && [ -e "$libdir/$soname" ] || fail "$lib: SONAME '$soname' missing or not installed as a link"
  echo "SONAME $soname"
  syms="$work/exported.txt"
  nm -DC --defined-only "$lib" | awk '{ $1=""; $2=""; print substr($0, 3) }' >"$syms"
  for s in 'superpoint_rt::SuperPoint::from_pretrained(' 'superpoint_rt::decode_image(' 'superpoint_rt::version()' \
           'typeinfo for superpoint_rt::Error'; do
    grep -qF "$s" "$syms" || fail "$lib does not export $s"
  done
  # Hidden: the private dependencies and the internals that no installed program calls (post/, image decoders).
  leaked="$(grep -E 'dnnl|boost|nlohmann|superpoint_rt::post::|superpoint_rt::image::decode_' "$syms" | head -5 || true)"
  [ -z "$leaked" ] || fail "$lib exports private symbols, e.g.:"$'\n'"$leaked"
  echo "$(wc -l <"$syms") exported symbols, $(grep -c '^superpoint_rt::[A-Za-z_]*(' "$syms") public free functions"
fi

echo "== $prefix/bin/superpoint-rt"
cli="$prefix/bin/superpoint-rt"
out="$("$cli" --version)"
[ "$out" = "superpoint-rt $version" ] || fail "superpoint-rt --version says '$out', CMakeLists.txt says $version"
if [ -n "$lib" ]; then
  resolved="$(ldd "$cli" | sed -n 's/.*libsuperpoint_rt\.so[^ ]* => \([^ ]*\).*/\1/p')"
  [ "$(readlink -f "$resolved")" = "$(readlink -f "$lib")" ] ||
    fail "$cli loads libsuperpoint_rt from '$resolved', not the installed $lib (RPATH: $(readelf -d "$cli" | grep -E 'R(UN)?PATH' || echo none))"
fi
info="$("$cli" info --weights "$weights" --local-files-only)" || fail "superpoint-rt info failed:"$'\n'"$info"
grep -E '^(superpoint-rt |backend:|weights:)' <<<"$info"

ex="$root/examples/cpp"
check_output() {  # name, program output: the program printed the version and some keypoints
  echo "$2"
  grep -q "^superpoint_rt $version: .*: [1-9][0-9]* keypoints, image 1600x900, descriptors [1-9][0-9]*x256" <<<"$2" ||
    fail "$1: unexpected output"
}
echo "== examples/cpp with find_package(superpoint_rt)"
cmake -S "$ex" -B "$work/ex-cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$work/ex-cmake" >/dev/null
check_output find_package "$("$work/ex-cmake/superpoint_rt_example" "$weights" "$image")"

echo "== examples/cpp with pkg-config --cflags --libs superpoint_rt"
pc_static=()
[ -z "$lib" ] && pc_static=(--static)
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if [ -z "$lib" ]; then  # the static library's own dependencies (the example does not reach all of them: HDF5, SQLite)
  for d in dnnl jpeg png gif tiff webp curl hdf5 sqlite3; do
    pkg-config --static --libs superpoint_rt | grep -q "$d" || fail "pkg-config --static --libs superpoint_rt lacks $d"
  done
fi
pc_prefix="$(pkg-config --variable=prefix superpoint_rt)"
[ "$(readlink -f "$pc_prefix")" = "$(readlink -f "$prefix")" ] || fail "pkg-config finds the prefix $pc_prefix, not $prefix"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 "$ex/main.cpp" -o "$work/ex-pkgconfig" $(pkg-config "${pc_static[@]}" --cflags --libs superpoint_rt) \
  ${lib:+-Wl,-rpath,"$libdir"}
check_output pkg-config "$("$work/ex-pkgconfig" "$weights" "$image")"

echo "check-install: OK ($mode, $prefix) in $(( $(date +%s) - start )) s"
