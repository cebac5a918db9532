"""Per-task episode statistics: success rate, return, length, score and end statuses.

Multi-task training reads its curves per ``task_id`` (the EPPO pacer and AgentRL's
task advantage normalization both do), so the statistics are kept per task, with an
``"all"`` row over every episode.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym


@dataclass
class _TaskTally:
    episodes: int = 0
    successes: int = 0
    total_return: float = 0.0
    total_length: int = 0
    total_score: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)

    def add(
        self, episode_return: float, length: int, success: bool, score: float, status: str
    ) -> None:
        self.episodes += 1
        self.successes += int(success)
        self.total_return += episode_return
        self.total_length += length
        self.total_score += score
        self.statuses[status] += 1

    def summary(self) -> dict[str, Any]:
        n = max(self.episodes, 1)
        return {
            "episodes": self.episodes,
            "success": self.successes / n,
            "return": self.total_return / n,
            "length": self.total_length / n,
            "score": self.total_score / n,
            "statuses": dict(sorted(self.statuses.items())),
        }


class TaskStatistics:
    """Running per-task totals; :meth:`summary` gives the means."""

    def __init__(self) -> None:
        self._tallies: dict[str, _TaskTally] = defaultdict(_TaskTally)

    def add(
        self,
        task_id: str,
        episode_return: float,
        length: int,
        *,
        success: bool,
        score: float = 0.0,
        status: str = "completed",
    ) -> None:
        """Count one finished episode of ``task_id``."""
        self._tallies[task_id].add(
            float(episode_return), int(length), bool(success), float(score), str(status)
        )

    def add_final_info(self, info: dict[str, Any], episode_return: float, length: int) -> None:
        """Count an episode from its last step's info (``task_id``, ``success``, ...)."""
        self.add(
            str(info.get("task_id", "unknown")),
            episode_return,
            length,
            success=bool(info.get("success", False)),
            score=float(info.get("score", 0.0)),
            status=str(info.get("status", "unknown")),
        )

    def summary(self) -> dict[str, dict[str, Any]]:
        """``{task_id: {episodes, success, return, length, score, statuses}}`` plus ``"all"``."""
        rows = {task: tally.summary() for task, tally in sorted(self._tallies.items())}
        if self._tallies:
            overall = _TaskTally()
            for tally in self._tallies.values():
                overall.episodes += tally.episodes
                overall.successes += tally.successes
                overall.total_return += tally.total_return
                overall.total_length += tally.total_length
                overall.total_score += tally.total_score
                overall.statuses.update(tally.statuses)
            rows["all"] = overall.summary()
        return rows

    def reset(self) -> None:
        self._tallies.clear()


class EpisodeStatistics(gym.Wrapper[Any, Any, Any, Any]):
    """Adds ``info["episode"] = {"return", "length", "task_id"}`` when an episode ends
    and counts it in :attr:`statistics` (shared between envs when one is passed)."""

    def __init__(self, env: gym.Env[Any, Any], statistics: TaskStatistics | None = None) -> None:
        super().__init__(env)
        self.statistics = statistics if statistics is not None else TaskStatistics()
        self._return = 0.0
        self._length = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._return, self._length = 0.0, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        if terminated or truncated:
            info = {
                **info,
                "episode": {
                    "return": self._return,
                    "length": self._length,
                    "task_id": info.get("task_id"),
                },
            }
            self.statistics.add_final_info(info, self._return, self._length)
        return observation, reward, terminated, truncated, info
