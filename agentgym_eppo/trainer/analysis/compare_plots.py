"""The plots of a comparison report (drawn by :mod:`.plots`): figure 1(c)'s diagnostics
and the mean success per method, as bars with 95% t intervals; AgentRL's and EPPO's
entropy per task side by side (mean over seeds); per-task entropy, clip range and
z-scores of each method's first finished seed (figure 1a/b, 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .compare_claims import HEADLINE
from .compare_collect import DIAGNOSTIC_TITLES, SeedResult
from .compare_stats import finite_interval, mean_curves
from .plots import ordered_tasks, plot_method_bars, plot_method_grid


def _t_half_width(values: Sequence[float]) -> float:
    """Half the 95% t interval of the finite values (0 under two): the plots' error bar.

    >>> round(_t_half_width([1.0, 2.0, 3.0, float("nan")]), 3), _t_half_width([1.0])
    (2.484, 0.0)
    """
    interval = finite_interval(values)
    if interval is None or interval.n < 2:
        return 0.0
    return interval.high - interval.mean


def write_plots(plots_dir: Path, results: Mapping[str, Sequence[SeedResult]]) -> dict[str, Path]:
    """Figure 1(c)-style bars with 95% t intervals, AgentRL's and EPPO's mean entropy per
    task side by side, and per-method curves (first finished seed of each method); map
    each plot's name to its PNG."""
    finished = {method: seeds for method, seeds in results.items() if seeds}
    if not finished:
        return {}
    written = {}
    bars = {
        key: {m: [r.value(key) for r in seeds] for m, seeds in finished.items()}
        for key in DIAGNOSTIC_TITLES
    }
    written["diagnostics"] = plot_method_bars(
        bars, titles=DIAGNOSTIC_TITLES, stem=plots_dir / "diagnostics", spread=_t_half_width
    )[0]
    success = {
        "mean_success": {m: [r.value("mean_success") for r in s] for m, s in finished.items()}
    }
    written["success"] = plot_method_bars(
        success,
        titles={"mean_success": "dev success after RL, mean over tasks"},
        stem=plots_dir / "success",
        spread=_t_half_width,
    )[0]
    runs = {m: [r.run_metrics() for r in finished[m]] for m in HEADLINE if m in finished}
    steps = np.asarray(sorted({int(s) for rs in runs.values() for r in rs for s in r.steps}))
    headline = {m: mean_curves(rs, "entropy", steps) for m, rs in runs.items()}
    seeds = ", ".join(f"{m} {len(finished[m])}" for m in headline)
    # plot_method_grid draws one panel per key: here one per task, one line per method
    panels = {
        f"{task}: mean over seeds ({seeds})": (
            steps,
            {m: curves[task] for m, curves in headline.items() if task in curves},
        )
        for task in ordered_tasks({t for curves in headline.values() for t in curves})
    }
    if panels:
        written["entropy_by_task"] = plot_method_grid(
            panels, ylabel="entropy (nats)", stem=plots_dir / "entropy_by_task", sharey=False
        )[0]
    first = {method: seeds[0].run_metrics() for method, seeds in finished.items()}
    for field_name, ylabel in (
        ("entropy", "entropy (nats)"),
        ("clip_eps", "clip ε"),
        ("zscore", "z"),
    ):
        curves = {
            f"{method} (seed {finished[method][0].seed})": (m.steps, m.task_series(field_name))
            for method, m in first.items()
            if m.task_series(field_name)
        }
        if curves:
            written[field_name] = plot_method_grid(
                curves, ylabel=ylabel, stem=plots_dir / field_name
            )[0]
    return written
