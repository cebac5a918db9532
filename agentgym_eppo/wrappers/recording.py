"""Trajectories to JSON lines: one line per finished episode, for replay, SFT and audits.

Each line: ``task_id``, ``sample_id``, ``split``, ``system_prompt``, ``tools``,
``observation`` (the task text), ``steps`` (``{"action", "observation", "reward",
"status"}`` each), then ``return``, ``length``, ``status``, ``success``, ``score``,
and for vector envs ``group`` and ``slot``. Actions are stored as given (text or a
parsed call); anything JSON cannot hold is stored as its ``str``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import gymnasium as gym

RESET_KEYS = ("task_id", "sample_id", "split", "system_prompt", "tools", "max_turns", "group")
FINAL_KEYS = ("status", "success", "score")


class TrajectoryWriter:
    """Appends episodes to a JSONL file (created with its folder; flushed per line)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        self.episodes = 0

    def write(self, episode: dict[str, Any]) -> None:
        if self._file is None:
            raise RuntimeError(f"the trajectory file {self.path} is closed")
        self._file.write(json.dumps(episode, ensure_ascii=False, default=str) + "\n")
        self._file.flush()
        self.episodes += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_trajectories(path: str | Path) -> list[dict[str, Any]]:
    """Every episode recorded in ``path``, in order."""
    return list(iter_trajectories(path))


def iter_trajectories(path: str | Path) -> Iterator[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def start_episode(observation: str, info: dict[str, Any]) -> dict[str, Any]:
    """The record of a new episode from its reset observation and info."""
    episode = {key: info[key] for key in RESET_KEYS if key in info}
    episode["observation"] = observation
    episode["steps"] = []
    return episode


def finish_episode(episode: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """Close the record with the totals and the final info's outcome."""
    rewards = [float(step["reward"]) for step in episode["steps"]]
    episode["return"] = sum(rewards)
    episode["length"] = len(rewards)
    for key in FINAL_KEYS:
        if key in info:
            episode[key] = info[key]
    return episode


class TrajectoryRecorder(gym.Wrapper[Any, Any, Any, Any]):
    """Records every finished episode of one env to ``path`` (JSON lines).

    An episode cut short by ``reset`` is recorded too, with ``status: "running"``.
    """

    def __init__(self, env: gym.Env[Any, Any], path: str | Path) -> None:
        super().__init__(env)
        self.writer = TrajectoryWriter(path)
        self._episode: dict[str, Any] | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if self._episode is not None:
            self.writer.write(
                finish_episode(self._episode, {"status": "running", "success": False})
            )
        observation, info = self.env.reset(seed=seed, options=options)
        self._episode = start_episode(observation, info)
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if self._episode is not None:
            self._episode["steps"].append(
                {
                    "action": action,
                    "observation": observation,
                    "reward": float(reward),
                    "status": info.get("status"),
                }
            )
            if terminated or truncated:
                self.writer.write(finish_episode(self._episode, info))
                self._episode = None
        return observation, reward, terminated, truncated, info

    def close(self) -> None:
        self.writer.close()
        super().close()
