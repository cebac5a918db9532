"""``agentgym-eppo diagnose RUN_DIR``: the entropy diagnostics and plots of one training run.

Reads ``RUN_DIR/metrics.jsonl`` and ``RUN_DIR/eval_*.json`` (layout: docs/trainer.md) and
writes, inside the run directory:

- ``plots/entropy`` (figure 1a/b), ``plots/clip_eps``, ``plots/zscore`` (figure 4),
  ``plots/train_success`` and ``plots/eval_success``, each as ``.png`` and ``.svg``
  (a plot whose metric the run never recorded is left out);
- ``diagnostics.json``: the three diagnostics of figure 1(c) and dev success per stage;
- ``diagnostics.md``: the same as a readable summary with the plots embedded.

The diagnostics are computed on the raw per-step task entropy ``tasks.<id>.entropy``
(the paper's eq. 5, what figure 1 plots), not on the pacer's EMA.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .diagnostics import LATE_TAIL, EntropyDiagnostics, diagnose_curves, finite_mean, late_window
from .plots import ordered_tasks, plot_eval_success, plot_task_series
from .run_dir import (
    METRICS_FILE,
    RunMetrics,
    eval_success,
    evals_split,
    json_safe,
    read_evals,
    read_metrics,
)

SUMMARY_MD = "diagnostics.md"
SUMMARY_JSON = "diagnostics.json"
PLOTS_DIR = "plots"

SERIES_PLOTS: tuple[tuple[str, str, str, str, tuple[float, ...]], ...] = (
    ("entropy", "entropy", "Per-task token entropy (fig. 1a/b)", "entropy (nats)", ()),
    ("clip_eps", "clip_eps", "Per-task clip range", "clip ε", ()),
    ("zscore", "zscore", "Entropy z-score across tasks (fig. 4)", "z", (0.0,)),
    ("success", "train_success", "Training success per task", "success rate", ()),
)
"""(metric, plot file stem, title, y label, reference lines) of each per-task line plot."""


def run_diagnostics(metrics: RunMetrics) -> EntropyDiagnostics:
    """Figure 1(c)'s three diagnostics on the run's per-task entropy curves."""
    return diagnose_curves(metrics.task_series("entropy"), LATE_TAIL)


def diagnose_run(run_dir: str | Path) -> Path:
    """Write the plots, ``diagnostics.json`` and ``diagnostics.md`` of a run; return the ``.md``.

    A run with no RL step (no ``metrics.jsonl`` yet, or ``rl.steps=0``) still gets its eval
    table; the diagnostics then read "n/a". Raises ``FileNotFoundError`` when ``run_dir``
    holds neither ``metrics.jsonl`` nor any ``eval_*.json``, and ``ValueError`` (naming file
    and line) for a malformed record.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"{run} is not a directory; pass a run directory")
    reports = read_evals(run)
    evals = {stage: eval_success(report) for stage, report in reports.items()}
    split = evals_split(reports.values())
    if (run / METRICS_FILE).is_file() or not evals:
        metrics = read_metrics(run)
    else:
        metrics = RunMetrics(steps=np.empty(0, dtype=np.int64), records=())
    diagnostics = run_diagnostics(metrics) if metrics.num_steps else None

    plots = _write_plots(run / PLOTS_DIR, metrics, evals, split)
    summary = _summary(run, metrics, evals, diagnostics)
    (run / SUMMARY_JSON).write_text(json.dumps(summary, indent=2, allow_nan=True) + "\n")
    markdown = run / SUMMARY_MD
    markdown.write_text(_markdown(run, metrics, evals, diagnostics, plots, split), encoding="utf-8")
    return markdown


def _write_plots(
    plots_dir: Path, metrics: RunMetrics, evals: dict[str, dict[str, float]], split: str
) -> dict[str, Path]:
    """Draw every plot the run has data for; map plot name to its PNG."""
    written: dict[str, Path] = {}
    if metrics.num_steps:
        for field, stem, title, ylabel, lines in SERIES_PLOTS:
            series = metrics.task_series(field)
            if not series:
                continue
            paths = plot_task_series(
                metrics.steps,
                series,
                title=title,
                ylabel=ylabel,
                stem=plots_dir / stem,
                reference_lines=lines,
            )
            written[stem] = paths[0]
    if evals:
        written["eval_success"] = plot_eval_success(
            evals, stem=plots_dir / "eval_success", split=split
        )[0]
    return written


