"""The statistics of a comparison over seeds: intervals over seeds, two methods paired
seed by seed (:func:`paired_over_seeds`) and instance by instance within one seed
(:func:`instance_pairs`), which evaluation instances each seed played
(:func:`instance_draw`), and the curves and clip ranges of several runs.

The tests themselves are :mod:`.stats`' (:func:`~.stats.mean_interval`,
:func:`~.stats.paired_permutation_test`) and :mod:`.paired_eval`'s
(:func:`~.paired_eval.compare_evals`); this module says what they are applied to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .compare_collect import SeedResult
from .paired_eval import compare_evals
from .plots import ordered_tasks
from .run_dir import RunMetrics
from .stats import Interval, TestResult, mean_interval, paired_permutation_test


def finite_interval(values: Iterable[float]) -> Interval | None:
    """The mean of the finite values with its 95% Student-t interval (``NaN`` values
    are left out); ``None`` when none is finite.

    >>> str(finite_interval([1.0, float("nan"), 2.0, 3.0])), finite_interval([])
    ('2.000 [-0.484, 4.484]', None)
    """
    finite = [float(v) for v in values if math.isfinite(v)]
    return mean_interval(finite) if finite else None


@dataclass(frozen=True)
class PairedSeeds:
    """``method`` against ``reference`` on one quantity, paired by seed: the differences
    (method - reference) on the seeds both have, and their test (``None`` under 2 seeds)."""

    method: str
    reference: str
    quantity: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    test: TestResult | None

    def cell(self) -> str:
        """``+diff [low, high], p = ..``, or why there is no test."""
        if self.test is None:
            return f"not enough seeds ({len(self.seeds)} common)"
        d = self.test.difference
        return f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}], p = {self.test.p_value:.3g}"


def paired_over_seeds(
    results: Mapping[str, Sequence[SeedResult]],
    method: str,
    reference: str,
    quantity: str,
    alternative: str = "two-sided",
) -> PairedSeeds:
    """The paired test of ``method`` against ``reference`` on ``quantity`` over the seeds
    both finished with a value: :func:`~.stats.paired_permutation_test` (one group, the
    seeds; exact sign flips wherever they can be enumerated) on method - reference.

    >>> from pathlib import Path
    >>> runs = {m: [SeedResult(s, Path(), {"mean_success": v + s / 10}, {}) for s in range(3)]
    ...         for m, v in (("a", 0.5), ("b", 0.25))}
    >>> paired = paired_over_seeds(runs, "a", "b", "mean_success", "greater")
    >>> paired.seeds, round(paired.test.p_value, 3), paired.test.method
    ((0, 1, 2), 0.125, 'exact')
    """
    ours = {r.seed: r.value(quantity) for r in results.get(method, ())}
    theirs = {r.seed: r.value(quantity) for r in results.get(reference, ())}
    seeds = tuple(
        s
        for s in sorted(set(ours) & set(theirs))
        if math.isfinite(ours[s]) and math.isfinite(theirs[s])
    )
    differences = tuple(ours[s] - theirs[s] for s in seeds)
    test = paired_permutation_test({"seeds": differences}, alternative) if len(seeds) >= 2 else None
    return PairedSeeds(method, reference, quantity, seeds, differences, test)


@dataclass(frozen=True)
class InstancePairs:
    """``method`` against ``reference`` within one seed, instance by instance
    (:func:`~.paired_eval.compare_evals` of their two evaluations)."""

    method: str
    reference: str
    seed: int
    instances: int
    difference: float  # mean over tasks of success, method - reference
    p_value: float  # two-sided: twice the smaller one-sided p
    test_method: str


def instance_pairs(
    results: Mapping[str, Sequence[SeedResult]], method: str, reference: str
) -> list[InstancePairs]:
    """The instance-level paired test of each seed both methods finished with their
    evaluation's episodes (evaluations written before episodes were recorded are skipped)."""
    ours = {r.seed: r.evaluation for r in results.get(method, ())}
    theirs = {r.seed: r.evaluation for r in results.get(reference, ())}
    pairs = []
    for seed in sorted(set(ours) & set(theirs)):
        a, b = theirs[seed], ours[seed]
        if a is None or b is None or "episodes" not in a or "episodes" not in b:
            continue
        better, worse = compare_evals(a, b), compare_evals(b, a)  # each test is one-sided
        pairs.append(
            InstancePairs(
                method,
                reference,
                seed,
                sum(task.instances for task in better.tasks.values()),
                better.mean_after - better.mean_before,
                min(1.0, 2.0 * min(better.test.p_value, worse.test.p_value)),
                better.test.method,
            )
        )
    return pairs


