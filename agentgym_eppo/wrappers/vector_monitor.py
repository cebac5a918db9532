"""Recording and per-task statistics for a :class:`~agentgym_eppo.vector.MultiTaskVectorEnv`.

:class:`VectorEpisodeMonitor` stands in for the vector env (every other attribute
passes through) and, whenever a slot's episode ends through any of its calls, writes
the episode to JSON lines and counts it per task. Episodes lost with a dead worker are
recorded too, with ``status: "task_error"`` and ``worker_restarted: true``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentgym_eppo.vector import MultiTaskVectorEnv, StepOutcome

from .recording import TrajectoryWriter, finish_episode
from .statistics import TaskStatistics


class VectorEpisodeMonitor:
    """Wraps a vector env; ``path=None`` keeps statistics only."""

    def __init__(
        self,
        venv: MultiTaskVectorEnv,
        path: str | Path | None = None,
        statistics: TaskStatistics | None = None,
    ) -> None:
        self.venv = venv
        self.writer = TrajectoryWriter(path) if path is not None else None
        self.statistics = statistics if statistics is not None else TaskStatistics()
        self._reset_infos: dict[int, dict[str, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.venv, name)

    def reset(self, **kwargs: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
        observations, infos = self.venv.reset(**kwargs)
        for index in range(self.venv.num_envs):
            if infos.get("_task_id", np.zeros(0, bool))[index]:
                self._reset_infos[index] = {
                    key: infos[key][index]
                    for key in infos
                    if not key.startswith("_") and infos[f"_{key}"][index]
                }
        return observations, infos

    def reset_some(self, indices: Sequence[int]) -> list[tuple[int, str, dict[str, Any]]]:
        resets = self.venv.reset_some(indices)
        for index, _, info in resets:
            self._reset_infos[index] = dict(info)
        return resets

    def step_some(self, indices: Sequence[int], actions: Sequence[Any]) -> list[StepOutcome]:
        return self._observe(self.venv.step_some(indices, actions))

    def abort_some(self, indices: Sequence[int], *args: Any, **kwargs: Any) -> list[StepOutcome]:
        return self._observe(self.venv.abort_some(indices, *args, **kwargs))

    def collect_steps(self, timeout: float | None = None) -> list[StepOutcome]:
        return self._observe(self.venv.collect_steps(timeout))

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        observations, rewards, terminated, truncated, infos = self.venv.step(actions)
        for index in np.flatnonzero(terminated | truncated):
            info = {
                key: infos[key][index]
                for key in infos
                if not key.startswith("_") and infos[f"_{key}"][index]
            }
            self._episode_ended(int(index), info)
        for index in np.flatnonzero(infos.get("_tools", np.zeros(len(rewards), bool))):
            self._reset_infos[int(index)] = {
                key: infos[key][index]
                for key in infos
                if not key.startswith("_") and infos[f"_{key}"][index]
            }
        return observations, rewards, terminated, truncated, infos

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.venv.close()

    def _observe(self, outcomes: list[StepOutcome]) -> list[StepOutcome]:
        for outcome in outcomes:
            if outcome.done:
                self._episode_ended(outcome.index, outcome.info)
        return outcomes

    def _episode_ended(self, index: int, info: dict[str, Any]) -> None:
        trajectory = self.venv.trajectory(index)
        reset_info = self._reset_infos.get(index, {})
        episode: dict[str, Any] = {
            "slot": index,
            "task_id": info.get("task_id", reset_info.get("task_id")),
            "sample_id": info.get("sample_id", reset_info.get("sample_id")),
            "group": info.get("group", reset_info.get("group")),
            "split": reset_info.get("split"),
            "system_prompt": reset_info.get("system_prompt"),
            "tools": reset_info.get("tools"),
            "observation": trajectory[0]["observation"] if trajectory else None,
            "steps": trajectory[1:],
        }
        episode = finish_episode(episode, info)
        if info.get("worker_restarted"):
            episode["worker_restarted"] = True
        self.statistics.add_final_info(info, episode["return"], episode["length"])
        if self.writer is not None:
            self.writer.write(episode)
