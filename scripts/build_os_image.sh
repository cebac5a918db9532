#!/usr/bin/env bash
# Builds the OS environment's Docker base image offline from Debian packages:
# debootstrap (minbase + the tools AgentBench's OS tasks use) piped into `docker import`.
# No registry is needed. Cached twice: the image itself (skipped when it exists) and the
# rootfs tarball under $OS_IMAGE_CACHE (reused when dockerd's storage was wiped).
set -euo pipefail
IMAGE=${OS_IMAGE:-local-os/default}
SUITE=${OS_IMAGE_SUITE:-bookworm}
MIRROR=${OS_IMAGE_MIRROR:-http://deb.debian.org/debian}
CACHE=${OS_IMAGE_CACHE:-/var/cache/agentgym-eppo}
PACKAGES=python3,procps,psmisc,passwd,tree,zip,unzip,bc,file,less,iproute2
TARBALL="$CACHE/os-rootfs-$SUITE.tar"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "docker image $IMAGE exists: not rebuilding"
    exit 0
fi
if [ ! -s "$TARBALL" ]; then
    command -v debootstrap >/dev/null || { echo "debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
    mkdir -p "$CACHE"
    rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    echo "debootstrap $SUITE into $rootfs (about a minute)"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 \
        || { tail -20 "$rootfs.log" >&2; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
    rm -f "$rootfs.log"
fi
docker import --change 'WORKDIR /root' --change 'ENV HOME=/root' --change 'CMD ["bash"]' \
    "$TARBALL" "$IMAGE" >/dev/null
echo "built docker image $IMAGE from $TARBALL"
