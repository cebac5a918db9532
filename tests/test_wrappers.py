"""Wrappers: tool-call formats, chat history, AgentBench's opening messages, JSONL
recording, per-task statistics and the OpenAI-tools view."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from support.vector_test_envs import COUNT, GUESS, say

from agentgym_eppo.core import UnparseableCallError
from agentgym_eppo.vector import MultiTaskVectorEnv
from agentgym_eppo.wrappers import (
    ChatHistory,
    EpisodeStatistics,
    HermesFormat,
    OpenAIToolsView,
    ReActFormat,
    TaskStatistics,
    ToolCallFormatWrapper,
    TrajectoryRecorder,
    VectorEpisodeMonitor,
    agentbench_messages,
    read_trajectories,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "commit_final_answer",
            "parameters": {"type": "object", "properties": {"answers": {"type": "array"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "bash_action",
            "parameters": {"type": "object", "properties": {"script": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "intersection",
            "parameters": {
                "type": "object",
                "properties": {"variable1": {"type": "string"}, "variable2": {"type": "string"}},
            },
        },
    },
]


@pytest.mark.parametrize(
    ("text", "call"),
    [
        (
            "Thought: list files\nAction: bash_action(ls -la | grep x, y)",
            ("bash_action", {"script": "ls -la | grep x, y"}),
        ),
        ('Action: bash_action("echo \\"hi\\"")', ("bash_action", {"script": 'echo "hi"'})),
        ("Action: bash_action(script='pwd')", ("bash_action", {"script": "pwd"})),
        ("Action: intersection(#0, #1)", ("intersection", {"variable1": "#0", "variable2": "#1"})),
        (
            'Action: intersection("#0", variable2="#3")',
            ("intersection", {"variable1": "#0", "variable2": "#3"}),
        ),
        (
            "Action: bash_action(ls)\nObservation: x\nAction: bash_action(pwd)",
            ("bash_action", {"script": "pwd"}),
        ),
        ("Action: bash_action(42)", ("bash_action", {"script": "42"})),
        ("Action: teleport(home)", ("teleport", {})),
        (
            "Action: commit_final_answer(['1', 'x'])",
            ("commit_final_answer", {"answers": ["1", "x"]}),
        ),
    ],
)
def test_react_format_reads_action_lines(text: str, call: tuple[str, dict[str, str]]) -> None:
    assert ReActFormat().parse(text, TOOLS) == {"name": call[0], "arguments": call[1]}


def test_react_format_without_an_action_says_what_to_write() -> None:
    with pytest.raises(
        UnparseableCallError,
        match=r"'Action: tool_name\(arguments\)' using one of: commit_final_answer, bash_action, intersection",
    ):
        ReActFormat().parse("I think the answer is 3.", TOOLS)


def test_formats_render_what_they_parse() -> None:
    react, hermes = ReActFormat(), HermesFormat()
    call = {"name": "intersection", "arguments": {"variable1": "#0", "variable2": "#1"}}
    assert react.render(call) == "Action: intersection(variable1='#0', variable2='#1')"
    assert react.parse(react.render(call), TOOLS) == call
    assert hermes.render(call).startswith("<tool_call>\n{")
    assert hermes.parse(hermes.render(call), TOOLS) == call
    assert "- bash_action(script)" in react.instructions(TOOLS)
    assert '"name": "bash_action"' in hermes.instructions(TOOLS)


def test_react_wrapper_lets_a_react_agent_solve_the_task() -> None:
    env = ToolCallFormatWrapper(gym.make(GUESS), "react")
    env.reset(options={"index": 1})
    assert env.step("Thought: try\nAction: say(alpha)")[0] == "not alpha"
    _, reward, terminated, _, info = env.step("Action: say(word='beta')")
    assert (reward, terminated, info["status"]) == (1.0, True, "completed")
    env.reset(options={"index": 1})
    _, reward, _, _, info = env.step("no action here")
    assert (reward, info["status"]) == (-0.2, "agent_invalid_action")


def test_agentbench_messages_put_the_tools_in_the_prompt_only_for_text_formats() -> None:
    info = {"system_prompt": "Find the word.", "tools": TOOLS}
    assert agentbench_messages("task", info) == [
        {"role": "system", "content": "Find the word."},
        {"role": "user", "content": "task"},
    ]
    react = agentbench_messages("task", info, "react")
    assert react[0]["content"].startswith(
        "Find the word.\n\nYou can use these tools:\n- commit_final_answer(answers)\n- bash_action(script)"
    )


def test_chat_history_keeps_the_conversation_for_function_calling() -> None:
    env = ChatHistory(gym.make(GUESS))
    messages, info = env.reset(options={"index": 0})
    assert env.observation_space.contains(messages)
    assert messages == [
        {"role": "system", "content": "Find the word."},
        {"role": "user", "content": "Guess the word of guess-train-0."},
    ]
    messages, *_ = env.step(say("beta"))
    assert messages[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "say", "arguments": '{"word": "beta"}'},
            }
        ],
    }
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "say",
        "content": "not beta",
    }
    messages, reward, *_ = env.step(
        '<tool_call>{"name": "say", "arguments": {"word": "alpha"}}</tool_call>'
    )
    assert reward == 1.0 and messages[-1] == {"role": "tool", "content": "right"}
    assert info["tools"][0]["function"]["name"] == "say"


def test_chat_history_in_react_format_answers_as_the_user() -> None:
    env = ChatHistory(gym.make(GUESS), fmt="react")
    messages, _ = env.reset(options={"index": 0})
    assert "Action: tool_name(arguments)" in messages[0]["content"]
    messages, reward, *_ = env.step("Thought: easy\nAction: say(alpha)")
    assert reward == 1.0
    assert messages[-2:] == [
        {"role": "assistant", "content": "Thought: easy\nAction: say(alpha)"},
        {"role": "user", "content": "right"},
    ]


def test_trajectory_recorder_writes_one_json_line_per_episode(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "episodes.jsonl"
    env = TrajectoryRecorder(gym.make(COUNT), path)
    env.reset(options={"index": 2})
    env.step(say("two"))
    env.step(say("three"))
    env.reset(options={"index": 0})
    env.step(say("one"))
    env.reset(options={"index": 1})
    env.step(say("x"))
    env.reset(options={"index": 1})  # cuts the episode short: recorded as running
    env.close()
    first, second, third = read_trajectories(path)
    assert first["task_id"] == "count" and first["sample_id"] == "count-train-2"
    assert first["observation"] == "Guess the word of count-train-2."
    assert first["steps"] == [
        {"action": say("two"), "observation": "not two", "reward": 0.0, "status": "running"},
        {"action": say("three"), "observation": "right", "reward": 1.0, "status": "completed"},
    ]
    assert (first["return"], first["length"], first["status"], first["success"]) == (
        1.0,
        2,
        "completed",
        True,
    )
    assert first["tools"][0]["function"]["name"] == "say"
    assert (second["return"], second["status"]) == (1.0, "completed")
    assert (third["length"], third["status"], third["success"]) == (1, "running", False)


def test_episode_statistics_count_success_return_and_length_per_task() -> None:
    stats = TaskStatistics()
    guess = EpisodeStatistics(gym.make(GUESS), stats)
    count = EpisodeStatistics(gym.make(COUNT), stats)
    guess.reset(options={"index": 0})
    *_, info = guess.step(say("alpha"))
    assert info["episode"] == {"return": 1.0, "length": 1, "task_id": "guess"}
    count.reset(options={"index": 0})
    count.step(say("x"))
    count.step(say("y"))
    summary = stats.summary()
    assert summary["guess"] == {
        "episodes": 1,
        "success": 1.0,
        "return": 1.0,
        "length": 1.0,
        "score": 1.0,
        "statuses": {"completed": 1},
    }
    assert summary["count"]["statuses"] == {"task_limit_reached": 1}
    assert summary["count"]["return"] == pytest.approx(-0.2) and summary["count"]["length"] == 2.0
    assert summary["all"]["episodes"] == 2 and summary["all"]["success"] == 0.5


def test_vector_monitor_records_and_counts_episodes_of_every_slot(tmp_path: Path) -> None:
    venv = VectorEpisodeMonitor(
        MultiTaskVectorEnv({GUESS: 2, COUNT: 2}, group_size=2, backend="serial"),
        tmp_path / "v.jsonl",
    )
    try:
        venv.reset(seed=0)
        experts = venv.call("expert_action")
        venv.step_some([0, 2], [experts[0], say("x")])
        venv.abort_some([1])
        venv.step_some([2, 3], [say("y"), experts[3]])
        summary = venv.statistics.summary()
        assert summary["guess"]["episodes"] == 2 and summary["guess"]["success"] == 0.5
        assert summary["count"]["statuses"] == {"completed": 1, "task_limit_reached": 1}
    finally:
        venv.close()
    episodes = read_trajectories(tmp_path / "v.jsonl")
    assert [(e["slot"], e["status"]) for e in episodes] == [
        (0, "completed"),
        (1, "agent_context_limit"),
        (2, "task_limit_reached"),
        (3, "completed"),
    ]
    assert (
        episodes[0]["group"] == episodes[1]["group"]
        and episodes[0]["system_prompt"] == "Find the word."
    )
    assert [step["action"] for step in episodes[2]["steps"]] == [say("x"), say("y")]


def test_openai_tools_view_speaks_the_chat_api_format() -> None:
    view = OpenAIToolsView(GUESS)
    messages, tools = view.reset(index=2)
    assert messages == [
        {"role": "system", "content": "Find the word."},
        {"role": "user", "content": "Guess the word of guess-train-2."},
    ]
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "say",
            "description": "Say a word.",
            "parameters": {
                "type": "object",
                "properties": {"word": {"type": "string", "description": "the word"}},
                "required": ["word"],
            },
        },
    }
    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "say", "arguments": '{"word": "beta"}'},
            },
            {
                "id": "b",
                "type": "function",
                "function": {"name": "say", "arguments": '{"word": "gamma"}'},
            },
        ],
    }
    messages = view.respond(reply)
    assert messages[-2:] == [
        {"role": "tool", "tool_call_id": "a", "content": "not beta"},
        {
            "role": "tool",
            "tool_call_id": "b",
            "content": "Not executed: only one tool call per turn is allowed; this one was ignored.",
        },
    ]
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"word": "beta"}
    messages = view.respond(
        {"role": "assistant", "content": '{"name": "say", "arguments": {"word": "gamma"}}'}
    )
    assert messages[-1] == {"role": "user", "content": "right"}
    assert view.done and view.reward == 1.0 and view.info["status"] == "completed"
    view.close()
