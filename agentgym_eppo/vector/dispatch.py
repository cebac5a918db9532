"""The dispatcher of a :class:`~agentgym_eppo.vector.MultiTaskVectorEnv`: it sends the
slots' requests to the worker pool and turns what comes back into outcomes.

Steps and aborts are submitted and collected apart (fast slots need not wait for slow
ones); resets and calls are exchanged whole (:meth:`Dispatcher.exchange`). Meanwhile the
dispatcher keeps two promises:

* A worker that dies ends the episodes it ran as ``task_error`` (the slot's abort
  penalty, ``terminated``) with ``info["worker_restarted"]``, ``info["error"]`` and
  ``info["trajectory"]``, the episode so far; the worker is restarted. A slot whose
  episode was not being stepped when it died ends so at its next step or abort.
* A step or abort still unanswered ``step_timeout`` seconds after its submission ends
  its slot's episode the same way, ``info["error"]`` naming the deadline: its worker is
  stopped (and so lost) while the other workers' slots go on. A pool whose workers run
  in the caller's own process cannot stop one, so there no deadline applies.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym_eppo.core import Status
from agentgym_eppo.core.base_env import abnormal_end_info

from .host import Reply, Request
from .outcome import StepOutcome
from .workers import WorkerError, WorkerLost, WorkerPool


@dataclass
class Slot:
    """What the vector env knows about one slot between calls."""

    index: int
    task_id: str
    group: int
    abort_penalty: float
    running: bool = False
    episodes: int = 0
    sample_id: str | None = None
    group_key: str | None = None
    turn: int = 0
    observation: str = ""
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    lost_reason: str | None = None


class Dispatcher:
    """Requests to ``pool`` for ``slots`` (whose state it updates as replies arrive).

    Args:
        pool: the started worker back-end.
        slots: every slot, by index.
        names: each slot's sub-env name, for error messages.
        step_timeout: seconds a step or abort may stay unanswered (None: no deadline).
    """

    def __init__(
        self,
        pool: WorkerPool,
        slots: Sequence[Slot],
        names: Sequence[str],
        step_timeout: float | None,
    ) -> None:
        self.pool = pool
        self.slots = slots
        self.names = names
        self.step_timeout = step_timeout
        self._request_ids = itertools.count(1)
        self._in_flight: dict[int, tuple[Request, Any]] = {}
        """Submitted steps and aborts by request id: the request and the action."""
        self._deadlines: dict[int, float] = {}
        """When each submitted step or abort (by request id) must have been answered."""
        self._overdue: dict[int, str] = {}
        """Workers stopped for an overdue request: the reason their loss will carry."""
        self._ready: dict[int, StepOutcome] = {}
        """Finished steps by slot, not yet handed to the caller."""

    def request(self, slot: int, command: str, payload: Any) -> Request:
        """A request with an id of its own."""
        return Request(slot, command, payload, next(self._request_ids))

    def in_flight_slots(self) -> set[int]:
        """The slots with a submitted step or abort not yet answered."""
        return {request.slot for request, _ in self._in_flight.values()}

    # ------------------------------------------------------------------ steps and aborts

    def submit_step(self, index: int, action: Any) -> None:
        """Start stepping a running slot (one whose worker was lost ends at once)."""
        slot = self.slots[index]
        if slot.lost_reason is not None:
            self._ready[index] = self._lost_outcome(slot, action, slot.lost_reason)
            return
        self._submit(self.request(index, "step", action), action)

    def submit_abort(self, index: int, status: Status, message: str) -> None:
        """Start ending a running slot's episode with ``status``."""
        slot = self.slots[index]
        if slot.lost_reason is not None:
            self._ready[index] = self._lost_outcome(slot, None, slot.lost_reason)
            return
        request = self.request(index, "abort", (status.value, message))
        self._submit(request, {"abort": status.value})

    def collect(self, timeout: float | None = None) -> list[StepOutcome]:
        """Outcomes of submitted steps that have finished, waiting up to ``timeout``
        seconds (``None``: until at least one) when none has."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self._ready and self._in_flight:
            # A pump may return empty-handed when a deadline passes; the loss it caused
            # arrives on the next one, still within the caller's wait.
            self._pump(None if end is None else max(0.0, end - time.monotonic()))
            if end is not None and time.monotonic() >= end:
                break
        outcomes = sorted(self._ready.values(), key=lambda o: o.index)
        self._ready.clear()
        return outcomes

    def collect_all(self, indices: Sequence[int]) -> list[StepOutcome]:
        """The outcomes of the named slots' submitted steps, in ``indices`` order."""
        wanted = set(indices)
        while not wanted.issubset(self._ready):
            self._pump(None)
        return [self._ready.pop(index) for index in indices]

    # ------------------------------------------------------------------ resets and calls

    def exchange(self, requests: Sequence[Request], *, retry_lost: bool = False) -> dict[int, Any]:
        """Submit requests outside the step machinery (reset, call) and wait for their
        values, by request id. A request whose worker dies is sent once more to its
        replacement with ``retry_lost``, else it is a :class:`WorkerError`."""
        for request in requests:
            self.pool.submit(request)
        waiting = {request.request_id: request for request in requests}
        values: dict[int, Any] = {}
        retried: set[int] = set()
        while waiting:
            events = self.pool.poll(self._wait_bound(None))
            self._stop_overdue()  # a step submitted earlier may stall meanwhile
            for event in events:
                if isinstance(event, WorkerLost):
                    resend = [r for r in event.requests if r.request_id in waiting]
                    self._on_worker_lost(event)
                    for request in resend:
                        if not retry_lost or request.request_id in retried:
                            raise WorkerError(
                                f"slot {request.slot}: {event.reason} during {request.command}"
                            )
                        retried.add(request.request_id)
                        self.pool.submit(request)
                    continue
                if event.request_id in waiting:
                    request = waiting.pop(event.request_id)
                    if event.error is not None:
                        raise self._request_error(request, event.error)
                    values[event.request_id] = event.value
                else:
                    self._on_step_reply(event)
        return values

    # ------------------------------------------------------------------ internals

    def _submit(self, request: Request, action: Any) -> None:
        self._in_flight[request.request_id] = (request, action)
        if self.step_timeout is not None and self.pool.can_stop_workers:
            self._deadlines[request.request_id] = time.monotonic() + self.step_timeout
        self.pool.submit(request)

    def _pump(self, timeout: float | None) -> None:
        """Turn whatever the pool has delivered into outcomes in ``self._ready``; wait
        no longer than the next step deadline, and stop the workers past theirs."""
        for event in self.pool.poll(self._wait_bound(timeout)):
            if isinstance(event, WorkerLost):
                self._on_worker_lost(event)
                continue
            self._on_step_reply(event)
        self._stop_overdue()

    def _wait_bound(self, timeout: float | None) -> float | None:
        pending = [
            deadline
            for request_id, deadline in self._deadlines.items()
            if self.pool.worker_of(self._in_flight[request_id][0].slot) not in self._overdue
        ]
        if not pending:
            return timeout
        until = max(0.0, min(pending) - time.monotonic())
        return until if timeout is None else min(timeout, until)

    def _stop_overdue(self) -> None:
        now = time.monotonic()
        for request_id, deadline in list(self._deadlines.items()):
            if deadline > now:
                continue
            request = self._in_flight[request_id][0]
            worker = self.pool.worker_of(request.slot)
            if worker in self._overdue:
                continue
            assert self.step_timeout is not None
            self._overdue[worker] = (
                f"slot {request.slot}'s {request.command} did not finish within the "
                f"step_timeout of {self.step_timeout:g} s"
            )
            self.pool.stop_overdue(worker)

    def _forget(self, request_id: int) -> tuple[Request, Any] | None:
        self._deadlines.pop(request_id, None)
        return self._in_flight.pop(request_id, None)

    def _on_step_reply(self, reply: Reply) -> None:
        entry = self._forget(reply.request_id)
        if entry is None:
            return
        request, action = entry
        if reply.error is not None:
            self.slots[request.slot].running = False
            raise self._request_error(request, reply.error)
        self._ready[request.slot] = self._record_step(request.slot, action, reply.value)

    def _request_error(self, request: Request, error: tuple[str, str]) -> WorkerError:
        return WorkerError(
            f"slot {request.slot} ({self.names[request.slot]}) failed to "
            f"{request.command}: {error[0]}: {error[1]}"
        )

    def _record_step(self, index: int, action: Any, value: Any) -> StepOutcome:
        observation, reward, terminated, truncated, info = value
        slot = self.slots[index]
        info = {**info, "group": slot.group_key}
        if "expert_action" in info:
            action = info["expert_action"]
        slot.turn = int(info.get("turn", slot.turn + 1))
        slot.observation = observation
        slot.trajectory.append(
            {
                "action": action,
                "observation": observation,
                "reward": reward,
                "status": info.get("status"),
            }
        )
        if terminated or truncated:
            slot.running = False
        return StepOutcome(index, observation, reward, terminated, truncated, info)

    def _on_worker_lost(self, lost: WorkerLost) -> None:
        hosted = self.pool.worker_slots[lost.worker]
        lost_requests = {request.slot: request for request in lost.requests}
        reason = self._overdue.pop(lost.worker, lost.reason)
        for index in hosted:
            slot = self.slots[index]
            request = lost_requests.get(index)
            entry = self._forget(request.request_id) if request else None
            if entry is not None and request is not None and request.command in ("step", "abort"):
                self._ready[index] = self._lost_outcome(slot, entry[1], reason)
            elif slot.running:
                slot.lost_reason = reason  # ends as task_error at its next step
        self.pool.restart(lost.worker)

    def _lost_outcome(self, slot: Slot, action: Any, reason: str) -> StepOutcome:
        slot.turn += 1
        slot.running, slot.lost_reason = False, None
        observation = (
            f"Task error: {reason}; the episode was lost with its worker, which was restarted."
        )
        slot.trajectory.append(
            {
                "action": action,
                "observation": observation,
                "reward": slot.abort_penalty,
                "status": Status.TASK_ERROR.value,
            }
        )
        slot.observation = observation
        info = abnormal_end_info(
            slot.task_id,
            slot.sample_id,
            slot.turn,
            Status.TASK_ERROR,
            {
                "group": slot.group_key,
                "worker_restarted": True,
                "error": reason,
                "trajectory": [dict(entry) for entry in slot.trajectory],
            },
        )
        return StepOutcome(slot.index, observation, slot.abort_penalty, True, False, info)
