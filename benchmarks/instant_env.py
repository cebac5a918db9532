"""An environment that costs nothing to step, to measure the vector env's own overhead.

Two ids (``Instant-A-v0``, ``Instant-B-v0``: two "tasks", so slots are mixed) with one
tool, ``noop``; every episode lasts ``max_turns`` (8) steps and ends by the turn limit,
so one fixed action drives every slot of every back-end with no expert in the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from agentgym_eppo.core import (
    AgentBenchEnv,
    FunctionCall,
    TaskRecord,
    TaskSet,
    ToolResult,
    ToolSpec,
)

NOOP_TEXT = '<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>'


@dataclass(frozen=True)
class InstantRecord(TaskRecord):
    pass


class InstantEnv(AgentBenchEnv[InstantRecord]):
    task_id = "instant_a"
    tools = (ToolSpec("noop", "Do nothing."),)
    default_max_turns = 8

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[InstantRecord]:
        return TaskSet([InstantRecord(f"{self.task_id}-{i}") for i in range(100)])

    def _begin_episode(self, record: InstantRecord) -> str:
        return f"Task {record.sample_id}."

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        return ToolResult("ok")

    def _end_episode(self) -> None:
        pass

    def expert_action(self) -> str:
        return NOOP_TEXT

    @property
    def system_prompt(self) -> str:
        return "Do nothing."


class InstantEnvB(InstantEnv):
    task_id = "instant_b"


IDS = (f"{__name__}:Instant-A-v0", f"{__name__}:Instant-B-v0")
for _name, _cls in (("Instant-A-v0", InstantEnv), ("Instant-B-v0", InstantEnvB)):
    if _name not in gym.registry:
        gym.register(id=_name, entry_point=f"{__name__}:{_cls.__name__}", disable_env_checker=True)
