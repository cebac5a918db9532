"""verl adapter: an agent loop whose turns are an environment's steps, and each tool of
an environment as a verl ``BaseTool``.

Two routes into verl's multi-turn rollout (``verl.experimental.agent_loop``):

- :class:`AgentGymAgentLoop` (agent name ``agentgym_agent``): one episode per sample. Each
  turn the LLM server generates from the token ids so far; the reply's text is the env's
  action (the env reads its tool call, as it reads any model's text); the observation
  goes back as a ``tool`` message through verl's Continuous Token builder (response
  mask 0). The loop ends with the episode, or when the response budget
  (``rollout.response_length``) is spent (the episode ends as ``agent_context_limit``)
  or ``multi_turn.max_assistant_turns`` is reached (``task_limit_reached``), both with
  the abort penalty. The ``AgentLoopOutput`` carries the episode's return as
  ``reward_score``, so verl's reward stage keeps it, and ``extra_fields`` the task id,
  the end status and each turn's reward (verl puts them in the batch's
  ``non_tensor_batch``). Point verl at it with
  ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` (:func:`write_verl_agent_loop_config`)
  and rows whose ``agent_name`` is ``agentgym_agent`` (:func:`verl_rows`).
- :class:`AgentGymTool`, for verl's own ``ToolAgentLoop``: verl reads tools from a YAML
  file (``class_name``, ``config``, ``tool_schema`` per tool) and, for every call the
  model makes, runs ``create``, ``execute`` and ``release`` on that tool. Our tools are
  not independent functions: all the tools of one task act on one episode. So every
  tool of a rollout shares one :class:`~agentgym_eppo.wrappers.session.EpisodeSession`,
  found by the rollout's ``request_id`` (verl passes ``agent_data``) or by
  ``create_kwargs["episode_id"]``. The first call of a rollout starts its episode on
  ``create_kwargs["task_index"]`` (put in the sample's ``tools_kwargs`` by
  :func:`verl_rows`); the episode's env is closed when it ends, or when more than
  ``max_sessions`` episodes are open (oldest first). ``execute`` returns the step's
  reward and ``{"status", "success", "done"}`` as metrics; ``calc_reward`` the
  episode's return (ending an unfinished one with the abort penalty).

Importing this module needs verl (tested with 0.9.1, which pins transformers<5.11; the
project's tests run it in a venv of its own, ``.venv-verl``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.utils.profiler import simple_timer

from agentgym_eppo.core import Status
from agentgym_eppo.wrappers.session import EpisodeSession, make_env

TOOL_CLASS = f"{__name__}.AgentGymTool"
DEFAULT_MAX_SESSIONS = 4096
AGENT_LOOP_NAME = "agentgym_agent"


@register(AGENT_LOOP_NAME)
class AgentGymAgentLoop(AgentLoopBase):
    """verl agent loop over one of our environments: each assistant turn is one env step.

    Reads the sample's ``raw_prompt`` (messages that already hold the task text, as
    :func:`verl_rows` writes them) and ``extra_info`` (``task``, ``task_index`` or
    ``sample_id``, optional ``env_kwargs``). Env resets and steps run in a worker
    thread so that slow tools (a shell command, a SQL statement) do not stall the
    other rollouts on verl's event loop.
    """

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        if not extra.get("task"):
            raise ValueError(
                "AgentGymAgentLoop needs extra_info['task'] in each sample (verl_rows writes it)"
            )
        session = await self.loop.run_in_executor(
            None,
            lambda: EpisodeSession(  # verl renders the replies with this tokenizer's template
                str(extra["task"]), extra.get("env_kwargs"), tokenizer=self.tokenizer
            ),
        )
        try:
            return await self._play(session, extra, list(kwargs["raw_prompt"]), sampling_params)
        finally:
            await self.loop.run_in_executor(None, session.close)

    async def _play(
        self,
        session: EpisodeSession,
        extra: Mapping[str, Any],
        messages: list[dict[str, Any]],
        sampling_params: dict[str, Any],
    ) -> AgentLoopOutput:
        index = extra.get("task_index")
        await self.loop.run_in_executor(
            None,
            lambda: session.start(
                index=int(index) if index is not None else None, sample_id=extra.get("sample_id")
            ),
        )
        tools = session.tools
        response_length = int(self.rollout_config.response_length)
        max_turns = self.rollout_config.multi_turn.max_assistant_turns
        request_id = uuid4().hex
        metrics: dict[str, Any] = {}
        token_ids = await self.ct_build_initial_tokens(messages, tools=tools)
        response_mask: list[int] = []
        logprobs: list[float] | None = None
        turn_rewards: list[float] = []
        while True:
            with simple_timer("generate_sequences", metrics):
                output = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=token_ids, sampling_params=sampling_params
                )
            merged, response_mask, logprobs = await self.ct_merge_assistant_token(
                token_ids,
                output.token_ids,
                response_mask,
                logprobs if (logprobs or output.log_probs) else None,
                assistant_logprobs=output.log_probs or None,
            )
            token_ids = merged.token_ids
            reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            with simple_timer("tool_calls", metrics):
                observation, reward, done, _ = await self.loop.run_in_executor(
                    None, session.act, reply
                )
            turn_rewards.append(reward)
            if done:
                break
            if max_turns and len(turn_rewards) >= max_turns:
                session.unfinished_status = Status.TASK_LIMIT_REACHED
                break
            previous = [*messages, {"role": "assistant", "content": reply}]
            messages = [*previous, {"role": "tool", "content": observation}]
            merged, response_mask, logprobs = await self.ct_merge_context_msg(
                previous, messages, token_ids, response_mask, logprobs, tools=tools
            )
            token_ids = merged.token_ids
            if len(response_mask) >= response_length:
                session.unfinished_status = Status.AGENT_CONTEXT_LIMIT
                break
        reward_score = await self.loop.run_in_executor(None, session.final_reward)
        cut = len(token_ids) - len(response_mask)
        return AgentLoopOutput(
            prompt_ids=token_ids[:cut],
            response_ids=token_ids[cut:][:response_length],
            response_mask=response_mask[:response_length],
            response_logprobs=logprobs[:response_length] if logprobs else None,
            reward_score=reward_score,
            num_turns=2 * len(turn_rewards) + 1,  # the prompt, then each reply and answer
            metrics=metrics,
            extra_fields={
                "turn_scores": turn_rewards,
                "tool_rewards": [],
                "agentgym_task": session.task_id,
                "agentgym_status": str(session.info.get("status")),
                "agentgym_success": bool(session.info.get("success", False)),
            },
        )


def verl_agent_loop_config() -> list[dict[str, str]]:
    """The content of verl's ``rollout.agent.agent_loop_config_path`` YAML, which makes
    verl's agent-loop workers (other processes) import and register the loop."""
    return [
        {
            "name": AGENT_LOOP_NAME,
            "_target_": f"{AgentGymAgentLoop.__module__}.{AgentGymAgentLoop.__qualname__}",
        }
    ]


