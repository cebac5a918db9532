"""The five tasks as a ``verifiers`` v1 taskset (``verifiers`` 0.4), no server in between.

``vf-eval agentgym-eppo-verifiers`` finds it by name: ``verifiers`` imports a taskset id
as a top-level module (``-`` read as ``_``), and :mod:`agentgym_eppo_verifiers` exports
the classes of this module. It brings its own pieces, each the one of its kind that the
module exports, so ``verifiers`` takes them as the taskset's defaults:

- :class:`AgentBenchTaskset`: one :class:`AgentBenchTask` per instance (task, split,
  index) of the tasks named in :class:`AgentBenchTasksetConfig`, carrying the env's
  system prompt and its tools as OpenAI function schemas. Loading it builds each task's
  env once, to read those and the instance count, and closes it: it starts no sandbox
  (the OS env is made with ``prestart=False``) and holds nothing.
- :class:`AgentBenchEnv`: its ``run`` builds one env per rollout, in-process, and plays
  it turn by turn as the model's user: the reset's task text opens the exchange, each
  reply is one step, each observation the next turn (a ``tool`` message answering a
  native tool call, a ``user`` message after a text reply). Every blocking env call
  runs in the env's own worker thread (:class:`EnvThread`); at most ``max_envs`` envs
  are alive at once. The env is
  closed on every path (the episode's end, an error, a cancellation, a timeout); a call
  in flight when the rollout is cancelled finishes first, then the env is closed.
- :class:`ToolCallHarness`: the model's side of a turn, in-process: one chat completion
  through ``verifiers``' interception endpoint, the task's tools offered as ``tools``.
  Any other harness works too (the ``null`` harness offers no tools: the model then
  writes its call as text, which the env reads as in-process).

The reward is the episode's return as in-process (the abort penalty included: a reply
the env cannot read, an unknown tool, or an exchange that ends before the episode does
scores like in-process), recorded by the task's ``@vf.reward``; ``success`` and the
AgentBench status (``status_<status>``: 1.0) are its metrics.

>>> config = AgentBenchTasksetConfig(tasks=["db", "kg"], split="dev")
>>> (config.tasks, config.split)
(['db', 'kg'], 'dev')
>>> try:
...     AgentBenchTasksetConfig(tasks=["webshops"])
... except ValueError as error:
...     print(error.errors()[0]["msg"])
Value error, tasks: unknown task 'webshops' (did you mean 'webshop'?); known: alfworld, db, kg, os, webshop
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
import verifiers.v1 as vf
from pydantic import Field, field_validator
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.utils.aio import run_shielded

from agentgym_eppo.core.tasks import check_split
from agentgym_eppo.registration import ENVIRONMENTS, TASK_IDS
from agentgym_eppo.wrappers.openai_tools import NOT_RUN
from agentgym_eppo.wrappers.session import EpisodeSession, make_env

__all__ = [
    "AgentBenchData",
    "AgentBenchEnv",
    "AgentBenchEnvConfig",
    "AgentBenchTask",
    "AgentBenchTaskset",
    "AgentBenchTasksetConfig",
    "ToolCallHarness",
    "ToolCallHarnessConfig",
]

ROLLOUT_ENV_KWARGS: dict[str, dict[str, Any]] = {"os": {"prestart": False}}
"""``gym.make`` keywords each rollout's env gets unless the config sets them: a rollout
plays one episode, so an OS env started ahead for a next one would be a sandbox held for
nothing."""

T = TypeVar("T")


class AgentBenchTasksetConfig(vf.TasksetConfig):
    """Which instances the taskset holds (``--env.taskset.*``, or ``[env.taskset]``)."""

    tasks: list[str] = Field(default_factory=lambda: list(TASK_IDS))
    """The tasks; by default every task the package registers, in AgentBench's order."""
    split: str = "dev"
    """The split every task's instances come from: train, dev or test."""
    env_kwargs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """``gym.make`` keywords per task (``{"db": {"db_url": ...}}``), for every env the
    taskset and its rollouts build."""

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, tasks: list[str]) -> list[str]:
        for task in tasks:
            ENVIRONMENTS.lookup(task, "tasks")
        return tasks

    @field_validator("split")
    @classmethod
    def _known_split(cls, split: str) -> str:
        return check_split(split)

    def gym_kwargs(self, task: str) -> dict[str, Any]:
        """What ``gym.make`` gets for ``task``'s envs."""
        return {
            **ROLLOUT_ENV_KWARGS.get(task, {}),
            "split": self.split,
            **self.env_kwargs.get(task, {}),
        }


