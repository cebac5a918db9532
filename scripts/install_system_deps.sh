#!/usr/bin/env bash
# Debian packages the environments need, installed only when missing (as root, with apt-get):
#   bubblewrap, util-linux, mount    the OS environment's embedded sandbox (bwrap, unshare, mount)
#   docker.io                        the OS environment's Docker backend (dockerd + CLI)
#   debootstrap                      builds the Docker base image offline (scripts/build_os_image.sh)
#   virtuoso-opensource-7-bin        AgentBench's own SPARQL server, for the KG endpoint tests
#   ShellCheck, package shellcheck   `make lint` checks the sandbox's bash control loop
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v mount >/dev/null 2>&1 || missing+=(mount)
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v virtuoso-t >/dev/null 2>&1 || missing+=(virtuoso-opensource-7-bin)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "missing system packages: ${missing[*]} (install them, e.g. apt-get install ${missing[*]})" >&2
    exit 1
fi
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
