#!/usr/bin/env bash
# Build a minimal Debian bookworm base image for hosts that cannot pull one: debootstrap (minbase) with
# python3, venv support and iproute2, then `docker import`. Skips the build when the tag already exists
# (pass --force to rebuild). Usage: containers/build-base.sh [--force] [TAG]
set -euo pipefail
FORCE=0
if [ "${1:-}" = "--force" ]; then FORCE=1; shift; fi
TAG=${1:-distro-bench-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# python3-venv: the worker image installs into a venv (bookworm's pip refuses system installs, PEP 668).
# iproute2: lets tests show that a worker cannot reshape its own link.
PACKAGES=python3,python3-venv,iproute2,ca-certificates

if [ "$FORCE" = 0 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "build-base: $TAG exists ($(docker image inspect -f '{{.Id}}' "$TAG" | cut -c1-19)); --force rebuilds it"
  exit 0
fi
# Like start-engine.sh: install the one tool it needs where apt can (a bare CI host), else say which.
if ! command -v debootstrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "build-base: installing debootstrap (apt-get install debootstrap)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; } || true
  fi
  command -v debootstrap >/dev/null || { echo "build-base: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
fi

ROOT=$(mktemp -d /var/tmp/distro-bench-rootfs.XXXXXX)
trap 'rm -rf --one-file-system "$ROOT"' EXIT

echo "build-base: debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || {
  echo "build-base: debootstrap failed; last lines of its log:" >&2; tail -n 20 "$ROOT.log" >&2; rm -f "$ROOT.log"; exit 1; }
rm -f "$ROOT.log"

# Lean: nothing of the package caches, docs or man pages is needed at run time.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/usr/share/doc/* \
       "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* "$ROOT"/var/log/*.log
echo "deb $MIRROR $SUITE main" >"$ROOT/etc/apt/sources.list"

echo "build-base: docker import -> $TAG"
tar -C "$ROOT" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'LABEL distro-bench.image=base' \
  --change 'CMD ["/bin/bash"]' \
  --message "debootstrap --variant=minbase $SUITE + $PACKAGES" - "$TAG" >/dev/null
echo "build-base: built $TAG ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