class AgentBenchData(vf.TaskData):
    """One instance: ``task``, ``split`` and ``index`` pick it; ``tools`` are the env's
    OpenAI function schemas (``system_prompt`` is the env's)."""

    task: str
    split: str
    index: int
    tools: list[dict[str, Any]]
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """What ``gym.make`` gets for this instance's env."""


class AgentBenchTask(vf.Task[AgentBenchData]):
    """Scored from the episode :class:`AgentBenchEnv` played (``trace.info["agentbench"]``)."""

    @vf.reward
    async def agentbench_reward(self, trace: vf.Trace) -> float:
        """The episode's return, as in-process (abort penalty included)."""
        return float(_episode(trace)["reward"])

    @vf.metric
    async def success(self, trace: vf.Trace) -> float:
        return 1.0 if _episode(trace)["success"] else 0.0

    @vf.metric
    async def agentbench_status(self, trace: vf.Trace) -> dict[str, float]:
        """``status_<status>``: 1.0, the episode's AgentBench status (completed,
        agent_invalid_action, task_limit_reached, ...); averaged over rollouts, the
        share of each."""
        return {f"status_{_episode(trace)['status']}": 1.0}

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        return float(_episode(trace)["turns"])


def _episode(trace: vf.Trace) -> dict[str, Any]:
    try:
        episode: dict[str, Any] = trace.info["agentbench"]
    except KeyError:
        raise ValueError(
            "the trace has no AgentBench episode (trace.info['agentbench']): score "
            "AgentBenchTask rollouts with AgentBenchEnv, which plays the episode"
        ) from None
    return episode


class AgentBenchTaskset(vf.Taskset[AgentBenchTask, AgentBenchTasksetConfig]):
    """Every instance of the configured tasks in the configured split."""

    def load(self) -> Iterator[AgentBenchTask]:
        config = self.config
        for task in config.tasks:
            kwargs = config.gym_kwargs(task)
            env = make_env(task, kwargs)
            try:
                unwrapped: Any = env.unwrapped
                system_prompt = str(unwrapped.system_prompt)
                tools = list(unwrapped.tool_schemas)
                count = int(unwrapped.num_tasks)
            finally:
                env.close()
            for index in range(count):
                name = f"{task}/{config.split}/{index}"
                yield AgentBenchTask(
                    AgentBenchData(
                        id=name,
                        name=name,
                        system_prompt=system_prompt,
                        task=task,
                        split=config.split,
                        index=index,
                        tools=tools,
                        env_kwargs=kwargs,
                    ),
                    config.task,
                )


class AgentBenchEnvConfig(vf.EnvConfig):
    """The player, on the local ``subprocess`` runtime by default (``verifiers``' own
    default is Prime's cloud runtime); its harness defaults to :class:`ToolCallHarness`."""

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    max_envs: int = Field(8, ge=1)
    """Envs alive at once, across this process's rollouts (each holds its sandbox,
    database, store or game while it plays); further rollouts wait for a free one."""


class AgentBenchEnv(vf.Env[AgentBenchEnvConfig]):
    """Plays one AgentBench episode per rollout, the env in-process as the model's user."""

    _envs: asyncio.Semaphore | None = None

    async def start(self) -> None:
        self._envs = asyncio.Semaphore(self.config.max_envs)

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        if not isinstance(task, AgentBenchTask):
            raise TypeError(f"AgentBenchEnv plays AgentBenchTask, got {type(task).__name__}")
        if self._envs is None:
            self._envs = asyncio.Semaphore(self.config.max_envs)
        async with self._envs:
            thread = EnvThread()
            sessions: list[EpisodeSession] = []
            try:
                await thread.run(_open, sessions, task.data)
                await _play(thread, sessions[0], task, agents)
            finally:
                try:
                    for session in sessions:
                        await thread.run(session.close)
                finally:
                    thread.shutdown()


