"""Run directories written by hand in the layout of docs/trainer.md, with known diagnostics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Ten steps of two tasks. os - db changes sign at steps 3, 5 and 9: three crossovers.
# Late window = round(0.3 * 10) = 3 steps (8, 9, 10): os rises 0.25 into step 8, db 0.5 into 10.
OS_ENTROPY = [2.0, 1.5, 0.5, 0.5, 1.5, 1.25, 1.0, 1.25, 0.5, 0.25]
DB_ENTROPY = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5]


def task_entry(entropy: float, clip_eps: float, zscore: float | None, success: float) -> dict:
    entry: dict[str, Any] = {
        "entropy": entropy,
        "entropy_ema": entropy,
        "collapse_ratio": 1.0,
        "clip_eps": clip_eps,
        "ratio_outside_share": 0.08,
        "clipped_share": 0.05,
        "success": success,
        "reward": success,
        "episode_length": 4.0,
        "aborts": {"task_limit_reached": 1},
        "tokens": 100,
    }
    if zscore is not None:
        entry["zscore"] = zscore
    return entry


def write_run(
    run: Path,
    *,
    with_zscore: bool = True,
    steps: int = 10,
    entropy: dict[str, list[float]] | None = None,
    after_rl: dict[str, float] | None = None,
    clip_eps: float | None = None,
) -> Path:
    """A finished run: ``steps`` steps of metrics and the three eval reports.

    By default two tasks with OS_ENTROPY / DB_ENTROPY and dev success after RL of
    os 0.5, db 0.25. ``entropy`` replaces the curves (then clip range and z-score follow the
    sign of each task against the mean); ``after_rl`` replaces the final dev success;
    ``clip_eps`` gives every task that clip range at every step.
    """
    run.mkdir(parents=True, exist_ok=True)
    curves = entropy or {"os": OS_ENTROPY, "db": DB_ENTROPY}
    lines = []
    for t in range(1, steps + 1):
        level = sum(curve[t - 1] for curve in curves.values()) / len(curves)
        tasks = {}
        for task, curve in curves.items():
            sign = 1.0 if curve[t - 1] > level else -1.0
            success = 0.1 * t if task == "os" else 0.5
            zscore = sign if with_zscore else None
            eps = 0.2 + 0.05 * sign if clip_eps is None else clip_eps
            tasks[task] = task_entry(curve[t - 1], eps, zscore, success)
        record = {
            "step": t,
            "global": {"loss": 0.1, "kl": 0.0, "tokens": 200, "seconds": 1.5},
            "tasks": tasks,
        }
        lines.append(json.dumps(record))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    final = after_rl or {"os": 0.5, "db": 0.25}
    for stage in ("base", "after_sft", "after_rl"):
        if stage == "after_rl":
            per_task = final
        else:
            scale = 0.0 if stage == "base" else 0.5
            per_task = {task: scale * value for task, value in {"os": 0.5, "db": 0.25}.items()}
        report = {
            "stage": stage,
            "split": "dev",
            "tasks": {
                task: {"success": value, "reward": value, "n": 4, "statuses": {}}
                for task, value in per_task.items()
            },
            "mean_success": sum(per_task.values()) / len(per_task),
        }
        (run / f"eval_{stage}.json").write_text(json.dumps(report))
    return run


def write_episodes(
    run: Path,
    outcomes: dict[str, list[list[bool]]],
    *,
    stage: str = "after_rl",
    split: str = "dev",
    first_ids: dict[str, int] | None = None,
) -> Path:
    """(Re)write ``eval_<stage>.json`` with its episodes: ``outcomes[task][i]`` are the
    successes of instance ``i``'s samples (ids ``<task>-<split>-<first + i>``, ``first``
    the task's entry of ``first_ids``, else 0: the same ids in every run that does not
    shift them); each task's success is the mean over its episodes."""
    run.mkdir(parents=True, exist_ok=True)
    episodes = [
        {
            "task_id": task,
            "sample_id": f"{task}-{split}-{(first_ids or {}).get(task, 0) + i:05d}",
            "success": success,
            "reward": float(success),
            "status": "completed",
            "turns": 2,
        }
        for task, instances in outcomes.items()
        for i, samples in enumerate(instances)
        for success in samples
    ]
    tasks = {}
    for task in outcomes:
        played = [float(e["success"]) for e in episodes if e["task_id"] == task]
        tasks[task] = {"success": sum(played) / len(played), "n": len(played), "statuses": {}}
    report = {
        "stage": stage,
        "split": split,
        "tasks": tasks,
        "mean_success": sum(t["success"] for t in tasks.values()) / len(tasks),
        "episodes": episodes,
    }
    (run / f"eval_{stage}.json").write_text(json.dumps(report))
    return run
