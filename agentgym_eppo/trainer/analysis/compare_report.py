"""The report of a method comparison: dev success, clipping and entropy diagnostics over
seeds, every difference tested pair by pair, the paper's claims judged by those tests.

Input: for each method, the run directories of its finished seeds (layout in
docs/trainer.md, "The run directory"), its planned seeds, and the shared start's dev
success. Output, in the comparison folder:

- ``report.md``: the runs finished of those planned per method; the paper's tables 1, 4
  and 6 on our numbers (success per task and its mean over tasks, each a mean over seeds
  with its 95% Student-t interval, the start as a reference row) and, below each, every
  method paired against the table's reference; which evaluation instances each seed
  played (:class:`InstanceDraw`); the instance-level paired test within each seed; per
  method and task the share of loss tokens clipped and the mean clip range; figure 1(c)'s
  three diagnostics; the verdict on each of the paper's claims, set against the paper's
  gain where it has one, and figure 1(c)'s claims again on the tasks with signal where
  some task has none; when the headline runs are confirmed on another split
  (:class:`Confirmation`), their success there per seed and the primary test repeated on
  it; the plots;
- ``report.json``: every per-seed number, interval and test behind those tables;
- ``plots/``: diagnostics per method (figure 1c) and mean success, with 95% t intervals;
  per-task entropy of AgentRL and EPPO side by side (mean over seeds, one panel per task);
  per-task entropy, clip range and z-scores of each method's first seed (figure 1a/b, 4).

Two methods are compared on the seeds both finished (the same seed draws the same
training instances in every method): the paired differences' mean, its 95% t interval,
and the exact sign-flip test of :func:`~.stats.paired_permutation_test` on them. Such a
test pairs seeds, not instances: whether two seeds played the same evaluation instances
is read from the evaluations' episodes and said in the report. The mean over tasks is
unweighted, as the paper's AVG column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .diagnostics import LATE_TAIL, diagnose_curves, finite_mean, finite_std
from .paired_eval import compare_evals
from .plots import ordered_tasks, plot_method_bars, plot_method_grid
from .run_dir import RunMetrics, eval_success, json_safe, read_evals, read_metrics
from .stats import TestResult, mean_interval, paired_permutation_test

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
START_LABEL = "start (shared)"
ALPHA = 0.05
"""A one-sided p under this, in either direction, decides a claim."""

BASELINE = "grpo_tan"
HEADLINE = (BASELINE, "eppo")
"""The pair whose per-task entropy curves are drawn side by side."""

METHOD_NAMES = {
    "grpo_tan": "AgentRL",
    "eppo": "EPPO",
    "eppo_no_taskwise": "EPPO w/o task-wise clip",
    "eppo_no_trend": "EPPO w/o trend constraint",
    "dapo": "DAPO",
    "dcpo": "DCPO",
    "bapo": "BAPO",
    "rloo": "RLOO",
    "rloo_eppo": "RLOO + EPPO",
}
"""The paper's name of each method of ``configs/compare-cpu.yaml``."""

DIAGNOSTIC_TITLES = {
    "crossover_count": "crossover count (lower better)",
    "trend_r2": "trend R² vs log t (higher better)",
    "late_spike_max": "late spike amplitude (lower better)",
}
DIAGNOSTIC_DIGITS = {"crossover_count": 1, "trend_r2": 3, "late_spike_max": 3}

CLIP_SHARES = {"ratio_outside_share": (), "clipped_share": ("clip_fraction",)}
"""Per-step clip metrics averaged per seed, with the names older runs recorded them under."""

PER_TASK_CLIP = {
    "clipped_share": ("share of loss tokens clipped", ("clip_fraction",), 4),
    "clip_eps": ("mean clip range ε", (), 3),
}
"""Per-task metrics averaged over steps per seed: (title, older names, digits)."""


@dataclass(frozen=True)
class PaperTable:
    """One of the paper's success tables on our numbers: its rows (every method when
    empty) and the method every other row is paired against."""

    source: str
    title: str
    methods: tuple[str, ...]
    reference: str


PAPER_TABLES = (
    PaperTable("Table 1", "every method", (), BASELINE),
    PaperTable(
        "Table 4", "EPPO and its ablations", ("eppo", "eppo_no_taskwise", "eppo_no_trend"), "eppo"
    ),
    PaperTable("Table 6", "RLOO and RLOO + EPPO", ("rloo", "rloo_eppo"), "rloo"),
)


@dataclass(frozen=True)
class PaperClaim:
    """A comparison the paper makes, checkable on our numbers: ``better`` beats ``worse``.
    ``paper_gain``: the paper's own difference (better - worse, success as a share), which
    our interval is set against: one that ends below it excludes a gain that large."""

    source: str
    quantity: str  # "mean_success" or a key of DIAGNOSTIC_TITLES
    better: str
    worse: str
    paper: str
    higher_is_better: bool = True
    paper_gain: float | None = None


