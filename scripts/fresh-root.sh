# shellcheck shell=bash
# A fresh, minimal Debian 12 root (mmdebstrap --variant=apt), for proving that install steps are complete: what
# works there works on a new machine, whatever this machine has accumulated. Sourced by check-fresh-root.sh and
# check-deb.sh; needs root (chroot, mounts) and the mmdebstrap package (scripts/install-deps.sh installs it).
#
#   fresh_root_create DIR [--no-repo]  bootstrap DIR, give it this machine's package sources, certificate store,
#                                      pip configuration and DNS, mount /proc, /dev and ../shared (read-only) at
#                                      DIR/work/shared, and clone this checkout to DIR/work/main (unless --no-repo)
#   fresh_root_tarball FILE            mmdebstrap once into the tar FILE; fresh_root_create then extracts
#                                      it when $FRESH_ROOT_TARBALL names it (one bootstrap for several roots)
#   fresh_root_run DIR CMD...          run CMD under bash in DIR/work/main with a clean environment: nothing that
#                                      points into this machine (SUPERPOINT_RT_WEIGHTS, HF_*, PYTHONPATH, ...) leaks in
#   fresh_root_destroy DIR             unmount and remove DIR (safe to call twice; check-*.sh call it from a trap)
#
# Why each host file is copied: a fresh machine of this kind has the same pip.conf and local CA (package registries
# are reached through a proxy whose CA is local). Without /usr/local/share/ca-certificates the root's own
# update-ca-certificates (run when ca-certificates is installed) rebuilds the store without the local CA and pip
# fails with a certificate error.

_fr_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

fresh_root_create() {
  local dir="$1" with_repo=1
  [ "${2:-}" = "--no-repo" ] && with_repo=0
  local shared="${SUPERPOINT_RT_SHARED:-$_fr_repo/../shared}"
  [ -d "$shared" ] || { echo "fresh-root: test data folder $shared not found (set SUPERPOINT_RT_SHARED)" >&2; return 1; }
  command -v mmdebstrap >/dev/null || { echo "fresh-root: mmdebstrap is not installed" >&2; return 1; }
  [ "$(id -u)" -eq 0 ] || { echo "fresh-root: needs root (chroot and bind mounts)" >&2; return 1; }

  # The host's package sources (deb822 or one-line format), so the root sees the same mirror/snapshot.
  local sources=()
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [ -s "$f" ] && sources+=("$f")
  done
  [ ${#sources[@]} -gt 0 ] || { echo "fresh-root: no apt sources on this machine" >&2; return 1; }
  if [ -n "${FRESH_ROOT_TARBALL:-}" ] && [ -s "$FRESH_ROOT_TARBALL" ]; then
    # The same bootstrap, made once per test run (fresh_root_tarball): each root is still a new, untouched copy.
    echo "fresh-root: $dir from $FRESH_ROOT_TARBALL (mmdebstrap --variant=apt bookworm, made for this run)"
    mkdir -p "$dir" && tar -C "$dir" -xf "$FRESH_ROOT_TARBALL"
  else
    echo "fresh-root: mmdebstrap --variant=apt bookworm $dir (${sources[*]})"
    mmdebstrap --quiet --variant=apt bookworm "$dir" "${sources[@]}"
  fi

  # dpkg without an fsync per file, as Debian's container images install packages (dpkg's force-unsafe-io): the
  # same packages, installed by the same commands, in a fraction of the time on a root that is thrown away.
  mkdir -p "$dir/etc/dpkg/dpkg.cfg.d" && echo force-unsafe-io >"$dir/etc/dpkg/dpkg.cfg.d/sprt-unsafe-io"
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$dir/etc/pip.conf"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    mkdir -p "$dir/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/"
  fi
  if [ -d /usr/local/share/ca-certificates ]; then
    mkdir -p "$dir/usr/local/share/ca-certificates"
    cp -r /usr/local/share/ca-certificates/. "$dir/usr/local/share/ca-certificates/"
  fi
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  [ -f /etc/hosts ] && cp /etc/hosts "$dir/etc/hosts"

  mount -t proc proc "$dir/proc"
  mount --rbind /dev "$dir/dev"
  mount --make-rslave "$dir/dev"
  mkdir -p "$dir/work/shared" "$dir/tmp"
  chmod 1777 "$dir/tmp"
  mount --bind "$shared" "$dir/work/shared"
  mount -o remount,bind,ro "$dir/work/shared"   # as in CI: the test data is read-only

  if [ "$with_repo" = 1 ]; then
    # A clone, as CI makes one: only what is committed travels. Say so when the working tree has more.
    git clone -q --no-hardlinks "$_fr_repo" "$dir/work/main"
    if [ -n "$(git -C "$_fr_repo" status --porcelain --untracked-files=normal)" ]; then
      echo "fresh-root: note: the working tree has uncommitted changes; the root tests the last commit" >&2
    fi
  fi
}

# mmdebstrap once into FILE (a tar of the bare root): fresh_root_create extracts it when $FRESH_ROOT_TARBALL names
# it, which saves a bootstrap per root when one run makes several (scripts/test.sh makes three).
fresh_root_tarball() {
  local file="$1"
  local sources=()
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [ -s "$f" ] && sources+=("$f")
  done
  [ ${#sources[@]} -gt 0 ] || { echo "fresh-root: no apt sources on this machine" >&2; return 1; }
  mmdebstrap --quiet --variant=apt --format=tar bookworm "$file.part" "${sources[@]}" && mv "$file.part" "$file"
}

# FRESH_ROOT_CPUID_CAP=avx2|avx2-novnni: every process in the root sees that CPU (scripts/as-cpu.sh's library,
# compiled on the host into the root, and its environment; see tests/tools/cpuid_cap.c), so that a machine with
# AVX-512 stands in for an AVX2-only one from the first package installed to the last test.
fresh_root_cap_env() {
  local dir="$1"
  local cap="${FRESH_ROOT_CPUID_CAP:-}"
  [ -n "$cap" ] || return 0
  local lib=/opt/sprt-cpuid-cap/libsprt_cpuid_cap.so
  if [ ! -f "$dir$lib" ]; then
    mkdir -p "$(dirname "$dir$lib")"
    bash "$_fr_repo/scripts/as-cpu.sh" --build "$dir$lib"
  fi
  # env -i in the root: none of the host's LD_AUDIT, LD_PRELOAD or ASAN_OPTIONS goes in.
  LD_AUDIT='' LD_PRELOAD='' ASAN_OPTIONS='' bash "$_fr_repo/scripts/as-cpu.sh" --env "$cap" "$lib"
}

fresh_root_run() {
  local dir="$1"
  shift
  local cap_env
  cap_env="$(fresh_root_cap_env "$dir")"
  # env -i: a clean environment, as a new login would have; CI=true and JOBS pass through deliberately.
  # shellcheck disable=SC2086  # cap_env is a list of VAR=value words without spaces
  chroot "$dir" /usr/bin/env -i HOME=/root USER=root LANG=C.UTF-8 TERM=dumb CI="${CI:-}" JOBS="${JOBS:-}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $cap_env \
    /bin/bash -c 'cd /work/main 2>/dev/null || cd /; '"$*"
}

fresh_root_destroy() {
  local dir="$1"
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  local m
  # Deepest mount points first; -l (lazy) so a process that still holds a file cannot keep the root alive.
  for m in $(awk -v d="$dir" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  if awk -v d="$dir" 'index($2, d) == 1 {found=1} END {exit !found}' /proc/self/mounts; then
    echo "fresh-root: $dir still has mounts; not removing it" >&2
    return 1
  fi
  rm -rf --one-file-system "$dir"
}
