"""Tool-call text formats: Hermes/Qwen JSON blocks and ReAct's ``Action: name(args)``.

The environments read JSON calls natively (``<tool_call>{...}</tool_call>`` or a bare
JSON object). A :class:`ToolCallFormat` lets a model that was prompted differently
drive them: it explains itself in a prompt (:meth:`ToolCallFormat.instructions`),
writes calls the way the model should (:meth:`ToolCallFormat.render`, for
demonstrations and SFT data), and reads calls back out of the model's text
(:meth:`ToolCallFormat.parse`). :class:`ToolCallFormatWrapper` applies one to an env.
"""

from __future__ import annotations

import abc
import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from agentgym_eppo.core import (
    FunctionCall,
    ToolCallError,
    ToolSpec,
    UnparseableCallError,
    parse_function_call,
)


def tool_specs(tools: Sequence[Mapping[str, Any]]) -> list[ToolSpec]:
    """OpenAI tool schemas back into :class:`~agentgym_eppo.core.ToolSpec` objects."""
    return [
        ToolSpec(
            tool["function"]["name"],
            tool["function"].get("description", ""),
            tool["function"].get("parameters", {"type": "object", "properties": {}}),
        )
        for tool in tools
    ]


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def _parameters(tools: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any] | None:
    """The tool's parameter schemas by name, in order; None for an unknown tool."""
    for tool in tools:
        if tool["function"]["name"] == name:
            return dict(tool["function"].get("parameters", {}).get("properties", {}))
    return None


class ToolCallFormat(abc.ABC):
    """How calls look in a model's text. ``tools`` are OpenAI schemas (``info["tools"]``)."""

    name: str
    result_role: str = "tool"
    """The chat role of a tool result in this format (``tool``, or ``user`` for text)."""

    @abc.abstractmethod
    def instructions(self, tools: Sequence[Mapping[str, Any]]) -> str:
        """Prompt text that lists the tools and says how to call one."""

    @abc.abstractmethod
    def render(self, call: Mapping[str, Any]) -> str:
        """The text a model writes for ``call`` (``{"name", "arguments"}``)."""

    @abc.abstractmethod
    def parse(self, text: str, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The call ``{"name", "arguments"}`` in ``text``; raises
        :class:`~agentgym_eppo.core.UnparseableCallError` with a hint when there is none."""


class HermesFormat(ToolCallFormat):
    """Hermes/Qwen: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

    name = "hermes"

    def instructions(self, tools: Sequence[Mapping[str, Any]]) -> str:
        listed = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
        return (
            "You may call one of these functions. Function signatures are within "
            f"<tools></tools>:\n<tools>\n{listed}\n</tools>\n\n"
            "Reply with one call as a JSON object inside <tool_call></tool_call>:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )

    def render(self, call: Mapping[str, Any]) -> str:
        return FunctionCall(call["name"], dict(call.get("arguments", {}))).to_hermes()

    def parse(self, text: str, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return parse_function_call(text, tool_specs(tools)).to_dict()


_ACTION = re.compile(r"Action:\s*([A-Za-z_][\w.-]*)\s*\((.*)\)", re.DOTALL)


class ReActFormat(ToolCallFormat):
    """ReAct text, as in AgentBench's original prompts: ``Thought: ...`` then
    ``Action: name(args)``.

    Arguments are Python-style: positional in the tool's parameter order, or
    ``key=value``; values are literals (``"text"``, ``3``, ``["a", "b"]``) or bare
    text. A tool with one string parameter takes everything between the parentheses
    (``Action: bash_action(ls -la | grep x, y)``), so shell commands and entity names
    need no quoting. The last ``Action:`` in the text counts.
    """

    name = "react"
    result_role = "user"

    def instructions(self, tools: Sequence[Mapping[str, Any]]) -> str:
        lines = []
        for tool in tools:
            function = tool["function"]
            params = ", ".join(function.get("parameters", {}).get("properties", {}))
            description = function.get("description", "")
            lines.append(
                f"- {function['name']}({params})" + (f": {description}" if description else "")
            )
        return (
            "You can use these tools:\n"
            + "\n".join(lines)
            + "\n\nAnswer in this format, one action per reply:\n"
            "Thought: what you think about the situation and what to do next\n"
            "Action: tool_name(arguments)\n"
            "The result of the action comes back as the next message."
        )

    def render(self, call: Mapping[str, Any]) -> str:
        arguments = dict(call.get("arguments", {}))
        if len(arguments) == 1:
            (value,) = arguments.values()
            rendered = value if isinstance(value, str) and ")" not in value else repr(value)
        else:
            rendered = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
        return f"Action: {call['name']}({rendered})"

    def parse(self, text: str, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        start = text.rfind("Action:")
        match = _ACTION.match(text, start) if start >= 0 else None
        if match is None:
            raise UnparseableCallError(
                "no action found; end your reply with one line 'Action: tool_name(arguments)' "
                f"using one of: {', '.join(_tool_names(tools))}"
            )
        name, inside = match.group(1), match.group(2).strip()
        parameters = _parameters(tools, name)
        if parameters is None:
            return {"name": name, "arguments": {}}  # the env names the unknown tool
        return {"name": name, "arguments": _react_arguments(inside, parameters)}


def _react_arguments(inside: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    if not inside:
        return {}
    names = list(parameters)
    parsed = _python_call_arguments(inside)
    if len(names) == 1:
        (name,) = names
        if parsed is not None and len(parsed[0]) == 1 and not parsed[1]:
            value = parsed[0][0]
            wants_text = parameters[name].get("type", "string") == "string"
            return {name: inside if wants_text and not isinstance(value, str) else value}
        if parsed is not None and not parsed[0] and set(parsed[1]) == set(names):
            return parsed[1]
        return {name: inside}
    if parsed is None:
        values = [part.strip().strip("\"'") for part in _split_top_level(inside)]
        return dict(zip(names, values, strict=False))
    positional, keywords = parsed
    return {**dict(zip(names, positional, strict=False)), **keywords}


def _python_call_arguments(inside: str) -> tuple[list[Any], dict[str, Any]] | None:
    """Literal positional and keyword arguments, or None if ``inside`` is not Python."""
    try:
        node = ast.parse(f"f({inside})", mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    try:
        positional = [ast.literal_eval(arg) for arg in node.args]
        keywords = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (ValueError, SyntaxError, TypeError):
        return None
    return positional, keywords


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


FORMATS: dict[str, ToolCallFormat] = {"hermes": HermesFormat(), "react": ReActFormat()}


def get_format(fmt: str | ToolCallFormat) -> ToolCallFormat:
    if isinstance(fmt, ToolCallFormat):
        return fmt
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(
            f"unknown tool-call format {fmt!r}; available: {', '.join(FORMATS)}"
        ) from None


class ToolCallFormatWrapper(gym.ActionWrapper[Any, Any, Any]):
    """Reads text actions in ``fmt`` into calls the env takes.

    Text that holds no call in ``fmt`` goes to the env unchanged, so the env reports it
    (or reads a JSON call in it) exactly as without the wrapper.
    """

    def __init__(self, env: gym.Env[Any, Any], fmt: str | ToolCallFormat = "react") -> None:
        super().__init__(env)
        self.format = get_format(fmt)
        self._tools: list[dict[str, Any]] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._tools = list(info.get("tools", []))
        return observation, info

    def action(self, action: Any) -> Any:
        if not isinstance(action, str):
            return action
        try:
            return self.format.parse(action, self._tools)
        except ToolCallError:
            return action
