"""The report of a method comparison: dev success and entropy diagnostics over seeds.

Input: for each method, the run directories of its finished seeds (layout in
docs/trainer.md, "The run directory"). Output, in the comparison folder:

- ``report.md``: dev success per task after RL (mean ± std over seeds), the three
  diagnostics of figure 1(c) per method, the paper's claims checked against our numbers,
  and the plots;
- ``report.json``: every per-seed number behind those tables;
- ``plots/``: diagnostics per method (figure 1c), mean success per method, per-task entropy
  of each method (figure 1a/b), clip range and z-scores (figure 4), PNG and SVG.

Standard deviations are over seeds with ``ddof=1`` (0 for a single seed); the mean over
tasks is unweighted, as the paper's AVG column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .diagnostics import finite_mean, finite_std
from .plots import ordered_tasks, plot_method_bars, plot_method_grid
from .report import run_diagnostics
from .run_dir import eval_success, json_safe, read_evals, read_metrics

REPORT_MD = "report.md"
REPORT_JSON = "report.json"

DIAGNOSTIC_TITLES = {
    "crossover_count": "crossover count (lower better)",
    "trend_r2": "trend R² vs log t (higher better)",
    "late_spike_max": "late spike amplitude (lower better)",
}


CLIP_SHARES = {"ratio_outside_share": (), "clipped_share": ("clip_fraction",)}
"""Per-step clip metrics averaged per seed, with the names older runs recorded them under."""


@dataclass(frozen=True)
class PaperClaim:
    """A comparison the paper makes, checkable on our numbers: ``better`` beats ``worse``."""

    source: str
    quantity: str  # "mean_success" or a key of DIAGNOSTIC_TITLES
    better: str
    worse: str
    paper: str
    higher_is_better: bool = True


PAPER_CLAIMS = (
    PaperClaim("Table 1", "mean_success", "eppo", "grpo_tan", "EPPO 54.3 vs AgentRL 51.6 AVG"),
    PaperClaim("Table 4", "mean_success", "eppo", "eppo_no_taskwise", "54.3 vs 48.8 (five-task)"),
    PaperClaim("Table 4", "mean_success", "eppo", "eppo_no_trend", "54.3 vs 47.1 (five-task)"),
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
    """What one finished run contributes: dev success after RL and its diagnostics."""

    seed: int
    run_dir: Path
    success: dict[str, float]
    diagnostics: dict[str, float]


def collect_seed(seed: int, run_dir: Path) -> SeedResult:
    """Read one finished run: ``eval_after_rl.json`` and the diagnostics of its entropy curves."""
    evals = read_evals(run_dir)
    if "after_rl" not in evals:
        raise FileNotFoundError(f"{run_dir}: no eval_after_rl.json; the run did not finish")
    success = eval_success(evals["after_rl"])
    success["mean_success"] = finite_mean(success.values())
    metrics = read_metrics(run_dir)
    diagnostics = dict.fromkeys([*DIAGNOSTIC_TITLES, *CLIP_SHARES], math.nan)
    if metrics.num_steps:
        result = run_diagnostics(metrics)
        diagnostics.update(
            crossover_count=float(result.crossover_count),
            trend_r2=result.trend_r2,
            late_spike_max=result.late_spike_max,
        )
        for key, old_names in CLIP_SHARES.items():
            diagnostics[key] = finite_mean(
                value
                for series in _first_series(metrics, (key, *old_names)).values()
                for value in series.tolist()
            )
    return SeedResult(seed, run_dir, success, diagnostics)


def _first_series(metrics: Any, names: Sequence[str]) -> dict[str, Any]:
    """The per-task series of the first of ``names`` the run recorded (runs written
    before a metric was renamed carry its old name)."""
    for name in names:
        series = metrics.task_series(name)
        if series:
            return dict(series)
    return {}


def mean_std(values: Sequence[float], digits: int = 3) -> str:
    """``mean ± std`` over seeds, or ``n/a`` when no seed has a value."""
    if not any(math.isfinite(v) for v in values):
        return "n/a"
    return f"{finite_mean(values):.{digits}f} ± {finite_std(values):.{digits}f}"


def write_compare_report(
    output_dir: Path,
    results: Mapping[str, Sequence[SeedResult]],
    *,
    planned_seeds: Sequence[int],
    start_success: Mapping[str, float] | None = None,
    failures: Mapping[str, str] | None = None,
) -> Path:
    """Write ``report.md``, ``report.json`` and the plots; return ``report.md``.

    ``results`` maps each method (in display order) to its finished seeds; methods with
    none still get a row that says so. ``start_success`` is the shared SFT checkpoint's dev
    success (``eval_after_sft.json``), shown as the starting point. ``failures`` maps a run
    (``method/seed``) to its error, listed so a partial report never reads as complete.
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    failures = dict(failures or {})
    planned = len(results) * len(planned_seeds)
    finished = sum(len(seeds) for seeds in results.values())
    tasks = ordered_tasks(
        {t for seeds in results.values() for r in seeds for t in r.success} - {"mean_success"}
    )
    plots = _write_plots(output_dir / "plots", results)
    (output_dir / REPORT_JSON).write_text(
        json.dumps(
            _report_json(results, planned_seeds, start_success, failures),
            indent=2,
        )
        + "\n"
    )
    lines = ["# Method comparison", ""]
    status = "complete" if finished == planned and not failures else "PARTIAL"
    lines.append(
        f"Runs finished: {finished} of {planned} planned ({len(results)} methods x seeds "
        f"{list(planned_seeds)}): **{status}**."
    )
    if failures:
        lines += ["", "Failed runs (rerun the comparison to retry them):", ""]
        lines += [f"- `{run}`: {error}" for run, error in failures.items()]
    lines += ["", "## Dev success after RL (mean ± std over seeds)", ""]
    lines.append(_success_table(results, tasks, start_success))
    lines += ["", "## Entropy diagnostics (figure 1c; mean ± std over seeds)", ""]
    lines.append(_diagnostics_table(results))
    lines += [
        "",
        "The two clip columns are means over steps and tasks: the share of loss tokens whose "
        "importance ratio lay outside their clip range, and the share whose gradient the clip "
        "removed. Near 0, the clip policies barely act on the loss.",
    ]
    lines += ["", "## The paper's claims on our numbers", ""]
    lines.append(_claims_table(results))
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}](plots/{path.name})" for name, path in plots.items()]
    report = output_dir / REPORT_MD
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return report


