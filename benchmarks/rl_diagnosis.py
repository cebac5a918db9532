"""One change at a time from one SFT checkpoint: what each RL variant did.

    python -m benchmarks.rl_diagnosis runs/why-rl-hurt --base all \\
        --out benchmarks/results/real-model/why-rl-hurt

A study is a folder of runs. The base run trained the SFT checkpoint and evaluated it
(``eval_after_sft.json``) before its own RL, or only evaluated it (``rl.steps=0``, its
``eval_after_rl.json``); every other run started RL from that checkpoint
(``init_checkpoint``) with one setting changed, and evaluated after RL on the same
instances (``eval.instance_seed``). For each run the table gives success per task after
RL on the evaluated split, the paired test against the SFT checkpoint's evaluation
(exact sign test per task, permutation test of the mean over tasks, both one-sided: did
RL help?), and
over its RL steps the mean per-token KL to the reference, the policy's entropy and the
share of loss tokens the clip bound. It prints the table (Markdown); ``--out`` writes
it with the numbers behind it (``<out>/diagnosis.md``, ``<out>/diagnosis.json``) and a
copy of each run's config, metrics and evaluations (``<out>/<run>/``); ``--out`` may be
the study itself, to rebuild the tables from committed runs.

Two more tables follow the first. **Over seeds**: runs whose configs differ only in
``seed`` are one setting; for each, its seeds' gains and their mean, and the gain pooled
over its seeds (per instance, the seeds' mean success against the checkpoint's). **Time split**: each run's median step time and the shares of the rollout,
the update's scoring passes (old and reference log-probs) and its training passes, and
the update's counted GFLOP per second of those two; with ``--peak FILE`` (a JSON of the
machine's fp32 and bf16 matmul GFLOP/s, written by ``--measure-peak``) also their share
of that peak.

>>> _flat({"rl": {"lr": 1e-05, "steps": 6}, "seed": 0})
{'rl.lr': 1e-05, 'rl.steps': 6, 'seed': 0}
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import yaml

from agentgym_eppo.trainer.analysis.paired_eval import compare_evals
from agentgym_eppo.trainer.analysis.run_dir import read_eval
from agentgym_eppo.trainer.analysis.stats import mean_interval
from agentgym_eppo.trainer.config import TrainConfig
from agentgym_eppo.trainer.config.describe import config_to_dict
from agentgym_eppo.trainer.devices import resolve_bf16
from benchmarks.machine import cpu_model, matmul_peak

# what every variant sets to start from the base's checkpoint, not a change of recipe
PLUMBING = {"output_dir", "init_checkpoint", "sft.enabled", "eval.stages", "resume"}
RUN_FILES = (
    "config.yaml",
    "machine.jsonl",
    "sft.json",
    "metrics.jsonl",
    "eval_after_sft.json",
    "eval_after_rl.json",
)


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


NO_CHANGE = "none (the base's recipe)"
# every setting at its default: what a config written before the setting existed ran at
DEFAULTS = _flat(config_to_dict(TrainConfig()))


def _change(base: dict[str, Any], run: dict[str, Any]) -> str:
    """The settings ``run`` changed from ``base``, less the plumbing and, for a run that
    trained no SFT of its own, the SFT's settings. A key one config lacks came with a
    newer trainer and stands at its default there.

    >>> _change({"seed": 0, "sft.epochs": 2}, {"seed": 1, "sft.epochs": 3, "sft.enabled": False})
    'seed=1'
    >>> _change({"seed": 0}, {"seed": 0, "rl.warmup_steps": 3, "rl.lr": 1e-05})
    'rl.warmup_steps=3'
    >>> _change({"seed": 0, "rl.steps": 0}, {"seed": 2, "rl.steps": 16})
    'seed=2'
    """
    skipped = PLUMBING | (
        {k for k in run if k.startswith("sft.")} if run.get("sft.enabled") is False else set()
    )
    if base.get("rl.steps") == 0:  # a base that only evaluated: its runs are the recipe's
        skipped |= {"rl.steps"}
    base, run = {**DEFAULTS, **base}, {**DEFAULTS, **run}
    keys = sorted(k for k in set(base) | set(run) if base.get(k) != run.get(k) and k not in skipped)
    return ", ".join(f"{k}={run.get(k)}" for k in keys) or NO_CHANGE


def _steps(metrics: Path) -> list[dict[str, Any]]:
    """The run's RL step records."""
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def _training_means(metrics: Path) -> dict[str, float]:
    """Means over the run's RL steps: KL (per token), entropy and clipped share (token
    weighted over tasks), the share of groups whose rewards differed (the only ones with
    a GRPO advantage) and the success of its training rollouts."""
    kl, entropy, clipped, success, mixed = [], [], [], [], []
    for step in _steps(metrics):
        tasks = [t for t in step["tasks"].values() if t["entropy"] is not None]  # trained
        tokens = sum(t["tokens"] for t in tasks) or 1
        kl.append(step["global"]["kl"])
        success.append(step["global"]["success"])
        entropy.append(sum(t["entropy"] * t["tokens"] for t in tasks) / tokens)
        clipped.append(sum(t["clipped_share"] * t["tokens"] for t in tasks) / tokens)
        mixed.append(sum(t["mixed_groups"] for t in step["tasks"].values()) / len(step["tasks"]))
    steps = len(kl) or 1
    return {
        "steps": len(kl),
        "kl": sum(kl) / steps,
        "kl_last": kl[-1] if kl else 0.0,
        "entropy": sum(entropy) / steps,
        "clipped_share": sum(clipped) / steps,
        "mixed_groups": sum(mixed) / steps,
        "train_success": sum(success) / steps,
    }