@dataclass(frozen=True)
class InstanceDraw:
    """Which evaluation instances each seed played on one split, read from the
    evaluations' episodes: per task and seed the sorted sample ids (those of the seed's
    first method), and each (method, seed) whose ids differ from its seed's first
    method's (``mismatched``). Seeds that played different instances pair as seeds, not
    as instances."""

    split: str
    played: Mapping[str, Mapping[int, tuple[str, ...]]]
    mismatched: tuple[tuple[str, int], ...] = ()

    def in_every_seed(self, task: str) -> int:
        """How many of the task's instances every seed played."""
        return len(set.intersection(*(set(ids) for ids in self.played[task].values())))

    def in_any_seed(self, task: str) -> int:
        """How many of the task's instances at least one seed played."""
        return len(set.union(*(set(ids) for ids in self.played[task].values())))

    def shared_by_two_seeds(self, task: str) -> tuple[int, int]:
        """The fewest and most instances of the task two seeds have in common."""
        draws = [set(ids) for ids in self.played[task].values()]
        common = [len(a & b) for k, a in enumerate(draws) for b in draws[k + 1 :]]
        return (min(common), max(common)) if common else (len(draws[0]), len(draws[0]))

    def varying_tasks(self) -> list[str]:
        """The tasks whose instances differ between seeds."""
        return [task for task, by_seed in self.played.items() if len(set(by_seed.values())) > 1]


def instance_draw(results: Mapping[str, Sequence[SeedResult]], split: str) -> InstanceDraw | None:
    """The :class:`InstanceDraw` of the evaluations in ``results`` (``None`` when none
    recorded its episodes).

    >>> from pathlib import Path
    >>> def run(seed, ids):
    ...     episodes = [{"task_id": "db", "sample_id": i} for i in ids]
    ...     return SeedResult(seed, Path(), {}, {}, evaluation={"episodes": episodes})
    >>> draw = instance_draw({"a": [run(0, "xy"), run(1, "yz")], "b": [run(0, "xy")]}, "dev")
    >>> draw.in_every_seed("db"), draw.in_any_seed("db"), draw.varying_tasks(), draw.mismatched
    (1, 3, ['db'], ())
    """
    played: dict[str, dict[int, tuple[str, ...]]] = {}
    first: dict[int, dict[str, tuple[str, ...]]] = {}
    mismatched: list[tuple[str, int]] = []
    for method, seeds in results.items():
        for r in seeds:
            if r.evaluation is None or "episodes" not in r.evaluation:
                continue
            ids: dict[str, set[str]] = {}
            for episode in r.evaluation["episodes"]:
                ids.setdefault(str(episode["task_id"]), set()).add(str(episode["sample_id"]))
            draw = {task: tuple(sorted(found)) for task, found in ids.items()}
            if r.seed not in first:
                first[r.seed] = draw
                for task, found_ids in draw.items():
                    played.setdefault(task, {})[r.seed] = found_ids
            elif draw != first[r.seed]:
                mismatched.append((method, r.seed))
    if not played:
        return None
    ordered = {task: dict(sorted(played[task].items())) for task in ordered_tasks(set(played))}
    return InstanceDraw(split, ordered, tuple(mismatched))


def clip_range_span(seeds: Sequence[SeedResult]) -> tuple[float, float] | None:
    """The smallest and largest clip range (``clip_eps``) of any task at any step of the
    runs; ``None`` when none recorded one."""
    values = [
        value
        for r in seeds
        for series in r.run_metrics().task_series("clip_eps").values()
        for value in series.tolist()
        if math.isfinite(value)
    ]
    return (min(values), max(values)) if values else None


def mean_curves(
    runs: Sequence[RunMetrics], field_name: str, steps: NDArray[np.int64]
) -> dict[str, NDArray[np.float64]]:
    """Each task's ``field_name`` at each of ``steps``: the mean over the runs that
    recorded it at that step (``NaN`` where none did).

    >>> runs = [RunMetrics(np.asarray([1, 2]), ({"tasks": {"os": {"entropy": e}}}, {"tasks": {}}))
    ...         for e in (1.0, 2.0)]
    >>> mean_curves(runs, "entropy", np.asarray([1, 2]))["os"].tolist()
    [1.5, nan]
    """
    position = {int(s): k for k, s in enumerate(steps)}
    sums: dict[str, NDArray[np.float64]] = {}
    counts: dict[str, NDArray[np.float64]] = {}
    for run in runs:
        at = np.asarray([position[int(s)] for s in run.steps], dtype=np.int64)
        for task, series in run.task_series(field_name).items():
            finite = np.isfinite(series)
            sums.setdefault(task, np.zeros(len(steps)))[at[finite]] += series[finite]
            counts.setdefault(task, np.zeros(len(steps)))[at[finite]] += 1
    return {
        task: np.where(counts[task] > 0, sums[task] / np.maximum(counts[task], 1), np.nan)
        for task in sums
    }
