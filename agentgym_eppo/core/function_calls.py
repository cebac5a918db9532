"""Read one tool call out of whatever a model (or a library) hands to ``step``.

Accepted forms, in the order they are tried:

* an already-parsed call: ``{"name": ..., "arguments": {...} | "<json>"}``;
* an OpenAI ``tool_calls`` entry ``{"type": "function", "function": {...}}``, or an
  assistant message ``{"role": "assistant", "tool_calls": [entry]}``;
* text with a Hermes/Qwen block ``<tool_call>{...}</tool_call>``;
* text holding a bare JSON object ``{"name": ..., "arguments": ...}`` (possibly inside
  a fenced code block, possibly after some reasoning).

Exactly one call per turn: several calls in one message are an error, as in
AgentBench's function-calling mode. Every failure raises a subclass of
:class:`~agentgym_eppo.core.errors.ToolCallError` whose message tells the model what
to send instead.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgumentsError, ToolCallError, UnknownToolError, UnparseableCallError
from .tools import ToolSpec

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_MAX_JSON_CANDIDATES = 64


@dataclass(frozen=True)
class FunctionCall:
    """A validated call of one tool."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments)}

    def to_hermes(self) -> str:
        """The call as Hermes/Qwen text, the form chat templates with tools produce."""
        return "<tool_call>\n" + json.dumps(self.to_dict(), ensure_ascii=False) + "\n</tool_call>"


def parse_function_call(action: Any, tools: Sequence[ToolSpec]) -> FunctionCall:
    """Turn ``action`` into a :class:`FunctionCall` of one of ``tools``, validated.

    Raises :class:`UnparseableCallError`, :class:`UnknownToolError` or
    :class:`InvalidArgumentsError`; never anything else.
    """
    try:
        raw = _extract_raw_call(action)
    except RecursionError:
        raise UnparseableCallError("the tool call is nested too deeply to read") from None
    except ToolCallError:
        raise
    except ValueError as error:  # e.g. Python's int-string limit inside the decoder
        raise UnparseableCallError(_unreadable_value(error)) from None
    return validate_call(raw, tools)


def validate_call(raw: Mapping[str, Any], tools: Sequence[ToolSpec]) -> FunctionCall:
    """Check a ``{"name", "arguments"}`` mapping against ``tools`` and return the call.

    Raises :class:`ToolCallError` subclasses only: an argument Python cannot even
    print (an integer past the int-string limit handed over as a dict) is an invalid
    argument too.
    """
    try:
        return _validate_call(raw, tools)
    except ToolCallError:
        raise
    except ValueError as error:
        raise InvalidArgumentsError(_unreadable_value(error)) from None


def _validate_call(raw: Mapping[str, Any], tools: Sequence[ToolSpec]) -> FunctionCall:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise UnparseableCallError(
            'a tool call needs a "name" string, e.g. {"name": "'
            + (tools[0].name if tools else "tool")
            + '", "arguments": {...}}'
        )
    by_name = {tool.name: tool for tool in tools}
    spec = by_name.get(name)
    if spec is None:
        available = ", ".join(by_name) or "none"
        raise UnknownToolError(f"unknown tool {_shorten(name)!r}; available: {available}")
    arguments = raw.get("arguments", raw.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _loads_arguments(name, arguments)
    if arguments is None:
        arguments = {}
    return FunctionCall(name=name, arguments=spec.validate(arguments))


def _extract_raw_call(action: Any) -> Mapping[str, Any]:
    if isinstance(action, FunctionCall):
        return action.to_dict()
    if isinstance(action, Mapping):
        return _from_mapping(action)
    if isinstance(action, (bytes, bytearray)):
        action = action.decode("utf-8", errors="replace")
    if not isinstance(action, str):
        raise UnparseableCallError(
            f"expected the assistant's text or a tool-call dict, got {type(action).__name__}"
        )
    return _from_text(action)


def _from_mapping(action: Mapping[str, Any]) -> Mapping[str, Any]:
    if "tool_calls" in action:
        calls = action.get("tool_calls") or []
        if not isinstance(calls, Sequence) or isinstance(calls, str) or len(calls) != 1:
            count = len(calls) if isinstance(calls, Sequence) else 0
            raise UnparseableCallError(f"expected exactly one tool call per turn, got {count}")
        entry = calls[0]
        if not isinstance(entry, Mapping):
            raise UnparseableCallError("a tool_calls entry must be an object")
        return _from_mapping(entry)
    if isinstance(action.get("function"), Mapping):
        return action["function"]
    if "name" in action:
        return action
    raise UnparseableCallError('a tool call needs "name" and "arguments" keys')


def _from_text(text: str) -> Mapping[str, Any]:
    blocks = _TOOL_CALL_BLOCK.findall(text)
    if len(blocks) > 1:
        raise UnparseableCallError(
            f"found {len(blocks)} <tool_call> blocks; send exactly one tool call per turn"
        )
    if blocks:
        return _json_object(blocks[0].strip(), source="<tool_call> block")
    candidates = _json_objects_in(text)
    calls = [obj for obj in candidates if isinstance(obj, Mapping) and "name" in obj]
    if len(calls) > 1:
        raise UnparseableCallError(
            f"found {len(calls)} tool calls; send exactly one tool call per turn"
        )
    if calls:
        return _from_mapping(calls[0])
    raise UnparseableCallError(
        "no tool call found; answer with exactly one call such as "
        '<tool_call>{"name": "...", "arguments": {...}}</tool_call>'
    )


def _json_object(text: str, source: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text, strict=False)
    except json.JSONDecodeError as error:
        raise UnparseableCallError(
            f"the {source} is not valid JSON ({error.msg} at char {error.pos})"
        ) from None
    except ValueError as error:  # a JSON number Python refuses to convert
        raise UnparseableCallError(
            f"the {source} cannot be read: {_unreadable_value(error)}"
        ) from None
    if not isinstance(value, Mapping):
        raise UnparseableCallError(
            f"the {source} must hold a JSON object, got {type(value).__name__}"
        )
    return _from_mapping(value)


def _json_objects_in(text: str) -> list[Any]:
    """Every top-level JSON object that can be decoded from ``text``, left to right."""
    decoder = json.JSONDecoder(strict=False)
    found: list[Any] = []
    position = text.find("{")
    tries = 0
    while position != -1 and tries < _MAX_JSON_CANDIDATES:
        tries += 1
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        except ValueError as error:  # JSON, but a number Python refuses to convert
            raise UnparseableCallError(_unreadable_value(error)) from None
        found.append(value)
        position = text.find("{", end)
    return found


def _loads_arguments(tool: str, text: str) -> Any:
    if not text.strip():
        return {}
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError as error:
        raise InvalidArgumentsError(
            f"{tool}: arguments are not valid JSON ({error.msg} at char {error.pos})"
        ) from None
    except RecursionError:
        raise InvalidArgumentsError(f"{tool}: arguments are nested too deeply to read") from None
    except ValueError as error:  # Python's int-string limit: a number of 4,301+ digits
        raise InvalidArgumentsError(f"{tool}: {_unreadable_value(error)}") from None


def _unreadable_value(error: ValueError) -> str:
    """The message for a value JSON allows but Python refuses to convert (see
    ``sys.set_int_max_str_digits``): today only integers with thousands of digits."""
    if "digits" in str(error):
        return (
            "a number in the call has more digits than can be read "
            f"(at most {_max_int_digits():,}); write numbers with fewer digits"
        )
    return f"a value in the call cannot be read ({_shorten(str(error), 120)})"


def _max_int_digits() -> int:
    return sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
