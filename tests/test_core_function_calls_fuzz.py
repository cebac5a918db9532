"""Property-based fuzzing of the function-call parser and of ``step``.

Whatever a model emits, the parser either returns a validated call of a known tool or
raises a :class:`ToolCallError`; ``step`` never raises and ends with a documented status.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.secret_env import SecretEnv

from agentgym_eppo.core import (
    FunctionCall,
    Status,
    ToolCallError,
    ToolSpec,
    parse_function_call,
    string_tool,
)

TOOLS = (
    string_tool("bash_action", "Run a script.", script="the script"),
    ToolSpec(
        "commit_final_answer",
        "Commit answers.",
        {
            "type": "object",
            "properties": {"answers": {"type": "array", "items": {"type": ["string", "number"]}}},
            "required": ["answers"],
        },
    ),
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
tool_names = st.sampled_from(["bash_action", "commit_final_answer", "bassh_action", "", "name"])
raw_calls = st.fixed_dictionaries(
    {"name": tool_names | st.text(max_size=10), "arguments": json_values | st.text(max_size=40)}
)
surrogate_text = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=200
)


def _actions() -> st.SearchStrategy[Any]:
    as_json = raw_calls.map(lambda call: json.dumps(call, ensure_ascii=False))
    wrapped = as_json.map(lambda text: f"<tool_call>{text}</tool_call>")
    doubled = st.tuples(wrapped, wrapped).map("".join)
    truncated = st.tuples(wrapped, st.integers(0, 200)).map(lambda pair: pair[0][: pair[1]])
    nested = st.integers(1, 50_000).map(
        lambda depth: "<tool_call>" + '{"a":' * depth + "1" + "}" * depth
    )
    huge = st.integers(10_000, 2_000_000).map(
        lambda size: json.dumps({"name": "bash_action", "arguments": {"script": "x" * size}})
    )
    openai = raw_calls.map(lambda call: {"type": "function", "function": call})
    return st.one_of(
        surrogate_text,
        as_json,
        wrapped,
        doubled,
        truncated,
        nested,
        huge,
        raw_calls,
        openai,
        json_values,
        st.binary(max_size=64),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=_actions())
def test_parser_returns_a_valid_call_or_raises_a_tool_call_error(action: Any) -> None:
    try:
        call = parse_function_call(action, TOOLS)
    except ToolCallError as error:
        assert error.status in (Status.AGENT_INVALID_ACTION, Status.AGENT_VALIDATION_FAILED)
        assert str(error)
        return
    assert isinstance(call, FunctionCall)
    spec = {tool.name: tool for tool in TOOLS}[call.name]
    assert spec.validate(dict(call.arguments)) == dict(call.arguments)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=_actions(), feedback=st.booleans())
def test_step_never_raises_and_ends_with_a_documented_status(action: Any, feedback: bool) -> None:
    env = SecretEnv(invalid_action="feedback" if feedback else "abort")
    env.reset(options={"index": 0})
    observation, reward, terminated, truncated, info = env.step(action)
    assert isinstance(observation, str)
    assert info["status"] in {status.value for status in Status}
    if terminated or truncated:
        assert info["status"] != "running"
        assert reward == (1.0 if info["status"] == "completed" else -0.2)
    else:
        assert info["status"] == "running" and reward == 0.0
