"""A minimal task ("say the secret word") that pins the base environment's contract.

It exists for tests of shared machinery (the base class, the parser fuzzing, the vector
env) where a real task would only add noise; it is not a mock of any real task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentgym_eppo.core import (
    AgentBenchEnv,
    AgentValidationFailed,
    FunctionCall,
    TaskRecord,
    TaskSet,
    ToolResult,
    string_tool,
)


@dataclass(frozen=True)
class SecretRecord(TaskRecord):
    secret: str


class SecretEnv(AgentBenchEnv[SecretRecord]):
    task_id = "secret"
    tools = (
        string_tool("say", "Say a word.", word="the word"),
        string_tool("peek", "Peek at a slot.", slot="#k"),
        string_tool("crash", "Break the backend.", why="reason"),
    )
    default_max_turns = 3

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ended = 0

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[SecretRecord]:
        words = ["alpha", "beta", "gamma"] if split == "train" else ["delta"]
        return TaskSet([SecretRecord(f"{split}-{i}", w) for i, w in enumerate(words)])

    def _begin_episode(self, record: SecretRecord) -> str:
        return f"Guess the word of {record.sample_id}."

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        if call.name == "peek":
            raise AgentValidationFailed(f"no slot {call.arguments['slot']}")
        if call.name == "crash":
            raise ConnectionError("backend went away")
        word = call.arguments["word"]
        if word == "long":
            return ToolResult("x" * 5000)
        if word == self.record.secret:
            return ToolResult("right", done=True, reward=1.0)
        return ToolResult(f"not {word}")

    def _end_episode(self) -> None:
        self.ended += 1

    def expert_action(self) -> dict[str, Any]:
        return {"name": "say", "arguments": {"word": self.record.secret}}

    @property
    def system_prompt(self) -> str:
        return "Find the secret word."