PAPER_CLAIMS = (
    PaperClaim(
        "Table 1",
        "mean_success",
        "eppo",
        "grpo_tan",
        "EPPO 54.3 vs AgentRL 51.6 AVG",
        paper_gain=0.027,
    ),
    PaperClaim(
        "Table 4",
        "mean_success",
        "eppo",
        "eppo_no_taskwise",
        "54.3 vs 48.8 (five-task), 59.1 vs 58.4 (three-task)",
    ),
    PaperClaim(
        "Table 4",
        "mean_success",
        "eppo",
        "eppo_no_trend",
        "54.3 vs 47.1 (five-task), 59.1 vs 57.6 (three-task)",
    ),
    PaperClaim("Table 6", "mean_success", "rloo_eppo", "rloo", "57.3 vs 55.9 (three-task)"),
    PaperClaim(
        "Fig. 1c", "crossover_count", "eppo", "grpo_tan", "fewer crossovers", higher_is_better=False
    ),
    PaperClaim("Fig. 1c", "trend_r2", "eppo", "grpo_tan", "higher trend R²"),
    PaperClaim(
        "Fig. 1c",
        "late_spike_max",
        "eppo",
        "grpo_tan",
        "weaker late spikes",
        higher_is_better=False,
    ),
)
"""The claims of tables 1, 4, 6 and figure 1(c); method names are ``configs/compare-cpu.yaml``'s."""


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


CONFIRM_STAGE = "before_sft"
"""The stage of an evaluation-only run: the one evaluation of a confirmation's folder."""


def collect_confirmation(seed: int, confirm_dir: Path, split: str) -> SeedResult:
    """Read one headline run's confirmation: its final checkpoint evaluated on ``split``
    with the protocol (``eval_before_sft.json`` of an evaluation-only run). Success only:
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

    @property
    def confirmed(self) -> bool:
        return any(self.results.values())


def _first_series(metrics: RunMetrics, names: Sequence[str]) -> dict[str, NDArray[np.float64]]:
    """The per-task series of the first of ``names`` the run recorded (runs written
    before a metric was renamed carry its old name)."""
    for name in names:
        series = metrics.task_series(name)
        if series:
            return dict(series)
    return {}


def interval_cell(values: Iterable[float], digits: int = 3) -> str:
    """``mean [low, high]``: the mean over seeds with its 95% Student-t interval; one
    seed has no interval, no seed no value (``NaN`` values are left out).

    >>> interval_cell([0.75, 0.625, 0.5])
    '0.625 [0.314, 0.936]'
    >>> interval_cell([0.4]), interval_cell([float("nan")])
    ('0.400 (1 seed)', 'n/a')
    """
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return "n/a"
    interval = mean_interval(finite)
    if interval.n == 1:
        return f"{interval.mean:.{digits}f} (1 seed)"
    return f"{interval.mean:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def _summary(values: Iterable[float]) -> dict[str, float | int]:
    """Mean, 95% t interval, sample std and count of the finite values (for the JSON)."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return {"n": 0}
    interval = mean_interval(finite)
    return {
        "mean": interval.mean,
        "low": interval.low,
        "high": interval.high,
        "std": finite_std(finite),
        "n": interval.n,
    }


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
class Verdict:
    """A claim judged by the paired test over seeds, one-sided each way."""

    claim: PaperClaim
    verdict: str  # "supported", "contradicted" or "not resolved at this scale"
    claimed: PairedSeeds  # better - worse, the claim's direction
    opposite: PairedSeeds  # the other direction

    @property
    def smallest_p(self) -> float:
        """The smallest one-sided p the exact sign-flip test can give on these seeds:
        ``2^-n`` for ``n`` non-zero differences (a zero difference flips to itself)."""
        return 0.5 ** sum(1 for d in self.claimed.differences if d != 0)


def claim_verdict(claim: PaperClaim, results: Mapping[str, Sequence[SeedResult]]) -> Verdict:
    """Whether our seeds support a claim of the paper: *supported* when the one-sided
    paired test in the claim's direction has p < :data:`ALPHA`, *contradicted* when the
    one in the opposite direction does, otherwise *not resolved at this scale* (always
    so with fewer than two common seeds)."""
    directions = ("greater", "less") if claim.higher_is_better else ("less", "greater")
    claimed, opposite = (
        paired_over_seeds(results, claim.better, claim.worse, claim.quantity, alternative)
        for alternative in directions
    )
    verdict = "not resolved at this scale"
    if claimed.test is not None and opposite.test is not None:
        if claimed.test.p_value < ALPHA:
            verdict = "supported"
        elif opposite.test.p_value < ALPHA:
            verdict = "contradicted"
    return Verdict(claim, verdict, claimed, opposite)


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


@dataclass(frozen=True)
class ConfirmationTests:
    """The tests of a :class:`Confirmation`, all on its split: each headline method paired
    against the baseline by seed per task and on the mean over tasks (two-sided); the
    paper's claims between headline methods on the mean success (the primary test,
    one-sided, judged as on dev); the instance-level test within each seed; which
    instances each seed played there."""

    confirmation: Confirmation
    tasks: tuple[str, ...]
    paired: tuple[PairedSeeds, ...]
    verdicts: tuple[Verdict, ...]
    instance_level: tuple[InstancePairs, ...]
    instances: InstanceDraw | None = None

    @classmethod
    def of(cls, confirmation: Confirmation, dev_tasks: Sequence[str]) -> ConfirmationTests:
        """Run the tests on the confirmed seeds (the dev tasks while none is confirmed)."""
        results = confirmation.results
        played = {t for seeds in results.values() for r in seeds for t in r.success}
        tasks = ordered_tasks(played - {"mean_success"}) or list(dev_tasks)
        pairs = table_pairs(PAPER_TABLES[0], list(results))
        return cls(
            confirmation,
            tuple(tasks),
            tuple(
                paired_over_seeds(results, m, ref, q)
                for m, ref in pairs
                for q in [*tasks, "mean_success"]
            ),
            tuple(
                claim_verdict(claim, results)
                for claim in PAPER_CLAIMS
                if claim.quantity == "mean_success" and {claim.better, claim.worse} <= set(results)
            ),
            tuple(p for m, ref in pairs for p in instance_pairs(results, m, ref)),
            instance_draw(results, confirmation.split),
        )


