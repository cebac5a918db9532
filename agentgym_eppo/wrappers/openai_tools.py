"""An OpenAI-tools view of any environment: ``tools`` and ``messages`` exactly as an
OpenAI-compatible chat API takes them, so any agent framework can drive it.

>>> view = OpenAIToolsView("db")
>>> messages, tools = view.reset(index=0)
>>> reply = client.chat.completions.create(model=..., messages=messages, tools=tools)  # doctest: +SKIP
>>> messages = view.respond(reply.choices[0].message.model_dump())  # doctest: +SKIP
>>> view.done, view.reward  # doctest: +SKIP

Every ``tool_calls`` entry of an assistant message is answered by a ``tool`` message
with its ``tool_call_id`` (the API requires it). AgentBench allows one call per turn,
so the env sees the first call; the others are answered with a note and not run. A
reply without tool calls is given to the env as text (it may hold a JSON call, else it
is an invalid action) and answered with a ``user`` message.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from .session import EpisodeSession

NOT_RUN = "Not executed: only one tool call per turn is allowed; this one was ignored."


class OpenAIToolsView:
    """Messages and tools in OpenAI's chat format over one env (task id or Gymnasium id).

    ``tokenizer``: the served model's, when known; its special tokens are escaped in the
    environment's text (:class:`EpisodeSession`)."""

    def __init__(
        self, task: str, env_kwargs: Mapping[str, Any] | None = None, *, tokenizer: Any = None
    ) -> None:
        self.session = EpisodeSession(task, env_kwargs, tokenizer=tokenizer)
        self.messages: list[dict[str, Any]] = []

    @property
    def tools(self) -> list[dict[str, Any]]:
        """``[{"type": "function", "function": {"name", "description", "parameters"}}]``."""
        return self.session.tools

    @property
    def done(self) -> bool:
        return self.session.done

    @property
    def reward(self) -> float:
        return self.session.reward

    @property
    def info(self) -> dict[str, Any]:
        return self.session.info

    def reset(
        self, *, index: int | None = None, sample_id: str | None = None, seed: int | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Start an episode: ``(messages, tools)`` for the first request."""
        task_text = self.session.start(index=index, sample_id=sample_id, seed=seed)
        self.messages = [
            {"role": "system", "content": self.session.system_prompt},
            {"role": "user", "content": task_text},
        ]
        return copy.deepcopy(self.messages), self.tools

    def respond(self, assistant: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Apply the model's assistant message; returns the whole conversation so far."""
        message = _assistant_message(assistant)
        self.messages.append(message)
        calls = message.get("tool_calls") or []
        if calls:
            first = calls[0]["function"]
            observation = self.session.act(
                {"name": first["name"], "arguments": first["arguments"]}
            )[0]
            self.messages.append(
                {"role": "tool", "tool_call_id": calls[0]["id"], "content": observation}
            )
            for extra in calls[1:]:
                self.messages.append(
                    {"role": "tool", "tool_call_id": extra["id"], "content": NOT_RUN}
                )
        else:
            observation = self.session.act(message.get("content") or "")[0]
            self.messages.append({"role": "user", "content": observation})
        return copy.deepcopy(self.messages)

    def close(self) -> None:
        self.session.close()


def _assistant_message(assistant: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only the fields the API takes back, arguments as JSON strings."""
    message: dict[str, Any] = {"role": "assistant", "content": assistant.get("content")}
    calls = []
    for position, call in enumerate(assistant.get("tool_calls") or []):
        function = call.get("function", {})
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(
            {
                "id": call.get("id") or f"call_{position}",
                "type": "function",
                "function": {"name": function.get("name", ""), "arguments": arguments},
            }
        )
    if calls:
        message["tool_calls"] = calls
    return message
