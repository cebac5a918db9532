"""The environment contract, implemented once for all five tasks.

:class:`AgentBenchEnv` owns everything the tasks share: reading the tool call out of
the action, turn counting and the turn limit, the two ways of handling an invalid
call, the abort penalty on every abnormal end, output truncation, the info keys, and
picking a task instance from ``seed``/``options``. A task only says how to load its
tasks, how to start and end an episode, and what each tool does.

Episode outcomes (``reward``, ``terminated``, ``truncated``, ``info["status"]``):

==========================  ==================  ===========  ==========  =========
how the episode ends        status              reward       terminated  truncated
==========================  ==================  ===========  ==========  =========
agent submits its answer    completed           task's [0,1] True        False
turn limit                  task_limit_reached  penalty      False       True
unreadable call / unknown   agent_invalid_action penalty     True        False
bad arguments               agent_validation_failed penalty  True        False
context overflow (trainer)  agent_context_limit penalty      True        False
backend failure             task_error          penalty      True        False
==========================  ==================  ===========  ==========  =========

With ``invalid_action="feedback"`` a bad call is not an end: its error comes back as
the observation and costs a turn.
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal

import gymnasium as gym

from .errors import EpisodeEnd, TaskFormatError, ToolCallError
from .function_calls import FunctionCall, parse_function_call
from .registry import did_you_mean
from .rewards import ABORT_PENALTY
from .spaces import UnicodeText
from .statuses import Status
from .tasks import RecordT, TaskSet, check_split
from .tools import ToolSpec
from .truncation import DEFAULT_OUTPUT_LIMIT, TRUNCATION_MARKER, truncate_output

logger = logging.getLogger(__name__)

InvalidActionMode = Literal["abort", "feedback"]
StepResult = tuple[str, float, bool, bool, dict[str, Any]]


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns to the base environment.

    ``done=True`` means the agent submitted its final answer and the episode is
    ``completed`` with ``reward`` (in [0, 1]); ``score`` defaults to ``reward`` and
    ``success`` to ``reward >= 1``. ``info`` is merged into the step's info.
    """

    observation: str
    done: bool = False
    reward: float = 0.0
    score: float | None = None
    success: bool | None = None
    info: Mapping[str, Any] = field(default_factory=dict)


