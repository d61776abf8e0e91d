#!/usr/bin/env bash
# Builds a sandbox image: a minimal Debian root file system for sinew-sandboxd.
#
#   build-image.sh [NAME]            NAME defaults to "default"
#
# Env: SINEW_IMAGE_ROOT   where images live (default /var/lib/sinew/images); the image
#                         is NAME/rootfs below it, marked ready by NAME/READY
#      SINEW_DEBIAN_MIRROR  (default http://deb.debian.org/debian)
#      SINEW_DEBIAN_SUITE   (default bookworm)
#      SINEW_IMAGE_PACKAGES extra comma-separated Debian packages
# Idempotent: an image that is already READY is left alone (pass --force to rebuild).
# Concurrent builds of the same image serialise on a lock file.
set -euo pipefail

name=default
force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) name=$arg ;;
  esac
done
if [[ ! "$name" =~ ^[a-z0-9][a-z0-9._-]*$ ]]; then
  echo "build-image: bad image name '$name' (use [a-z0-9._-])" >&2; exit 2
fi
root=${SINEW_IMAGE_ROOT:-/var/lib/sinew/images}
mirror=${SINEW_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${SINEW_DEBIAN_SUITE:-bookworm}
packages="bash,coreutils,python3,git,ca-certificates,procps,findutils,grep,sed${SINEW_IMAGE_PACKAGES:+,$SINEW_IMAGE_PACKAGES}"
image=$root/$name

mkdir -p "$root"
exec 9>"$root/.$name.lock"
flock 9
# Evaluation paths (docs/eval.md): /logs, /tests and /solution point into the writable
# /tmp of each sandbox, so a verifier can write /logs/verifier/reward.txt in a read-only root.
eval_links() {
  for d in logs tests solution; do
    [ -e "$1/$d" ] || [ -L "$1/$d" ] || ln -s "/tmp/$d" "$1/$d"
  done
}
if [ -f "$image/READY" ] && [ "$force" = 0 ]; then
  eval_links "$image/rootfs"
  echo "build-image: $image is ready"; exit 0
fi
if ! command -v debootstrap >/dev/null; then
  echo "build-image: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1
fi

tmp=$root/.$name.building
rm -rf "$tmp"
mkdir -p "$tmp"
echo "build-image: debootstrap $suite into $tmp (1-3 minutes)"
debootstrap --variant=minbase --include="$packages" "$suite" "$tmp/rootfs" "$mirror" \
  > "$tmp/debootstrap.log" 2>&1 || { echo "build-image: debootstrap failed, see $tmp/debootstrap.log" >&2; tail -20 "$tmp/debootstrap.log" >&2; exit 1; }

rfs=$tmp/rootfs
# The unprivileged user every sandbox process runs as.
chroot "$rfs" groupadd -g 1000 sandbox
chroot "$rfs" useradd -u 1000 -g 1000 -d /workspace -M -s /bin/bash sandbox
# Mount points the provisioner needs in a read-only root: the workspace, the agent
# (bind-mounted read-only from the host) and the directory of its socket.
mkdir -p "$rfs/workspace" "$rfs/.sinew/agent" "$rfs/.sinew/run"
eval_links "$rfs"
# Smaller image: no apt caches, docs or man pages.
rm -rf "$rfs"/var/cache/apt/archives/*.deb "$rfs"/var/lib/apt/lists/* \
       "$rfs"/usr/share/doc/* "$rfs"/usr/share/man/* "$rfs"/usr/share/info/*
echo "sandbox" > "$rfs/etc/hostname"

rm -rf "$image"
mkdir -p "$image"
mv "$rfs" "$image/rootfs"
mv "$tmp/debootstrap.log" "$image/"
rm -rf "$tmp"
date -u +%FT%TZ > "$image/READY"
echo "build-image: $image ready"
