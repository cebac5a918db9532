"""Sub-envs in Ray actors: the back-end for many machines (the ``ray`` extra).

Each worker is an actor holding an :class:`~agentgym_eppo.vector.host.EnvHost`;
requests are actor calls, replies are collected with ``ray.wait`` as they finish. An
actor that dies (node lost, process killed) surfaces as ``RayActorError`` and becomes a
:class:`~agentgym_eppo.vector.workers.base.WorkerLost`. Ray is started here (with
``num_cpus`` CPUs and the caller's ``sys.path``) only when no Ray runtime is up, and
shut down again on ``close``; on a cluster you start, the env ids' modules must be
importable on every node.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..host import EnvHost, Reply, Request, SubEnvSpec
from .base import Event, WorkerError, WorkerLost, WorkerPool

_START_TIMEOUT_S = 120.0


def start_local_ray(num_cpus: int | None) -> None:
    """Start a local Ray runtime whose workers see the caller's import path.

    Like multiprocessing's spawn, so that env ids of the form ``"module:Id"`` (and any
    module the caller can import) resolve inside the actors too.
    """
    import ray

    import_path = os.pathsep.join(path for path in sys.path if path)
    ray.init(
        num_cpus=num_cpus,
        runtime_env={"env_vars": {"PYTHONPATH": import_path}},
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )


class _ActorHost:
    """The actor's body: an EnvHost plus the process id (for fault injection)."""

    def __init__(self, specs: Mapping[int, SubEnvSpec], temp_dir: str) -> None:
        os.makedirs(temp_dir, exist_ok=True)
        self.host = EnvHost(specs, temp_dir=temp_dir)

    def describe(self) -> dict[int, Any]:
        return {slot: self.host.handle(Request(slot, "describe")).value for slot in self.host.envs}

    def handle(self, request: Request) -> Reply:
        return self.host.handle(request)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.host.close()


class RayPool(WorkerPool):
    """One actor per ``envs_per_worker`` slots; ``actor_options`` go to ``.options()``
    (default: a hundredth of a CPU, so that actors never wait for free CPUs)."""

    name = "ray"

    def __init__(
        self,
        specs: Sequence[SubEnvSpec],
        envs_per_worker: int = 1,
        actor_options: Mapping[str, Any] | None = None,
        num_cpus: int | None = None,
    ) -> None:
        super().__init__(specs, envs_per_worker)
        import ray

        self._ray = ray
        self._started_ray = False
        if not ray.is_initialized():
            start_local_ray(num_cpus or os.cpu_count() or 1)
            self._started_ray = True
        self._actor_class = ray.remote(_ActorHost)
        self._actor_options = dict(actor_options or {"num_cpus": 0.01})
        self._actors: list[Any] = [None] * len(self.worker_slots)
        self._pending: dict[Any, tuple[int, Request]] = {}
        self._closed = False

    def start(self) -> None:
        for worker in range(len(self.worker_slots)):
            self._actors[worker] = self._launch(worker)
        for worker in range(len(self.worker_slots)):
            self._await_ready(worker)

    def _launch(self, worker: int) -> Any:
        options = {"max_restarts": 0, **self._actor_options}
        return self._actor_class.options(**options).remote(
            self.specs_of(worker), self.temp_dir(worker)
        )

    def _await_ready(self, worker: int) -> None:
        ray = self._ray
        try:
            descriptions = ray.get(self._actors[worker].describe.remote(), timeout=_START_TIMEOUT_S)
        except Exception as error:
            self.close()
            raise WorkerError(f"ray worker {worker} could not build its envs: {error}") from error
        self.descriptions.update(descriptions)

    def submit(self, request: Request) -> None:
        worker = self.worker_of(request.slot)
        actor = self._actors[worker]
        if actor is None:
            raise WorkerError(f"ray worker {worker} is not running")
        self._pending[actor.handle.remote(request)] = (worker, request)

    def poll(self, timeout: float | None = None) -> list[Event]:
        ray = self._ray
        if not self._pending:
            return []
        ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        if ready:
            ready, _ = ray.wait(list(self._pending), num_returns=len(self._pending), timeout=0)
        events: list[Event] = []
        lost: dict[int, str] = {}
        for ref in ready:
            worker, request = self._pending.pop(ref)
            try:
                events.append(ray.get(ref))
            except ray.exceptions.RayActorError as error:
                lost[worker] = f"ray actor died: {type(error).__name__}"
                self._pending[ref] = (worker, request)
        for worker, reason in lost.items():
            requests = tuple(r for w, r in self._pending.values() if w == worker)
            self._pending = {ref: wr for ref, wr in self._pending.items() if wr[0] != worker}
            events.append(WorkerLost(worker, requests, reason))
        return events

    def restart(self, worker: int) -> None:
        self._kill(worker)
        self._clear_temp_dir(worker)
        self._actors[worker] = self._launch(worker)
        self._await_ready(worker)

    def kill_worker(self, worker: int) -> None:
        pid = self._ray.get(self._actors[worker].pid.remote(), timeout=_START_TIMEOUT_S)
        os.kill(pid, signal.SIGKILL)

    def stop_overdue(self, worker: int) -> None:
        # A busy actor cannot answer pid(); Ray kills it from outside, and its pending
        # requests then fail with RayActorError, which poll() reports as WorkerLost.
        actor = self._actors[worker]
        if actor is not None:
            self._ray.kill(actor, no_restart=True)

    def _kill(self, worker: int) -> None:
        actor = self._actors[worker]
        if actor is not None:
            self._ray.kill(actor, no_restart=True)
        self._actors[worker] = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        closing = [a.close.remote() for a in self._actors if a is not None]
        with contextlib.suppress(Exception):  # a dead actor has nothing left to close
            ray.get(closing, timeout=30)
        for worker in range(len(self._actors)):
            self._kill(worker)
        self._pending.clear()
        self._remove_temp_root()
        if self._started_ray:
            ray.shutdown()
