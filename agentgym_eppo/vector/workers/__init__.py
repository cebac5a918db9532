"""Worker back-ends behind one interface: ``serial``, ``subprocess`` (default), ``ray``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..host import SubEnvSpec
from .base import Event, WorkerError, WorkerLost, WorkerPool
from .serial import SerialPool
from .subprocess import SubprocessPool

BACKENDS = ("serial", "subprocess", "ray")


def make_pool(
    backend: str, specs: Sequence[SubEnvSpec], envs_per_worker: int = 1, **options: Any
) -> WorkerPool:
    """The pool of ``backend``; ``options`` go to its constructor (e.g. ``start_method``
    for subprocesses, ``actor_options``/``num_cpus`` for Ray)."""
    if backend == "serial":
        return SerialPool(specs, **options)
    if backend == "subprocess":
        return SubprocessPool(specs, envs_per_worker, **options)
    if backend == "ray":
        try:
            from .ray import RayPool
        except ImportError as error:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "backend='ray' needs the ray extra: pip install 'agentgym-eppo[ray]'"
            ) from error
        return RayPool(specs, envs_per_worker, **options)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


__all__ = [
    "BACKENDS",
    "Event",
    "SerialPool",
    "SubprocessPool",
    "WorkerError",
    "WorkerLost",
    "WorkerPool",
    "make_pool",
]