def write_verl_agent_loop_config(path: str) -> None:
    import yaml

    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(verl_agent_loop_config(), handle, sort_keys=False)


class _SessionRegistry:
    """Open episodes by key, shared by every tool object in this process."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, EpisodeSession] = OrderedDict()
        self._lock = threading.Lock()
        self.returns: OrderedDict[str, float] = OrderedDict()
        """Returns of episodes that ended, for ``calc_reward`` after the env is closed."""

    def get(self, key: str) -> EpisodeSession | None:
        with self._lock:
            return self._sessions.get(key)

    def add(self, key: str, session: EpisodeSession, max_sessions: int) -> None:
        with self._lock:
            self._sessions[key] = session
            while len(self._sessions) > max_sessions:
                _, oldest = self._sessions.popitem(last=False)
                oldest.close()
            while len(self.returns) > max_sessions:
                self.returns.popitem(last=False)

    def close(self, key: str) -> None:
        with self._lock:
            session = self._sessions.pop(key, None)
        if session is not None:
            session.close()

    def __len__(self) -> int:
        return len(self._sessions)


SESSIONS = _SessionRegistry()


class AgentGymTool(BaseTool):
    """One tool of one task; ``config``: ``{"task": "db", "env_kwargs": {...},
    "max_sessions": 4096}``."""

    def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
        super().__init__(config, tool_schema)
        if not config.get("task"):
            raise ValueError("AgentGymTool's config needs 'task' (e.g. 'db' or 'AgentBench-DB-v0')")
        self.task = str(config["task"])
        self.env_kwargs = dict(config.get("env_kwargs") or {})
        self.max_sessions = int(config.get("max_sessions", DEFAULT_MAX_SESSIONS))
        self._instances: dict[str, dict[str, Any]] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        instance_id = instance_id or str(uuid4())
        self._instances[instance_id] = dict(kwargs.get("create_kwargs") or {})
        return instance_id, ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float, dict[str, Any]]:
        key = self._episode_key(instance_id, kwargs.get("agent_data"))
        session = SESSIONS.get(key)
        if session is None:
            session = self._start(key, self._instances.get(instance_id, {}))
        observation, reward, done, info = session.act({"name": self.name, "arguments": parameters})
        metrics = {
            "status": info.get("status"),
            "success": bool(info.get("success", False)),
            "done": done,
        }
        if done:
            SESSIONS.returns[key] = session.reward
            SESSIONS.close(key)
        return ToolResponse(text=observation), reward, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        key = self._episode_key(instance_id, kwargs.get("agent_data"))
        if key in SESSIONS.returns:
            return SESSIONS.returns[key]
        session = SESSIONS.get(key)
        return session.final_reward() if session is not None else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)

    def _episode_key(self, instance_id: str, agent_data: Any) -> str:
        request_id = getattr(agent_data, "request_id", None)
        if request_id is not None:
            return f"{self.task}:{request_id}"
        episode = self._instances.get(instance_id, {}).get("episode_id")
        return f"{self.task}:{episode if episode is not None else instance_id}"

    def _start(self, key: str, create_kwargs: Mapping[str, Any]) -> EpisodeSession:
        session = EpisodeSession(self.task, self.env_kwargs)
        index = create_kwargs.get("task_index")
        session.start(
            index=int(index) if index is not None else None,
            sample_id=create_kwargs.get("sample_id"),
        )
        SESSIONS.add(key, session, self.max_sessions)
        return session


def end_episode(task: str, episode: str) -> float:
    """End a rollout's episode (e.g. when verl's loop stops) and return its reward."""
    key = f"{task}:{episode}"
    session = SESSIONS.get(key)
    if session is None:
        return SESSIONS.returns.pop(key, 0.0)
    reward = session.final_reward()
    SESSIONS.close(key)
    return reward


def verl_tool_config(
    tasks: Sequence[str], env_kwargs: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The ``tools`` YAML content for verl's ``multi_turn.tool_config_path``."""
    env_kwargs = env_kwargs or {}
    entries = []
    for task in tasks:
        env = make_env(task, env_kwargs.get(task))
        try:
            schemas = env.unwrapped.tool_schemas  # type: ignore[attr-defined]
        finally:
            env.close()
        for schema in schemas:
            entries.append(
                {
                    "class_name": TOOL_CLASS,
                    "config": {
                        "type": "native",
                        "task": task,
                        "env_kwargs": dict(env_kwargs.get(task, {})),
                    },
                    "tool_schema": schema,
                }
            )
    return {"tools": entries}


