"""Sub-envs in worker processes: the default back-end on one machine.

Each worker is a process of its own session (so that killing its process group also
ends whatever it started: sandboxes, shells, servers) with a private ``TMPDIR``. The
caller waits on the workers' pipes and process sentinels together, so it sees a reply
the moment it is sent and a death the moment it happens.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import selectors
import shutil
import signal
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from ..host import EnvHost, Reply, Request, SubEnvSpec
from .base import Event, WorkerError, WorkerLost, WorkerPool

_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 10.0
_TERMINATE_TIMEOUT_S = 10.0


def _worker_main(conn: Connection, specs: Mapping[int, SubEnvSpec], temp_dir: str) -> None:
    """The worker loop: build the envs, then answer requests until told to stop."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    # A graceful close that outlasts its wait sends SIGTERM: unwind a step that is still
    # running so that ``host.close()`` below releases sandboxes, cgroups and databases.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        host = EnvHost(specs, temp_dir=temp_dir)
        ready = Reply(
            -1, 0, value={slot: host.handle(Request(slot, "describe")).value for slot in specs}
        )
    except Exception as error:
        conn.send(Reply(-1, 0, error=(type(error).__name__, str(error))))
        return
    conn.send(ready)
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the caller is gone
                break
            if message is None:
                break
            reply = host.handle(Request(*message))
            try:
                conn.send((reply.slot, reply.request_id, reply.value, reply.error))
            except (pickle.PicklingError, TypeError, AttributeError) as error:
                conn.send((reply.slot, reply.request_id, None, ("PicklingError", str(error))))
    finally:
        host.close()
        conn.close()
        # The caller removes this folder too, unless it was killed first.
        shutil.rmtree(temp_dir, ignore_errors=True)


