"""The report of a method comparison: dev success, clipping and entropy diagnostics over
seeds, every difference tested pair by pair, the paper's claims judged by those tests.

Input: for each method, the run directories of its finished seeds (layout in
docs/trainer.md, "The run directory"), its planned seeds, and the shared start's dev
success. Output, in the comparison folder:

- ``report.md``: the runs finished of those planned per method; the paper's tables 1, 4
  and 6 on our numbers (success per task and its mean over tasks, each a mean over seeds
  with its 95% Student-t interval, the start as a reference row) and, below each, every
  method paired against the table's reference; which evaluation instances each seed
  played (:class:`~.compare_stats.InstanceDraw`); the instance-level paired test within each seed; per
  method and task the share of loss tokens clipped and the mean clip range; figure 1(c)'s
  three diagnostics; the verdict on each of the paper's claims, set against the paper's
  gain where it has one, and figure 1(c)'s claims again on the tasks with signal where
  some task has none; when the headline runs are confirmed on another split
  (:class:`~.compare_collect.Confirmation`), their success there per seed and the primary test repeated on
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

This module composes the report's parts, one job each: :mod:`.compare_collect` reads
the runs' files, :mod:`.compare_stats` holds the statistics over seeds,
:mod:`.compare_claims` the paper's tables and claims and every test that judges them,
and :mod:`.compare_markdown`, :mod:`.compare_json` and :mod:`.compare_plots` write them
out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from .compare_claims import ComparisonTests
from .compare_collect import Confirmation, SeedResult
from .compare_json import report_json
from .compare_markdown import report_markdown
from .compare_plots import write_plots

REPORT_MD = "report.md"
REPORT_JSON = "report.json"


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
    tests = ComparisonTests.of(results, start_success or {}, confirmation)
    plots = write_plots(output_dir / "plots", results)
    data = report_json(
        results,
        tests,
        planned_seeds=planned_seeds,
        start_success=start_success,
        start_name=start_name,
        failures=failures,
    )
    (output_dir / REPORT_JSON).write_text(json.dumps(data, indent=2) + "\n")
    markdown = report_markdown(
        results,
        tests,
        planned_seeds=planned_seeds,
        start_success=start_success,
        start_name=start_name,
        failures=failures,
        plots=plots,
    )
    report = output_dir / REPORT_MD
    report.write_text(markdown, encoding="utf-8")
    return report
