"""Trajectories to JSON lines: one line per finished episode, for replay, SFT and audits.

Each line: ``task_id``, ``sample_id``, ``split``, ``system_prompt``, ``tools``,
``observation`` (the task text), ``steps`` (``{"action", "observation", "reward",
"status"}`` each), then ``return``, ``length``, ``status``, ``success``, ``score``,
and for vector envs ``group`` and ``slot``. Actions are stored as given (text or a
parsed call); anything JSON cannot hold is stored as its ``str``.

Recording never raises out of ``step``, whatever the agent wrote. Text that UTF-8
cannot encode (a lone surrogate such as ``"\\ud800"``) is written as its JSON escape, so
:func:`read_trajectories` gives back the very same string; other text stays as it is.
A value JSON cannot hold even as its ``str`` (a dict with non-string keys, a cycle,
nesting past the encoder's recursion) is stored as a note naming it, and the rest of the
episode is kept. A file that cannot be written (disk full) costs the episode: a warning,
counted in :attr:`TrajectoryWriter.lost`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import gymnasium as gym

RESET_KEYS = ("task_id", "sample_id", "split", "system_prompt", "tools", "max_turns", "group")
FINAL_KEYS = ("status", "success", "score")


class TrajectoryWriter:
    """Appends episodes to a JSONL file (created with its folder; flushed per line).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> writer = TrajectoryWriter(path)
    >>> writer.write({"steps": [{"action": "caf\u00e9 \\ud800", "observation": {(1, 2): 3}}]})
    >>> writer.close()
    >>> path.read_text(encoding="utf-8")
    '{"steps": [{"action": "caf\u00e9 \\\\ud800", "observation": "<not recordable as JSON: dict: keys must be str, int, float, bool or None, not tuple>"}]}\\n'
    >>> read_trajectories(path)[0]["steps"][0]["action"] == "caf\u00e9 \\ud800"
    True
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # JSON text is ASCII outside its strings, so a surrogate's \\uXXXX replacement is
        # the JSON escape of that very character: the line still reads back exactly.
        self._file: IO[str] | None = self.path.open(
            "a", encoding="utf-8", errors="backslashreplace"
        )
        self.episodes = 0
        self.lost = 0

    def write(self, episode: dict[str, Any]) -> None:
        """Append one episode; raises only when the writer is closed (see the module)."""
        if self._file is None:
            raise RuntimeError(f"the trajectory file {self.path} is closed")
        try:
            self._file.write(_json_line(episode) + "\n")
            self._file.flush()
        except OSError as error:
            self.lost += 1
            warnings.warn(
                f"trajectory file {self.path}: an episode was not recorded ({error})",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        self.episodes += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _json_line(episode: dict[str, Any]) -> str:
    try:
        return json.dumps(episode, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        # Encoded field by field, so only the values that cannot be held become notes;
        # joined as text, so no field is nested deeper than it was.
        def step(value: Any) -> str:
            if not isinstance(value, dict):
                return _encode(value)
            return (
                "{" + ", ".join(f"{_encode(str(k))}: {_encode(v)}" for k, v in value.items()) + "}"
            )

        fields = [
            f"{_encode(str(key))}: "
            + (
                "[" + ", ".join(map(step, value)) + "]"
                if key == "steps" and isinstance(value, list)
                else _encode(value)
            )
            for key, value in episode.items()
        ]
        return "{" + ", ".join(fields) + "}"


def _encode(value: Any) -> str:
    """``value`` as JSON (non-JSON leaves as their ``str``), or a note string naming it."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError) as error:
        return json.dumps(f"<not recordable as JSON: {type(value).__name__}: {error}>")


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
