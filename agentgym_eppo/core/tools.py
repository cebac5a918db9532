"""Tool specifications in OpenAI function format, and argument validation against them.

Each environment declares its tools as :class:`ToolSpec` objects. ``info["tools"]``
carries their OpenAI schemas so that chat templates and OpenAI-compatible APIs can
show them to a model unchanged. Validation covers the JSON-schema subset the tools
use (object with typed properties, ``required``, no extra keys, arrays with typed
items) and reports errors in words a model can learn from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgumentsError

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what it does, and the JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []}
    )

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry: ``{"type": "function", "function": ...}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _plain(self.parameters),
            },
        }

    @property
    def argument_names(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Return ``arguments`` as a dict if they satisfy the schema, else raise.

        Raises :class:`InvalidArgumentsError` naming the tool, the offending key and
        what was expected, e.g. ``"execute_sql: argument 'query' must be a string, got
        integer"``.
        """
        if not isinstance(arguments, dict):
            raise InvalidArgumentsError(
                f"{self.name}: arguments must be a JSON object, got {_json_type_name(arguments)}"
            )
        properties: Mapping[str, Any] = self.parameters.get("properties", {})
        required: Sequence[str] = self.parameters.get("required", [])
        missing = [key for key in required if key not in arguments]
        if missing:
            raise InvalidArgumentsError(
                f"{self.name}: missing required argument(s) {', '.join(map(repr, missing))}; "
                f"expected {self._signature()}"
            )
        extra = [key for key in arguments if key not in properties]
        if extra:
            raise InvalidArgumentsError(
                f"{self.name}: unexpected argument(s) {', '.join(map(repr, map(str, extra)))}; "
                f"expected {self._signature()}"
            )
        for key, value in arguments.items():
            _check_value(self.name, key, value, properties[key])
        return dict(arguments)

    def _signature(self) -> str:
        return f"{self.name}({', '.join(self.argument_names)})"


def _check_value(tool: str, key: str, value: Any, schema: Mapping[str, Any]) -> None:
    expected = schema.get("type")
    if expected is None:
        return
    allowed = expected if isinstance(expected, list) else [expected]
    if not any(_is_type(value, name) for name in allowed):
        raise InvalidArgumentsError(
            f"{tool}: argument {key!r} must be {' or '.join(allowed)}, got {_json_type_name(value)}"
        )
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidArgumentsError(
            f"{tool}: argument {key!r} must be one of {list(schema['enum'])}, got {value!r}"
        )
    if _is_type(value, "array") and "items" in schema:
        for position, item in enumerate(value):
            _check_value(tool, f"{key}[{position}]", item, schema["items"])


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(name, ()))


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    for name in ("boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name) and not (name == "integer" and isinstance(value, float)):
            return name
    return type(value).__name__


def _plain(value: Any) -> Any:
    """Deep-copy mappings and sequences into plain dicts and lists (JSON-serialisable)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def string_tool(name: str, description: str, **arguments: str) -> ToolSpec:
    """A tool whose arguments are all required strings; ``arguments`` maps name to description."""
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {
                key: {"type": "string", "description": text} for key, text in arguments.items()
            },
            "required": list(arguments),
        },
    )
