"""Task records, task sets and the file helpers every environment's loader shares.

Each environment defines its own record dataclass (subclassing :class:`TaskRecord`)
and a loader that accepts ``None`` (the shipped set), a path (AgentBench's format or
ours, detected), or a list of records/dicts. :class:`TaskSet` gives every env the same
deterministic order and the same ``index``/``sample_id`` lookup.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar

from .errors import TaskFormatError
from .registry import Registry

TASK_SPLITS: Registry[str] = Registry(
    "split",
    {
        "train": "what training (RL rollouts, expert episodes for SFT) draws from",
        "dev": "held out from training; what the trainer evaluates by default",
        "test": "held out from training and from every choice made on dev",
    },
)
"""Every task family's splits (AgentBench's dev and test, plus a train split)."""
SPLITS = tuple(TASK_SPLITS)


@dataclass(frozen=True)
class TaskRecord:
    """What every task instance has: a stable id unique within its set."""

    sample_id: str


RecordT = TypeVar("RecordT", bound=TaskRecord)


class TaskSet(Generic[RecordT]):
    """An ordered, immutable collection of task records with lookup by index and id."""

    def __init__(self, records: Sequence[RecordT], *, name: str = "tasks") -> None:
        if not records:
            raise TaskFormatError(f"{name}: the task set is empty")
        self._records = tuple(records)
        self._by_id: dict[str, int] = {}
        for position, record in enumerate(self._records):
            if record.sample_id in self._by_id:
                raise TaskFormatError(f"{name}: duplicate sample_id {record.sample_id!r}")
            self._by_id[record.sample_id] = position
        self.name = name

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[RecordT]:
        return iter(self._records)

    def __getitem__(self, index: int) -> RecordT:
        return self._records[index]

    def by_index(self, index: int) -> RecordT:
        """The ``index``-th record; raises ``IndexError`` naming the valid range."""
        if not isinstance(index, int) or not 0 <= index < len(self._records):
            raise IndexError(
                f"{self.name}: index {index!r} out of range 0..{len(self._records) - 1}"
            )
        return self._records[index]

    def by_sample_id(self, sample_id: str) -> RecordT:
        """The record whose ``sample_id`` is ``sample_id``; raises ``KeyError`` if absent."""
        position = self._by_id.get(str(sample_id))
        if position is None:
            raise KeyError(f"{self.name}: no task with sample_id {sample_id!r}")
        return self._records[position]


def asset_path(*parts: str) -> Path:
    """Path of a file shipped in ``agentgym_eppo/assets``."""
    return Path(str(resources.files("agentgym_eppo").joinpath("assets", *parts)))


def read_json_or_jsonl(path: str | Path) -> list[Any]:
    """Read a ``.json`` (list or dict), ``.jsonl`` or gzipped variant into a list.

    A JSON dict is returned as a one-element list; callers that expect AgentBench's
    dict-of-lists formats handle that themselves.
    """
    path = Path(path)
    if not path.exists():
        raise TaskFormatError(f"task file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    stem = path.with_suffix("") if path.suffix == ".gz" else path
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            if stem.suffix == ".jsonl":
                return [json.loads(line) for line in handle if line.strip()]
            data = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError) as error:
        raise TaskFormatError(f"{path}: not valid JSON ({error})") from error
    return data if isinstance(data, list) else [data]


def write_jsonl_gz(path: str | Path, rows: Iterable[Any]) -> None:
    """Write rows as gzipped JSON lines, byte-for-byte reproducible (mtime fixed at 0)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for row in rows:
            gz.write((json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return split
