"""The paper's tables and claims, and the tests that judge them on a comparison's seeds.

The paper's methods under their ``configs/compare-cpu.yaml`` names (:data:`METHOD_NAMES`),
its success tables 1, 4 and 6 (:data:`PAPER_TABLES`: which methods, paired against which
reference), and its claims (:data:`PAPER_CLAIMS`), each judged by the paired test over
seeds one-sided each way (:func:`claim_verdict`). :class:`ComparisonTests` runs every
test a report shows; figure 1(c)'s claims are judged again on the tasks the start
solves at all (:class:`SignalTests`), and the headline claims on a confirmation's split
(:class:`ConfirmationTests`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .compare_collect import (
    DIAGNOSTIC_TITLES,
    Confirmation,
    SeedResult,
    evaluated_split,
    figure_1c,
)
from .compare_stats import (
    InstanceDraw,
    InstancePairs,
    PairedSeeds,
    instance_draw,
    instance_pairs,
    paired_over_seeds,
)
from .diagnostics import LATE_TAIL, diagnose_curves
from .plots import ordered_tasks

ALPHA = 0.05
"""A one-sided p under this, in either direction, decides a claim."""

BASELINE = "grpo_tan"
HEADLINE = (BASELINE, "eppo")
"""The pair whose per-task entropy curves are drawn side by side."""

GLOBAL_ENTROPY_ABLATION = "eppo_no_taskwise"
"""EPPO w/o task-wise clip: the pacer sees one entropy, the token mean over tasks."""

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


def method_label(method: str) -> str:
    """``eppo`` -> ``eppo (EPPO)``: the config's name and the paper's."""
    name = METHOD_NAMES.get(method)
    return f"{method} ({name})" if name else method


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
            curves = r.run_metrics().task_series("entropy")
            kept = {task: curves[task] for task in tasks if task in curves}
            diagnostics = {**r.diagnostics, **(figure_1c(kept) if kept else {})}
            restricted[method].append(replace(r, diagnostics=diagnostics))
    return restricted


@dataclass(frozen=True)
class SignalTests:
    """Figure 1(c)'s claims judged again on the entropy curves of the tasks with signal
    alone (``tasks``, :func:`tasks_with_signal`; the others are ``silent``), beside their
    verdicts on every task (``on_every``); where the two differ, the verdict on the tasks
    with signal stands. ``results``: the runs with their diagnostics on those tasks
    (:func:`on_tasks`); ``silent_spikes``: (method, seed, task, amplitude) of each run of
    the claims whose largest late spike came from a silent task."""

    tasks: tuple[str, ...]
    silent: tuple[str, ...]
    results: Mapping[str, Sequence[SeedResult]]
    on_every: tuple[Verdict, ...]
    verdicts: tuple[Verdict, ...]
    silent_spikes: tuple[tuple[str, int, str, float], ...]

    @classmethod
    def of(
        cls,
        results: Mapping[str, Sequence[SeedResult]],
        verdicts: Sequence[Verdict],
        tasks: Sequence[str],
        signal: Sequence[str],
    ) -> SignalTests:
        """Judge figure 1(c)'s claims among ``verdicts`` again on ``signal`` of ``tasks``."""
        silent = [task for task in tasks if task not in signal]
        restricted = on_tasks(results, signal)
        on_every = [v for v in verdicts if v.claim.quantity in DIAGNOSTIC_TITLES]
        claims = [v.claim for v in on_every]
        spikes = []
        for method in dict.fromkeys(m for c in claims for m in (c.better, c.worse)):
            for r in results.get(method, ()):
                spike = diagnose_curves(
                    r.run_metrics().task_series("entropy"), LATE_TAIL
                ).late_spike_per_task
                if spike and (top := max(spike, key=lambda t: spike[t])) in silent:
                    spikes.append((method, r.seed, top, spike[top]))
        return cls(
            tuple(signal),
            tuple(silent),
            restricted,
            tuple(on_every),
            tuple(claim_verdict(claim, restricted) for claim in claims),
            tuple(spikes),
        )


@dataclass(frozen=True)
class ConfirmationTests:
    """The tests of a :class:`~.compare_collect.Confirmation`, all on its split: each
    headline method paired against the baseline by seed per task and on the mean over
    tasks (two-sided); the paper's claims between headline methods on the mean success
    (the primary test, one-sided, judged as on dev); the instance-level test within each
    seed; which instances each seed played there."""

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


@dataclass(frozen=True)
class ComparisonTests:
    """Every test of a comparison: per paper table (by its ``source``), each method
    paired against the table's reference by seed on each task's success and the mean
    over tasks (two-sided); table 1's pairs on figure 1(c)'s diagnostics; the
    instance-level test within each seed of every table's pairs; the verdict on each of
    the paper's claims; which instances each seed played; figure 1(c)'s claims on the
    tasks with signal, where some task has none; a confirmation's tests."""

    tasks: tuple[str, ...]
    paired: Mapping[str, tuple[PairedSeeds, ...]]
    diagnostic_pairs: tuple[PairedSeeds, ...]
    instance_level: tuple[InstancePairs, ...]
    verdicts: tuple[Verdict, ...]
    instances: InstanceDraw | None
    signal: SignalTests | None
    confirmed: ConfirmationTests | None

    @classmethod
    def of(
        cls,
        results: Mapping[str, Sequence[SeedResult]],
        start_success: Mapping[str, float],
        confirmation: Confirmation | None = None,
    ) -> ComparisonTests:
        """Run the tests on ``results`` (each method's finished seeds); the tasks are
        those the runs or the start (``start_success``) were evaluated on."""
        methods = list(results)
        tasks = ordered_tasks(
            {t for seeds in results.values() for r in seeds for t in r.success} - {"mean_success"}
            | set(start_success)
        )
        verdicts = tuple(claim_verdict(claim, results) for claim in PAPER_CLAIMS)
        signal = tasks_with_signal(tasks, start_success)
        return cls(
            tuple(tasks),
            {
                table.source: tuple(
                    paired_over_seeds(results, m, ref, q)
                    for m, ref in table_pairs(table, methods)
                    for q in [*tasks, "mean_success"]
                )
                for table in PAPER_TABLES
            },
            tuple(
                paired_over_seeds(results, m, ref, q)
                for m, ref in table_pairs(PAPER_TABLES[0], methods)
                for q in DIAGNOSTIC_TITLES
            ),
            tuple(
                pair
                for table in PAPER_TABLES
                for m, ref in table_pairs(table, methods)
                for pair in instance_pairs(results, m, ref)
            ),
            verdicts,
            instance_draw(results, evaluated_split(results)),
            SignalTests.of(results, verdicts, tasks, signal)
            if 0 < len(signal) < len(tasks)
            else None,
            None if confirmation is None else ConfirmationTests.of(confirmation, tasks),
        )
