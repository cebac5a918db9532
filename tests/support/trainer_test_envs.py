"""Two small learnable tasks for the trainer's tests, registered as
``support.trainer_test_envs:Echo-v0`` and ``support.trainer_test_envs:Lookup-v0``.

``echo``: the task names a word; ``say(word)`` with that word succeeds (one turn).
``lookup``: ``open(box)`` reveals the word hidden in a box, then ``say(word)`` (two
turns: the trainer's observation tokens get exercised). Both have experts. They are
real environments on the project's base class, small so that a 0.1M-parameter model
can learn them in seconds.
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
    string_tool,
)

WORDS = ("apple", "river", "stone", "cloud", "maple", "tiger", "ocean", "amber")
DEV_WORDS = ("apple", "ocean", "tiger")


@dataclass(frozen=True)
class WordRecord(TaskRecord):
    word: str
    box: str


def _records(split: str) -> TaskSet[WordRecord]:
    words = WORDS if split == "train" else DEV_WORDS
    return TaskSet(
        [WordRecord(f"{split}-{i}", word, f"box{i % 3}") for i, word in enumerate(words)]
    )


class EchoEnv(AgentBenchEnv[WordRecord]):
    task_id = "echo"
    tools = (string_tool("say", "Say a word.", word="the word"),)
    default_max_turns = 2

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[WordRecord]:
        return _records(split)

    def _begin_episode(self, record: WordRecord) -> str:
        return f"Say {record.word}."

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        right = call.arguments["word"] == self.record.word
        return ToolResult("right" if right else "wrong", done=True, reward=float(right))

    def _end_episode(self) -> None:
        pass

    def expert_action(self) -> dict[str, Any]:
        return {"name": "say", "arguments": {"word": self.record.word}}

    @property
    def system_prompt(self) -> str:
        return "Call say with the word."


class LookupEnv(EchoEnv):
    task_id = "lookup"
    tools = (
        string_tool("open", "Open a box.", box="the box"),
        string_tool("say", "Say a word.", word="the word"),
    )
    default_max_turns = 3

    def _begin_episode(self, record: WordRecord) -> str:
        self.opened = False
        return f"The word is in {record.box}."

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        if call.name == "open":
            self.opened = call.arguments["box"] == self.record.box
            return ToolResult(self.record.word if self.opened else "empty")
        return super()._run_tool(call)

    def expert_action(self) -> dict[str, Any]:
        if not self.opened:
            return {"name": "open", "arguments": {"box": self.record.box}}
        return super().expert_action()

    @property
    def system_prompt(self) -> str:
        return "Open the box, then say its word."


for _name, _cls in (("Echo-v0", "EchoEnv"), ("Lookup-v0", "LookupEnv")):
    if _name not in gym.registry:
        gym.register(id=_name, entry_point=f"{__name__}:{_cls}", disable_env_checker=True)
