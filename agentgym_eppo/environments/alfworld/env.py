"""``AgentBench-ALFWorld-v0``: household tasks in ALFWorld's text engine, AgentBench's rules.

The agent has one tool, ``take_action(action)``. The action is read as AgentBench reads
it (:mod:`.actions`: first line, lower-cased, snapped to the closest admissible
command); every observation ends with the commands available next. The episode is
won when the game says so (reward 1); the third identical action in a row ends it as
``agent_invalid_action`` (AgentBench checks repeats before success, so a win on that
action would not count either: it is not played); the turn limit (20, AgentBench's
function-calling setting; v0.2 used 35) truncates it.

The envs of one process share the engine's memo tables (:func:`.engine.shared_caches`):
a game is translated and parsed once per process, however many envs (vector slots, a
second evaluation) reset into it.

Example::

    import gymnasium as gym
    import agentgym_eppo

    env = gym.make("AgentBench-ALFWorld-v0", split="dev")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ...core.base_env import AgentBenchEnv, ToolResult
from ...core.errors import AgentInvalidAction, TaskFormatError
from ...core.function_calls import FunctionCall
from ...core.tasks import TaskSet
from ...core.tools import string_tool
from .actions import normalize_action, snap_action
from .engine import ALFWorldEngine, GameState, shared_caches
from .expert import HandCodedExpert
from .tasks import ALFWorldRecord, load_task_set

REPEAT_LIMIT = 3
OBSERVATION_LIMIT = 16_000
"""ALFWorld observations are never cut in AgentBench; this only bounds pathological games."""

SYSTEM_PROMPT = (
    "You are an agent in a household. You get a description of the room and a task to "
    "accomplish in it. On each turn, call take_action with exactly one action chosen from "
    "the AVAILABLE ACTIONS listed after the latest observation; the environment replies "
    "with what happened. An action that is not available is matched to the closest "
    'available one. If the environment says "Nothing happens.", the action had no effect: '
    "try another. Repeating the same action three times in a row ends the episode as a "
    "failure. Act directly and finish the task in as few turns as you can."
)


def available_actions(commands: Sequence[str]) -> str:
    """AgentBench's suffix listing the admissible commands, one per line."""
    return " AVAILABLE ACTIONS: " + "\n".join(commands) + "\n"


def first_observation(intro: str) -> str:
    """The room and task without TextWorld's ``-= Welcome ... =-`` banner, as AgentBench shows it."""
    return "\n".join(intro.split("\n\n")[1:])


def step_observation(feedback: str) -> str:
    """AgentBench's ``process_ob``: drop a leading "You arrive at loc N. " (older grammars)."""
    if feedback.startswith("You arrive at loc "):
        return feedback[feedback.find(". ") + 2 :]
    return feedback


class ALFWorldEnv(AgentBenchEnv[ALFWorldRecord]):
    """ALFWorld on alfworld's TextWorld PDDL engine, with the handcoded expert.

    ``data_dir`` (else ``$ALFWORLD_DATA``) points at the ALFWorld data when ``tasks`` is an
    AgentBench task list or when the full set should replace the shipped games.
    ``memoize=False`` runs the stock engine (same transcripts, several times slower).
    The memoized engines of all envs in a process share one set of caches per
    ``max_cached_games`` (:func:`.engine.shared_caches`), holding that many games in all:
    a game another env of the process has played resets without being translated and
    parsed again.
    """

    task_id = "alfworld"
    tools = (
        string_tool(
            "take_action",
            "Perform one action in the household, chosen from the available actions.",
            action="the action, e.g. 'go to countertop 1' or 'take mug 2 from cabinet 1'",
        ),
    )
    default_max_turns = 20

    def __init__(
        self,
        tasks: str | os.PathLike[str] | Sequence[Any] | None = None,
        split: str = "train",
        *,
        data_dir: str | os.PathLike[str] | None = None,
        memoize: bool = True,
        max_cached_games: int = 64,
        output_limit: int = OBSERVATION_LIMIT,
        **kwargs: Any,
    ) -> None:
        super().__init__(tasks, split, output_limit=output_limit, **kwargs)  # type: ignore[arg-type]
        self._data_dir = data_dir
        self._engine = ALFWorldEngine(
            memoize=memoize, caches=shared_caches(max_cached_games) if memoize else None
        )
        self._game_record: ALFWorldRecord | None = None
        self._state: GameState | None = None
        self._expert: HandCodedExpert | None = None
        self._recent_actions: list[str] = []

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    @property
    def admissible_commands(self) -> tuple[str, ...]:
        """The commands the game accepts now."""
        if self._state is None:
            raise RuntimeError("no episode yet: call reset() first")
        return self._state.admissible_commands

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[ALFWorldRecord]:
        return load_task_set(tasks, split, self._data_dir)

    def _begin_episode(self, record: ALFWorldRecord) -> str:
        if self._game_record is not record:
            game = record.load_game()
            try:
                self._engine.load(game)
            except Exception as error:
                where = record.game_file or f"shipped game {record.sample_id}"
                raise TaskFormatError(
                    f"{where}: the ALFWorld engine cannot load this game "
                    f"({type(error).__name__}: {error})"
                ) from error
            self._game_record = record
        self._state = self._engine.reset()
        seed = int(self.np_random.integers(2**31))
        self._expert = HandCodedExpert(record.task_type, record.pddl_params, seed=seed)
        self._expert.start(self._state)
        self._recent_actions = []
        return first_observation(self._state.feedback) + available_actions(
            self._state.admissible_commands
        )

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        assert self._state is not None and self._expert is not None
        action = normalize_action(str(call.arguments["action"]))
        self._recent_actions = [*self._recent_actions[-(REPEAT_LIMIT - 1) :], action]
        if len(self._recent_actions) == REPEAT_LIMIT and len(set(self._recent_actions)) == 1:
            raise AgentInvalidAction(
                f"The same action {action!r} was repeated {REPEAT_LIMIT} times in a row; "
                "the episode ends."
            )
        command = snap_action(action, self._state.admissible_commands)
        self._state = self._engine.step(command)
        info = {"command": command, "won": self._state.won}
        observation = step_observation(self._state.feedback)
        if self._state.won:
            return ToolResult(observation, done=True, reward=1.0, info=info)
        self._expert.observe(self._state, command)
        return ToolResult(
            observation + available_actions(self._state.admissible_commands), info=info
        )

    def _end_episode(self) -> None:
        self._expert = None

    def _close_backend(self) -> None:
        self._engine.close()
        self._game_record = None

    def expert_action(self) -> dict[str, Any]:
        """The handcoded expert's next command, as a ``take_action`` call."""
        if self._expert is None:
            raise RuntimeError("no running episode: call reset() first")
        return {"name": "take_action", "arguments": {"action": self._expert.next_action()}}