class SubprocessPool(WorkerPool):
    """One process per ``envs_per_worker`` slots (default one per slot).

    ``start_method`` is multiprocessing's: ``spawn`` (default: safe beside torch and
    Ray threads) or ``fork`` (faster to start; the sub-env factories need not be
    importable).
    """

    name = "subprocess"

    def __init__(
        self, specs: Sequence[SubEnvSpec], envs_per_worker: int = 1, start_method: str = "spawn"
    ) -> None:
        super().__init__(specs, envs_per_worker)
        self._context: Any = multiprocessing.get_context(start_method)
        self._processes: list[BaseProcess | None] = [None] * len(self.worker_slots)
        self._conns: list[Connection | None] = [None] * len(self.worker_slots)
        self._pending: list[dict[int, Request]] = [{} for _ in self.worker_slots]
        # One long-lived selector over every pipe and process sentinel: registering them
        # anew on each poll would cost more than the message itself.
        self._selector = selectors.DefaultSelector()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for worker in range(len(self.worker_slots)):
            self._launch(worker)
        for worker in range(len(self.worker_slots)):
            self._await_ready(worker)

    def _launch(self, worker: int) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main,
            args=(child, self.specs_of(worker), self.temp_dir(worker)),
            name=f"agentgym-vector-worker-{worker}",
            daemon=True,
        )
        process.start()
        child.close()
        self._processes[worker], self._conns[worker] = process, parent

    def _await_ready(self, worker: int) -> None:
        conn, process = self._conns[worker], self._processes[worker]
        assert conn is not None and process is not None
        problem: str | None = None
        if not conn.poll(_START_TIMEOUT_S):
            problem = f"did not start within {_START_TIMEOUT_S:.0f} s"
        else:
            try:
                ready: Reply = conn.recv()
            except (EOFError, OSError):
                process.join(_STOP_TIMEOUT_S)
                problem = f"died while building its envs ({_death_reason(process.exitcode)})"
            else:
                if ready.error is not None:
                    problem = f"could not build its envs: {ready.error[0]}: {ready.error[1]}"
                else:
                    self.descriptions.update(ready.value)
                    self._selector.register(conn, selectors.EVENT_READ, ("reply", worker))
                    self._selector.register(
                        process.sentinel, selectors.EVENT_READ, ("death", worker)
                    )
        if problem is not None:
            self.close()
            raise WorkerError(f"worker {worker} {problem}")

    def restart(self, worker: int) -> None:
        self._stop(worker, graceful=False)
        self._pending[worker].clear()
        self._launch(worker)
        self._await_ready(worker)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for conn in self._conns:
            if conn is not None:
                with contextlib.suppress(OSError, ValueError):
                    conn.send(None)
        for worker in range(len(self.worker_slots)):
            self._stop(worker, graceful=True)
        self._selector.close()
        self._remove_temp_root()

    def _stop(self, worker: int, *, graceful: bool) -> None:
        process, conn = self._processes[worker], self._conns[worker]
        for registered in (conn, process.sentinel if process is not None else None):
            if registered is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(registered)
        if process is not None:
            if graceful:
                process.join(_STOP_TIMEOUT_S)
                if process.is_alive():
                    process.terminate()
                    process.join(_TERMINATE_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join(_STOP_TIMEOUT_S)
            _kill_process_group(process.pid)
            process.close()
        if conn is not None:
            conn.close()
        self._processes[worker], self._conns[worker] = None, None
        self._clear_temp_dir(worker)

    def kill_worker(self, worker: int) -> None:
        process = self._processes[worker]
        if process is not None and process.pid is not None:
            os.kill(process.pid, signal.SIGKILL)

    def pids(self) -> list[int]:
        """The process ids of the live workers."""
        return [p.pid for p in self._processes if p is not None and p.pid is not None]

    # ------------------------------------------------------------------ requests

    def submit(self, request: Request) -> None:
        worker = self.worker_of(request.slot)
        conn = self._conns[worker]
        if conn is None:
            raise WorkerError(f"worker {worker} is not running")
        self._pending[worker][request.request_id] = request
        # A dead worker's pipe is broken; poll() reports the death through its sentinel.
        with contextlib.suppress(OSError):
            # Plain tuples on the wire: pickling them costs less than dataclasses.
            conn.send((request.slot, request.command, request.payload, request.request_id))

    def poll(self, timeout: float | None = None) -> list[Event]:
        """Replies as they come; a worker that died, busy or idle, is a WorkerLost."""
        if not any(self._pending):
            return []
        events: list[Event] = []
        dead: set[int] = set()
        for key, _ in self._selector.select(timeout):
            kind, worker = key.data
            if kind == "death" or not self._receive(worker, events):
                dead.add(worker)
        for worker in sorted(dead):
            while self._receive(worker, events, block=False):
                pass  # replies sent just before the worker died still count
            process = self._processes[worker]
            if process is not None:
                process.join(_STOP_TIMEOUT_S)  # the pipe closes just before the exit code is known
            code = process.exitcode if process is not None else None
            requests = tuple(self._pending[worker].values())
            self._pending[worker].clear()
            events.append(WorkerLost(worker, requests, _death_reason(code)))
        return events

    def _receive(self, worker: int, events: list[Event], *, block: bool = True) -> bool:
        """Read one reply of a worker whose pipe is readable; False if the pipe is closed
        (or, with ``block=False``, empty). One read per wake-up: ``wait`` reports the
        pipe again while more replies are queued."""
        conn = self._conns[worker]
        assert conn is not None
        try:
            if not block and not conn.poll():
                return False
            reply = Reply(*conn.recv())
        except (EOFError, OSError):
            return False
        self._pending[worker].pop(reply.request_id, None)
        events.append(reply)
        return True


def _death_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"worker killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"worker killed by signal {-exitcode}"
    return f"worker exited with code {exitcode}"


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _kill_process_group(pid: int | None) -> None:
    """End whatever the worker started in its session (sandboxes, shells, servers)."""
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
