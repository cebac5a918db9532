"""One evaluation's success per task, with a 95% interval over its instances.

An evaluation plays each instance several times (``eval.samples_per_instance``), so its
episodes are not independent: the unit is the instance. Per task, the interval is the
Student-t interval of the instances' success rates (the mean over each one's attempts);
over tasks, the unweighted mean of the tasks (as ``mean_success``) with
:func:`~agentgym_eppo.trainer.analysis.stats.mean_of_means_interval`. A task where no
episode succeeded has the interval ``[0, 0]``, so "above 0" needs a lower bound above 0.

>>> evaluation = {"episodes": [
...     {"task_id": "os", "sample_id": str(i // 2), "success": i < 3, "reward": 0.0}
...     for i in range(8)]}
>>> print(success_table(success_intervals(evaluation)))
| task | instances | episodes | success | 95% interval over instances |
|---|---|---|---|---|
| os | 4 | 8 | 0.375 | [-0.387, 1.137] |
| mean over tasks | | 8 | 0.375 | [-0.387, 1.137] |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .paired_eval import by_instance
from .stats import Interval, mean_interval, mean_of_means_interval


@dataclass(frozen=True)
class SuccessIntervals:
    tasks: dict[str, Interval]  # per task: mean success, its interval, n = instances
    episodes: dict[str, int]
    mean: Interval  # the mean over tasks; n = instances of all tasks


def success_intervals(evaluation: Mapping[str, Any]) -> SuccessIntervals:
    """Success per task and over tasks of one evaluation, each with its 95% interval."""
    grouped = by_instance(evaluation)
    if not grouped:
        raise ValueError("the evaluation has no episodes")
    rates = {
        task: [
            sum(float(e["success"]) for e in attempts) / len(attempts)
            for attempts in instances.values()
        ]
        for task, instances in sorted(grouped.items())
    }
    return SuccessIntervals(
        tasks={task: mean_interval(values) for task, values in rates.items()},
        episodes={
            task: sum(len(a) for a in instances.values())
            for task, instances in sorted(grouped.items())
        },
        mean=mean_of_means_interval(list(rates.values())),
    )


def success_table(result: SuccessIntervals) -> str:
    """Markdown: one row per task and one for the mean over tasks."""
    lines = [
        "| task | instances | episodes | success | 95% interval over instances |",
        "|---|---|---|---|---|",
    ]
    for task, interval in result.tasks.items():
        lines.append(
            f"| {task} | {interval.n} | {result.episodes[task]} | {interval.mean:.3f} | "
            f"[{interval.low:.3f}, {interval.high:.3f}] |"
        )
    m = result.mean
    lines.append(
        f"| mean over tasks | | {sum(result.episodes.values())} | {m.mean:.3f} | "
        f"[{m.low:.3f}, {m.high:.3f}] |"
    )
    return "\n".join(lines)