def _precision(folder: Path, config: dict[str, Any]) -> str | None:
    """The precision the run's update ran in: its ``bf16`` setting on its machine (None for
    a run folder without the machine's record)."""
    if not (folder / "machine.jsonl").exists():
        return None
    machine = json.loads((folder / "machine.jsonl").read_text().splitlines()[0])
    bf16 = {**DEFAULTS, **config}["bf16"]
    return "bf16" if resolve_bf16(bf16, torch.device("cpu"), machine) else "fp32"


def _timing(folder: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The step's time split over the run's RL steps: the median step, each part's share
    of the summed step time, and the update's counted GFLOP per second of its scoring and
    training passes, with the precision they ran in."""
    steps = [step["global"] for step in _steps(folder / "metrics.jsonl")]
    total = sum(s["seconds"] for s in steps) or 1.0
    parts = {k: sum(s[f"{k}_seconds"] for s in steps) for k in ("rollout", "score", "train")}
    update = parts["score"] + parts["train"]
    return {
        "step_seconds": statistics.median(s["seconds"] for s in steps) if steps else 0.0,
        **{f"{k}_share": v / total for k, v in parts.items()},
        "other_share": 1.0 - sum(parts.values()) / total,
        "update_gflops": sum(s["update_gflop"] for s in steps) / update if update else 0.0,
        "precision": _precision(folder, config),
    }


def _over_seeds(
    runs: list[dict[str, Any]],
    sft_eval: dict,
    configs: dict[str, dict[str, Any]],
    evaluations: dict[str, dict[str, Any]],
) -> list:
    """Runs whose configs differ only in ``seed`` pooled into one setting: each seed's
    gain, their mean with a Student-t interval over seeds, the gain pooled per instance,
    and per task the pooled change with the one-sided sign test p that RL lowered it."""
    settings: dict[str, list[dict[str, Any]]] = {}
    for row in runs:
        setting = ", ".join(c for c in row["change"].split(", ") if not c.startswith("seed="))
        settings.setdefault(setting or NO_CHANGE, []).append(row)
    pooled = []
    for setting, rows in settings.items():
        after = [evaluations[r["run"]] for r in rows]
        # per instance: the mean over the seeds' episodes against the checkpoint's
        episodes = {"episodes": [e for a in after for e in a["episodes"]]}
        comparison = compare_evals(sft_eval, episodes)
        worse = compare_evals(episodes, sft_eval)  # its one-sided test: did RL lower it?
        seed_level = mean_interval([r["difference"] for r in rows])
        seeds = [configs[r["run"]]["seed"] for r in rows]
        pooled.append(
            {
                "setting": setting,
                "runs": [r["run"] for r in rows],
                "seeds": seeds,
                "gains": [r["difference"] for r in rows],
                "mean_gain": seed_level.mean,
                "seed_interval": [seed_level.low, seed_level.high],
                "pooled": comparison.test.difference.mean,
                "pooled_interval": [
                    comparison.test.difference.low,
                    comparison.test.difference.high,
                ],
                "pooled_p_greater": comparison.test.p_value,
                "pooled_by_task": {t: c.after - c.before for t, c in comparison.tasks.items()},
                "p_lower_by_task": {t: c.test.p_value for t, c in worse.tasks.items()},
            }
        )
    return pooled


def measure_peak(threads: int) -> dict[str, Any]:
    """This machine's fp32 and bf16 matmul GFLOP/s at ``threads`` (2048 x 2048, best of 5),
    with the CPU and the load average around the measurement."""
    torch.set_num_threads(threads)
    before = os.getloadavg()
    peak = {
        name: matmul_peak(dtype)
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    return {
        "cpu": cpu_model(),
        "threads": threads,
        "gflops": peak,
        "load": [before, os.getloadavg()],
    }


def _success(evaluation: dict[str, Any]) -> dict[str, float]:
    return {task: value["success"] for task, value in sorted(evaluation["tasks"].items())}


def diagnose(study: Path, base: str, peak: dict[str, Any] | None = None) -> dict[str, Any]:
    base_config = _flat(yaml.safe_load((study / base / "config.yaml").read_text()))
    configs = {
        p.name: _flat(yaml.safe_load((p / "config.yaml").read_text()))
        for p in study.iterdir()
        if (p / "eval_after_rl.json").exists()
    }
    # runs that trained no step (rl.steps=0) evaluated the checkpoint (again, under their
    # sampling seed): pooled with the base's SFT evaluation, they are the reference every
    # RL run is paired with (per instance, the mean over those evaluations). A base that
    # only evaluated its checkpoint is one of them.
    again = sorted(name for name, config in configs.items() if config.get("rl.steps") == 0)
    checkpoint = [
        (name, configs[name]["seed"], read_eval(study / name / "eval_after_rl.json"))
        for name in again
    ]
    if (study / base / "eval_after_sft.json").exists():
        base_eval = read_eval(study / base / "eval_after_sft.json")
        checkpoint.insert(0, (base, base_config["seed"], base_eval))
    sft_eval = {"episodes": [e for _, _, evaluation in checkpoint for e in evaluation["episodes"]]}
    runs = sorted(set(configs) - set(again), key=lambda name: (name != base, name))
    rows, comparisons, evaluations = [], {}, {}
    for name in runs:
        folder = study / name
        after = evaluations[name] = read_eval(folder / "eval_after_rl.json")
        comparison = comparisons[name] = compare_evals(sft_eval, after)
        rows.append(
            {
                "run": name,
                "change": _change(base_config, configs[name]),
                "success": {t: c.after for t, c in comparison.tasks.items()},
                "mean": comparison.mean_after,
                "difference": comparison.test.difference.mean,
                "interval": [comparison.test.difference.low, comparison.test.difference.high],
                "p_greater": comparison.test.p_value,
                "p_by_task": {t: c.test.p_value for t, c in comparison.tasks.items()},
                **_training_means(folder / "metrics.jsonl"),
                "timing": _timing(folder, configs[name]),
            }
        )
    # the base run played every instance the checkpoint did; an evaluation-only base is
    # the checkpoint's evaluation itself
    sft = comparisons.get(base) or compare_evals(sft_eval, sft_eval)
    result = {
        "sft": {"success": {t: c.before for t, c in sft.tasks.items()}, "mean": sft.mean_before},
        "instances": {t: c.instances for t, c in sft.tasks.items()},
        "runs": rows,
        "reference_runs": [name for name, _, _ in checkpoint],
        "over_seeds": _over_seeds(rows, sft_eval, configs, evaluations),
        "peak": peak,
    }
    if len(checkpoint) > 1:
        result["checkpoint_evaluations"] = [
            {"run": name, "seed": seed, "success": _success(evaluation)}
            for name, seed, evaluation in checkpoint
        ]
    return result


def render(result: dict[str, Any]) -> str:
    tasks = sorted(result["sft"]["success"])
    head = "| run | change | " + " | ".join(tasks) + " | mean | gain [95% CI] | p (gain > 0) "
    head += "| KL | entropy | clipped | mixed groups | train success |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    sft = result["sft"]
    pooled = len(result.get("checkpoint_evaluations", [])) or 1
    label = "SFT checkpoint" + (f" ({pooled} evaluations)" if pooled > 1 else "")
    lines.append(
        f"| {label} | | "
        + " | ".join(f"{sft['success'][t]:.2f}" for t in tasks)
        + f" | {sft['mean']:.3f} | | | | | | | |"
    )
    for row in result["runs"]:
        low, high = row["interval"]
        lines.append(
            f"| {row['run']} | {row['change']} | "
            + " | ".join(f"{row['success'][t]:.2f}" for t in tasks)
            + f" | {row['mean']:.3f} | {row['difference']:+.3f} [{low:+.3f}, {high:+.3f}] "
            f"| {row['p_greater']:.3g} | {row['kl']:.4f} | {row['entropy']:.3f} "
            f"| {100 * row['clipped_share']:.2f}% | {row['mixed_groups']:.2f} "
            f"| {row['train_success']:.2f} |"
        )
    tables = [lines, _render_checkpoint(result), _render_seeds(result), _render_timing(result)]
    return "\n\n".join("\n".join(table) for table in tables if table) + "\n"


def _render_checkpoint(result: dict[str, Any]) -> list[str]:
    """The checkpoint's evaluations under each sampling seed: the evaluation's own noise."""
    evaluations = result.get("checkpoint_evaluations", [])
    if not evaluations:
        return []
    tasks = sorted(result["sft"]["success"])
    lines = ["| checkpoint evaluated by | seed | " + " | ".join(tasks) + " | mean |"]
    lines.append("|" + "---|" * (len(tasks) + 3))
    for e in evaluations:
        mean = statistics.fmean(e["success"][t] for t in tasks)
        cells = " | ".join(f"{e['success'][t]:.2f}" for t in tasks)
        lines.append(f"| {e['run']} | {e['seed']} | {cells} | {mean:.3f} |")
    return lines


def _render_seeds(result: dict[str, Any]) -> list[str]:
    tasks = sorted(result["sft"]["success"])
    head = "| setting | seeds | gain per seed | mean gain over seeds [95% CI] "
    head += "| pooled gain [95% CI] | p (gain > 0) | "
    head += " | ".join(f"{t} (p lower)" for t in tasks)
    lines = [head + " |", "|" + "---|" * (6 + len(tasks))]
    for s in result["over_seeds"]:
        low, high = s["pooled_interval"]
        lines.append(
            f"| {s['setting']} | {', '.join(map(str, s['seeds']))} "
            f"| {', '.join(f'{g:+.3f}' for g in s['gains'])} "
            f"| {s['mean_gain']:+.3f} [{s['seed_interval'][0]:+.3f}, {s['seed_interval'][1]:+.3f}] "
            f"| {s['pooled']:+.3f} [{low:+.3f}, {high:+.3f}] | {s['pooled_p_greater']:.3g} | "
            + " | ".join(
                f"{s['pooled_by_task'][t]:+.3f} ({s['p_lower_by_task'][t]:.2g})" for t in tasks
            )
            + " |"
        )
    return lines


def _render_timing(result: dict[str, Any]) -> list[str]:
    peak = (result.get("peak") or {}).get("gflops", {})
    head = "| run | step, s (median) | rollout | scoring | training | other | update GFLOP/s |"
    head += " precision | share of its matmul peak |" if peak else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in result["runs"]:
        t = row["timing"]
        line = (
            f"| {row['run']} | {t['step_seconds']:.1f} | {100 * t['rollout_share']:.0f}% "
            f"| {100 * t['score_share']:.0f}% | {100 * t['train_share']:.0f}% "
            f"| {100 * t['other_share']:.0f}% | {t['update_gflops']:.0f} |"
        )
        if peak:  # the share of the peak of the precision the run's update ran in
            precision = t["precision"]
            share = f" {precision} | {100 * t['update_gflops'] / peak[precision]:.0f}% |"
            line += share if precision else " | |"
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="the folder holding the study's runs")
    parser.add_argument("--base", required=True, help="the run that trained the SFT checkpoint")
    parser.add_argument("--out", type=Path, help="a folder for the table, its numbers and the runs")
    parser.add_argument(
        "--peak", type=Path, help="the machine's matmul peak (JSON) to state shares of"
    )
    parser.add_argument(
        "--measure-peak", type=int, metavar="THREADS", help="measure the peak first into --peak"
    )
    args = parser.parse_args()
    if args.measure_peak:
        args.peak.write_text(json.dumps(measure_peak(args.measure_peak), indent=1) + "\n")
    peak = json.loads(args.peak.read_text()) if args.peak else None
    result = diagnose(args.study, args.base, peak)
    table = render(result)
    if args.out:
        for run in dict.fromkeys([*result["reference_runs"], *(r["run"] for r in result["runs"])]):
            target = args.out / run
            target.mkdir(parents=True, exist_ok=True)
            for name in RUN_FILES:
                source = args.study / run / name
                if source.exists() and source.resolve() != (target / name).resolve():
                    shutil.copyfile(source, target / name)
        (args.out / "diagnosis.json").write_text(json.dumps(result, indent=1) + "\n")
        (args.out / "diagnosis.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