def table_rows(table: PaperTable, methods: Sequence[str]) -> list[str]:
    """The methods of ``table`` among ``methods``: in the paper's order, or all of them."""
    return [m for m in table.methods if m in methods] if table.methods else list(methods)


def table_pairs(table: PaperTable, methods: Sequence[str]) -> list[tuple[str, str]]:
    """The (method, reference) pairs of ``table`` among ``methods``, in display order.

    >>> table_pairs(PAPER_TABLES[1], ["grpo_tan", "eppo", "eppo_no_trend", "eppo_no_taskwise"])
    [('eppo_no_taskwise', 'eppo'), ('eppo_no_trend', 'eppo')]
    """
    rows = table_rows(table, methods)
    if table.reference not in rows:
        return []
    return [(m, table.reference) for m in rows if m != table.reference]


def method_label(method: str) -> str:
    """``eppo`` -> ``eppo (EPPO)``: the config's name and the paper's."""
    name = METHOD_NAMES.get(method)
    return f"{method} ({name})" if name else method


GLOBAL_ENTROPY_ABLATION = "eppo_no_taskwise"
"""EPPO w/o task-wise clip: the pacer sees one entropy, the token mean over tasks."""

SAME_CLIP_TOLERANCE = 0.01
"""A clip range within this share of the baseline's fixed one at every step is, in
effect, the baseline's clip (a method that differs from it by no more trains as it)."""


def clip_range_span(seeds: Sequence[SeedResult]) -> tuple[float, float] | None:
    """The smallest and largest clip range (``clip_eps``) of any task at any step of the
    runs; ``None`` when none recorded one."""
    values = [
        value
        for r in seeds
        for series in _metrics(r).task_series("clip_eps").values()
        for value in series.tolist()
        if math.isfinite(value)
    ]
    return (min(values), max(values)) if values else None


def _global_entropy_note(
    results: Mapping[str, Sequence[SeedResult]], table1: Sequence[PairedSeeds]
) -> list[str]:
    """What the global-entropy ablation's clip did, from its runs' clip ranges; where it
    never left the baseline's fixed range by more than :data:`SAME_CLIP_TOLERANCE`, that
    it is the baseline in effect, and its Table 1 difference the run-to-run noise."""
    runs = results.get(GLOBAL_ENTROPY_ABLATION, ())
    span = clip_range_span(runs) if runs else None
    if span is None:
        return []
    low, high = span
    count = f"{len(runs)} run" + ("s" if len(runs) > 1 else "")
    text = (
        f"{method_label(GLOBAL_ENTROPY_ABLATION)} paces one entropy under one key: a cohort "
        "of one, so its z is 0 (eq. 8) and eq. 9 gives ε0; only the trend constraint "
        f"(eq. 11) moves its range. Over every step of its {count} the clip range stayed in "
        f"[{low:.4f}, {high:.4f}]"
    )
    fixed = clip_range_span(results.get(BASELINE, ())) if results.get(BASELINE) else None
    if fixed is None or fixed[0] != fixed[1]:
        return ["", text + "."]
    eps = fixed[0]
    if max(abs(low - eps), abs(high - eps)) > SAME_CLIP_TOLERANCE * eps:
        return ["", text + f", against {method_label(BASELINE)}'s fixed {eps:.4f}."]
    noise = next(
        (
            p.cell()
            for p in table1
            if (p.method, p.reference, p.quantity)
            == (GLOBAL_ENTROPY_ABLATION, BASELINE, "mean_success")
        ),
        "no common seed",
    )
    return [
        "",
        text + f", within {SAME_CLIP_TOLERANCE:.0%} of {method_label(BASELINE)}'s fixed "
        f"{eps:.4f}: in effect it is {METHOD_NAMES[BASELINE]}. Its differences from "
        f"{BASELINE} (Table 1, mean over tasks: {noise}) measure run-to-run noise, and its "
        "pairing with eppo above is EPPO against a second run of AgentRL's update.",
    ]


def tasks_with_signal(tasks: Sequence[str], start_success: Mapping[str, float]) -> list[str]:
    """The tasks the start solves at all (dev success above 0). On the others the start's
    groups end alike, so their tokens carry almost no advantage for a clip to act on.

    >>> tasks_with_signal(["os", "alfworld"], {"os": 0.7, "alfworld": 0.0})
    ['os']
    """
    return [task for task in tasks if start_success.get(task, 0.0) > 0]


def on_tasks(
    results: Mapping[str, Sequence[SeedResult]], tasks: Sequence[str]
) -> dict[str, list[SeedResult]]:
    """``results`` with figure 1(c)'s diagnostics recomputed on the entropy curves of
    ``tasks`` alone (the runs and every other number unchanged)."""
    restricted: dict[str, list[SeedResult]] = {}
    for method, seeds in results.items():
        restricted[method] = []
        for r in seeds:
            curves = _metrics(r).task_series("entropy")
            kept = {task: curves[task] for task in tasks if task in curves}
            diagnostics = {**r.diagnostics, **(figure_1c(kept) if kept else {})}
            restricted[method].append(replace(r, diagnostics=diagnostics))
    return restricted


