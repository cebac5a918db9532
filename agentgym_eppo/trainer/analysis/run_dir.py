"""The one owner of a run directory's layout: what the trainer writes there and how it is read.

- ``RUN_DIR/metrics.jsonl``: one JSON object per RL step
  (:func:`~agentgym_eppo.trainer.training.update.step_record` builds it,
  :class:`MetricsWriter` appends it, :func:`read_metrics` reads it back),
  ``{"step": t, "global": {...}, "tasks": {"<task_id>": {"entropy": .., "clip_eps": .., ...}}}``;
- ``RUN_DIR/eval_<stage>.json`` (:func:`write_eval`, :func:`read_eval`, :func:`read_evals`):
  ``{"stage", "split", "tasks": {"<task_id>": {"success", ...}}, "mean_success",
  "episodes": [{"task_id", "sample_id", "success", "reward", ...}, ...]}``
  (a run written before a stage was renamed holds its old name, ``eval_before_sft.json``
  for ``base``: :func:`eval_path` and :func:`read_evals` read it as the new one);
- ``RUN_DIR/sft.json`` (:func:`write_sft_record`): the SFT stage: expert episodes and
  held-out instances per task, target and sequence tokens, the loss of every optimizer
  step, the held-out loss curve ``[[step, loss], ...]``, the step whose weights were
  kept, whether it stopped early, and its seconds;
- ``RUN_DIR/machine.jsonl`` (:func:`record_machine`): one line per start of the run (a
  resume adds one), the machine it ran on.

Every field is described in ``docs/trainer.md`` ("The run directory"). The readers turn
the files into aligned numpy series and plain dicts; a step where a task has no entry (no
samples that step) becomes ``NaN``, which the diagnostics read as "no information".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agentgym_eppo.trainer.config import EVAL_STAGES, RENAMED_STAGES

METRICS_FILE = "metrics.jsonl"
MACHINE_FILE = "machine.jsonl"


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


def read_eval(path: str | Path) -> dict[str, Any]:
    """One evaluation file (``eval_<stage>.json``, :func:`write_eval`), its shape checked.

    Raises ``ValueError`` naming the file when it is not a JSON object with a ``tasks``
    object, or when its ``episodes`` (files written before episodes were recorded have
    none) are not a list of objects that each name a ``task_id`` and a ``sample_id``.
    """
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg})") from error
    if not isinstance(report, dict) or not isinstance(report.get("tasks"), dict):
        raise ValueError(f"{path}: not an evaluation (expected an object with a 'tasks' object)")
    episodes = report.get("episodes", [])
    if not isinstance(episodes, list):
        raise ValueError(f"{path}: 'episodes' must be a list")
    for number, episode in enumerate(episodes):
        if not isinstance(episode, dict) or not {"task_id", "sample_id"} <= episode.keys():
            raise ValueError(
                f"{path}: episode {number} is not an object with a 'task_id' and a 'sample_id'"
            )
    return report


def read_evals(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Every ``RUN_DIR/eval_<stage>.json``, keyed by stage (a renamed stage by its new
    name), known stages first in training order.

    Raises ``ValueError`` naming the file when one is not a JSON object with a ``tasks`` object.
    """
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(run_dir).glob("eval_*.json")):
        report = read_eval(path)
        stage = str(report.get("stage") or path.stem.removeprefix("eval_"))
        found[RENAMED_STAGES.get(stage, stage)] = report
    order = {stage: position for position, stage in enumerate(EVAL_STAGES)}
    return dict(sorted(found.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def evals_split(results: Iterable[Mapping[str, Any]]) -> str:
    """The split the evaluations were played on, for a heading ("dev + test" if they
    differ; "dev" for files written before evaluations named their split).

    >>> evals_split([{"split": "test"}, {"split": "test"}]), evals_split([])
    ('test', 'dev')
    """
    return " + ".join(sorted({str(r.get("split", "dev")) for r in results})) or "dev"


def eval_path(run_dir: str | Path, stage: str) -> Path:
    """Where the evaluation of ``stage`` lives in a run directory: ``eval_<stage>.json``,
    or the file of the stage's old name where only that one is there.

    >>> eval_path("runs/a", "base").name
    'eval_base.json'
    """
    path = _stage_file(run_dir, stage)
    for old, new in RENAMED_STAGES.items():
        if new == stage and not path.is_file() and _stage_file(run_dir, old).is_file():
            return _stage_file(run_dir, old)
    return path


def _stage_file(run_dir: str | Path, stage: str) -> Path:
    return Path(run_dir) / f"eval_{stage}.json"


def write_eval(run_dir: str | Path, result: Mapping[str, Any]) -> Path:
    """Write one evaluation's JSON (see the module docstring) as ``eval_<stage>.json``."""
    path = _stage_file(run_dir, str(result["stage"]))
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def write_sft_record(run_dir: str | Path, record: Mapping[str, Any]) -> Path:
    """Write the SFT stage's record (see the module docstring) as ``sft.json``."""
    path = Path(run_dir) / "sft.json"
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def record_machine(
    run_dir: str | Path, machine: Mapping[str, Any], resumed_after: int | None = None
) -> Path:
    """Append one start of the run to ``machine.jsonl``: when (UTC), the RL step it
    resumed after (``None`` for a fresh start) and ``machine``
    (:func:`~agentgym_eppo.trainer.devices.describe_machine`)."""
    path = Path(run_dir) / MACHINE_FILE
    line = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "resumed_after_step": resumed_after,
        **machine,
    }
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(line, sort_keys=True) + "\n")
    return path


def eval_success(report: dict[str, Any]) -> dict[str, float]:
    """Dev success per task of one eval report (``NaN`` where a task has none)."""
    return {
        str(task): _number(entry.get("success") if isinstance(entry, dict) else None)
        for task, entry in report["tasks"].items()
    }


def json_safe(value: Any) -> Any:
    """``value`` with every NaN/inf float (nested in dicts and lists) as ``None``: JSON has
    no NaN, and the run directory's files are read by other tools.

    >>> json_safe({"a": float("nan"), "b": [1.0, float("inf")]})
    {'a': None, 'b': [1.0, None]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class MetricsWriter:
    """Appends step records; on resume drops records after the checkpoint's step."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, resume_after: int | None = None):
        self.path = Path(run_dir) / METRICS_FILE
        if resume_after is not None and self.path.exists():
            kept = [
                line
                for line in self.path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line)["step"] <= resume_after
            ]
            self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        elif resume_after is None and self.path.exists():
            self.path.unlink()
        self._file = self.path.open("a", encoding="utf-8")
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional (the train extra has it)
                self._tb = None
            else:
                self._tb = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(json_safe(record), sort_keys=True) + "\n")
        self._file.flush()
        if self._tb is None:
            return
        step = record["step"]
        for key, value in record["global"].items():
            if isinstance(value, (int, float)):
                self._tb.add_scalar(f"global/{key}", value, step)
        for task, values in record["tasks"].items():
            for key, value in values.items():
                if isinstance(value, (int, float)) and value is not None:
                    self._tb.add_scalar(f"{key}/{task}", value, step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
