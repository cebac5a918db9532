"""Worker back-ends behind one interface: ``serial``, ``subprocess`` (default), ``ray``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentgym_eppo.core.registry import Registry, did_you_mean

from ..host import SubEnvSpec
from .base import Event, WorkerError, WorkerLost, WorkerPool
from .serial import SerialPool
from .subprocess import SubprocessPool


def _serial(specs: Sequence[SubEnvSpec], envs_per_worker: int, **options: Any) -> WorkerPool:
    return SerialPool(specs, **options)  # one process: envs_per_worker has no meaning


def _ray(specs: Sequence[SubEnvSpec], envs_per_worker: int, **options: Any) -> WorkerPool:
    try:
        from .ray import RayPool
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "backend='ray' needs the ray extra: pip install 'agentgym-eppo[ray]'"
        ) from error
    return RayPool(specs, envs_per_worker, **options)


BACKENDS: Registry[Callable[..., WorkerPool]] = Registry(
    "vector back-end", {"serial": _serial, "subprocess": SubprocessPool, "ray": _ray}
)
"""``backend`` -> ``(specs, envs_per_worker, **options) -> WorkerPool``."""


def make_pool(
    backend: str, specs: Sequence[SubEnvSpec], envs_per_worker: int = 1, **options: Any
) -> WorkerPool:
    """The pool of ``backend``; ``options`` go to its constructor (e.g. ``start_method``
    for subprocesses, ``actor_options``/``num_cpus`` for Ray)."""
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be one of {tuple(BACKENDS)}, got {backend!r}"
            f"{did_you_mean(backend, BACKENDS)}"
        )
    return BACKENDS[backend](specs, envs_per_worker, **options)


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
