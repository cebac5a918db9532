"""The comparison report's ``report.json``: every per-seed number, interval and test
behind its tables (``NaN`` written as ``null``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .compare_claims import ComparisonTests, ConfirmationTests, Verdict
from .compare_collect import CLIP_SHARES, DIAGNOSTIC_TITLES, PER_TASK_CLIP, SeedResult
from .compare_stats import (
    InstanceDraw,
    InstancePairs,
    PairedSeeds,
    clip_range_span,
    finite_interval,
)
from .diagnostics import finite_std
from .run_dir import json_safe


def report_json(
    results: Mapping[str, Sequence[SeedResult]],
    tests: ComparisonTests,
    *,
    planned_seeds: Mapping[str, Sequence[int]],
    start_success: Mapping[str, float] | None,
    start_name: str | None,
    failures: Mapping[str, str],
) -> dict[str, Any]:
    """The report's JSON: the plan, the start, the failed runs, every seed's numbers,
    the intervals over seeds, and every test of ``tests``."""
    tasks = tests.tasks
    quantities = [*tasks, "mean_success", *DIAGNOSTIC_TITLES, *CLIP_SHARES]
    paired = [*(p for pairs in tests.paired.values() for p in pairs), *tests.diagnostic_pairs]
    signal = tests.signal
    return json_safe(
        {
            "planned_seeds": {m: list(seeds) for m, seeds in planned_seeds.items()},
            "start_name": start_name,
            "start_success": dict(start_success or {}),
            "failures": dict(failures),
            "methods": {
                method: [
                    {
                        "seed": r.seed,
                        "run_dir": str(r.run_dir),
                        "success": dict(r.success),
                        "diagnostics": dict(r.diagnostics),
                        "per_task": {k: dict(v) for k, v in r.per_task.items()},
                    }
                    for r in seeds
                ]
                for method, seeds in results.items()
            },
            "intervals": {
                "about": "mean over seeds with its 95% Student-t interval",
                "methods": {
                    method: {
                        **{q: _summary(r.value(q) for r in seeds) for q in quantities},
                        **{
                            f"{key}/{task}": _summary(
                                r.per_task.get(key, {}).get(task, math.nan) for r in seeds
                            )
                            for key in PER_TASK_CLIP
                            for task in tasks
                        },
                    }
                    for method, seeds in results.items()
                },
            },
            "clip_range_span": {
                method: clip_range_span(seeds) for method, seeds in results.items() if seeds
            },
            "paired": [_pair_json(p) for p in paired],
            "instances": _instances_json(tests.instances),
            "instance_level": [_instance_json(p) for p in tests.instance_level],
            "claims": [_verdict_json(v) for v in tests.verdicts],
            "claims_on_tasks_with_signal": None
            if signal is None
            else {
                "tasks": list(signal.tasks),
                "about": "figure 1(c)'s claims on the entropy curves of the tasks the start "
                "solves at all (dev success above 0)",
                "claims": [_verdict_json(v) for v in signal.verdicts],
            },
            "confirmation": None
            if tests.confirmed is None
            else _confirmation_json(tests.confirmed),
        }
    )


def _summary(values: Iterable[float]) -> dict[str, float | int]:
    """Mean, 95% t interval, sample std and count of the finite values.

    >>> _summary([1.0, 2.0, 3.0, float("nan")])["std"], _summary([float("nan")])
    (1.0, {'n': 0})
    """
    values = list(values)
    interval = finite_interval(values)
    if interval is None:
        return {"n": 0}
    return {
        "mean": interval.mean,
        "low": interval.low,
        "high": interval.high,
        "std": finite_std(values),
        "n": interval.n,
    }


def _instances_json(draw: InstanceDraw | None) -> dict[str, Any] | None:
    if draw is None:
        return None
    return {
        "split": draw.split,
        "about": "per task, the sample ids each seed played (those of the seed's first method)",
        "varying_tasks": draw.varying_tasks(),
        "mismatched": [[method, seed] for method, seed in draw.mismatched],
        "tasks": {
            task: {
                "in_every_seed": draw.in_every_seed(task),
                "in_any_seed": draw.in_any_seed(task),
                "shared_by_two_seeds": list(draw.shared_by_two_seeds(task)),
                "seeds": {str(seed): list(ids) for seed, ids in by_seed.items()},
            }
            for task, by_seed in draw.played.items()
        },
    }


def _instance_json(pair: InstancePairs) -> dict[str, Any]:
    return {
        "method": pair.method,
        "reference": pair.reference,
        "seed": pair.seed,
        "instances": pair.instances,
        "difference": pair.difference,
        "p_value": pair.p_value,
        "alternative": "two-sided",
        "test": pair.test_method,
    }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    return {
        "source": verdict.claim.source,
        "quantity": verdict.claim.quantity,
        "better": verdict.claim.better,
        "worse": verdict.claim.worse,
        "verdict": verdict.verdict,
        "paper_gain": verdict.claim.paper_gain,
        "claimed": _pair_json(verdict.claimed),
        "opposite": _pair_json(verdict.opposite),
    }


def _confirmation_json(confirmed: ConfirmationTests) -> dict[str, Any]:
    results = confirmed.confirmation.results
    return {
        "split": confirmed.confirmation.split,
        "methods": {
            method: [
                {"seed": r.seed, "confirm_dir": str(r.run_dir), "success": dict(r.success)}
                for r in seeds
            ]
            for method, seeds in results.items()
        },
        "missing": {
            method: {str(seed): why for seed, why in missing.items()}
            for method, missing in confirmed.confirmation.missing.items()
        },
        "intervals": {
            "about": "mean over confirmed seeds with its 95% Student-t interval",
            "methods": {
                method: {
                    q: _summary(r.value(q) for r in seeds)
                    for q in [*confirmed.tasks, "mean_success"]
                }
                for method, seeds in results.items()
            },
        },
        "paired": [_pair_json(p) for p in confirmed.paired],
        "claims": [_verdict_json(v) for v in confirmed.verdicts],
        "instances": _instances_json(confirmed.instances),
        "instance_level": [_instance_json(p) for p in confirmed.instance_level],
    }


def _pair_json(pair: PairedSeeds) -> dict[str, Any]:
    test = pair.test
    return {
        "method": pair.method,
        "reference": pair.reference,
        "quantity": pair.quantity,
        "seeds": list(pair.seeds),
        "differences": list(pair.differences),
        "difference": None
        if test is None
        else {
            "mean": test.difference.mean,
            "low": test.difference.low,
            "high": test.difference.high,
        },
        "p_value": None if test is None else test.p_value,
        "alternative": None if test is None else test.alternative,
        "test": "not enough seeds" if test is None else f"{test.name}, {test.method}",
    }
