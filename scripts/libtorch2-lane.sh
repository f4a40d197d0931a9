#!/usr/bin/env bash
# The libtorch 2.x lane: Debian trixie's libtorch-dev (2.6) in a chroot made
# with debootstrap, cached between runs, with this machine's Go and module
# cache and this source tree mounted into it.
#
#   scripts/libtorch2-lane.sh root         make (or check) the cached root
#   scripts/libtorch2-lane.sh test         root, then the lane's tests in it
#   scripts/libtorch2-lane.sh run CMD...   root, then CMD in it (in /src)
#   scripts/libtorch2-lane.sh run --mount DIR CMD...
#                                          root, then CMD in it, in DIR (a
#                                          downstream module, say)
#
# With --mount, DIR is bind-mounted writable at its own path in the root,
# and this checkout read only at its own path as well as at /src, so that a
# go.mod's replace directive pointing at the checkout (absolute, or relative
# to DIR) holds inside the root as outside; CMD runs in DIR. Before entering,
# "go mod download" runs in DIR on this machine (the root has no network for
# Go: GOPROXY=off), so DIR's go.mod and go.sum must be complete. What CMD
# writes in DIR stays there, owned by root.
#
# The root lives in $WFGEN_LANE_ROOT (default /var/cache/wfgen/trixie-root).
# A root is reused when its marker file says it holds the suite and packages
# below and they check out; one made for another package list gets them
# installed in place (and its Go build cache cleared); a broken one is
# rebuilt. The script only ever
# deletes roots it made (the marker or the .partial directory marker is
# there) and never while something is mounted inside them. Every mount is
# made in a private mount namespace (unshare -m) and also unmounted by a trap,
# so nothing stays mounted when the script ends, however it ends.
#
# Needs root, debootstrap (installed on demand), unshare, chroot and flock,
# and the Debian mirror; the Go module proxy is not used inside the root.
set -euo pipefail