def _signal_section(
    results: Mapping[str, Sequence[SeedResult]],
    verdicts: Sequence[Verdict],
    tasks: Sequence[str],
    signal: Sequence[str],
) -> tuple[list[str], list[Verdict]]:
    """Figure 1(c)'s claims again on the tasks with signal, beside the verdicts on every
    task; where they differ, the verdict on the tasks with signal stands. Returns the
    lines and the verdicts on those tasks."""
    silent = [task for task in tasks if task not in signal]
    restricted = on_tasks(results, signal)
    on_every = [v for v in verdicts if v.claim.quantity in DIAGNOSTIC_TITLES]
    claims = [v.claim for v in on_every]
    on_signal = [claim_verdict(claim, restricted) for claim in claims]

    def clipped(among: Sequence[str]) -> list[float]:
        """Each method's clipped share on each of ``among``, the mean over its seeds."""
        shares = (
            finite_mean(r.per_task.get("clipped_share", {}).get(task, math.nan) for r in seeds)
            for seeds in results.values()
            if seeds
            for task in among
        )
        return [share for share in shares if math.isfinite(share)]

    quiet, loud = clipped(silent), clipped(signal)
    share = (
        f", and the clip removed the gradient of at most {max(quiet):.2%} of their loss "
        f"tokens in any method ({min(loud):.2%}-{max(loud):.2%} on {', '.join(signal)}; "
        "mean over steps and seeds)"
        if quiet and loud
        else ""
    )
    lines = [
        "",
        "### Figure 1(c)'s claims on the tasks with signal",
        "",
        f"The start never solves {', '.join(silent)} (dev success 0), so their groups nearly "
        f"always end alike: few of their tokens carry an advantage{share}. Their entropy "
        "still moves with the shared weights and enters the diagnostics over every task. "
        f"The same claims on the entropy curves of {', '.join(signal)} alone:",
        "",
        _claims_table(restricted, on_signal),
    ]
    spikes = []
    for method in dict.fromkeys(m for c in claims for m in (c.better, c.worse)):
        for r in results.get(method, ()):
            spike = diagnose_curves(
                _metrics(r).task_series("entropy"), LATE_TAIL
            ).late_spike_per_task
            if spike and (top := max(spike, key=lambda t: spike[t])) in silent:
                spikes.append(f"{method} seed {r.seed} ({top} {spike[top]:.3f})")
    if spikes:
        lines += [
            "",
            f"Runs whose largest late spike came from a task without signal: {', '.join(spikes)}.",
        ]
    differ = [(a, b) for a, b in zip(on_every, on_signal, strict=True) if a.verdict != b.verdict]
    if not differ:
        lines += ["", "The verdicts are those on every task."]
        return lines, on_signal
    for every, only in differ:
        claim = every.claim
        sign = ">" if claim.higher_is_better else "<"
        lines += [
            "",
            f"{claim.better} {sign} {claim.worse} on {claim.quantity} ({claim.source}): "
            f"*{every.verdict}* on every task, *{only.verdict}* on {', '.join(signal)}. The "
            "verdict on the tasks with signal stands: a difference carried by tasks whose "
            "tokens the clip barely acts on is no evidence about the clip policy.",
        ]
    return lines, on_signal


def _paper_gain_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """Each tested claim with a paper's gain: our 95% interval set against it."""
    lines = []
    for v in verdicts:
        gain, test = v.claim.paper_gain, v.claimed.test
        if gain is None or test is None:
            continue
        d = test.difference
        if d.high < gain:
            where = (
                "ends below it: a gain as large as the paper's is excluded at this scale, "
                "a result in itself"
            )
        elif d.low > gain:
            where = "lies above it"
        else:
            where = "contains it: a gain as large as the paper's is not excluded"
        lines += [
            "",
            f"{v.claim.source}, {v.claim.better} - {v.claim.worse} on {v.claim.quantity}: the "
            f"paper's gain is {gain:+.3f} ({v.claim.paper}); our 95% interval of the "
            f"difference over {len(v.claimed.seeds)} seeds, [{d.low:+.3f}, {d.high:+.3f}], "
            f"{where}.",
        ]
    return lines


def _instances_section(draw: InstanceDraw | None) -> list[str]:
    """Which evaluation instances each seed played, and what that makes of the tests
    paired over seeds."""
    if draw is None:
        return ["No evaluation recorded its episodes: which instances each seed played is unknown."]
    split = draw.split
    seeds = sorted({seed for by_seed in draw.played.values() for seed in by_seed})
    varying = draw.varying_tasks()
    if len(seeds) < 2:
        text = f"One seed evaluated on the {split} split: nothing to compare across seeds."
    elif not varying:
        text = (
            f"Every seed played the same {split} instances of every task (below). A test "
            "paired over seeds still pairs seeds (a training run each), not instances."
        )
    else:
        same = [task for task in draw.played if task not in varying]
        text = (
            f"The seeds did not play the same {split} instances: those of "
            f"{', '.join(varying)} changed with the seed (each run drew them with its own "
            "seed)"
            + (f"; those of {', '.join(same)} did not" if same else "")
            + ". A test paired over seeds therefore pairs seeds, not instances: each pair is "
            "two runs that drew the same training instances and played the same evaluation "
            "instances, and the spread over seeds holds the spread of the instance draws as "
            "well as of the training runs."
        )
    if draw.mismatched:
        runs = ", ".join(f"{method} seed {seed}" for method, seed in draw.mismatched)
        text += (
            f" Within a seed the methods did not all play the same instances ({runs}); the "
            "instance-level tests pair only the instances both runs played."
        )
    else:
        text += " Within one seed every method played the same instances."
    rows = _header(
        ["task", "seeds"],
        ["instances a seed", "in every seed", "in any seed", "shared by two seeds"],
    )
    for task, by_seed in draw.played.items():
        sizes = sorted({len(ids) for ids in by_seed.values()})
        size = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        low, high = draw.shared_by_two_seeds(task)
        two = "-" if len(by_seed) < 2 else (str(low) if low == high else f"{low}-{high}")
        rows.append(
            f"| {task} | {list(by_seed)} | {size} | {draw.in_every_seed(task)} | "
            f"{draw.in_any_seed(task)} | {two} |"
        )
    return [text, "", *rows]


