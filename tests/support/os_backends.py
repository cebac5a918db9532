"""Which OS sandbox backends can run here, for the OS tests' parametrized fixtures.

A backend that cannot run is skipped with its reason: bubblewrap needs root, the
``bwrap`` binary and a writable cgroup tree; Docker needs a reachable engine and the
``local-os/default`` image (``scripts/run_tests.sh`` starts dockerd and builds it).
"""

from __future__ import annotations

import functools

import pytest

from agentgym_eppo.environments.os.sandbox import SandboxError, SandboxLimits
from agentgym_eppo.environments.os.sandbox_bwrap import bwrap_available

DOCKER_IMAGE = "local-os/default"
SMALL_LIMITS = SandboxLimits(
    memory_bytes=256 << 20, cpus=1.0, pids=64, disk_bytes=64 << 20, file_size_bytes=32 << 20
)
"""Tight limits so that the fault tests hit them fast."""


@functools.cache
def docker_unavailable() -> str | None:
    try:
        from agentgym_eppo.environments.os.sandbox_docker import docker_client

        client = docker_client()
    except SandboxError as error:
        return str(error)
    try:
        client.images.get(DOCKER_IMAGE)
    except Exception:
        return f"the image {DOCKER_IMAGE} is missing (run scripts/build_os_image.sh)"
    return None


def skip_unless(backend: str) -> None:
    reason = bwrap_available() if backend == "bwrap" else docker_unavailable()
    if reason:
        pytest.skip(f"{backend} backend unavailable: {reason}")


BACKENDS = [
    pytest.param("bwrap", id="bwrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
