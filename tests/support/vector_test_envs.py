"""Test-only tasks for the vector env, registered as ``support.vector_test_envs:<Name>-v0``.

``gym.make("support.vector_test_envs:Guess-v0")`` imports this module first (in a worker
process too), so the ids need no registration by the caller. The tasks are tiny on
purpose; their extra tools cause the faults the vector env must survive: a slow step,
a worker that dies, and episode resources (a child process and a temp dir) that must
not outlive the episode or the worker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
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


@dataclass(frozen=True)
class WordRecord(TaskRecord):
    word: str


class GuessEnv(AgentBenchEnv[WordRecord]):
    """Guess the word: ``say(word)`` ends the episode with reward 1 when right.

    ``hold_resources=True`` starts a ``sleep`` child process and a temp dir per episode
    (both released in ``_end_episode``); their paths come back in the reset info.
    """

    task_id = "guess"
    words: tuple[str, ...] = ("alpha", "beta", "gamma")
    tools = (
        string_tool("say", "Say a word.", word="the word"),
        string_tool("wait", "Sleep for some seconds.", seconds="how long"),
        string_tool("die", "Kill the process running this env.", how="exit code"),
    )
    default_max_turns = 4

    def __init__(self, hold_resources: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hold_resources = hold_resources
        self._child: subprocess.Popen[bytes] | None = None
        self._scratch: str | None = None

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[WordRecord]:
        words = self.words if split == "train" else ("delta",)
        return TaskSet([WordRecord(f"{self.task_id}-{split}-{i}", w) for i, w in enumerate(words)])

    def _begin_episode(self, record: WordRecord) -> str:
        if self.hold_resources:
            self._scratch = tempfile.mkdtemp(prefix="guess-episode-")
            self._child = subprocess.Popen(["sleep", "300"])
        return f"Guess the word of {record.sample_id}."

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        if call.name == "wait":
            time.sleep(float(call.arguments["seconds"]))
            return ToolResult("waited")
        if call.name == "die":
            os._exit(int(call.arguments["how"]))
        word = call.arguments["word"]
        if word == self.record.word:
            return ToolResult("right", done=True, reward=1.0)
        return ToolResult(f"not {word}")

    def _end_episode(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child.wait()
            self._child = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        info["worker_pid"] = os.getpid()
        if self._child is not None:
            info["child_pid"] = self._child.pid
            info["scratch"] = self._scratch
        return observation, info

    def expert_action(self) -> dict[str, Any]:
        return {"name": "say", "arguments": {"word": self.record.word}}

    @property
    def system_prompt(self) -> str:
        return "Find the word."


class CountEnv(GuessEnv):
    """A second task with a larger dataset: say the number in words."""

    task_id = "count"
    words = ("one", "two", "three", "four", "five")
    default_max_turns = 2


for _name, _cls in (("Guess-v0", GuessEnv), ("Count-v0", CountEnv)):
    if _name not in gym.registry:
        gym.register(id=_name, entry_point=f"{__name__}:{_cls.__name__}", disable_env_checker=True)

GUESS = f"{__name__}:Guess-v0"
COUNT = f"{__name__}:Count-v0"


def say(word: str) -> dict[str, Any]:
    return {"name": "say", "arguments": {"word": word}}
