"""Where ALFWorld games come from: the shipped set, the full ALFWorld data, task lists.

Sources, as ``tasks`` (``gym.make(..., tasks=...)``) and ``data_dir`` decide:

* ``tasks=None`` and a data folder (``data_dir=`` or ``$ALFWORLD_DATA``) that holds
  ``json_2.1.1`` (the layout ``alfworld-download`` makes): the full ALFWorld set, split
  ``train`` -> ``json_2.1.1/train``, ``dev`` -> ``valid_seen``, ``test`` -> ``valid_unseen``;
  games marked unsolvable are skipped, as ``AlfredTWEnv`` does;
* ``tasks=None`` otherwise: the project's shipped games (:mod:`.games`);
* a path to AgentBench's ``alfworld/<split>.json`` (task type -> game paths relative to
  the data folder): those games, in file order;
* a path to a ``.jsonl``/``.jsonl.gz`` of shipped-format rows, or to a folder of games;
* a list of shipped-format rows (dicts) or :class:`ALFWorldRecord` objects.

Game files are read when an episode starts, so listing 3,500 ALFWorld games costs a
directory walk, not 3,500 JSON parses; a game file that is missing, corrupt or marked
unsolvable is a :class:`~agentgym_eppo.core.TaskFormatError` naming the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import TaskFormatError
from ...core.tasks import TaskRecord, TaskSet, read_json_or_jsonl
from .games import TASK_TYPES, game_data, shipped_path

FULL_SET_FOLDERS = {"train": "train", "dev": "valid_seen", "test": "valid_unseen"}
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"


@dataclass(frozen=True)
class ALFWorldRecord(TaskRecord):
    """One game: either a shipped row (``row``) or a ``game.tw-pddl`` on disk (``game_file``)."""

    task_type: str = ""
    pddl_params: Mapping[str, Any] = field(default_factory=dict)
    game_file: str | None = None
    row: Mapping[str, Any] | None = field(default=None, repr=False)

    def load_game(self) -> dict[str, Any]:
        """The ``game.tw-pddl`` JSON; raises TaskFormatError naming the file if it is unusable."""
        if self.row is not None:
            data = game_data(self.row)
            where = f"shipped game {self.sample_id}"
        else:
            assert self.game_file is not None
            where = self.game_file
            try:
                with open(self.game_file, encoding="utf-8") as handle:
                    data = json.load(handle)
            except FileNotFoundError:
                raise TaskFormatError(f"{where}: game file not found") from None
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                raise TaskFormatError(f"{where}: not a valid game file ({error})") from error
        missing = [key for key in ("pddl_domain", "grammar", "pddl_problem") if key not in data]
        if not isinstance(data, dict) or missing:
            raise TaskFormatError(f"{where}: not an ALFWorld game (missing {missing})")
        if not data.get("solvable", False):
            raise TaskFormatError(
                f"{where}: the game is not marked solvable; ALFWorld only plays solvable games"
            )
        return data


def record_from_row(row: Mapping[str, Any], where: str) -> ALFWorldRecord:
    """A shipped-format row -> record; names the row's source and the missing field."""
    missing = [
        key
        for key in ("name", "task_type", "pddl_params", "task", "pddl_problem")
        if key not in row
    ]
    if missing:
        raise TaskFormatError(f"{where}: game row lacks {missing}")
    if row["task_type"] not in TASK_TYPES:
        raise TaskFormatError(
            f"{where}: unknown task_type {row['task_type']!r}; expected one of {TASK_TYPES}"
        )
    row = {"solvable": True, "walkthrough": [], **row}
    return ALFWorldRecord(
        sample_id=str(row["name"]),
        task_type=row["task_type"],
        pddl_params=dict(row["pddl_params"]),
        row=row,
    )