STATISTICS_NOTE = (
    "Each cell over seeds is `mean [low, high]`: the mean over the method's finished seeds "
    "and its 95% Student-t interval (mean ± t(0.975, n-1) · s / √n, s the sample std over "
    "seeds); a single seed has no interval. A paired cell is `+difference [low, high], p`: "
    "the mean over the seeds both methods finished (the same seed draws the same training "
    "instances; whether it also plays the same evaluation instances is said under "
    "'Evaluated instances') of method - reference, its 95% t interval, and the two-sided p of the "
    "paired sign-flip permutation test over those seeds (`p from` names how the p was had: "
    "exact enumeration or Monte Carlo). With n paired seeds no two-sided p is below "
    "2^(1-n): 0.0625 with 5 seeds, 0.25 with 3. Under two common seeds there is no test."
)

VERDICT_NOTE = (
    f"A claim is *supported* when the one-sided paired test over seeds in the claim's "
    f"direction has p < {ALPHA}, *contradicted* when the one-sided test of the opposite "
    f"direction has p < {ALPHA}, and *not resolved at this scale* otherwise (with n seeds "
    f"the exact test's p is at least 2^-n: three seeds can never reach {ALPHA})."
)


CONFIRMATION_NOTE = (
    "Each headline run's final checkpoint, evaluated once on the {split} split with the "
    "protocol of the dev evaluations (no other run is evaluated on it). The primary test "
    "is repeated on these numbers unchanged: the paired difference of the mean success "
    "over tasks on the seeds both methods have confirmed, its 95% t interval, and the "
    "one-sided exact sign-flip test in the claim's direction, judged as above."
)


PLOTS_NOTE = (
    "Bars (`diagnostics`, `success`): the mean over seeds, error bars its 95% t interval "
    "(none for one seed). `entropy_by_task`: AgentRL's and EPPO's entropy per task, the mean "
    "over seeds at each step. `entropy`, `clip_eps`, `zscore`: each method's first finished "
    "seed."
)


def _dev_split(results: Mapping[str, Sequence[SeedResult]]) -> str:
    """The split the runs' final evaluations played (``dev`` when none says)."""
    for seeds in results.values():
        for r in seeds:
            if r.evaluation is not None:
                return str(r.evaluation.get("split", "dev"))
    return "dev"


