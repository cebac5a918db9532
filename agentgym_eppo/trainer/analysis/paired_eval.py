"""Two evaluations of the same instances, compared instance by instance.

An evaluation's JSON (:mod:`agentgym_eppo.trainer.rollout.evaluation`) lists every
episode. Two evaluations with the same protocol and seed play the same instances, so the
question "did training raise dev success?" is a paired one: for each instance, the change
in its success rate (the mean over its attempts). Per task, an exact sign test on those
changes; over tasks, a paired permutation test of the mean over tasks (each task
weighted equally, as ``mean_success`` is). Both one-sided: is ``after`` better?

>>> before = {"episodes": [
...     {"task_id": "os", "sample_id": "a", "success": False, "reward": 0.0},
...     {"task_id": "os", "sample_id": "b", "success": True, "reward": 1.0}]}
>>> after = {"episodes": [
...     {"task_id": "os", "sample_id": "a", "success": True, "reward": 1.0},
...     {"task_id": "os", "sample_id": "b", "success": True, "reward": 1.0}]}
>>> comparison = compare_evals(before, after, rounds=200)
>>> comparison.tasks["os"].before, comparison.tasks["os"].after, comparison.tasks["os"].instances
(0.5, 1.0, 2)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .stats import TestResult, paired_permutation_test, sign_test


@dataclass(frozen=True)
class TaskChange:
    instances: int  # instances played in both evaluations
    episodes_before: int
    episodes_after: int
    before: float  # success over the paired instances' episodes
    after: float
    reward_before: float
    reward_after: float
    test: TestResult  # sign test on the per-instance changes


@dataclass(frozen=True)
class EvalComparison:
    tasks: dict[str, TaskChange]
    mean_before: float
    mean_after: float
    test: TestResult  # permutation test of the mean over tasks


def by_instance(result: Mapping[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """An evaluation's episodes grouped by task, then by instance (``sample_id``)."""
    if "episodes" not in result:
        raise ValueError(
            "an evaluation without its episodes (written before they were recorded) "
            "cannot be compared pair by pair"
        )
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for episode in result["episodes"]:
        grouped[episode["task_id"]][str(episode["sample_id"])].append(episode)
    return grouped


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def compare_evals(
    before: Mapping[str, Any], after: Mapping[str, Any], rounds: int = 20_000, seed: int = 0
) -> EvalComparison:
    """``after`` against ``before`` on the instances both played."""
    a, b = by_instance(before), by_instance(after)
    tasks: dict[str, TaskChange] = {}
    differences: dict[str, list[float]] = {}
    for task in sorted(set(a) & set(b)):
        shared = sorted(set(a[task]) & set(b[task]))
        if not shared:
            continue
        change = []
        for instance in shared:
            change.append(
                _mean([float(e["success"]) for e in b[task][instance]])
                - _mean([float(e["success"]) for e in a[task][instance]])
            )
        old = [e for i in shared for e in a[task][i]]
        new = [e for i in shared for e in b[task][i]]
        differences[task] = change
        tasks[task] = TaskChange(
            instances=len(shared),
            episodes_before=len(old),
            episodes_after=len(new),
            before=_mean([float(e["success"]) for e in old]),
            after=_mean([float(e["success"]) for e in new]),
            reward_before=_mean([float(e["reward"]) for e in old]),
            reward_after=_mean([float(e["reward"]) for e in new]),
            test=sign_test(change, "greater"),
        )
    if not tasks:
        raise ValueError("the two evaluations share no instance")
    return EvalComparison(
        tasks=tasks,
        mean_before=_mean([t.before for t in tasks.values()]),
        mean_after=_mean([t.after for t in tasks.values()]),
        test=paired_permutation_test(differences, "greater", rounds=rounds, seed=seed),
    )


def comparison_table(
    comparison: EvalComparison, before: str = "before", after: str = "after"
) -> str:
    """Markdown: per task success and reward before and after, and the tests."""
    lines = [
        f"| task | instances | success {before} | success {after} | reward {before} | "
        f"reward {after} | sign test p (one-sided) |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, c in comparison.tasks.items():
        lines.append(
            f"| {task} | {c.instances} | {c.before:.3f} | {c.after:.3f} | {c.reward_before:.3f} | "
            f"{c.reward_after:.3f} | {c.test.p_value:.3g} |"
        )
    t = comparison.test
    lines.append(
        f"| mean over tasks | | {comparison.mean_before:.3f} | {comparison.mean_after:.3f} | | | "
        f"permutation p = {t.p_value:.3g} ({t.method}) |"
    )
    return "\n".join(lines)
