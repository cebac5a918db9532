#!/usr/bin/env bash
# Debian packages the environments need: bubblewrap (the OS sandbox).
# Installs only what is missing, and only when running as root with apt-get.
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "missing system packages: ${missing[*]} (install them, e.g. apt-get install ${missing[*]})" >&2
    exit 1
fi
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
