"""One interface over the worker back-ends (PufferLib's design): serial, subprocess, Ray.

A pool places the slots' sub-envs on workers (``envs_per_worker`` slots each), takes
:class:`~agentgym_eppo.vector.host.Request` objects without waiting, and hands back
whatever replies have arrived. Because requests are answered as they finish, a slow
environment (ALFWorld, an OS sandbox) never holds up the replies of fast ones on the
parallel back-ends. A worker that dies is reported as :class:`WorkerLost` naming the
requests it took with it; the caller decides what those episodes become and calls
:meth:`WorkerPool.restart`.
"""

from __future__ import annotations

import abc
import shutil
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..host import Reply, Request, SubEnvSpec
from .leftovers import make_root


@dataclass(frozen=True)
class WorkerLost:
    """A worker died (killed, crashed, out of memory) with ``requests`` unanswered."""

    worker: int
    requests: tuple[Request, ...]
    reason: str


Event = Reply | WorkerLost


class WorkerError(RuntimeError):
    """A worker could not be started or answered a request with an error."""


class WorkerPool(abc.ABC):
    """Runs the sub-envs of ``specs`` (one per slot) on workers of one kind."""

    name: str = "base"

    def __init__(self, specs: Sequence[SubEnvSpec], envs_per_worker: int = 1) -> None:
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be at least 1, got {envs_per_worker}")
        self.specs = list(specs)
        self.envs_per_worker = int(envs_per_worker)
        count = -(-len(self.specs) // self.envs_per_worker)
        self.worker_slots: list[tuple[int, ...]] = [
            tuple(range(w * envs_per_worker, min(len(self.specs), (w + 1) * envs_per_worker)))
            for w in range(count)
        ]
        self._temp_root: Path | None = None
        self._remove_root: weakref.finalize[Any, Any] | None = None
        self.descriptions: dict[int, dict[str, Any]] = {}
        """``describe`` of every slot's sub-env, filled by :meth:`start`."""

    def worker_of(self, slot: int) -> int:
        return slot // self.envs_per_worker

    @property
    def temp_root(self) -> Path | None:
        """The folder holding the workers' temp folders (None until one is needed)."""
        return self._temp_root

    def temp_dir(self, worker: int) -> str:
        """The worker's private temp folder (its ``TMPDIR``), removed on restart and close."""
        if self._temp_root is None:
            self._temp_root = make_root()
            # Removed by close(), and also if the caller exits or drops the pool without it.
            self._remove_root = weakref.finalize(self, shutil.rmtree, str(self._temp_root), True)
        path = self._temp_root / f"worker-{worker}"
        path.mkdir(parents=True, exist_ok=True)
        return str(path)

    def _clear_temp_dir(self, worker: int) -> None:
        if self._temp_root is not None:
            shutil.rmtree(self._temp_root / f"worker-{worker}", ignore_errors=True)

    def _remove_temp_root(self) -> None:
        if self._remove_root is not None:
            self._remove_root()

    def specs_of(self, worker: int) -> dict[int, SubEnvSpec]:
        return {slot: self.specs[slot] for slot in self.worker_slots[worker]}

    @abc.abstractmethod
    def start(self) -> None:
        """Start every worker, build its sub-envs, fill :attr:`descriptions`."""

    @abc.abstractmethod
    def submit(self, request: Request) -> None:
        """Hand ``request`` to its slot's worker without waiting for the answer."""

    @abc.abstractmethod
    def poll(self, timeout: float | None = None) -> list[Event]:
        """Replies and worker losses that have arrived; waits up to ``timeout`` seconds
        (``None``: until at least one) when none has."""

    @abc.abstractmethod
    def restart(self, worker: int) -> None:
        """Replace a lost worker by a fresh one with new sub-envs for its slots."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close every sub-env, stop every worker, remove the temp folders. Idempotent."""

    def kill_worker(self, worker: int) -> None:
        """Kill a worker abruptly (fault injection for tests and benchmarks)."""
        raise NotImplementedError(f"the {self.name} back-end cannot kill a worker")

    @property
    def can_stop_workers(self) -> bool:
        """Whether :meth:`stop_overdue` can end a worker (not the caller's own process)."""
        return True

    def stop_overdue(self, worker: int) -> None:
        """End a worker stuck in a request, without waiting on it; :meth:`poll` then
        reports it as :class:`WorkerLost` and the caller restarts it."""
        self.kill_worker(worker)