def write_compare_report(
    output_dir: Path,
    results: Mapping[str, Sequence[SeedResult]],
    *,
    planned_seeds: Mapping[str, Sequence[int]],
    start_success: Mapping[str, float] | None = None,
    start_name: str | None = None,
    failures: Mapping[str, str] | None = None,
    confirmation: Confirmation | None = None,
) -> Path:
    """Write ``report.md``, ``report.json`` and the plots; return ``report.md``.

    ``results`` maps each method (in display order) to its finished seeds; methods with
    none still get a row that says so. ``planned_seeds`` maps each method to the seeds it
    is planned with. ``start_success`` is the dev success of the checkpoint every run
    starts RL from (``start_name``: a named base model, or the SFT checkpoint trained for
    the comparison), its reference row. ``failures`` maps a run (``method/seed``) to its
    error, listed so a partial report never reads as complete. ``confirmation``: the
    headline runs' evaluation on another split, its own section (none without it).
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    failures = dict(failures or {})
    tasks = ordered_tasks(
        {t for seeds in results.values() for r in seeds for t in r.success} - {"mean_success"}
        | set(start_success or {})
    )
    paired = {
        table.source: [
            paired_over_seeds(results, m, ref, q)
            for m, ref in table_pairs(table, list(results))
            for q in [*tasks, "mean_success"]
        ]
        for table in PAPER_TABLES
    }
    diagnostic_pairs = [
        paired_over_seeds(results, m, ref, q)
        for m, ref in table_pairs(PAPER_TABLES[0], list(results))
        for q in DIAGNOSTIC_TITLES
    ]
    instance_level = [
        pair
        for table in PAPER_TABLES
        for m, ref in table_pairs(table, list(results))
        for pair in instance_pairs(results, m, ref)
    ]
    verdicts = [claim_verdict(claim, results) for claim in PAPER_CLAIMS]
    draw = instance_draw(results, _dev_split(results))
    signal = tasks_with_signal(tasks, start_success or {})
    signal_lines: list[str] = []
    signal_verdicts: list[Verdict] | None = None
    if 0 < len(signal) < len(tasks):
        signal_lines, signal_verdicts = _signal_section(results, verdicts, tasks, signal)
    confirmed = None if confirmation is None else ConfirmationTests.of(confirmation, tasks)
    plots = _write_plots(output_dir / "plots", results)
    report_json = _report_json(
        results,
        planned_seeds,
        start_success,
        start_name,
        failures,
        tasks,
        [*(p for pairs in paired.values() for p in pairs), *diagnostic_pairs],
        instance_level,
        verdicts,
        confirmed,
        draw,
        (signal, signal_verdicts),
    )
    (output_dir / REPORT_JSON).write_text(json.dumps(report_json, indent=2) + "\n")

    lines = ["# Method comparison", ""]
    lines += _runs_section(results, planned_seeds, failures)
    lines += ["", "## How the numbers are made", "", STATISTICS_NOTE]
    if start_success:
        name = f" (`{start_name}`)" if start_name else ""
        lines += [
            "",
            f"The {START_LABEL} row of each table is the checkpoint every run starts RL "
            f"from{name}, evaluated once with the same protocol: one evaluation, no interval.",
        ]
    for table in PAPER_TABLES:
        lines += ["", f"## {table.source}: dev success after RL, {table.title}", ""]
        lines.append(
            _success_table(results, table_rows(table, list(results)), tasks, start_success)
        )
        lines += ["", f"Paired against {method_label(table.reference)}:", ""]
        lines.append(_paired_table(paired[table.source], [*tasks, "mean_success"]))
        if table.source == "Table 4":
            lines += _global_entropy_note(results, paired["Table 1"])
    lines += ["", "## Evaluated instances", ""]
    lines += _instances_section(draw)
    lines += ["", "## Instance-level paired tests within each seed (secondary view)", ""]
    lines.append(_instance_table(instance_level, draw=draw))
    lines += ["", "## Clipping per task (mean over steps, then over seeds)", ""]
    for key, (title, _, digits) in PER_TASK_CLIP.items():
        lines += [f"{title[0].upper()}{title[1:]} (`{key}`):", ""]
        lines += [_per_task_table(results, tasks, key, digits), ""]
    lines += ["## Entropy diagnostics (figure 1c)", ""]
    lines.append(_diagnostics_table(results))
    lines += [
        "",
        "The two clip columns are means over steps and tasks: the share of loss tokens whose "
        "importance ratio lay outside their clip range, and the share whose gradient the clip "
        "removed. Near 0, the clip policies barely act on the loss.",
        "",
        f"Paired against {method_label(BASELINE)}:",
        "",
        _paired_table(diagnostic_pairs, list(DIAGNOSTIC_TITLES)),
    ]
    lines += ["", "## The paper's claims on our numbers", ""]
    lines.append(_claims_table(results, verdicts))
    lines += ["", VERDICT_NOTE]
    lines += _paper_gain_lines(verdicts)
    lines += signal_lines
    if confirmed is not None:
        lines += _confirmation_section(confirmed, results)
    if plots:
        lines += ["", "## Plots", "", PLOTS_NOTE, ""]
        lines += [f"![{name}](plots/{path.name})" for name, path in plots.items()]
    report = output_dir / REPORT_MD
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return report


def _confirmation_section(
    confirmed: ConfirmationTests, results: Mapping[str, Sequence[SeedResult]]
) -> list[str]:
    """The confirmation's section: which seeds have it and which not (and why), success
    per seed and over seeds beside the same runs' dev success, and its tests."""
    confirmation = confirmed.confirmation
    split = confirmation.split
    lines = ["", f"## Confirmation on the {split} split", "", CONFIRMATION_NOTE.format(split=split)]
    done = [
        f"{method_label(m)} seeds {[r.seed for r in seeds]}"
        for m, seeds in confirmation.results.items()
        if seeds
    ]
    if not done:
        lines += ["", f"No headline run has been evaluated on the {split} split yet."]
        return lines + _missing_lines(confirmation)
    lines += ["", f"Confirmed: {'; '.join(done)}.", *_missing_lines(confirmation)]
    reference = method_label(BASELINE)
    return [
        *lines,
        "",
        _confirmation_table(confirmation, results, confirmed.tasks),
        "",
        f"The primary test on the {split} split (seeds both methods confirmed):",
        "",
        _claims_table(confirmation.results, confirmed.verdicts),
        *_paper_gain_lines(confirmed.verdicts),
        "",
        f"Paired against {reference} on the {split} split (two-sided):",
        "",
        _paired_table(confirmed.paired, [*confirmed.tasks, "mean_success"]),
        "",
        f"Instances played on the {split} split:",
        "",
        *_instances_section(confirmed.instances),
        "",
        _instance_table(confirmed.instance_level, split, confirmed.instances),
    ]