SUITE=trixie
MIRROR=${WFGEN_LANE_MIRROR:-http://deb.debian.org/debian}
ROOT=${WFGEN_LANE_ROOT:-/var/cache/wfgen/trixie-root}
# What the lane needs in the root: libtorch and g++ for the engine (and
# libopenblas0, the BLAS libtorch recommends and a default install gets, as
# on the machine: without it, apt's minimal choice is the reference BLAS, a
# 4-5x slower matmul), pkgconf for the e2e build against a relocated
# libtorch, python3-torch for parity fixtures and torchrun,
# python3-setuptools and python3-dev for AOTInductor export (torch._inductor
# compiles C++), python3-torchvision for the AOTInductor mobilenet fixture
# (and the TorchScript parity test, which skips without it), libgloo-dev for
# the engine's process groups (Gloo's headers).
PACKAGES=(libtorch-dev libopenblas0 python3-torch g++ pkgconf python3-setuptools python3-dev python3-torchvision ca-certificates libgloo-dev)
# The lane's tests: engine, client, e2e, importer, torchrun, process groups
# and the sharded example (two torchrun nodes), and the import command's
# tests (IMPORT_RUN; the command's other tests need git, which the root
# lacks, and no libtorch). The AOTInductor tests among them export their
# packages with the root's python3-torch (cached in the root's
# ~/.cache/wfgen/aoti). The scheduler measurement runs alone afterwards, as
# in make test: other packages' tests running beside it add context
# switches it would count.
TEST_PKGS=(./runtime/torch/... ./runtime/client/... ./e2e/... ./gen/importer/... ./runtime/proc/torchrun/... ./runtime/dist/... ./examples/sharded/... ./internal/zoo/)
IMPORT_RUN='^TestImport'
ALONE='^TestBackToBackCallsKeepSchedulerQuiet$'

SRC=$(cd "$(dirname "$0")/.." && pwd)
MARKER=.wfgen-lane-root
STAMP="suite=$SUITE packages=${PACKAGES[*]}"
GOROOT_HOST=$(go env GOROOT)
GOMODCACHE_HOST=$(go env GOMODCACHE)

log() { echo "libtorch2-lane: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"

# mounted_under DIR: true when anything is mounted at or below DIR.
mounted_under() {
  local d
  d=$(realpath -m "$1")
  awk -v d="$d" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# remove_ours DIR: deletes a root this script made, refusing anything else.
remove_ours() {
  local dir=$1
  [ -e "$dir" ] || return 0
  if [ ! -f "$dir/$MARKER" ] && [ ! -f "$dir/.wfgen-lane-partial" ]; then
    die "$dir exists but was not made by this script (no $MARKER); remove it yourself or set WFGEN_LANE_ROOT"
  fi
  if mounted_under "$dir"; then
    die "$dir has mounts inside it (findmnt -R $dir); unmount them first"
  fi
  rm -rf --one-file-system "$dir"
}

# in_root DIR CMD...: runs CMD chrooted in DIR with /proc, /sys, /dev, the
# Go toolchain, the module cache (read only) and the source tree (at /src)
# mounted, in a private mount namespace; in /src, or, when MOUNT is set, in
# MOUNT, mounted writable at its own path beside the source tree (read only,
# also at its own path).
MOUNT=
in_root() {
  local dir=$1
  shift
  mkdir -p "$dir/usr/local/go" "$dir/root/go/pkg/mod" "$dir/src" "$dir/proc" "$dir/sys" "$dir/dev"
  if [ -n "$MOUNT" ]; then
    mkdir -p "$dir$SRC" "$dir$MOUNT"
  fi
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  cp /etc/hosts "$dir/etc/hosts"
  unshare -m --propagation private bash -euo pipefail -c '
    dir=$1 goroot=$2 modcache=$3 src=$4 extra=$5
    shift 5
    cleanup() {
      for m in ${extra:+"$dir$extra"} ${extra:+"$dir$src"} "$dir/src" "$dir/root/go/pkg/mod" "$dir/usr/local/go" "$dir/dev" "$dir/sys" "$dir/proc"; do
        umount -R "$m" 2>/dev/null || true
      done
    }
    trap cleanup EXIT
    mount -t proc proc "$dir/proc"
    mount --rbind /sys "$dir/sys"
    mount --rbind /dev "$dir/dev"
    mount --bind "$goroot" "$dir/usr/local/go"
    mount -o remount,bind,ro "$dir/usr/local/go"
    mount --bind "$modcache" "$dir/root/go/pkg/mod"
    mount -o remount,bind,ro "$dir/root/go/pkg/mod"
    mount --bind "$src" "$dir/src"
    mount -o remount,bind,ro "$dir/src"
    workdir=/src
    if [ -n "$extra" ]; then
      if [ "$src" != /src ]; then
        mount --bind "$src" "$dir$src"
        mount -o remount,bind,ro "$dir$src"
      fi
      mount --bind "$extra" "$dir$extra"
      workdir=$extra
    fi
    status=0
    chroot "$dir" /usr/bin/env -i \
      HOME=/root PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TMPDIR=/tmp DEBIAN_FRONTEND=noninteractive \
      GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOPROXY=off GOMODCACHE=/root/go/pkg/mod \
      GOCACHE=/root/.cache/go-build \
      bash -c "cd \"\$1\" && shift && exec \"\$@\"" bash "$workdir" "$@" || status=$?
    exit $status
  ' bash "$dir" "$GOROOT_HOST" "$GOMODCACHE_HOST" "$SRC" "$MOUNT" "$@"
}

# root_ok DIR: the marker matches and the packages are installed.
root_ok() {
  local dir=$1 status
  [ -f "$dir/$MARKER" ] && [ "$(cat "$dir/$MARKER")" = "$STAMP" ] || return 1
  [ -x "$dir/usr/bin/g++" ] && [ -f "$dir/usr/include/torch/script.h" ] && [ -x "$dir/usr/bin/python3" ] || return 1
  status=$(chroot "$dir" dpkg-query -W -f='${Status}\n' "${PACKAGES[@]}" 2>/dev/null) || return 1
  [ "$(grep -c '^install ok installed$' <<<"$status")" -eq ${#PACKAGES[@]} ]
}

install_packages() {
  local dir=$1
  # Go's build cache does not notice changed C headers (go.dev/issue/24355):
  # a shim compiled against the libtorch being replaced must not be reused.
  rm -rf "$dir/root/.cache/go-build"
  log "installing ${PACKAGES[*]} in $dir (apt-get, about 3 minutes)"
  in_root "$dir" bash -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null && apt-get clean' \
    bash "${PACKAGES[@]}"
  echo "$STAMP" >"$dir/$MARKER"
}

ensure_root() {
  mkdir -p "$(dirname "$ROOT")"
  exec 9>"$ROOT.lock"
  flock 9
  if root_ok "$ROOT"; then
    log "reusing $ROOT"
    flock -s 9
    return
  fi
  if [ -f "$ROOT/$MARKER" ] && [ -x "$ROOT/usr/bin/apt-get" ] && [ -x "$ROOT/bin/bash" ]; then
    # Made by this script for another package list, or an install that
    # stopped half way: try installing in place before rebuilding.
    log "$ROOT is incomplete ($(cat "$ROOT/$MARKER")); installing in place"
    if install_packages "$ROOT" && root_ok "$ROOT"; then
      flock -s 9
      return
    fi
    log "$ROOT is broken; rebuilding it"
  fi
  command -v debootstrap >/dev/null 2>&1 || {
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  }
  local partial=$ROOT.partial
  remove_ours "$partial"
  mkdir -p "$partial"
  touch "$partial/.wfgen-lane-partial"
  log "debootstrap $SUITE into $partial (about 2.5 minutes)"
  debootstrap --variant=minbase "$SUITE" "$partial" "$MIRROR" >"$partial.debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $partial.debootstrap.log"
  install_packages "$partial"
  root_ok "$partial" || die "$partial: packages missing after install"
  rm -f "$partial/.wfgen-lane-partial" "$partial.debootstrap.log"
  remove_ours "$ROOT"
  mv "$partial" "$ROOT"
  log "made $ROOT"
  flock -s 9
}

run_tests() {
  (cd "$SRC" && go mod download)
  in_root "$ROOT" bash -c '
    set -e
    echo "libtorch2-lane: $(go version), $(g++ --version | head -1), libtorch $(awk "/#define TORCH_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == \"\" ? \"\" : \".\") \$3 } END { print v }" /usr/include/torch/csrc/api/include/torch/version.h)"
    import_run=$1
    shift
    go test -timeout 20m -skip "$0" "$@"
    go test -timeout 20m -run "$import_run" ./cmd/wfgen/
    go test -count=1 -run "$0" ./runtime/torch/
  ' "$ALONE" "$IMPORT_RUN" "${TEST_PKGS[@]}"
}

# run_in [--mount DIR] CMD...: the run command.
run_in() {
  if [ "${1:-}" = --mount ]; then
    [ $# -ge 2 ] || die "run --mount: give a folder"
    [ -d "$2" ] || die "run --mount $2: not a folder"
    MOUNT=$(realpath "$2")
    case "$MOUNT" in
      /) die "run --mount /: give the downstream module's folder, not /" ;;
      "$ROOT" | "$ROOT"/*) die "run --mount $MOUNT: a folder inside the lane's root" ;;
      /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /src | /src/* | /usr/local/go | /usr/local/go/* | /root/go/pkg/mod | /root/go/pkg/mod/*)
        die "run --mount $MOUNT: the root mounts something there already; move the module elsewhere" ;;
    esac
    shift 2
  fi
  [ $# -gt 0 ] || die "run: give a command"
  ensure_root
  if [ -n "$MOUNT" ] && [ -f "$MOUNT/go.mod" ]; then
    # The root has no module proxy: fetch what the module needs here.
    (cd "$MOUNT" && go mod download) || die "run --mount $MOUNT: go mod download failed (is go.sum complete? run go mod tidy)"
  fi
  in_root "$ROOT" "$@"
}

case "${1:-}" in
  root) ensure_root ;;
  test) ensure_root; run_tests ;;
  run) shift; run_in "$@" ;;
  *) die "usage: $0 root | test | run [--mount DIR] CMD..." ;;
esac