class AgentBenchEnv(gym.Env[str, Any], Generic[RecordT], abc.ABC):
    """Base class of every AgentBench task environment (see the module docstring).

    Examples:
        One KG episode played by the environment's own expert, then an action that is
        not a tool call (an agent status, with the abort penalty):

        >>> import gymnasium as gym
        >>> env = gym.make("agentgym_eppo:AgentBench-KG-v0", split="dev")
        >>> observation, info = env.reset(options={"index": 0})
        >>> info["task_id"], info["tools"][0]["function"]["name"]
        ('kg', 'get_relations')
        >>> done = False
        >>> while not done:
        ...     action = env.unwrapped.expert_action()
        ...     observation, reward, terminated, truncated, info = env.step(action)
        ...     done = terminated or truncated
        >>> info["status"], info["success"], reward
        ('completed', True, 1.0)
        >>> observation, info = env.reset(options={"index": 0})
        >>> observation, reward, terminated, truncated, info = env.step("hello")
        >>> reward, terminated, info["status"]
        (-0.2, True, 'agent_invalid_action')
        >>> env.close()
    """

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - gymnasium declares it a plain attribute

    task_id: ClassVar[str]
    """The task family, ``info["task_id"]``: the id it is registered under
    (:func:`agentgym_eppo.registration.register_task`)."""
    tools: ClassVar[tuple[ToolSpec, ...]]
    default_max_turns: ClassVar[int]
    truncation_marker: ClassVar[str] = TRUNCATION_MARKER

    def __init__(
        self,
        tasks: str | Sequence[Any] | None = None,
        split: str = "train",
        *,
        max_turns: int | None = None,
        invalid_action: InvalidActionMode = "abort",
        abort_penalty: float = ABORT_PENALTY,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        render_mode: str | None = None,
    ) -> None:
        if invalid_action not in ("abort", "feedback"):
            raise ValueError(
                f"invalid_action must be 'abort' or 'feedback', got {invalid_action!r}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.max_turns = int(max_turns if max_turns is not None else self.default_max_turns)
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")
        self.invalid_action: InvalidActionMode = invalid_action
        self.abort_penalty = float(abort_penalty)
        self.output_limit = int(output_limit)
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self._task_source = check_task_source(tasks)
        self._split = check_split(split)
        self._task_sets: dict[str, TaskSet[RecordT]] = {}
        self._record: RecordT | None = None
        self._episode_split = self._split
        self._turn = 0
        self._status = Status.COMPLETED
        self._transcript: list[str] = []

    # ------------------------------------------------------------------ task hooks

    @abc.abstractmethod
    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[RecordT]:
        """Load the task set: ``None`` is the shipped ``split``, else a path or records."""

    @abc.abstractmethod
    def _begin_episode(self, record: RecordT) -> str:
        """Create the episode's resources for ``record``; return the first observation."""

    @abc.abstractmethod
    def _run_tool(self, call: FunctionCall) -> ToolResult:
        """Execute one validated call. Agent mistakes are observations; abnormal ends
        raise :class:`~agentgym_eppo.core.errors.EpisodeEnd`."""

    @abc.abstractmethod
    def _end_episode(self) -> None:
        """Release the episode's resources. Called exactly once per episode, however it ends."""

    @abc.abstractmethod
    def expert_action(self) -> Any:
        """The expert's next action for the current state, in a form ``step`` accepts."""

    @property
    @abc.abstractmethod
    def system_prompt(self) -> str:
        """The task's instructions for the model (AgentBench's wording)."""

    def _parse_text_action(self, text: str) -> FunctionCall | None:
        """Task-specific plain-text forms (``Final Answer: #3``, ``search[...]``); None if absent."""
        return None

    def _close_backend(self) -> None:
        """Release resources that outlive episodes (servers, pools); called by ``close``."""

    # ------------------------------------------------------------------ public API

    @property
    def task_set(self) -> TaskSet[RecordT]:
        """The task set of the split the env was made with (``reset``'s ``split``
        option changes only that episode's)."""
        return self._tasks_for(self._split)

    @property
    def num_tasks(self) -> int:
        """How many task instances the env's split holds (``reset(options={"index": k})``)."""
        return len(self.task_set)

    @property
    def record(self) -> RecordT:
        """The current episode's task record."""
        if self._record is None:
            raise RuntimeError("no episode yet: call reset() first")
        return self._record

    @property
    def episode_split(self) -> str:
        """The split of the current (or last) episode: the env's, unless ``reset`` named one."""
        return self._episode_split

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def status(self) -> Status:
        return self._status

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function schemas (``info["tools"]``)."""
        return [tool.openai_schema() for tool in self.tools]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode and return ``(task text, info)``.

        ``options`` (see :data:`RESET_OPTIONS`) apply to this episode only: ``split``
        ("train" | "dev" | "test") picks the task set for this episode (the next reset
        without it is back on the split the env was made with), and ``sample_id`` or
        ``index`` picks the task instance in it (GRPO groups reset G envs to one
        instance); otherwise the instance is drawn from the env's seeded RNG. An
        unknown option is a ``ValueError`` that lists the known ones.
        """
        super().reset(seed=seed)
        options = check_reset_options(options)
        split = check_split(options["split"]) if "split" in options else self._split
        if self._status is Status.RUNNING:
            self._finish_episode()
        record = self._pick_record(self._tasks_for(split), options)
        self._turn = 0
        self._transcript = []
        observation = self._begin_episode(record)
        self._record = record
        self._episode_split = split
        self._status = Status.RUNNING
        self._transcript.append(observation)
        info = self._base_info()
        info.update(
            tools=self.tool_schemas,
            system_prompt=self.system_prompt,
            max_turns=self.max_turns,
            split=split,
        )
        return observation, info

    def step(self, action: Any) -> StepResult:
        """Apply one tool call; see the module docstring for every way an episode ends."""
        if self._record is None:
            raise RuntimeError("no episode has started: call reset() before step()")
        if self._status is not Status.RUNNING:
            raise RuntimeError(
                f"the episode has ended ({self._status.value}); call reset() before step()"
            )
        self._turn += 1
        try:
            call = self._parse(action)
        except ToolCallError as error:
            message = f"Invalid tool call: {error}"
            if self.invalid_action == "abort":
                return self._finish(message, error.status)
            return self._continue(message, {"invalid_action": str(error)})
        try:
            result = self._run_tool(call)
        except EpisodeEnd as end:
            return self._finish(str(end), end.status)
        except Exception as error:  # a backend bug must end the episode, not the caller
            logger.exception("%s: tool %s failed", self.task_id, call.name)
            return self._finish(f"Task error: {type(error).__name__}: {error}", Status.TASK_ERROR)
        observation = truncate_output(result.observation, self.output_limit, self.truncation_marker)
        if result.done:
            return self._complete(observation, result)
        return self._continue(observation, dict(result.info))

    def abort(self, status: Status = Status.AGENT_CONTEXT_LIMIT, message: str = "") -> StepResult:
        """End the running episode from outside (e.g. the trainer's context limit).

        Returns the same 5-tuple as ``step``, with the abort penalty.
        """
        if self._status is not Status.RUNNING or self._record is None:
            raise RuntimeError("no running episode to abort")
        if not status.is_abort:
            raise ValueError(f"abort needs an abnormal status, got {status.value}")
        return self._finish(message or f"Episode ended: {status.value}", status)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(self._transcript)
        return None

    def close(self) -> None:
        if self._status is Status.RUNNING:
            self._finish_episode()
        self._close_backend()
        super().close()

    # ------------------------------------------------------------------ internals

    def _tasks_for(self, split: str) -> TaskSet[RecordT]:
        if split not in self._task_sets:
            self._task_sets[split] = self._load_tasks(self._task_source, split)
        return self._task_sets[split]

    def _pick_record(self, tasks: TaskSet[RecordT], options: Mapping[str, Any]) -> RecordT:
        if options.get("sample_id") is not None:
            return tasks.by_sample_id(str(options["sample_id"]))
        if options.get("index") is not None:
            return tasks.by_index(int(options["index"]))
        return tasks.by_index(int(self.np_random.integers(len(tasks))))

    def _parse(self, action: Any) -> FunctionCall:
        if isinstance(action, str):
            special = self._parse_text_action(action)
            if special is not None:
                return special
        return parse_function_call(action, self.tools)

    def _base_info(self) -> dict[str, Any]:
        return step_info(self.task_id, self.record.sample_id, self._turn, self._status)

    def _continue(self, observation: str, extra: dict[str, Any]) -> StepResult:
        if self._turn >= self.max_turns:
            info = {**extra}
            return self._finish(observation, Status.TASK_LIMIT_REACHED, info)
        self._transcript.append(observation)
        info = self._base_info()
        info.update(extra)
        return observation, 0.0, False, False, info

    def _complete(self, observation: str, result: ToolResult) -> StepResult:
        self._status = Status.COMPLETED
        self._finish_episode()
        self._transcript.append(observation)
        reward = float(result.reward)
        info = self._base_info()
        info.update(result.info)
        info["success"] = bool(result.success if result.success is not None else reward >= 1.0)
        info["score"] = float(result.score if result.score is not None else reward)
        return observation, reward, True, False, info

    def _finish(
        self, observation: str, status: Status, extra: dict[str, Any] | None = None
    ) -> StepResult:
        self._status = status
        self._finish_episode()
        self._transcript.append(observation)
        info = abnormal_end_info(self.task_id, self.record.sample_id, self._turn, status, extra)
        truncated = status is Status.TASK_LIMIT_REACHED
        return observation, self.abort_penalty, not truncated, truncated, info

    def _finish_episode(self) -> None:
        if self._status is Status.RUNNING:
            self._status = Status.TASK_ERROR
        try:
            self._end_episode()
        except Exception:  # cleanup must never turn an episode end into a crash
            logger.exception("%s: releasing the episode's resources failed", self.task_id)


def step_info(task_id: str, sample_id: str | None, turn: int, status: Status) -> dict[str, Any]:
    """The keys every step's and reset's ``info`` starts with.

    >>> step_info("kg", "kg-7", 2, Status.RUNNING)
    {'task_id': 'kg', 'sample_id': 'kg-7', 'turn': 2, 'status': 'running'}
    """
    return {"task_id": task_id, "sample_id": sample_id, "turn": turn, "status": status.value}


def abnormal_end_info(
    task_id: str,
    sample_id: str | None,
    turn: int,
    status: Status,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``info`` of an episode that ended without completing: :func:`step_info`, then
    ``extra``, then ``success`` False and ``score`` 0.0 over whatever ``extra`` said.

    >>> abnormal_end_info("kg", "kg-7", 3, Status.TASK_ERROR, {"error": "lost"})
    {'task_id': 'kg', 'sample_id': 'kg-7', 'turn': 3, 'status': 'task_error', 'error': 'lost', 'success': False, 'score': 0.0}
    """
    return {
        **step_info(task_id, sample_id, turn, status),
        **(extra or {}),
        "success": False,
        "score": 0.0,
    }


RESET_OPTIONS = ("split", "index", "sample_id")
"""The keys ``AgentBenchEnv.reset`` accepts in ``options``."""


def check_reset_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` as a dict; an unknown key is a ``ValueError`` naming the known ones.

    Silently ignoring a misspelt key (``idx``) would run some other task instance.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"reset options must be a dict, got {type(options).__name__}")
    unknown = [key for key in options if key not in RESET_OPTIONS]
    if unknown:
        key = unknown[0]
        raise ValueError(
            f"unknown reset option {key!r}{did_you_mean(key, RESET_OPTIONS)}; "
            f"known options: {', '.join(RESET_OPTIONS)}"
        )
    return dict(options)


def check_task_source(tasks: Any) -> Any:
    """A ``tasks=`` path must exist now, not at the first ``reset``."""
    if isinstance(tasks, (str, os.PathLike)) and not Path(tasks).exists():
        raise TaskFormatError(
            f"tasks={str(tasks)!r}: no such file or folder; pass a task file or folder, "
            "a list of task records, or None for the shipped tasks"
        )
    return tasks
