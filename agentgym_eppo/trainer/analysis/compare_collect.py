"""What a comparison reads of each finished run: dev success after RL, figure 1(c)'s
diagnostics and the clip metrics of its ``metrics.jsonl`` (:func:`collect_seed`), and the
headline runs' evaluations on another split (:func:`collect_confirmation`,
:class:`Confirmation`). The layout of the files read is :mod:`.run_dir`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .diagnostics import LATE_TAIL, diagnose_curves, finite_mean
from .run_dir import RunMetrics, eval_success, read_evals, read_metrics

DIAGNOSTIC_TITLES = {
    "crossover_count": "crossover count (lower better)",
    "trend_r2": "trend R² vs log t (higher better)",
    "late_spike_max": "late spike amplitude (lower better)",
}
"""Figure 1(c)'s three diagnostics (:func:`figure_1c`), each with its title."""

CLIP_SHARES = {"ratio_outside_share": (), "clipped_share": ("clip_fraction",)}
"""Per-step clip metrics averaged per seed, with the names older runs recorded them under."""

PER_TASK_CLIP = {
    "clipped_share": ("share of loss tokens clipped", ("clip_fraction",), 4),
    "clip_eps": ("mean clip range ε", (), 3),
}
"""Per-task metrics averaged over steps per seed: (title, older names, digits)."""

CONFIRM_STAGE = "base"
"""The stage of an evaluation-only run: the one evaluation of a confirmation's folder
(and of the shared start's)."""


@dataclass
class SeedResult:
    """What one finished run contributes: dev success after RL, its diagnostics, per-task
    clip metrics (mean over steps), and the evaluation and metrics they come from (for a
    confirmation, :func:`collect_confirmation`, success on the confirmation split only)."""

    seed: int
    run_dir: Path
    success: dict[str, float]
    diagnostics: dict[str, float]
    per_task: dict[str, dict[str, float]] = field(default_factory=dict)
    evaluation: dict[str, Any] | None = None
    metrics: RunMetrics | None = None

    def value(self, quantity: str) -> float:
        """A task's success, ``mean_success``, or a diagnostic (``NaN`` if the run has none)."""
        if quantity in self.success:
            return self.success[quantity]
        return self.diagnostics.get(quantity, math.nan)

    def run_metrics(self) -> RunMetrics:
        """The run's metrics: those collected, else read again from its folder."""
        return self.metrics if self.metrics is not None else read_metrics(self.run_dir)


def _read_evaluation(run_dir: Path, stage: str, missing: str) -> dict[str, Any]:
    """``eval_<stage>.json`` of ``run_dir``; ``FileNotFoundError`` saying ``missing`` if absent."""
    evals = read_evals(run_dir)
    if stage not in evals:
        raise FileNotFoundError(f"{run_dir}: no eval_{stage}.json; {missing}")
    return evals[stage]


def _success(evaluation: dict[str, Any]) -> dict[str, float]:
    """Success per task of one evaluation and ``mean_success``, their unweighted mean."""
    success = eval_success(evaluation)
    success["mean_success"] = finite_mean(success.values())
    return success


def collect_seed(seed: int, run_dir: Path) -> SeedResult:
    """Read one finished run: ``eval_after_rl.json`` and the diagnostics of its metrics."""
    evaluation = _read_evaluation(run_dir, "after_rl", "the run did not finish")
    success = _success(evaluation)
    metrics = read_metrics(run_dir)
    diagnostics = dict.fromkeys([*DIAGNOSTIC_TITLES, *CLIP_SHARES], math.nan)
    per_task: dict[str, dict[str, float]] = {}
    if metrics.num_steps:
        diagnostics.update(figure_1c(metrics.task_series("entropy")))
        for key, old_names in CLIP_SHARES.items():
            diagnostics[key] = finite_mean(
                value
                for series in _first_series(metrics, (key, *old_names)).values()
                for value in series.tolist()
            )
        for key, (_, old_names, _) in PER_TASK_CLIP.items():
            per_task[key] = {
                task: finite_mean(series.tolist())
                for task, series in _first_series(metrics, (key, *old_names)).items()
            }
    return SeedResult(seed, run_dir, success, diagnostics, per_task, evaluation, metrics)


def figure_1c(curves: Mapping[str, NDArray[np.float64]]) -> dict[str, float]:
    """Figure 1(c)'s three diagnostics (the keys of :data:`DIAGNOSTIC_TITLES`) of one
    run's per-task entropy curves."""
    result = diagnose_curves(curves, LATE_TAIL)
    return {
        "crossover_count": float(result.crossover_count),
        "trend_r2": result.trend_r2,
        "late_spike_max": result.late_spike_max,
    }


def _first_series(metrics: RunMetrics, names: Sequence[str]) -> dict[str, NDArray[np.float64]]:
    """The per-task series of the first of ``names`` the run recorded (runs written
    before a metric was renamed carry its old name)."""
    for name in names:
        series = metrics.task_series(name)
        if series:
            return dict(series)
    return {}


def collect_confirmation(seed: int, confirm_dir: Path, split: str) -> SeedResult:
    """Read one headline run's confirmation: its final checkpoint evaluated on ``split``
    with the protocol (``eval_base.json`` of an evaluation-only run). Success only:
    there is no training, so no diagnostics. An evaluation on another split is refused."""
    evaluation = _read_evaluation(confirm_dir, CONFIRM_STAGE, "the run is not confirmed")
    played = evaluation.get("split", "dev")
    if played != split:
        raise ValueError(f"{confirm_dir}: evaluated on {played!r}, not the {split!r} split")
    return SeedResult(seed, confirm_dir, _success(evaluation), {}, evaluation=evaluation)


@dataclass(frozen=True)
class Confirmation:
    """The headline runs evaluated once more, on ``split``: per headline method (the
    baseline first), the seeds confirmed (:func:`collect_confirmation`), and each planned
    seed with none, mapped to why (as the caller knows it: still training, or trained on
    a machine whose checkpoints did not travel)."""

    split: str
    results: Mapping[str, Sequence[SeedResult]]
    missing: Mapping[str, Mapping[int, str]] = field(default_factory=dict)


def evaluated_split(results: Mapping[str, Sequence[SeedResult]]) -> str:
    """The split the runs' final evaluations played (``dev`` when none says)."""
    for seeds in results.values():
        for r in seeds:
            if r.evaluation is not None:
                return str(r.evaluation.get("split", "dev"))
    return "dev"