def _missing_lines(confirmation: Confirmation) -> list[str]:
    """One line per method and reason: the planned seeds without a confirmation."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for method, missing in confirmation.missing.items():
        for seed, why in sorted(missing.items()):
            grouped.setdefault((method, why), []).append(seed)
    if not grouped:
        return []
    lines = ["", f"Without a confirmation on the {confirmation.split} split:", ""]
    return lines + [
        f"- {method_label(method)}, seeds {seeds}: {why}"
        for (method, why), seeds in grouped.items()
    ]


def _confirmation_table(
    confirmation: Confirmation,
    results: Mapping[str, Sequence[SeedResult]],
    tasks: Sequence[str],
) -> str:
    """Per headline method, a row per confirmed seed and the mean over them (95% t
    interval), with the same runs' dev success over tasks beside."""
    split = confirmation.split
    rows = _header(
        ["method", "seed"], [*tasks, "mean over tasks", "dev, mean over tasks (same run)"]
    )
    for method, seeds in confirmation.results.items():
        dev = {r.seed: r.value("mean_success") for r in results.get(method, ())}
        for r in seeds:
            cells = [_value_cell(r.value(q)) for q in [*tasks, "mean_success"]]
            cells.append(_value_cell(dev.get(r.seed, math.nan)))
            rows.append(f"| {method_label(method)} | {r.seed} | " + " | ".join(cells) + " |")
        if seeds:
            cells = [interval_cell(r.value(q) for r in seeds) for q in [*tasks, "mean_success"]]
            cells.append(interval_cell(dev.get(r.seed, math.nan) for r in seeds))
            count = f"{len(seeds)} seed" + ("s" if len(seeds) > 1 else "")
            rows.append(f"| {method_label(method)} | mean ({count}) | " + " | ".join(cells) + " |")
    return "\n".join([f"Success on the {split} split after RL, per seed:", "", *rows])


def _value_cell(value: float) -> str:
    """One seed's value, without an interval."""
    return f"{value:.3f}" if math.isfinite(value) else "n/a"


def _runs_section(
    results: Mapping[str, Sequence[SeedResult]],
    planned_seeds: Mapping[str, Sequence[int]],
    failures: Mapping[str, str],
) -> list[str]:
    planned = {m: list(planned_seeds.get(m, ())) for m in results}
    groups: dict[tuple[int, ...], int] = {}
    for seeds in planned.values():
        groups[tuple(seeds)] = groups.get(tuple(seeds), 0) + 1
    plan = " + ".join(
        f"{count} method{'s' if count > 1 else ''} x seeds {list(seeds)}"
        for seeds, count in groups.items()
    )
    total = sum(len(seeds) for seeds in planned.values())
    finished = sum(len(seeds) for seeds in results.values())
    status = "complete" if finished == total and not failures else "PARTIAL"
    lines = [f"Runs finished: {finished} of {total} planned ({plan}): **{status}**.", ""]
    lines += ["| method | planned seeds | finished | missing |", "|---|---|---|---|"]
    for method, seeds in planned.items():
        done = sorted(r.seed for r in results[method])
        missing = [s for s in seeds if s not in done]
        lines.append(f"| {method_label(method)} | {seeds} | {done} | {missing or '-'} |")
    if failures:
        lines += ["", "Failed runs (rerun the comparison to retry them):", ""]
        lines += [f"- `{run}`: {error}" for run, error in failures.items()]
    return lines


def _header(first: Sequence[str], columns: Sequence[str]) -> list[str]:
    return [
        "| " + " | ".join([*first, *columns]) + " |",
        "|" + "---|" * len(first) + "---:|" * len(columns),
    ]


