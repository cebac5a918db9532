"""The comparison report's ``report.md``: the runs finished of those planned, the
paper's tables on our numbers with every pair tested, the instances played, the
clipping and entropy diagnostics, the verdict on each of the paper's claims, a
confirmation's section, and the plots. Every number comes from the seeds and the
:class:`~.compare_claims.ComparisonTests` given; this module only writes them out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .compare_claims import (
    ALPHA,
    BASELINE,
    GLOBAL_ENTROPY_ABLATION,
    METHOD_NAMES,
    PAPER_TABLES,
    ComparisonTests,
    ConfirmationTests,
    SignalTests,
    Verdict,
    method_label,
    table_rows,
)
from .compare_collect import (
    CLIP_SHARES,
    DIAGNOSTIC_TITLES,
    PER_TASK_CLIP,
    Confirmation,
    SeedResult,
)
from .compare_stats import (
    InstanceDraw,
    InstancePairs,
    PairedSeeds,
    clip_range_span,
    finite_interval,
)
from .diagnostics import finite_mean

START_LABEL = "start (shared)"

DIAGNOSTIC_DIGITS = {"crossover_count": 1, "trend_r2": 3, "late_spike_max": 3}

SAME_CLIP_TOLERANCE = 0.01
"""A clip range within this share of the baseline's fixed one at every step is, in
effect, the baseline's clip (a method that differs from it by no more trains as it)."""

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


def interval_cell(values: Iterable[float], digits: int = 3) -> str:
    """``mean [low, high]``: the mean over seeds with its 95% Student-t interval; one
    seed has no interval, no seed no value (``NaN`` values are left out).

    >>> interval_cell([0.75, 0.625, 0.5])
    '0.625 [0.314, 0.936]'
    >>> interval_cell([0.4]), interval_cell([float("nan")])
    ('0.400 (1 seed)', 'n/a')
    """
    interval = finite_interval(values)
    if interval is None:
        return "n/a"
    if interval.n == 1:
        return f"{interval.mean:.{digits}f} (1 seed)"
    return f"{interval.mean:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def report_markdown(
    results: Mapping[str, Sequence[SeedResult]],
    tests: ComparisonTests,
    *,
    planned_seeds: Mapping[str, Sequence[int]],
    start_success: Mapping[str, float] | None,
    start_name: str | None,
    failures: Mapping[str, str],
    plots: Mapping[str, Path],
) -> str:
    """The report's Markdown, its plots (name -> PNG, in ``plots/``) embedded."""
    tasks = tests.tasks
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
        lines.append(_paired_table(tests.paired[table.source], [*tasks, "mean_success"]))
        if table.source == "Table 4":
            lines += _global_entropy_note(results, tests.paired["Table 1"])
    lines += ["", "## Evaluated instances", ""]
    lines += _instances_section(tests.instances)
    lines += ["", "## Instance-level paired tests within each seed (secondary view)", ""]
    lines.append(_instance_table(tests.instance_level, draw=tests.instances))
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
        _paired_table(tests.diagnostic_pairs, list(DIAGNOSTIC_TITLES)),
    ]
    lines += ["", "## The paper's claims on our numbers", ""]
    lines.append(_claims_table(results, tests.verdicts))
    lines += ["", VERDICT_NOTE]
    lines += _paper_gain_lines(tests.verdicts)
    if tests.signal is not None:
        lines += _signal_section(results, tests.signal)
    if tests.confirmed is not None:
        lines += _confirmation_section(tests.confirmed, results)
    if plots:
        lines += ["", "## Plots", "", PLOTS_NOTE, ""]
        lines += [f"![{name}](plots/{path.name})" for name, path in plots.items()]
    return "\n".join(lines) + "\n"


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


def _signal_section(results: Mapping[str, Sequence[SeedResult]], signal: SignalTests) -> list[str]:
    """Figure 1(c)'s claims again on the tasks with signal, beside the verdicts on every
    task, with how little the clip acted on the tasks without."""
    silent, tasks = signal.silent, signal.tasks

    def clipped(among: Sequence[str]) -> list[float]:
        """Each method's clipped share on each of ``among``, the mean over its seeds."""
        shares = (
            finite_mean(r.per_task.get("clipped_share", {}).get(task, math.nan) for r in seeds)
            for seeds in results.values()
            if seeds
            for task in among
        )
        return [share for share in shares if math.isfinite(share)]

    quiet, loud = clipped(silent), clipped(tasks)
    share = (
        f", and the clip removed the gradient of at most {max(quiet):.2%} of their loss "
        f"tokens in any method ({min(loud):.2%}-{max(loud):.2%} on {', '.join(tasks)}; "
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
        f"The same claims on the entropy curves of {', '.join(tasks)} alone:",
        "",
        _claims_table(signal.results, signal.verdicts),
    ]
    spikes = [
        f"{method} seed {seed} ({task} {spike:.3f})"
        for method, seed, task, spike in signal.silent_spikes
    ]
    if spikes:
        lines += [
            "",
            f"Runs whose largest late spike came from a task without signal: {', '.join(spikes)}.",
        ]
    differ = [
        (a, b)
        for a, b in zip(signal.on_every, signal.verdicts, strict=True)
        if a.verdict != b.verdict
    ]
    if not differ:
        return [*lines, "", "The verdicts are those on every task."]
    for every, only in differ:
        claim = every.claim
        sign = ">" if claim.higher_is_better else "<"
        lines += [
            "",
            f"{claim.better} {sign} {claim.worse} on {claim.quantity} ({claim.source}): "
            f"*{every.verdict}* on every task, *{only.verdict}* on {', '.join(tasks)}. The "
            "verdict on the tasks with signal stands: a difference carried by tasks whose "
            "tokens the clip barely acts on is no evidence about the clip policy.",
        ]
    return lines


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
    tasks: Sequence[str],
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
    results: Mapping[str, Sequence[SeedResult]], tasks: Sequence[str], key: str, digits: int
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
