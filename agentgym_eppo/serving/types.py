"""OpenEnv's Action, Observation and State for the AgentBench tasks.

One action class per task (its tool names are a closed set, so ``/schema`` lists them
and a structured call to a tool the task lacks is refused before it reaches the
environment); one observation and one state class for all five.

An action carries exactly one of:

- ``text``: the model's raw reply, judged by the environment exactly as in-process
  (a Hermes ``<tool_call>`` block, bare JSON, ``Final Answer: #k`` for KG; an
  unreadable reply or an unknown tool ends the episode with ``agent_invalid_action``);
- ``tool_call``: an already-parsed ``{"name", "arguments"}`` call.

``text`` is the schema's one required field (null when ``tool_call`` is given), so a
client that sends a model's reply as "the single required field" (``verifiers``'
``openenv`` taskset) reaches the environment with any reply: prose, a ``<tool_call>``
block, malformed JSON. Such a client sends a reply that parses as a JSON call
(``{"name": ..., "arguments": ...}``) as the object itself: an object with ``name`` and
neither ``text`` nor ``tool_call`` is read as that reply's text, and a ``text`` that is
another JSON value (a number, a list, null) as its JSON text.

>>> action_class("db").model_validate(
...     {"tool_call": {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}}
... ).env_action()
{'name': 'execute_sql', 'arguments': {'query': 'SELECT 1'}}
>>> action_class("db").model_validate({"text": "Action: Answer"}).env_action()
'Action: Answer'
>>> action_class("db").model_validate({"name": "drop_everything", "arguments": {}}).env_action()
'{"name": "drop_everything", "arguments": {}}'
>>> action_class("db").model_json_schema()["required"]
['text']
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic_core import PydanticCustomError

from agentgym_eppo.core.spaces import DEFAULT_MAX_LENGTH
from agentgym_eppo.core.tools import ToolSpec
from agentgym_eppo.registration import ENVIRONMENTS

MAX_ACTION_CHARS = DEFAULT_MAX_LENGTH
"""Longest ``text`` an action may carry (the environments' action space bound): a longer
one is a validation error, the episode untouched."""


class AgentBenchAction(Action):
    """One turn of the agent: ``text`` or ``tool_call``, never both, never neither."""

    text: str | None = Field(
        max_length=MAX_ACTION_CHARS,
        description="the model's raw reply, which calls one of the tools listed in the "
        'reset observation\'s info.tools: a Hermes block <tool_call>{"name": ..., '
        '"arguments": {...}}</tool_call> or that JSON alone; null when tool_call is given',
    )
    tool_call: Any = Field(default=None, description="an already-parsed call")

    @model_validator(mode="before")
    @classmethod
    def _reply_as_text(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "text" not in data:
            if "tool_call" not in data and "name" in data:  # a reply that parsed as a call
                return {"text": json.dumps(data, ensure_ascii=False)}
            return {**data, "text": None}
        if "tool_call" not in data and not isinstance(data["text"], str):
            return {**data, "text": json.dumps(data["text"], ensure_ascii=False)}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> AgentBenchAction:
        if (self.text is None) == (self.tool_call is None):
            # a custom error, not a ValueError: OpenEnv sends the errors' details as
            # JSON, and a ValueError inside them cannot be serialised (the session dies)
            raise PydanticCustomError(
                "action_shape",
                "an action carries exactly one of 'text' (the model's raw reply) and "
                "'tool_call' ({'name': ..., 'arguments': {...}})",
            )
        return self

    def env_action(self) -> str | dict[str, Any]:
        """What the Gymnasium environment's ``step`` receives."""
        if self.text is not None:
            return self.text
        return self.tool_call.model_dump()


class AgentBenchObservation(Observation):
    """What ``reset`` and ``step`` return in-process: the text, ``info``, and the two
    ends (``done`` is ``terminated or truncated``; ``reward`` is None at reset)."""

    text: str = Field(description="the observation: the task text at reset, a tool's output after")
    info: dict[str, Any] = Field(
        default_factory=dict,
        description="the environment's info: task_id, sample_id, turn, status, and at "
        "reset tools, system_prompt, max_turns, split; at the end success and score",
    )
    terminated: bool = Field(default=False, description="the episode ended (not by the turn limit)")
    truncated: bool = Field(default=False, description="the episode hit its turn limit")


class AgentBenchState(State):
    """The session's episode: which task instance, which turn, which status."""

    task_id: str = Field(description=f"the task, one of {', '.join(ENVIRONMENTS)}")
    sample_id: str | None = Field(default=None, description="the instance; None before reset")
    split: str | None = Field(default=None, description="the episode's split")
    turn: int = Field(default=0, ge=0, description="turns taken in this episode")
    status: str | None = Field(
        default=None, description="the episode's status (running, completed, ...)"
    )


def tool_specs(task: str) -> tuple[ToolSpec, ...]:
    """The tools of a task, read from its environment class without building one."""
    if task not in ENVIRONMENTS:
        raise KeyError(f"unknown task {task!r}; available: {', '.join(ENVIRONMENTS)}")
    tools: tuple[ToolSpec, ...] = ENVIRONMENTS[task].env_class().tools
    return tools


@functools.cache
def action_class(task: str) -> type[AgentBenchAction]:
    """The action class of one task: ``tool_call.name`` is one of the task's tools."""
    names = tuple(tool.name for tool in tool_specs(task))
    title = task.upper() if len(task) <= 2 else task.capitalize()
    # types built at run time: Any, which create_model accepts and mypy cannot check
    tool_name: Any = Literal[names]
    call: type[BaseModel] = create_model(
        f"{title}ToolCall",
        __config__=ConfigDict(extra="forbid"),
        name=(tool_name, Field(description=f"one of the task's tools: {', '.join(names)}")),
        arguments=(dict[str, Any], Field(default_factory=dict)),
    )
    optional_call: Any = call | None
    return create_model(
        f"{title}Action",
        __base__=AgentBenchAction,
        tool_call=(optional_call, Field(default=None, description="an already-parsed call")),
    )
