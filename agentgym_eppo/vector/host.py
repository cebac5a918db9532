"""The code that runs inside every worker, whatever the back-end: it owns sub-envs.

A worker (the caller's own process, a subprocess or a Ray actor) holds an
:class:`EnvHost` with the sub-environments of one or more slots and answers
:class:`Request` objects with plain, picklable replies. The environments never know
which back-end runs them (PufferLib's design).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentgym_eppo.core import ABORT_PENALTY, Status


class _ExpertAction:
    """The type of :data:`EXPERT_ACTION`."""

    def __repr__(self) -> str:
        return "EXPERT_ACTION"

    def __reduce__(self) -> str:
        return "EXPERT_ACTION"  # unpickles to the module's one instance


EXPERT_ACTION = _ExpertAction()
"""An action that makes the sub-env take its expert's next action, inside the worker
(no round trip to ask for it): for scripted baselines, SFT data and benchmarks. The
action taken comes back as ``info["expert_action"]``."""


@dataclass(frozen=True)
class SubEnvSpec:
    """How to build one sub-environment: a Gymnasium id (``module:Id`` imports the
    module first, as ``gym.make`` does) or a picklable factory, plus keyword arguments.

    Not Gymnasium's ``EnvSpec`` (a registry entry): this is one slot's recipe, and is
    named apart so that the two never shadow each other in an import."""

    env_id: str | Callable[..., gym.Env[Any, Any]]
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def make(self) -> gym.Env[Any, Any]:
        if callable(self.env_id):
            return self.env_id(**dict(self.kwargs))
        return gym.make(self.env_id, **dict(self.kwargs))

    @property
    def name(self) -> str:
        return (
            self.env_id if isinstance(self.env_id, str) else getattr(self.env_id, "__name__", "env")
        )


@dataclass(frozen=True)
class Request:
    """One command for one slot's sub-env: ``reset``, ``step``, ``abort``, ``describe``,
    ``call`` (a method of ``env.unwrapped``) or ``close``."""

    slot: int
    command: str
    payload: Any = None
    request_id: int = 0


@dataclass(frozen=True)
class Reply:
    """The answer to a :class:`Request`: ``value`` on success, else ``error`` (its type
    name and message), re-raised in the caller's process."""

    slot: int
    request_id: int
    value: Any = None
    error: tuple[str, str] | None = None


class EnvHost:
    """Sub-environments of some slots, and the dispatcher of requests to them."""

    def __init__(self, specs: Mapping[int, SubEnvSpec], temp_dir: str | None = None) -> None:
        if temp_dir is not None:
            # Everything the envs put in temp files lands in a folder the vector env
            # removes, even when this worker is killed before it can clean up.
            os.environ["TMPDIR"] = temp_dir
            tempfile.tempdir = temp_dir
        self.envs: dict[int, gym.Env[Any, Any]] = {
            slot: spec.make() for slot, spec in specs.items()
        }

    def handle(self, request: Request) -> Reply:
        try:
            value = self._dispatch(request)
        except Exception as error:  # the caller re-raises it with the slot named
            return Reply(request.slot, request.request_id, error=(type(error).__name__, str(error)))
        return Reply(request.slot, request.request_id, value=value)

    def _dispatch(self, request: Request) -> Any:
        env = self.envs[request.slot]
        command, payload = request.command, request.payload
        if command == "step":
            action = payload
            if isinstance(payload, _ExpertAction):
                action = env.unwrapped.expert_action()  # type: ignore[attr-defined]
            observation, reward, terminated, truncated, info = env.step(action)
            if action is not payload:
                info = {**info, "expert_action": action}
            return observation, float(reward), bool(terminated), bool(truncated), info
        if command == "reset":
            return env.reset(**payload)
        if command == "abort":
            status, message = payload
            observation, reward, terminated, truncated, info = env.unwrapped.abort(  # type: ignore[attr-defined]
                Status(status), message
            )
            return observation, float(reward), bool(terminated), bool(truncated), info
        if command == "describe":
            return describe(env)
        if command == "call":
            name, args, kwargs = payload
            attribute = getattr(env.unwrapped, name)
            return attribute(*args, **kwargs) if callable(attribute) else attribute
        if command == "close":
            self.close_slot(request.slot)
            return None
        raise ValueError(f"unknown worker command {command!r}")

    def close_slot(self, slot: int) -> None:
        env = self.envs.pop(slot, None)
        if env is not None:
            env.close()

    def close(self) -> None:
        for slot in list(self.envs):
            self.close_slot(slot)


def describe(env: gym.Env[Any, Any]) -> dict[str, Any]:
    """What the vector env needs to know about a sub-env before its first reset."""
    unwrapped = env.unwrapped
    task_id = getattr(unwrapped, "task_id", None) or (env.spec.id if env.spec else "env")
    num_tasks = getattr(unwrapped, "num_tasks", None)
    return {
        "task_id": str(task_id),
        "num_tasks": int(num_tasks) if num_tasks is not None else None,
        "abort_penalty": float(getattr(unwrapped, "abort_penalty", ABORT_PENALTY)),
        "max_turns": getattr(unwrapped, "max_turns", None),
    }
