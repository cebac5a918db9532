"""Figures of a run and of a comparison, each saved as PNG and SVG.

Uses matplotlib's object API on the Agg canvas (no pyplot, no display, no global state), so
plots can be drawn from a background process or a test. SVGs carry no date and a fixed
hash salt, so the same data gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.typing import NDArray

from agentgym_eppo.registration import TASK_IDS

from .diagnostics import finite_mean, finite_std

TASK_ORDER = TASK_IDS
"""AgentBench's five tasks, in the paper's column order; they keep one colour in every plot."""

FORMATS = ("png", "svg")


def task_color(task: str) -> str:
    """A stable colour per task (``C0``..``C9``): the five AgentBench tasks first, then others."""
    if task in TASK_ORDER:
        return f"C{TASK_ORDER.index(task)}"
    return f"C{len(TASK_ORDER) + sum(map(ord, task)) % (10 - len(TASK_ORDER))}"


def ordered_tasks(tasks: Sequence[str] | set[str]) -> list[str]:
    """Tasks in the order of their registration (AgentBench's, as the paper lists them),
    then others by name."""
    known = [task for task in TASK_ORDER if task in tasks]
    return known + sorted(set(tasks) - set(TASK_ORDER))


def save_figure(figure: Figure, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg``; return both paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    with matplotlib.rc_context({"svg.hashsalt": "agentgym-eppo"}):
        for extension in FORMATS:
            path = stem.with_suffix(f".{extension}")
            metadata = {"Date": None} if extension == "svg" else {}
            figure.savefig(path, dpi=120, bbox_inches="tight", metadata=metadata)
            paths.append(path)
    return paths


def _draw_series(
    axes: Axes, steps: NDArray[np.int64], series: Mapping[str, NDArray[np.float64]]
) -> None:
    for task in ordered_tasks(list(series)):
        values = series[task]
        finite = np.isfinite(values)
        axes.plot(steps[finite], values[finite], label=task, color=task_color(task), lw=1.4)


def plot_task_series(
    steps: NDArray[np.int64],
    series: Mapping[str, NDArray[np.float64]],
    *,
    title: str,
    ylabel: str,
    stem: Path,
    reference_lines: Sequence[float] = (),
) -> list[Path]:
    """One line per task over training steps (figure 1a/b for entropy, figure 4 for z-scores)."""
    figure = Figure(figsize=(7.0, 3.8))
    axes = figure.add_subplot()
    for level in reference_lines:
        axes.axhline(level, color="0.6", lw=0.8, ls="--")
    _draw_series(axes, steps, series)
    axes.set(title=title, xlabel="RL step", ylabel=ylabel)
    axes.grid(alpha=0.3)
    if series:
        axes.legend(loc="best", fontsize="small", frameon=False)
    return save_figure(figure, stem)


def plot_eval_success(
    success: Mapping[str, Mapping[str, float]], *, stem: Path, split: str = "dev"
) -> list[Path]:
    """Grouped bars: success on ``split`` per task (groups) at each evaluated stage (bars)."""
    stages = list(success)
    tasks = ordered_tasks({task for per_task in success.values() for task in per_task})
    figure = Figure(figsize=(7.0, 3.8))
    axes = figure.add_subplot()
    width = 0.8 / max(1, len(stages))
    positions = np.arange(len(tasks), dtype=np.float64)
    for k, stage in enumerate(stages):
        heights = [success[stage].get(task, np.nan) for task in tasks]
        shade = matplotlib.colormaps["viridis"](0.15 + 0.7 * k / max(1, len(stages) - 1))
        offset = (k - (len(stages) - 1) / 2) * width
        axes.bar(positions + offset, heights, width, label=stage, color=shade)
    axes.set_xticks(positions, tasks)
    axes.set(title=f"Success per task ({split} split)", ylabel="success rate", ylim=(0, 1.05))
    axes.grid(axis="y", alpha=0.3)
    if stages:
        axes.legend(fontsize="small", frameon=False)
    return save_figure(figure, stem)


def plot_method_bars(
    values: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    titles: Mapping[str, str],
    stem: Path,
    spread: Callable[[Sequence[float]], float] = finite_std,
) -> list[Path]:
    """One panel per quantity; one bar per method (mean over seeds, error bar =
    ``spread`` of the seeds' values either side: the std unless told).

    ``values[quantity][method]`` holds one number per seed; ``titles[quantity]`` names the
    panel. Figure 1(c) is this plot for the three diagnostics.
    """
    quantities = list(titles)
    figure = Figure(figsize=(3.4 * max(1, len(quantities)), 3.6))
    for k, quantity in enumerate(quantities):
        axes = figure.add_subplot(1, len(quantities), k + 1)
        methods = list(values.get(quantity, {}))
        means = [finite_mean(values[quantity][m]) for m in methods]
        errors = [spread(values[quantity][m]) for m in methods]
        axes.bar(range(len(methods)), means, yerr=errors, color="C0", capsize=3)
        axes.set_xticks(range(len(methods)), methods, rotation=35, ha="right", fontsize="small")
        axes.set_title(titles[quantity], fontsize="medium")
        axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return save_figure(figure, stem)


def plot_method_grid(
    curves: Mapping[str, tuple[NDArray[np.int64], Mapping[str, NDArray[np.float64]]]],
    *,
    ylabel: str,
    stem: Path,
    sharey: bool = True,
) -> list[Path]:
    """Small multiples, one panel per method, each with one line per task (a shared
    y-axis unless ``sharey`` is false)."""
    methods = list(curves)
    columns = min(3, max(1, len(methods)))
    rows = -(-max(1, len(methods)) // columns)
    figure = Figure(figsize=(4.0 * columns, 3.0 * rows))
    axes_grid = figure.subplots(rows, columns, squeeze=False, sharey=sharey)
    for k, axes in enumerate(axes_grid.flat):
        if k >= len(methods):
            axes.set_visible(False)
            continue
        steps, series = curves[methods[k]]
        _draw_series(axes, steps, series)
        axes.set_title(methods[k], fontsize="medium")
        axes.set_xlabel("RL step")
        axes.grid(alpha=0.3)
        if k % columns == 0:
            axes.set_ylabel(ylabel)
    handles, labels = axes_grid.flat[0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 0.93))
    return save_figure(figure, stem)
