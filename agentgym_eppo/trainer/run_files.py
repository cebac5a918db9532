"""Read a run directory as the trainer writes it (layout in INTERFACES.md).

- ``RUN_DIR/metrics.jsonl``: one JSON object per RL step,
  ``{"step": t, "global": {...}, "tasks": {"<task_id>": {"entropy": .., "clip_eps": .., ...}}}``;
- ``RUN_DIR/eval_<stage>.json``: ``{"stage", "split", "tasks": {"<task_id>": {"success", ...}},
  "mean_success"}``.

Readers only: they turn those files into aligned numpy series and plain dicts and never
write. A step where a task has no entry (no samples that step) becomes ``NaN``, which the
diagnostics read as "no information".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

METRICS_FILE = "metrics.jsonl"
EVAL_STAGES = ("before_sft", "after_sft", "after_rl")
"""The stages the trainer evaluates at, in training order."""


@dataclass(frozen=True)
class RunMetrics:
    """Per-step metrics of one run, sorted by step (a re-logged step keeps its last record)."""

    steps: NDArray[np.int64]
    records: tuple[dict[str, Any], ...]

    @property
    def num_steps(self) -> int:
        return len(self.records)

    @property
    def task_ids(self) -> tuple[str, ...]:
        """Every task that appears in any step, sorted."""
        return tuple(sorted({task for record in self.records for task in record["tasks"]}))

    def task_series(self, field: str) -> dict[str, NDArray[np.float64]]:
        """``field`` per task per step (``NaN`` where absent), for tasks that ever report it."""
        series: dict[str, NDArray[np.float64]] = {}
        for task in self.task_ids:
            values = [_number(record["tasks"].get(task, {}).get(field)) for record in self.records]
            array = np.asarray(values, dtype=np.float64)
            if np.isfinite(array).any():
                series[task] = array
        return series

    def global_series(self, field: str) -> NDArray[np.float64]:
        """``global.<field>`` per step (``NaN`` where absent)."""
        values = [_number(record.get("global", {}).get(field)) for record in self.records]
        return np.asarray(values, dtype=np.float64)


def _number(value: Any) -> float:
    """A metric value as a float; missing or non-numeric values are ``NaN``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def read_metrics(run_dir: str | Path) -> RunMetrics:
    """Parse ``RUN_DIR/metrics.jsonl``.

    Raises ``FileNotFoundError`` when the file is missing and ``ValueError`` naming the line
    for a record that is not a JSON object with an integer ``step`` and a ``tasks`` object.
    A last line without its newline that does not parse is a record still being written by
    a live run, and is skipped.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; pass a run directory written by `agentgym-eppo train`"
        )
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    by_step: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines):  # the unterminated last line of a live run
                continue
            raise ValueError(f"{path}:{number}: not a JSON object ({error.msg})") from error
        _check_record(record, path, number)
        by_step[record["step"]] = record
    ordered = sorted(by_step)
    return RunMetrics(
        steps=np.asarray(ordered, dtype=np.int64),
        records=tuple(by_step[step] for step in ordered),
    )


def _check_record(record: Any, path: Path, number: int) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int):
        raise ValueError(f"{path}:{number}: 'step' must be an integer, got {step!r}")
    if not isinstance(record.get("tasks"), dict):
        raise ValueError(f"{path}:{number}: 'tasks' must be an object of per-task metrics")


def read_evals(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Every ``RUN_DIR/eval_<stage>.json``, keyed by stage, known stages first in training order.

    Raises ``ValueError`` naming the file when one is not a JSON object with a ``tasks`` object.
    """
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(run_dir).glob("eval_*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error.msg})") from error
        if not isinstance(report, dict) or not isinstance(report.get("tasks"), dict):
            raise ValueError(f"{path}: expected an object with a 'tasks' object")
        found[str(report.get("stage") or path.stem.removeprefix("eval_"))] = report
    order = {stage: position for position, stage in enumerate(EVAL_STAGES)}
    return dict(sorted(found.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def eval_success(report: dict[str, Any]) -> dict[str, float]:
    """Dev success per task of one eval report (``NaN`` where a task has none)."""
    return {
        str(task): _number(entry.get("success") if isinstance(entry, dict) else None)
        for task, entry in report["tasks"].items()
    }
