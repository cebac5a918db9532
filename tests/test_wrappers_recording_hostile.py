"""Recording what an agent wrote never raises out of ``step`` and loses nothing: text
UTF-8 cannot encode (a lone surrogate) comes back from the file exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from support.vector_test_envs import GUESS, say

from agentgym_eppo.vector import MultiTaskVectorEnv
from agentgym_eppo.wrappers import TrajectoryRecorder, VectorEpisodeMonitor, read_trajectories

LONE = "\ud800"
# A text action that no call can be parsed from (action only), and a call whose word the
# task echoes back (``not <word>``: action and observation both).
ATTACKS = {"in an action": LONE + " café", "in an observation": say(LONE + " café")}


@pytest.mark.parametrize("where", ATTACKS)
def test_trajectory_recorder_keeps_a_lone_surrogate(tmp_path: Path, where: str) -> None:
    path = tmp_path / "t.jsonl"
    env = TrajectoryRecorder(gym.make(GUESS, split="dev"), path)
    env.reset(options={"index": 0})
    steps = _play(env.step, ATTACKS[where])
    env.close()
    [episode] = read_trajectories(path)
    assert [(s["action"], s["observation"]) for s in episode["steps"]] == steps
    assert LONE in _text(episode["steps"][0], where)
    assert "café".encode() in path.read_bytes()  # other text is kept as it is


@pytest.mark.parametrize("where", ATTACKS)
def test_vector_monitor_keeps_a_lone_surrogate(tmp_path: Path, where: str) -> None:
    path = tmp_path / "v.jsonl"
    venv = VectorEpisodeMonitor(MultiTaskVectorEnv({GUESS: 1}, split="dev"), path)
    try:
        venv.reset(seed=0)

        def step(action: Any) -> tuple[Any, ...]:
            [outcome] = venv.step_some([0], [action])
            return (outcome.observation, outcome.reward, outcome.terminated,
                    outcome.truncated, outcome.info)  # fmt: skip

        steps = _play(step, ATTACKS[where])
    finally:
        venv.close()
    [episode] = read_trajectories(path)
    assert [(s["action"], s["observation"]) for s in episode["steps"]] == steps
    assert LONE in _text(episode["steps"][0], where)


def _text(step: dict[str, Any], where: str) -> str:
    return step["observation"] if where == "in an observation" else step["action"]


def _play(step: Any, action: Any) -> list[tuple[Any, Any]]:
    """Play ``action``, then the right word until the episode ends; (action, observation)
    of each step."""
    played = []
    while True:
        observation, _, terminated, truncated, _ = step(action)
        played.append((action, observation))
        if terminated or truncated:
            return played
        action = say("delta")


def test_a_value_json_cannot_hold_becomes_a_note_and_the_rest_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    env = TrajectoryRecorder(gym.make(GUESS, split="dev"), path)
    env.reset(options={"index": 0})
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    *_, info = env.step({"name": "say", "arguments": {"word": cyclic}})
    env.close()
    [episode] = read_trajectories(path)
    [step] = episode["steps"]
    assert step["action"].startswith("<not recordable as JSON: dict: Circular reference")
    assert step["status"] == episode["status"] == info["status"]
    assert episode["sample_id"] == "guess-dev-0" and episode["length"] == 1