def record_from_game_file(game_file: Path, sample_id: str) -> ALFWorldRecord:
    """A ``game.tw-pddl`` with its ``traj_data.json`` beside it -> record."""
    traj_file = game_file.parent / TRAJ_FILE
    try:
        traj = json.loads(traj_file.read_text(encoding="utf-8"))
        task_type, params = traj["task_type"], dict(traj["pddl_params"])
    except FileNotFoundError:
        raise TaskFormatError(f"{traj_file}: not found (every ALFWorld game has one)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TaskFormatError(f"{traj_file}: unreadable task parameters ({error!r})") from error
    return ALFWorldRecord(
        sample_id=sample_id, task_type=task_type, pddl_params=params, game_file=str(game_file)
    )


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """``data_dir``, else ``$ALFWORLD_DATA``, else None."""
    chosen = data_dir if data_dir is not None else os.environ.get("ALFWORLD_DATA")
    return Path(chosen).expanduser() if chosen else None


def load_task_set(
    tasks: str | os.PathLike[str] | Sequence[Any] | None,
    split: str,
    data_dir: str | os.PathLike[str] | None = None,
) -> TaskSet[ALFWorldRecord]:
    """The games of ``split`` from ``tasks`` (see the module docstring)."""
    root = resolve_data_dir(data_dir)
    if tasks is None:
        if root is not None and (root / "json_2.1.1").is_dir():
            return _full_set(root, split)
        return _shipped(split)
    if isinstance(tasks, (str, os.PathLike)):
        return _from_path(Path(tasks), root)
    records = [
        item if isinstance(item, ALFWorldRecord) else record_from_row(item, f"tasks[{i}]")
        for i, item in enumerate(tasks)
    ]
    return TaskSet(records, name="alfworld tasks")


def _shipped(split: str) -> TaskSet[ALFWorldRecord]:
    path = shipped_path(split)
    rows = read_json_or_jsonl(path)
    return TaskSet(
        [record_from_row(row, f"{path}:{i + 1}") for i, row in enumerate(rows)],
        name=f"alfworld/{split}",
    )


def _full_set(root: Path, split: str) -> TaskSet[ALFWorldRecord]:
    folder = root / "json_2.1.1" / FULL_SET_FOLDERS[split]
    records = []
    for game_file in sorted(folder.rglob(GAME_FILE)):
        relative = game_file.parent.relative_to(folder)
        if "movable" in str(relative) or "Sliced" in str(relative):
            continue  # AlfredTWEnv skips these too: the text engine does not support them
        if not _marked_solvable(game_file):
            continue
        records.append(record_from_game_file(game_file, str(relative)))
    if not records:
        raise TaskFormatError(f"{folder}: no solvable ALFWorld games found")
    return TaskSet(records, name=f"alfworld:{folder}")


def _marked_solvable(game_file: Path) -> bool:
    try:
        return bool(json.loads(game_file.read_text(encoding="utf-8")).get("solvable", False))
    except (OSError, ValueError):
        return False


def _from_path(path: Path, root: Path | None) -> TaskSet[ALFWorldRecord]:
    if path.is_dir():
        games = sorted(path.rglob(GAME_FILE))
        if not games:
            raise TaskFormatError(f"{path}: no {GAME_FILE} files in this folder")
        return TaskSet(
            [record_from_game_file(g, str(g.parent.relative_to(path))) for g in games],
            name=f"alfworld:{path}",
        )
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        rows = read_json_or_jsonl(path)
        return TaskSet(
            [record_from_row(row, f"{path}:{i + 1}") for i, row in enumerate(rows)],
            name=f"alfworld:{path}",
        )
    content = read_json_or_jsonl(path)
    if len(content) != 1 or not isinstance(content[0], dict):
        raise TaskFormatError(
            f"{path}: expected AgentBench's task list (task type -> list of game paths)"
        )
    return _agentbench_list(path, content[0], root)


def _agentbench_list(
    path: Path, listing: Mapping[str, Any], root: Path | None
) -> TaskSet[ALFWorldRecord]:
    if root is None:
        raise TaskFormatError(
            f"{path}: AgentBench's task list names games inside the ALFWorld data; "
            "pass data_dir= or set ALFWORLD_DATA to the folder holding json_2.1.1/"
        )
    records = []
    for task_family, game_paths in listing.items():
        if not isinstance(game_paths, list):
            raise TaskFormatError(f"{path}: {task_family!r} must list game paths")
        for relative in game_paths:
            game_file = root / str(relative)
            if not game_file.is_file():
                raise TaskFormatError(f"{path}: game {relative!r} not found under {root}")
            sample_id = str(Path(str(relative)).parent.relative_to(Path(str(relative)).parts[0]))
            records.append(record_from_game_file(game_file, sample_id))
    return TaskSet(records, name=f"alfworld:{path}")
