"""The function-call parser: every accepted form, and a typed error for everything else."""

from __future__ import annotations

import json

import pytest

from agentgym_eppo.core import (
    FunctionCall,
    InvalidArgumentsError,
    Status,
    ToolSpec,
    UnknownToolError,
    UnparseableCallError,
    parse_function_call,
    string_tool,
)

TOOLS = (
    string_tool("bash_action", "Run a script.", script="the script"),
    string_tool("answer_action", "Answer.", answer="the answer"),
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
EXPECTED = FunctionCall("bash_action", {"script": "ls -la"})


@pytest.mark.parametrize(
    "action",
    [
        '<tool_call>{"name": "bash_action", "arguments": {"script": "ls -la"}}</tool_call>',
        'I will list files.\n<tool_call>\n{"name": "bash_action", "arguments": {"script": "ls -la"}}\n</tool_call>',
        '{"name": "bash_action", "arguments": {"script": "ls -la"}}',
        'Thought: list.\n```json\n{"name": "bash_action", "arguments": {"script": "ls -la"}}\n```',
        '{"name": "bash_action", "arguments": "{\\"script\\": \\"ls -la\\"}"}',
        {"name": "bash_action", "arguments": {"script": "ls -la"}},
        {"name": "bash_action", "arguments": '{"script": "ls -la"}'},
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "bash_action", "arguments": '{"script": "ls -la"}'},
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "bash_action", "arguments": {"script": "ls -la"}},
                }
            ],
        },
        FunctionCall("bash_action", {"script": "ls -la"}),
    ],
)
def test_every_accepted_form_parses_to_the_same_call(action: object) -> None:
    assert parse_function_call(action, TOOLS) == EXPECTED


def test_unclosed_tool_call_block_at_end_of_generation_still_parses() -> None:
    text = '<tool_call>{"name": "bash_action", "arguments": {"script": "ls -la"}}'
    assert parse_function_call(text, TOOLS) == EXPECTED


def test_hermes_round_trip() -> None:
    assert parse_function_call(EXPECTED.to_hermes(), TOOLS) == EXPECTED


def test_unknown_tool_names_the_available_ones() -> None:
    with pytest.raises(
        UnknownToolError,
        match=r"unknown tool 'bassh_action'; available: bash_action, answer_action, commit_final_answer",
    ):
        parse_function_call({"name": "bassh_action", "arguments": {}}, TOOLS)


def test_missing_argument_is_a_validation_error_with_the_signature() -> None:
    with pytest.raises(
        InvalidArgumentsError,
        match=r"missing required argument\(s\) 'script'; expected bash_action\(script\)",
    ) as caught:
        parse_function_call({"name": "bash_action", "arguments": {}}, TOOLS)
    assert caught.value.status is Status.AGENT_VALIDATION_FAILED


def test_wrong_type_and_extra_keys_are_rejected() -> None:
    with pytest.raises(
        InvalidArgumentsError, match="argument 'script' must be string, got integer"
    ):
        parse_function_call({"name": "bash_action", "arguments": {"script": 3}}, TOOLS)
    with pytest.raises(InvalidArgumentsError, match="unexpected argument"):
        parse_function_call({"name": "bash_action", "arguments": {"script": "a", "x": 1}}, TOOLS)
    with pytest.raises(
        InvalidArgumentsError,
        match=r"argument 'answers\[1\]' must be string or number, got boolean",
    ):
        parse_function_call(
            {"name": "commit_final_answer", "arguments": {"answers": ["a", True]}}, TOOLS
        )


def test_several_calls_in_one_message_are_refused() -> None:
    one = '<tool_call>{"name": "bash_action", "arguments": {"script": "a"}}</tool_call>'
    with pytest.raises(UnparseableCallError, match="found 2 <tool_call> blocks; send exactly one"):
        parse_function_call(one + one, TOOLS)
    bare = json.dumps({"name": "bash_action", "arguments": {"script": "a"}})
    with pytest.raises(UnparseableCallError, match="found 2 tool calls"):
        parse_function_call(bare + " " + bare, TOOLS)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("just chatting", "no tool call found"),
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ("<tool_call>[1, 2]</tool_call>", "must hold a JSON object"),
        ("<tool_call>" + "[" * 100_000 + "</tool_call>", "nested too deeply|not valid JSON"),
        (42, "expected the assistant's text or a tool-call dict, got int"),
        ({"arguments": {}}, 'a tool call needs "name"'),
        ({"tool_calls": []}, "exactly one tool call per turn, got 0"),
    ],
)
def test_unreadable_actions_raise_a_typed_error(action: object, message: str) -> None:
    with pytest.raises(UnparseableCallError, match=message) as caught:
        parse_function_call(action, TOOLS)
    assert caught.value.status is Status.AGENT_INVALID_ACTION


def test_arguments_that_are_not_json_are_a_validation_error() -> None:
    with pytest.raises(InvalidArgumentsError, match="arguments are not valid JSON"):
        parse_function_call({"name": "bash_action", "arguments": "{script"}, TOOLS)


def test_openai_schema_shape() -> None:
    schema = TOOLS[0].openai_schema()
    assert schema == {
        "type": "function",
        "function": {
            "name": "bash_action",
            "description": "Run a script.",
            "parameters": {
                "type": "object",
                "properties": {"script": {"type": "string", "description": "the script"}},
                "required": ["script"],
            },
        },
    }
    json.dumps(schema)
