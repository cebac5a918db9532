"""Observations as chat message lists, ready for a chat template or a chat API.

:class:`ChatHistory` keeps the whole conversation of an episode: AgentBench's system
prompt, the task as the user's message, each assistant reply, and each tool result
(as a ``tool`` message answering the call, or a ``user`` message in text formats such
as ReAct). ``info["tools"]`` carries the OpenAI schemas for the template.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from gymnasium.spaces import Space

from agentgym_eppo.core import ToolCallError

from .formats import ToolCallFormat, get_format
from .prompts import agentbench_messages

Message = dict[str, Any]


class MessageList(Space[list[Message]]):
    """A list of chat messages, each a dict with a string ``role`` and ``content``."""

    def __init__(self) -> None:
        super().__init__()

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content", ""), (str, type(None)))
            for m in x
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        return [{"role": "user", "content": ""}]

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageList)

    def __hash__(self) -> int:
        return hash(MessageList)


class ChatHistory(gym.Wrapper[Any, Any, Any, Any]):
    """Observations become the episode's message list.

    Actions may be the assistant's text, an OpenAI assistant message (``{"role":
    "assistant", "content", "tool_calls"}``) or a parsed call. ``fmt`` (``"react"``...)
    puts the tool instructions into the system prompt and reads calls from text in that
    format; ``fmt=None`` is function calling (tools go to the template via ``info``).
    """

    def __init__(self, env: gym.Env[Any, Any], fmt: str | ToolCallFormat | None = None) -> None:
        super().__init__(env)
        self.format = get_format(fmt) if fmt is not None else None
        self.observation_space = MessageList()
        self.messages: list[Message] = []
        self._tools: list[dict[str, Any]] = []
        self._calls = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._tools = list(info.get("tools", []))
        self._calls = 0
        self.messages = agentbench_messages(observation, info, self.format)
        return copy.deepcopy(self.messages), info

    def step(self, action: Any) -> tuple[list[Message], Any, bool, bool, dict[str, Any]]:
        message, env_action = self._assistant_message(action)
        self.messages.append(message)
        observation, reward, terminated, truncated, info = self.env.step(env_action)
        self.messages.append(self._result_message(message, observation))
        return copy.deepcopy(self.messages), reward, terminated, truncated, info

    def _result_message(self, assistant: Message, observation: str) -> Message:
        calls = assistant.get("tool_calls") or []
        if calls:
            first = calls[0]
            return {
                "role": "tool",
                "tool_call_id": first.get("id", ""),
                "name": first.get("function", first).get("name", ""),
                "content": observation,
            }
        role = self.format.result_role if self.format is not None else "tool"
        return {"role": role, "content": observation}

    def _assistant_message(self, action: Any) -> tuple[Message, Any]:
        """The assistant message to record, and what to hand the env."""
        if isinstance(action, Mapping) and action.get("role") == "assistant":
            return dict(action), dict(action)
        if isinstance(action, str):
            if self.format is not None:
                try:
                    return {"role": "assistant", "content": action}, self.format.parse(
                        action, self._tools
                    )
                except ToolCallError:  # the env reports the unreadable call itself
                    return {"role": "assistant", "content": action}, action
            return {"role": "assistant", "content": action}, action
        if isinstance(action, Mapping) and "name" in action:
            self._calls += 1
            call = {
                "id": f"call_{self._calls}",
                "type": "function",
                "function": {
                    "name": action["name"],
                    "arguments": json.dumps(action.get("arguments", {}), ensure_ascii=False),
                },
            }
            return {"role": "assistant", "content": "", "tool_calls": [call]}, dict(action)
        return {"role": "assistant", "content": str(action)}, action