def _open(sessions: list[EpisodeSession], data: AgentBenchData) -> None:
    # appended in the thread: a rollout cancelled while its env is being built still
    # finds it to close
    sessions.append(EpisodeSession(data.task, data.env_kwargs))


class EnvThread:
    """One env's blocking calls, each in the same worker thread of its own (an env may be
    bound to the thread that built it: the DB env's SQLite connection is), off the event
    loop. A call runs to its end even if the rollout is cancelled meanwhile (the
    cancellation is raised after), so the env is never closed under a call."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentbench-env")

    async def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, functools.partial(call, *args, **kwargs))
        result: T = await run_shielded(future)
        return result

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False)


async def _play(
    thread: EnvThread, session: EpisodeSession, task: AgentBenchTask, agents: vf.Agents
) -> None:
    data = task.data
    text = await thread.run(session.start, index=data.index)
    async with agents.player.interaction(task) as interaction:
        segment = await interaction.turn(text)
        while not segment.terminated and not session.done:
            action, answer = _action(segment)
            observation, _, done, _ = await thread.run(session.act, action)
            if done:
                break
            segment = await interaction.turn(answer(observation))
        # an exchange that ended first (a harness limit, a failed model call) is an
        # abnormal end, scored with the abort penalty as in-process
        reward = await thread.run(session.final_reward)
        interaction.trace.info["agentbench"] = {
            "task": data.task,
            "split": data.split,
            "index": data.index,
            "sample_id": session.info.get("sample_id"),
            "status": session.info.get("status"),
            "success": bool(session.info.get("success", False)),
            "turns": session.turns,
            "reward": reward,
        }


def _action(segment: vf.Segment) -> tuple[Any, Callable[[str], Any]]:
    """The env's action in the segment's reply, and how to answer it with an observation:
    the first native tool call (a ``tool`` message answers each call; AgentBench runs one
    per turn), else the reply's text (a ``user`` message)."""
    reply = next(
        (message for message in reversed(segment.messages) if message.role == "assistant"),
        None,
    )
    calls = getattr(reply, "tool_calls", None) or []
    if not calls:
        return segment.last_reply, lambda observation: observation
    first = calls[0]

    def answer(observation: str) -> list[vf.ToolMessage]:
        return [vf.ToolMessage(tool_call_id=first.id, name=first.name, content=observation)] + [
            vf.ToolMessage(tool_call_id=call.id, name=call.name, content=NOT_RUN)
            for call in calls[1:]
        ]

    return {"name": first.name, "arguments": first.arguments}, answer


class ToolCallHarnessConfig(vf.HarnessConfig):
    """:class:`ToolCallHarness`'s knobs."""

    request_timeout_s: float = Field(600.0, gt=0)
    """Seconds one chat completion may take (through the interception endpoint)."""


class ToolCallHarness(vf.Harness[ToolCallHarnessConfig]):
    """One chat completion per segment, in-process, with the task's ``tools`` offered as
    OpenAI function tools (``verifiers``' "a harness may run its loop in-process": the
    call goes through the rollout's interception endpoint, which records it).

    A segment ends at the model's reply, tool calls and all: the caller (the env) runs the
    calls and answers them in the next turn. Tasks without ``tools`` get none offered."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        system_prompt, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = []
        if system_prompt:
            messages.append({"role": "system", "content": system_prompt})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt:
            messages.extend(message_to_wire(message) for message in prompt)
        body: dict[str, Any] = {"model": ctx.model, "messages": messages}
        tools = getattr(data, "tools", None)
        if tools:
            body["tools"] = tools
        async with httpx.AsyncClient(timeout=self.config.request_timeout_s) as client:
            response = await client.post(
                f"{endpoint.rstrip('/')}/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {secret}"},
            )
        if response.status_code != 200:
            return vf.ProgramResult(
                exit_code=1,
                stdout="",
                stderr=f"chat completion answered {response.status_code}: {response.text[-2000:]}",
            )
        return vf.ProgramResult(exit_code=0, stdout=json.dumps(response.json())[-2000:], stderr="")