def _success_table(
    results: Mapping[str, Sequence[SeedResult]],
    tasks: list[str],
    start_success: Mapping[str, float] | None,
) -> str:
    rows = [
        "| method | seeds | " + " | ".join(tasks) + " | mean over tasks |",
        "|---|---:|" + "---:|" * (len(tasks) + 1),
    ]
    if start_success:
        cells = [f"{start_success.get(task, math.nan):.3f}" for task in tasks]
        start_mean = finite_mean(start_success.get(task, math.nan) for task in tasks)
        rows.append("| SFT start (shared) | - | " + " | ".join(cells) + f" | {start_mean:.3f} |")
    for method, seeds in results.items():
        cells = [mean_std([r.success.get(t, math.nan) for r in seeds]) for t in tasks]
        cells.append(mean_std([r.success["mean_success"] for r in seeds]))
        rows.append(f"| {method} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _diagnostics_table(results: Mapping[str, Sequence[SeedResult]]) -> str:
    rows = [
        "| method | seeds | crossover count ↓ | trend R² ↑ | late spike amplitude ↓ | "
        "ratio outside clip range | gradient clipped |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method, seeds in results.items():
        cells = [
            mean_std([r.diagnostics[key] for r in seeds], 1 if key == "crossover_count" else 3)
            for key in DIAGNOSTIC_TITLES
        ]
        for key in CLIP_SHARES:
            cells.append(mean_std([r.diagnostics.get(key, math.nan) for r in seeds], 4))
        rows.append(f"| {method} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _values(seeds: Sequence[SeedResult], quantity: str) -> list[float]:
    if quantity == "mean_success":
        return [r.success["mean_success"] for r in seeds]
    return [r.diagnostics[quantity] for r in seeds]


def claim_verdict(claim: PaperClaim, results: Mapping[str, Sequence[SeedResult]]) -> str:
    """Whether our seeds agree with a claim of the paper.

    "agrees" / "disagrees" by the sign of the difference of means; "(within noise)" is added
    when that difference is smaller than the larger of the two standard deviations over
    seeds, so a handful of seeds cannot pass for evidence either way.
    """
    better, worse = results.get(claim.better, ()), results.get(claim.worse, ())
    a, b = _values(better, claim.quantity), _values(worse, claim.quantity)
    if not any(map(math.isfinite, a)) or not any(map(math.isfinite, b)):
        return "not run"
    difference = finite_mean(a) - finite_mean(b)
    if not claim.higher_is_better:
        difference = -difference
    verdict = "agrees" if difference > 0 else "ties" if difference == 0 else "disagrees"
    if abs(difference) < max(finite_std(a), finite_std(b)) or min(len(a), len(b)) < 2:
        verdict += " (within noise)"
    return verdict


def _claims_table(results: Mapping[str, Sequence[SeedResult]]) -> str:
    rows = ["| source | claim | paper | ours | verdict |", "|---|---|---|---|---|"]
    for claim in PAPER_CLAIMS:
        sign = ">" if claim.higher_is_better else "<"
        ours = (
            f"{mean_std(_values(results.get(claim.better, ()), claim.quantity))} vs "
            f"{mean_std(_values(results.get(claim.worse, ()), claim.quantity))}"
        )
        rows.append(
            f"| {claim.source} | {claim.better} {sign} {claim.worse} on {claim.quantity} | "
            f"{claim.paper} | {ours} | {claim_verdict(claim, results)} |"
        )
    return "\n".join(rows)


def _write_plots(plots_dir: Path, results: Mapping[str, Sequence[SeedResult]]) -> dict[str, Path]:
    """Figure 1(c)-style bars and per-method curves (first finished seed of each method)."""
    finished = {method: seeds for method, seeds in results.items() if seeds}
    if not finished:
        return {}
    written = {}
    bars = {
        key: {m: [r.diagnostics[key] for r in seeds] for m, seeds in finished.items()}
        for key in DIAGNOSTIC_TITLES
    }
    written["diagnostics"] = plot_method_bars(
        bars, titles=DIAGNOSTIC_TITLES, stem=plots_dir / "diagnostics"
    )[0]
    success = {"mean_success": {m: _values(seeds, "mean_success") for m, seeds in finished.items()}}
    written["success"] = plot_method_bars(
        success,
        titles={"mean_success": "dev success after RL, mean over tasks"},
        stem=plots_dir / "success",
    )[0]
    metrics = {method: read_metrics(seeds[0].run_dir) for method, seeds in finished.items()}
    for field, ylabel in (("entropy", "entropy (nats)"), ("clip_eps", "clip ε"), ("zscore", "z")):
        curves = {
            f"{method} (seed {finished[method][0].seed})": (m.steps, m.task_series(field))
            for method, m in metrics.items()
            if m.task_series(field)
        }
        if curves:
            written[field] = plot_method_grid(curves, ylabel=ylabel, stem=plots_dir / field)[0]
    return written


def _report_json(
    results: Mapping[str, Sequence[SeedResult]],
    planned_seeds: Sequence[int],
    start_success: Mapping[str, float] | None,
    failures: Mapping[str, str],
) -> dict[str, Any]:
    return json_safe(
        {
            "planned_seeds": list(planned_seeds),
            "start_success": dict(start_success or {}),
            "failures": dict(failures),
            "methods": {
                method: [
                    {
                        "seed": r.seed,
                        "run_dir": str(r.run_dir),
                        "success": dict(r.success),
                        "diagnostics": dict(r.diagnostics),
                    }
                    for r in seeds
                ]
                for method, seeds in results.items()
            },
            "claims": [
                {
                    "source": c.source,
                    "quantity": c.quantity,
                    "better": c.better,
                    "worse": c.worse,
                    "verdict": claim_verdict(c, results),
                }
                for c in PAPER_CLAIMS
            ],
        }
    )
