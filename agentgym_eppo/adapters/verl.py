"""verl adapter: each tool of an environment as a verl ``BaseTool``, plus its YAML.

verl's ``ToolAgentLoop`` reads tools from a YAML file (``class_name``, ``config``,
``tool_schema`` per tool) and, for every call the model makes, runs ``create``,
``execute`` and ``release`` on that tool. Our tools are not independent functions:
all the tools of one task act on one episode. So every :class:`AgentGymTool` of a
rollout shares one :class:`~agentgym_eppo.wrappers.session.EpisodeSession`, found by
the rollout's ``request_id`` (verl passes ``agent_data``) or by ``create_kwargs
["episode_id"]``. The first call of a rollout starts its episode on
``create_kwargs["task_index"]`` (put in the sample's ``tools_kwargs`` by
:func:`verl_rows`); the episode's env is closed when it ends, or when more than
``max_sessions`` episodes are open (oldest first). ``execute`` returns the step's
reward and ``{"status", "success", "done"}`` as metrics; ``calc_reward`` the
episode's return (ending an unfinished one with the abort penalty).

Without verl installed (not a dependency: it pins its own torch, vLLM/SGLang) the
class derives from a stand-in with ``BaseTool``'s interface; with verl it is a real
``verl.tools.base_tool.BaseTool`` subclass and takes verl's schema objects.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from agentgym_eppo.wrappers.session import EpisodeSession, make_env

try:
    from verl.tools.base_tool import BaseTool as _VerlBase
    from verl.tools.schemas import ToolResponse as _ToolResponse
except ImportError:

    class _VerlBase:  # type: ignore[no-redef]
        """Stand-in for ``verl.tools.base_tool.BaseTool``."""

        def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
            self.config = config
            self.tool_schema = tool_schema
            function = (
                tool_schema["function"]
                if isinstance(tool_schema, Mapping)
                else tool_schema.function
            )
            self.name = function["name"] if isinstance(function, Mapping) else function.name

    @dataclass
    class _ToolResponse:  # type: ignore[no-redef]
        """Stand-in for ``verl.tools.schemas.ToolResponse``."""

        text: str | None = None


TOOL_CLASS = f"{__name__}.AgentGymTool"
DEFAULT_MAX_SESSIONS = 4096


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


class AgentGymTool(_VerlBase):
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
        return instance_id, _ToolResponse()

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
        return _ToolResponse(text=observation), reward, metrics

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
    task: str, indices: Sequence[int], env_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """verl dataset rows (``prompt``, ``data_source``, ``agent_name``, ``extra_info`` with
    ``tools_kwargs``) for instances ``indices`` of ``task``; the prompt holds the task."""
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
                    "agent_name": "tool_agent",
                    "prompt": [
                        {"role": "system", "content": session.system_prompt},
                        {"role": "user", "content": task_text},
                    ],
                    "reward_model": {"style": "rule", "ground_truth": ""},
                    "extra_info": {
                        "task": task,
                        "task_index": int(index),
                        "tools_kwargs": {name: create for name in tool_names},
                    },
                }
            )
    finally:
        session.close()
    return rows
