"""The shared environment contract, exercised through the minimal task in secret_env.py.

The task ("say the secret word") exists only to pin the base class's behaviour: turn
limit, abort penalty, feedback mode, info keys, seeding and options.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from support.secret_env import SecretEnv

from agentgym_eppo.core import ABORT_PENALTY, Status, TaskFormatError, UnicodeText
from agentgym_eppo.registration import ENVIRONMENTS


def say(word: str) -> dict[str, Any]:
    return {"name": "say", "arguments": {"word": word}}


def test_reset_info_carries_the_contract_keys() -> None:
    env = SecretEnv()
    obs, info = env.reset(seed=0, options={"index": 1})
    assert obs == "Guess the word of train-1."
    assert info["task_id"] == "secret"
    assert info["sample_id"] == "train-1"
    assert info["max_turns"] == 3
    assert info["turn"] == 0
    assert info["status"] == "running"
    assert info["system_prompt"] == "Find the secret word."
    assert [tool["function"]["name"] for tool in info["tools"]] == ["say", "peek", "crash"]


def test_expert_completes_with_reward_one() -> None:
    env = SecretEnv()
    env.reset(options={"sample_id": "train-2"})
    obs, reward, terminated, truncated, info = env.step(env.expert_action())
    assert (obs, reward, terminated, truncated) == ("right", 1.0, True, False)
    assert info["status"] == "completed" and info["success"] is True and info["score"] == 1.0
    assert env.ended == 1


def test_turn_limit_truncates_with_abort_penalty() -> None:
    env = SecretEnv()
    env.reset(options={"index": 0})
    for _ in range(2):
        _, reward, terminated, truncated, info = env.step(say("nope"))
        assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, "running")
    _, reward, terminated, truncated, info = env.step(say("nope"))
    assert (reward, terminated, truncated) == (ABORT_PENALTY, False, True)
    assert info["status"] == "task_limit_reached" and info["turn"] == 3 and info["success"] is False
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(say("alpha"))


def test_unparseable_call_aborts_by_default() -> None:
    env = SecretEnv()
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step("no call here")
    assert obs.startswith("Invalid tool call: no tool call found")
    assert (reward, terminated, truncated, info["status"]) == (
        -0.2,
        True,
        False,
        "agent_invalid_action",
    )


def test_bad_arguments_abort_as_validation_failed() -> None:
    env = SecretEnv()
    env.reset(options={"index": 0})
    _, reward, _, _, info = env.step({"name": "say", "arguments": {}})
    assert (reward, info["status"]) == (-0.2, "agent_validation_failed")


def test_feedback_mode_returns_the_error_and_costs_a_turn() -> None:
    env = SecretEnv(invalid_action="feedback")
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step('{"name": "shout"}')
    assert obs == "Invalid tool call: unknown tool 'shout'; available: say, peek, crash"
    assert (reward, terminated, truncated, info["turn"]) == (0.0, False, False, 1)
    assert "unknown tool" in info["invalid_action"]
    _, reward, *_ = env.step(env.expert_action())
    assert reward == 1.0


def test_tool_raising_episode_end_uses_its_status() -> None:
    env = SecretEnv()
    env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step({"name": "peek", "arguments": {"slot": "#9"}})
    assert (obs, reward, terminated, info["status"]) == (
        "no slot #9",
        -0.2,
        True,
        "agent_validation_failed",
    )


def test_unexpected_backend_exception_is_a_task_error_not_a_crash() -> None:
    env = SecretEnv()
    env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step({"name": "crash", "arguments": {"why": "x"}})
    assert obs == "Task error: ConnectionError: backend went away"
    assert (reward, terminated, info["status"]) == (-0.2, True, "task_error")
    assert env.ended == 1


def test_output_is_truncated_to_the_limit() -> None:
    env = SecretEnv(output_limit=100)
    env.reset(options={"index": 0})
    obs, *_ = env.step(say("long"))
    assert len(obs) == 100 and obs.endswith("[TRUNCATED]")


def test_abort_from_outside_ends_with_the_given_status() -> None:
    env = SecretEnv()
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.abort(Status.AGENT_CONTEXT_LIMIT)
    assert (reward, terminated, info["status"]) == (-0.2, True, "agent_context_limit")
    with pytest.raises(ValueError, match="abnormal status"):
        env.reset()
        env.abort(Status.COMPLETED)


def test_seed_picks_the_same_instance_and_split_option_switches_sets() -> None:
    first = [SecretEnv().reset(seed=7)[1]["sample_id"] for _ in range(3)]
    assert len(set(first)) == 1
    env = SecretEnv()
    _, info = env.reset(options={"split": "dev"})
    assert info["sample_id"] == "dev-0" and info["split"] == "dev"
    assert env.episode_split == "dev"


def test_split_option_applies_to_that_reset_only() -> None:
    env = SecretEnv()  # made on "train": three tasks
    env.reset(options={"split": "dev", "index": 0})
    _, info = env.reset(options={"index": 2})
    assert (info["split"], info["sample_id"]) == ("train", "train-2")
    assert env.num_tasks == 3 and env.episode_split == "train"


def test_unknown_reset_option_is_an_error_naming_the_known_ones() -> None:
    env = SecretEnv()
    with pytest.raises(
        ValueError,
        match=r"unknown reset option 'idx' \(did you mean 'index'\?\); known options: split, index, sample_id",
    ):
        env.reset(options={"idx": 1})
    with pytest.raises(ValueError, match=r"unknown reset option 'level'; known"):
        env.reset(options={"level": 1})


def test_step_before_any_reset_says_no_episode_has_started() -> None:
    with pytest.raises(RuntimeError, match=r"no episode has started: call reset\(\)"):
        SecretEnv().step(say("alpha"))


def test_missing_task_file_fails_at_construction(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(TaskFormatError, match=r"missing\.json'?: no such file or folder"):
        SecretEnv(tasks=str(missing))
    with pytest.raises(TaskFormatError, match="no such file"):
        SecretEnv(tasks=missing)


@pytest.mark.parametrize("env_id", [spec.env_id for spec in ENVIRONMENTS.values()])
def test_every_registered_env_checks_its_task_file_at_make(env_id: str, tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="no such file or folder"):
        gym.make(env_id, tasks=str(tmp_path / "missing.json"))


def test_reset_mid_episode_releases_the_previous_episode() -> None:
    env = SecretEnv()
    env.reset(options={"index": 0})
    env.reset(options={"index": 1})
    assert env.ended == 1
    env.close()
    assert env.ended == 2


def test_bad_constructor_and_option_values_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="invalid_action must be"):
        SecretEnv(invalid_action="ignore")
    with pytest.raises(ValueError, match="split must be one of"):
        SecretEnv().reset(options={"split": "validation"})
    with pytest.raises(IndexError, match=r"index 5 out of range 0..2"):
        SecretEnv().reset(options={"index": 5})
    with pytest.raises(KeyError, match="no task with sample_id"):
        SecretEnv().reset(options={"sample_id": "nope"})


def test_text_space_accepts_real_text_and_pickles_small() -> None:
    space = UnicodeText()
    assert space.contains("ls: cannot access 'é' — ✓\n") and space.contains("")
    assert not space.contains(3)
    assert len(pickle.dumps(space)) < 10_000
    assert space.contains(space.sample())


def test_gymnasium_check_env_passes() -> None:
    check_env(SecretEnv(), skip_render_check=True)