def write_verl_tool_config(
    path: str, tasks: Sequence[str], env_kwargs: Mapping[str, Mapping[str, Any]] | None = None
) -> None:
    import yaml

    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(
            verl_tool_config(tasks, env_kwargs), handle, sort_keys=False, allow_unicode=True
        )


def verl_rows(
    task: str,
    indices: Sequence[int],
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    agent_name: str = "tool_agent",
) -> list[dict[str, Any]]:
    """verl dataset rows (``prompt``, ``data_source``, ``agent_name``, ``extra_info`` with
    ``tools_kwargs``) for instances ``indices`` of ``task``; the prompt holds the task.

    ``agent_name``: ``"tool_agent"`` (verl's ``ToolAgentLoop`` with :class:`AgentGymTool`)
    or ``"agentgym_agent"`` (:class:`AgentGymAgentLoop`)."""
    session = EpisodeSession(task, env_kwargs)
    rows = []
    try:
        tool_names = [schema["function"]["name"] for schema in session.tools]
        for index in indices:
            task_text = session.start(index=int(index))
            create = {"create_kwargs": {"task_index": int(index)}}
            rows.append(
                {
                    "data_source": f"agentgym_eppo/{session.task_id}",
                    "agent_name": agent_name,
                    "prompt": [
                        {"role": "system", "content": session.system_prompt},
                        {"role": "user", "content": task_text},
                    ],
                    "reward_model": {"style": "rule", "ground_truth": ""},
                    "extra_info": {
                        **({"env_kwargs": dict(env_kwargs)} if env_kwargs else {}),
                        "task": task,
                        "task_index": int(index),
                        "tools_kwargs": {name: create for name in tool_names},
                    },
                }
            )
    finally:
        session.close()
    return rows
