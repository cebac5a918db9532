"""Every sub-env in the caller's process: no parallelism, no overhead, easy debugging."""

from __future__ import annotations

from collections.abc import Sequence

from ..host import EnvHost, Request, SubEnvSpec
from .base import Event, WorkerPool


class SerialPool(WorkerPool):
    """Requests run as they are submitted; replies wait in a queue for :meth:`poll`.

    A slow sub-env blocks the caller here: use a parallel back-end for heavy tasks.
    """

    name = "serial"

    def __init__(self, specs: Sequence[SubEnvSpec], envs_per_worker: int = 1) -> None:
        super().__init__(specs, envs_per_worker=max(1, len(specs)))
        self._host: EnvHost | None = None
        self._replies: list[Event] = []

    def start(self) -> None:
        # No private TMPDIR here: it would redirect the caller's own temp files.
        self._host = EnvHost(self.specs_of(0))
        for slot in range(len(self.specs)):
            reply = self._host.handle(Request(slot, "describe"))
            if reply.error is not None:
                raise RuntimeError(f"slot {slot}: {reply.error[0]}: {reply.error[1]}")
            self.descriptions[slot] = reply.value

    def submit(self, request: Request) -> None:
        if self._host is None:
            raise RuntimeError("the serial pool is closed")
        self._replies.append(self._host.handle(request))

    def poll(self, timeout: float | None = None) -> list[Event]:
        replies, self._replies = self._replies, []
        return replies

    @property
    def can_stop_workers(self) -> bool:
        return False  # every request runs to its end inside submit()

    def restart(self, worker: int) -> None:
        raise RuntimeError("a serial worker is the caller's own process and cannot be restarted")

    def close(self) -> None:
        if self._host is not None:
            self._host.close()
            self._host = None
        self._remove_temp_root()