def _success_table(
    results: Mapping[str, Sequence[SeedResult]],
    methods: Sequence[str],
    tasks: list[str],
    start_success: Mapping[str, float] | None,
) -> str:
    rows = _header(["method", "seeds"], [*tasks, "mean over tasks"])
    if start_success:
        cells = [f"{start_success.get(task, math.nan):.3f}" for task in tasks]
        start_mean = finite_mean(start_success.get(task, math.nan) for task in tasks)
        rows.append(f"| {START_LABEL} | - | " + " | ".join(cells) + f" | {start_mean:.3f} |")
    for method in methods:
        seeds = results[method]
        cells = [interval_cell(r.value(q) for r in seeds) for q in [*tasks, "mean_success"]]
        rows.append(f"| {method} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _paired_table(pairs: Sequence[PairedSeeds], quantities: Sequence[str]) -> str:
    """One row per (method, reference), one paired cell per quantity."""
    by_row: dict[tuple[str, str], dict[str, PairedSeeds]] = {}
    for pair in pairs:
        by_row.setdefault((pair.method, pair.reference), {})[pair.quantity] = pair
    names = ["mean over tasks" if q == "mean_success" else q for q in quantities]
    rows = _header(["method - reference", "seeds paired"], [*names, "p from"])
    if not by_row:
        return "\n".join([*rows, "| no method of the comparison to pair |"])
    for (method, reference), cells in by_row.items():
        seeds = max((cells[q].seeds for q in quantities), key=len)
        sources = sorted({c.test.method for c in cells.values() if c.test is not None})
        row = [f"{method} - {reference}", str(list(seeds))]
        row += [cells[q].cell() for q in quantities]
        row.append(", ".join(sources) or "-")
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


def _instance_table(
    pairs: Sequence[InstancePairs], split: str = "dev", draw: InstanceDraw | None = None
) -> str:
    if not pairs:
        return "No pair of runs with per-episode evaluations on a common seed yet."
    same = draw is not None and not draw.mismatched
    rows = [
        (
            f"Within one seed both runs played the same {split} instances"
            if same
            else f"Within one seed, on the {split} instances both runs played"
        )
        + ": per instance the change in success rate over its samples, tested by the paired "
        "sign-flip permutation test of the mean over tasks (two-sided: twice the smaller "
        "one-sided p). The test takes that seed's instances as its units and its two runs as "
        "given: it speaks for those two runs on those instances, not for another training "
        "run or another draw of instances.",
        "",
        *_header(
            ["method - reference", "seed"],
            ["instances", "success difference (mean over tasks)", "p", "p from"],
        ),
    ]
    for p in pairs:
        rows.append(
            f"| {p.method} - {p.reference} | {p.seed} | {p.instances} | {p.difference:+.3f} | "
            f"{p.p_value:.3g} | {p.test_method} |"
        )
    return "\n".join(rows)


def _per_task_table(
    results: Mapping[str, Sequence[SeedResult]], tasks: list[str], key: str, digits: int
) -> str:
    rows = _header(["method", "seeds"], [*tasks, "mean over tasks"])
    for method, seeds in results.items():
        per_seed = [r.per_task.get(key, {}) for r in seeds]
        cells = [interval_cell((v.get(t, math.nan) for v in per_seed), digits) for t in tasks]
        cells.append(interval_cell((finite_mean(v.values()) for v in per_seed), digits))
        rows.append(f"| {method} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _diagnostics_table(results: Mapping[str, Sequence[SeedResult]]) -> str:
    rows = _header(
        ["method", "seeds"],
        [
            "crossover count ↓",
            "trend R² ↑",
            "late spike amplitude ↓",
            "ratio outside clip range",
            "gradient clipped",
        ],
    )
    for method, seeds in results.items():
        cells = [
            interval_cell((r.value(key) for r in seeds), DIAGNOSTIC_DIGITS[key])
            for key in DIAGNOSTIC_TITLES
        ]
        cells += [interval_cell((r.value(key) for r in seeds), 4) for key in CLIP_SHARES]
        rows.append(f"| {method} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _claims_table(results: Mapping[str, Sequence[SeedResult]], verdicts: Sequence[Verdict]) -> str:
    rows = [
        "| source | claim | paper | ours | seeds paired | difference (better - worse) | "
        "p claimed | p opposite | test | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        claim = v.claim
        sign = ">" if claim.higher_is_better else "<"
        digits = DIAGNOSTIC_DIGITS.get(claim.quantity, 3)
        ours = " vs ".join(
            interval_cell((r.value(claim.quantity) for r in results.get(m, ())), digits)
            for m in (claim.better, claim.worse)
        )
        if v.claimed.test is None or v.opposite.test is None:
            tested = ["-", "-", "-", f"not enough seeds ({len(v.claimed.seeds)} common)"]
        else:
            d = v.claimed.test.difference
            tested = [
                f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]",
                f"{v.claimed.test.p_value:.3g}",
                f"{v.opposite.test.p_value:.3g}",
                f"{v.claimed.test.name}, one-sided, {v.claimed.test.method} "
                f"(smallest p possible {v.smallest_p:.3g})",
            ]
        rows.append(
            f"| {claim.source} | {claim.better} {sign} {claim.worse} on {claim.quantity} | "
            f"{claim.paper} | {ours} | {list(v.claimed.seeds)} | " + " | ".join(tested) + f" | "
            f"{v.verdict} |"
        )
    return "\n".join(rows)


def _t_half_width(values: Sequence[float]) -> float:
    """Half the 95% t interval of the finite values (0 under two): the plots' error bar."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if len(finite) < 2:
        return 0.0
    interval = mean_interval(finite)
    return interval.high - interval.mean


def _metrics(result: SeedResult) -> RunMetrics:
    return result.metrics if result.metrics is not None else read_metrics(result.run_dir)


def mean_curves(
    runs: Sequence[RunMetrics], field_name: str, steps: NDArray[np.int64]
) -> dict[str, NDArray[np.float64]]:
    """Each task's ``field_name`` at each of ``steps``: the mean over the runs that
    recorded it at that step (``NaN`` where none did).

    >>> from agentgym_eppo.trainer.analysis.run_dir import RunMetrics
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


def _write_plots(plots_dir: Path, results: Mapping[str, Sequence[SeedResult]]) -> dict[str, Path]:
    """Figure 1(c)-style bars with 95% t intervals, AgentRL's and EPPO's mean entropy per
    task side by side, and per-method curves (first finished seed of each method)."""
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
    runs = {m: [_metrics(r) for r in finished[m]] for m in HEADLINE if m in finished}
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
    first = {method: _metrics(seeds[0]) for method, seeds in finished.items()}
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


def _report_json(
    results: Mapping[str, Sequence[SeedResult]],
    planned_seeds: Mapping[str, Sequence[int]],
    start_success: Mapping[str, float] | None,
    start_name: str | None,
    failures: Mapping[str, str],
    tasks: Sequence[str],
    paired: Sequence[PairedSeeds],
    instance_level: Sequence[InstancePairs],
    verdicts: Sequence[Verdict],
    confirmed: ConfirmationTests | None,
    draw: InstanceDraw | None,
    signal: tuple[Sequence[str], Sequence[Verdict] | None],
) -> dict[str, Any]:
    quantities = [*tasks, "mean_success", *DIAGNOSTIC_TITLES, *CLIP_SHARES]
    signal_tasks, signal_verdicts = signal
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
            "instances": _instances_json(draw),
            "instance_level": [_instance_json(p) for p in instance_level],
            "claims": [_verdict_json(v) for v in verdicts],
            "claims_on_tasks_with_signal": None
            if signal_verdicts is None
            else {
                "tasks": list(signal_tasks),
                "about": "figure 1(c)'s claims on the entropy curves of the tasks the start "
                "solves at all (dev success above 0)",
                "claims": [_verdict_json(v) for v in signal_verdicts],
            },
            "confirmation": None if confirmed is None else _confirmation_json(confirmed),
        }
    )


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
