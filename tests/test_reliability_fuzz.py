"""Fuzzing every real tool of the five environments.

For each environment's own tools: whatever is handed to the parser gives a validated
call of one of them or a ``ToolCallError`` with a documented status and a message, and
whatever is handed to ``step`` of the real environment gives an observation and a
documented status, the abort penalty on every abnormal end. The long run of the
same strategies is ``python -m benchmarks.run reliability`` (``benchmarks/results/reliability/figures.md``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from agentgym_eppo.core import Status, ToolCallError, parse_function_call
from benchmarks.fuzz_tools import ENV_CLASSES, actions_for, check_parse, check_step, env_class

TASKS = list(ENV_CLASSES)
STEP_EXAMPLES = {"os": 25, "db": 60, "kg": 60, "alfworld": 25, "webshop": 60}
ENV_KWARGS: dict[str, dict[str, Any]] = {"os": {"command_timeout": 5.0}}


@pytest.fixture(scope="module", params=TASKS)
def real_env(request: pytest.FixtureRequest) -> Iterator[Any]:
    cls = env_class(request.param)
    env = cls(split="dev", **ENV_KWARGS.get(request.param, {}))
    yield env
    env.close()


@pytest.mark.parametrize("task", TASKS)
def test_parser_with_each_env_tools_returns_a_valid_call_or_a_documented_error(
    task: str,
) -> None:
    tools = tuple(env_class(task).tools)

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    @given(action=actions_for(tools, huge=300_000))
    def parse(action: Any) -> None:
        assert check_parse(action, tools) in (
            "valid",
            Status.AGENT_INVALID_ACTION.value,
            Status.AGENT_VALIDATION_FAILED.value,
        )

    parse()


def _first_string_argument(tools: tuple[Any, ...]) -> tuple[str, str]:
    for tool in tools:
        for key, schema in tool.parameters.get("properties", {}).items():
            if schema.get("type") == "string":
                return tool.name, key
    raise AssertionError("no tool with a string argument")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("malformed_json", Status.AGENT_INVALID_ACTION),
        ("two_calls", Status.AGENT_INVALID_ACTION),
        ("unknown_tool", Status.AGENT_INVALID_ACTION),
        ("wrong_type", Status.AGENT_VALIDATION_FAILED),
        ("extra_key", Status.AGENT_VALIDATION_FAILED),
        ("arguments_not_an_object", Status.AGENT_VALIDATION_FAILED),
        ("deep_nesting", Status.AGENT_INVALID_ACTION),
        ("deep_nesting_in_arguments", Status.AGENT_VALIDATION_FAILED),
    ],
)
def test_each_kind_of_broken_call_fails_with_its_documented_status(
    task: str, kind: str, status: Status
) -> None:
    tools = tuple(env_class(task).tools)
    name, key = _first_string_argument(tools)
    good = json.dumps({"name": name, "arguments": {key: "x"}})
    actions = {
        "malformed_json": f"<tool_call>{good[:-3]}</tool_call>",
        "two_calls": f"<tool_call>{good}</tool_call><tool_call>{good}</tool_call>",
        "unknown_tool": {"name": name + "_x", "arguments": {key: "x"}},
        "wrong_type": {"name": name, "arguments": {key: ["x"]}},
        "extra_key": {"name": name, "arguments": {key: "x", "sudo": True}},
        "arguments_not_an_object": {"name": name, "arguments": "[1, 2]"},
        "deep_nesting": "<tool_call>" + '{"a":' * 100_000 + "1" + "}" * 100_000,
        "deep_nesting_in_arguments": {"name": name, "arguments": "[" * 100_000 + "]" * 100_000},
    }
    with pytest.raises(ToolCallError) as raised:
        parse_function_call(actions[kind], tools)
    assert raised.value.status is status
    assert str(raised.value)


@pytest.mark.parametrize(
    "text",
    ["\x00\x1b[2J\u202e", "\ud800 lone \udfff surrogates", "x" * 500_000, "日本語 ✓ 🙂"],
    ids=["control", "surrogates", "huge", "unicode"],
)
@pytest.mark.parametrize("task", TASKS)
def test_hostile_strings_in_a_valid_call_parse_unchanged(task: str, text: str) -> None:
    tools = tuple(env_class(task).tools)
    name, key = _first_string_argument(tools)
    hermes = "<tool_call>" + json.dumps({"name": name, "arguments": {key: text}}) + "</tool_call>"
    call = parse_function_call(hermes, tools)
    assert call.name == name
    assert call.arguments[key] == text


@pytest.mark.slow
def test_step_on_the_real_env_never_raises_and_ends_with_a_documented_status(
    real_env: Any,
) -> None:
    task = real_env.unwrapped.task_id
    tools = tuple(real_env.unwrapped.tools)
    seen: set[str] = set()

    @settings(
        max_examples=STEP_EXAMPLES[task],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(action=actions_for(tools, huge=200_000))
    def step(action: Any) -> None:
        real_env.unwrapped.invalid_action = "feedback" if len(seen) % 2 else "abort"
        status, _ = check_step(real_env, action)
        seen.add(status)

    step()
    assert seen, "no step was taken"


def test_step_after_hostile_input_still_serves_the_expert_to_the_end(real_env: Any) -> None:
    """Garbage in ``feedback`` mode costs a turn and leaves the env able to finish the task."""
    unwrapped = real_env.unwrapped
    unwrapped.invalid_action = "feedback"
    real_env.reset(options={"index": 0})
    observation, reward, terminated, truncated, info = real_env.step("\ud800{\x00")
    assert (terminated, truncated, reward, info["status"]) == (False, False, 0.0, "running")
    assert "Invalid tool call" in observation
    while not (terminated or truncated):
        observation, reward, terminated, truncated, info = real_env.step(unwrapped.expert_action())
    assert info["status"] == "completed"