def _summary(
    run: Path,
    metrics: RunMetrics,
    evals: dict[str, dict[str, float]],
    diagnostics: EntropyDiagnostics | None,
) -> dict[str, Any]:
    """The machine-readable summary (``NaN`` written as ``null``)."""
    return json_safe(
        {
            "run_dir": str(run),
            "steps": metrics.num_steps,
            "tasks": list(ordered_tasks(metrics.task_ids)),
            "late_tail": LATE_TAIL,
            "diagnostics": diagnostics.as_dict() if diagnostics else None,
            "eval_success": evals,
            "eval_mean_success": {
                stage: finite_mean(per_task.values()) for stage, per_task in evals.items()
            },
        }
    )


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _tailfinite_mean(values: NDArray[np.float64] | None, window: int) -> float:
    if values is None:
        return math.nan
    return finite_mean(values[-window:].tolist())


def _markdown(
    run: Path,
    metrics: RunMetrics,
    evals: dict[str, dict[str, float]],
    diagnostics: EntropyDiagnostics | None,
    plots: dict[str, Path],
    split: str,
) -> str:
    tasks = ordered_tasks(metrics.task_ids)
    lines = [f"# Diagnostics of `{run.name}`", ""]
    lines.append(f"RL steps: {metrics.num_steps}; tasks: {', '.join(tasks) or 'none'}.")
    lines += ["", "## Entropy stability (paper §4.1, figure 1c)", ""]
    if diagnostics is None:
        lines.append("No RL step in `metrics.jsonl` yet: the diagnostics need entropy curves.")
    else:
        window = late_window(metrics.num_steps, LATE_TAIL)
        lines += [
            "| diagnostic | value | better |",
            "|---|---:|---|",
            f"| crossover count (pairwise sign flips) | {diagnostics.crossover_count} | lower |",
            f"| trend R² vs log t (mean over tasks) | {_fmt(diagnostics.trend_r2)} | higher |",
            f"| late spike amplitude (max over tasks, last {window} step"
            f"{'' if window == 1 else 's'}) | "
            f"{_fmt(diagnostics.late_spike_max, 4)} | lower |",
            "",
            _per_task_table(metrics, diagnostics, tasks, window),
        ]
    lines += ["", f"## Success on the {split} split", ""]
    lines.append(_eval_table(evals) if evals else "No `eval_*.json` in the run directory.")
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({PLOTS_DIR}/{path.name})" for name, path in plots.items()]
    return "\n".join(lines) + "\n"


def _per_task_table(
    metrics: RunMetrics, diagnostics: EntropyDiagnostics, tasks: list[str], window: int
) -> str:
    entropy = metrics.task_series("entropy")
    clip = metrics.task_series("clip_eps")
    success = metrics.task_series("success")
    rows = [
        "| task | entropy first | entropy last | trend R² | late spike | clip ε last | "
        "train success (late mean) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for task in tasks:
        curve = entropy.get(task)
        finite = curve[np.isfinite(curve)] if curve is not None else np.empty(0)
        first = float(finite[0]) if len(finite) else math.nan
        last = float(finite[-1]) if len(finite) else math.nan
        clip_last = _tailfinite_mean(clip.get(task), 1)
        rows.append(
            f"| {task} | {_fmt(first)} | {_fmt(last)} | "
            f"{_fmt(diagnostics.trend_r2_per_task.get(task, math.nan))} | "
            f"{_fmt(diagnostics.late_spike_per_task.get(task, math.nan), 4)} | "
            f"{_fmt(clip_last)} | {_fmt(_tailfinite_mean(success.get(task), window))} |"
        )
    return "\n".join(rows)


def _eval_table(evals: dict[str, dict[str, float]]) -> str:
    tasks = ordered_tasks({task for per_task in evals.values() for task in per_task})
    rows = [
        "| stage | " + " | ".join(tasks) + " | mean over tasks |",
        "|---|" + "---:|" * (len(tasks) + 1),
    ]
    for stage, per_task in evals.items():
        cells = [_fmt(per_task.get(task, math.nan)) for task in tasks]
        rows.append(
            f"| {stage} | " + " | ".join(cells) + f" | {_fmt(finite_mean(per_task.values()))} |"
        )
    return "\n".join(rows)
