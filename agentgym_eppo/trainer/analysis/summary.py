"""The end-of-run summary: per-task success and reward at every evaluated stage, and the
first stage against the last and, with a stage between, each against the one before,
paired over instances (``RUN_DIR/paired_eval.md``).

Reward sits beside success because an RL step can only move what its reward reaches,
and a policy that stops aborting (-0.2) gains reward before success.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym_eppo.trainer.config import EVAL_STAGES

from .paired_eval import compare_evals, comparison_table
from .run_dir import eval_path, evals_split


def print_summary(console: Console, run_dir: str | Path, seed: int) -> None:
    """Print the tables of the evaluations ``run_dir`` holds, and write
    ``paired_eval.md`` when two or more stages kept their episodes."""
    run_dir = Path(run_dir)
    stages = []
    for stage in EVAL_STAGES:
        path = eval_path(run_dir, stage)
        if path.exists():
            stages.append((stage, json.loads(path.read_text(encoding="utf-8"))))
    tasks = sorted({t for _, result in stages for t in result["tasks"]})
    split = evals_split(result for _, result in stages)
    for measure in ("success", "reward"):
        table = Table(title=f"{split} {measure} per task (seed {seed})")
        table.add_column("stage")
        for task in tasks:
            table.add_column(task, justify="right")
        table.add_column("mean", justify="right")
        for stage, result in stages:
            values = [result["tasks"][t][measure] for t in tasks if t in result["tasks"]]
            table.add_row(
                stage,
                *[
                    f"{result['tasks'][t][measure]:.3f}" if t in result["tasks"] else "-"
                    for t in tasks
                ],
                f"{sum(values) / len(values):.3f}" if values else "-",
            )
        console.print(table)
    if len(stages) >= 2 and all("episodes" in result for _, result in stages):
        sections = []
        for (first, start), (last, end) in stage_pairs(stages):
            comparison = compare_evals(start, end, seed=seed)
            text = comparison_table(comparison, first, last)
            sections.append(
                f"# {last} against {first}, instance by instance (seed {seed})\n\n{text}\n\n"
                f"Over tasks: {comparison.test}\n"
            )
            console.print(f"{last} against {first}, paired over instances: {comparison.test}")
        (run_dir / "paired_eval.md").write_text("\n".join(sections), encoding="utf-8")


def stage_pairs(stages: list[tuple[str, Any]]) -> list[tuple[tuple[str, Any], tuple[str, Any]]]:
    """The comparisons a run's evaluations answer: the last stage against the first and,
    where a stage lies between (SFT then RL), each stage against the one before it, so
    that RL is judged against what it started from.

    >>> [(a, b) for (a, _), (b, _) in stage_pairs([("base", 0), ("after_rl", 0)])]
    [('base', 'after_rl')]
    >>> stages = [("base", 0), ("after_sft", 0), ("after_rl", 0)]
    >>> [(a, b) for (a, _), (b, _) in stage_pairs(stages)]
    [('base', 'after_rl'), ('base', 'after_sft'), ('after_sft', 'after_rl')]
    """
    pairs = [(stages[0], stages[-1])]
    if len(stages) > 2:
        pairs += list(itertools.pairwise(stages))
    return pairs
