"""The clip-binding pilot's table, rebuilt from its committed run files.

``python -m benchmarks.clip_pilot [RUNS_DIR]`` reads every ``RUNS_DIR/<setting>/``
(default ``benchmarks/results/compare-cpu/pilot``) that holds a ``metrics.jsonl`` written
by ``agentgym-eppo train``, and prints one row per setting and task: the share of loss
tokens the clip touched over the run (weighted by each step's tokens), the train success
and token entropy of the first and last halves of the steps, and the median KL to the
base. A setting binds where the share is at least 2%; it holds where each task's train
success and entropy stay in the range of the baseline setting (``e1-lr3e5-base``, the
demo's update: one PPO epoch). Train success is over 16 episodes a task a step, so a
half of four steps is 64 episodes: differences under ~0.15 are noise.

>>> rows = pilot_rows([{"tasks": {"os": {"tokens": 100, "clipped_share": 0.03,
...     "success": 0.5, "entropy": 0.1}}, "global": {"kl": 0.01}}])
>>> rows["os"]["clipped"], rows["os"]["success"]
(0.03, (0.5, 0.5))
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parent / "results" / "compare-cpu" / "pilot"
BINDS = 0.02
"""The least share of loss tokens clipped, on average, for the clip to count as binding."""


def _halves(values: Sequence[float]) -> tuple[float, float]:
    half = max(1, len(values) // 2)
    return statistics.fmean(values[:half]), statistics.fmean(values[-half:])


def pilot_rows(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task: ``clipped`` (token-weighted share), ``success`` and ``entropy`` (first
    half, last half), ``kl`` (the run's median), ``steps``."""
    tasks = sorted({task for record in records for task in record["tasks"]})
    rows: dict[str, dict[str, Any]] = {}
    kl = statistics.median(float(r["global"]["kl"]) for r in records)
    for task in tasks:
        steps = [r["tasks"][task] for r in records if task in r["tasks"]]
        tokens = sum(s["tokens"] for s in steps)
        clipped = sum(s["tokens"] * s["clipped_share"] for s in steps) / max(tokens, 1)
        rows[task] = {
            "clipped": clipped,
            "success": _halves([s["success"] for s in steps]),
            "entropy": _halves([s["entropy"] for s in steps]),
            "kl": kl,
            "steps": len(steps),
        }
    return rows


def table(runs: Path) -> str:
    lines = [
        "| setting | steps | task | clipped share | train success (first half -> last) "
        "| entropy (first half -> last) | median KL to the base |",
        "|---|---|---|---|---|---|---|",
    ]
    for metrics in sorted(runs.glob("*/metrics.jsonl")):
        records = [json.loads(line) for line in metrics.read_text().splitlines() if line]
        if not records:
            continue
        rows = pilot_rows(records)
        for task, row in rows.items():
            (s0, s1), (e0, e1) = row["success"], row["entropy"]
            lines.append(
                f"| {metrics.parent.name} | {row['steps']} | {task} | {row['clipped']:.2%} | "
                f"{s0:.2f} -> {s1:.2f} | {e0:.3f} -> {e1:.3f} | {row['kl']:.3g} |"
            )
        mean = statistics.fmean(row["clipped"] for row in rows.values())
        verdict = "binds" if mean >= BINDS else "does not bind"
        lines.append(
            f"| {metrics.parent.name} | | mean over tasks | {mean:.2%} ({verdict}) | | | |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    print(table(Path(argv[0]) if argv else DEFAULT))


if __name__ == "__main__":
    main(sys.argv[1:])
