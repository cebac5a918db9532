"""The shipped base model, measured: pretraining speed, loss, and dev success on the protocol.

    python -m benchmarks.base_model RUN_DIR [--agentbench-data DIR] [--curve-scale 0.25]
    python -m benchmarks.base_model --copying MODEL [MODEL ...]
    python -m benchmarks.base_model --agentbench MODEL --agentbench-data DIR
    python -m benchmarks.base_model --paired BEFORE AFTER [--split test] [--out DIR]

``RUN_DIR`` is the run folder of ``agentgym-eppo pretrain --config configs/tiny-base*.yaml``.
Writes the run's generated report, ``benchmarks/results/base-model/<RUN_DIR's name>/report.md``
(its plots and ``evals.json`` beside it), and the score table of the model card
(``agentgym_eppo/assets/models/agentgym-tiny/README.md``, between its ``scores`` markers).
It never writes ``benchmarks/results/base-model.md``: that page is written by hand (the
shipped run and the table of all runs, each with the commit that recorded it).

The evaluation protocol is the CPU demo's (``configs/demo-cpu.yaml``: its tasks, eval
instances per task, attempts per instance, temperature, seed, prompt style, rollout
limits and environment settings), so the base model here and the demo's before/after
table are scored the same way. The learning curve scores the pretraining snapshots on
the same instances, scaled down by ``--curve-scale`` (stated in the results).
AgentBench's own dev files are scored where they run offline: OS and DB (KG needs
Freebase and ALFWorld the original game files, neither of which is here).

``--copying`` only prints the copying table (teacher-forced accuracy on the names the
expert copies from the question, 40 dev episodes per task) of the models named: shipped
names or folders, e.g. a model before and after a continued pretraining.
``--agentbench`` only prints the table of AgentBench's own dev files for one model.
``--paired`` scores two models with the protocol on ``--split`` (e.g. the test split, to
confirm on instances no choice has seen a change measured on dev) and prints their
paired comparison (the demo's test), and how many episodes each ended at its first turn;
``--out`` keeps both evaluations and the table.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from agentgym_eppo.trainer.analysis.paired_eval import compare_evals, comparison_table
from agentgym_eppo.trainer.config import TrainConfig, load_config
from agentgym_eppo.trainer.rollout.episodes import RolloutLimits
from agentgym_eppo.trainer.rollout.evaluation import evaluate_policy
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.run import evaluated_tasks
from agentgym_eppo.trainer.training.models import load_policy

from .machine import cpu_model, matmul_peak
from .report import write_generated

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROTOCOL = ROOT / "configs" / "demo-cpu.yaml"
CARD = ROOT / "agentgym_eppo" / "assets" / "models" / "agentgym-tiny" / "README.md"
AGENTBENCH_FILES = {"os": "os_interaction/dev.json", "db": "dbbench/dev.jsonl"}
AGENTBENCH_SCRIPTS = {"os": "os_interaction/scripts/dev"}  # env kwarg scripts_dir


def evaluate(
    model_dir: Path | str, protocol: TrainConfig, scale: float = 1.0, **extra: Any
) -> dict:
    """The protocol's evaluation of ``model_dir`` (instances scaled by ``scale``)."""
    model, tokenizer = load_policy(model_dir)
    e, r = protocol.eval, protocol.rollout
    engine = HFGenerateEngine(
        model, tokenizer.eos_token_id, tokenizer.pad_token_id, batch_size=r.generation_batch
    )
    by_task = {t: max(1, round(n * scale)) for t, n in e.instances_by_task.items()}
    started = time.perf_counter()
    result = evaluate_policy(
        engine,
        tokenizer,
        extra.pop("tasks", evaluated_tasks(protocol)),
        stage="base",
        split=e.split,
        max_instances=extra.pop("max_instances", None),
        limits=RolloutLimits(r.max_tokens_per_turn, r.max_context, e.temperature),
        slots_per_task=e.slots_per_task,
        backend=r.backend,
        env_kwargs=extra.pop("env_kwargs", protocol.env_kwargs),
        instance_seed=e.instance_seed,
        prompt_style=r.prompt,
        samples_per_instance=e.samples_per_instance,
        instances_by_task=extra.pop("instances_by_task", by_task),
    )
    result["seconds"] = time.perf_counter() - started
    return result


def paired_comparison(before: str, after: str, split: str, out: Path | None = None) -> str:
    """Both models scored with the protocol on ``split``; their paired comparison (the
    demo's test) and each task's share of episodes that ended at their first turn."""
    protocol = load_config(PROTOCOL, [f"eval.split={split}"])
    results = [evaluate(model, protocol) for model in (before, after)]
    comparison = compare_evals(results[0], results[1], seed=protocol.seed)
    first_turn = [first_turn_share(r) for r in results]
    lines = [
        f"{after} against {before} on the {split} split (protocol of `configs/demo-cpu.yaml`, "
        f"seed {protocol.seed})",
        "",
        comparison_table(comparison),
        "",
        f"Over tasks: {comparison.test}",
        "",
        "Share of episodes ended at their first turn (before -> after): "
        + ", ".join(f"{t} {first_turn[0][t]:.3f} -> {first_turn[1][t]:.3f}" for t in first_turn[0]),
    ]
    text = "\n".join(lines)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name, result in zip(("before", "after"), results, strict=True):
            (out / f"eval_{split}_{name}.json").write_text(json.dumps(result, indent=1))
        write_generated(out / f"paired_{split}.md", text)
    return text


def first_turn_share(result: dict) -> dict[str, float]:
    """Each task's share of ``result``'s episodes that ended at their first turn."""
    return {
        t: statistics.mean(e["turns"] == 1 for e in result["episodes"] if e["task_id"] == t)
        for t in result["tasks"]
    }


def agentbench_scores(model_dir: Path | str, protocol: TrainConfig, data: Path) -> dict[str, dict]:
    """The protocol's evaluation of ``model_dir`` on AgentBench's own dev files under
    ``data`` (every instance, the protocol's attempts and temperature)."""
    scores = {}
    for task, relative in AGENTBENCH_FILES.items():
        kwargs = {**protocol.env_kwargs.get(task, {}), "tasks": str(data / relative)}
        if task in AGENTBENCH_SCRIPTS:
            kwargs["scripts_dir"] = str(data / AGENTBENCH_SCRIPTS[task])
        scores[task] = evaluate(
            model_dir, protocol, tasks=[task], env_kwargs={task: kwargs},
            instances_by_task={}, max_instances=None,
        )  # fmt: skip
    return scores


def agentbench_table(scores: dict[str, dict]) -> list[str]:
    """Markdown lines: what :func:`agentbench_scores` measured, with its caveat."""
    return [
        "Not our generators' distribution (other wording, other file trees and tables), so "
        "low scores are expected. KG needs Freebase and ALFWorld the original game files, "
        "neither of which is here.",
        "",
        "| task | dev success (episodes) | mean reward | statuses |",
        "|---|---|---|---|",
        *(
            f"| {t} | {r['tasks'][t]['success']:.3f} ({r['tasks'][t]['n']}) | "
            f"{r['tasks'][t]['reward']:.3f} | {r['tasks'][t]['statuses']} |"
            for t, r in scores.items()
        ),
    ]


COPY_TASKS = ("os", "db", "kg")
CALL_SYNTAX = '<tool_call>\n{"name": "arguments": }\n</tool_call>'


def expert_dev_episodes(task: str, count: int) -> list[Any]:
    """The expert's episodes of the first ``count`` dev instances of ``task``."""
    import gymnasium as gym

    from agentgym_eppo.registration import env_id_for
    from agentgym_eppo.trainer.training.pretrain import play_expert

    env = gym.make(
        env_id_for(task), split="dev", **({"command_timeout": 5} if task == "os" else {})
    )
    episodes = [play_expert(env, index) for index in range(count)]
    env.close()
    return episodes


def copy_accuracy(model_dir: Path | str, episodes: dict[str, list[Any]]) -> dict[str, dict]:
    """Teacher-forced next-token accuracy on the expert's dev tokens, split into tokens that
    occur in the task text (names to copy: paths, tables, entities) and all others."""
    from agentgym_eppo.trainer.training.batching import build_micro_batch
    from agentgym_eppo.trainer.training.sft import expert_transcript

    model, tokenizer = load_policy(model_dir)
    model.eval()
    syntax = set(tokenizer.encode(CALL_SYNTAX, add_special_tokens=False))
    result = {}
    for task, played in episodes.items():
        hits = {True: [0, 0], False: [0, 0]}
        for episode in played:
            transcript = expert_transcript(tokenizer, episode, "compact")
            in_task = set(tokenizer.encode(episode.task_text, add_special_tokens=False))
            batch = build_micro_batch([transcript], [0], tokenizer.pad_token_id)
            with torch.no_grad():
                logits = model(
                    input_ids=batch.input_ids, attention_mask=batch.attention_mask
                ).logits[0]
            predicted = logits[batch.positions].argmax(-1).tolist()
            for guess, target in zip(predicted, batch.targets.tolist(), strict=True):
                copied = target in in_task and target not in syntax
                hits[copied][0] += int(guess == target)
                hits[copied][1] += 1
        result[task] = {
            "copied": hits[True][0] / max(1, hits[True][1]),
            "other": hits[False][0] / max(1, hits[False][1]),
            "copied_tokens": hits[True][1],
        }
    return result


def copying_table(models: list[str]) -> list[str]:
    """The copying table of ``models`` on the same dev episodes."""
    dev_episodes = {task: expert_dev_episodes(task, 40) for task in COPY_TASKS}
    lines = _copy_header("model")
    for model in models:
        lines.append(f"| {model} | {_copy_cells(copy_accuracy(model, dev_episodes))} |")
    return lines


def _copy_header(first: str) -> list[str]:
    columns = " | ".join(f"{t} copied | {t} other" for t in COPY_TASKS)
    return [f"| {first} | {columns} |", f"|---|{'---|---|' * len(COPY_TASKS)}"]


def _copy_cells(acc: dict[str, dict]) -> str:
    return " | ".join(f"{acc[t]['copied']:.3f} | {acc[t]['other']:.3f}" for t in COPY_TASKS)


def _row(result: dict, tasks: list[str]) -> str:
    cells = []
    for task in tasks:
        entry = result["tasks"].get(task)
        cells.append(f"{entry['success']:.3f} ({entry['n']})" if entry else "-")
    return " | ".join(cells)


def _plots(metrics: list[dict], curve: list[tuple[int, dict]], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([m["tokens_seen"] / 1e6 for m in metrics], [m["loss"] for m in metrics])
    ax.set_xlabel("tokens seen (M)")
    ax.set_ylabel("cross-entropy on the agent's tokens")
    ax.set_yscale("log")
    ax.set_title("agentgym-tiny pretraining loss")
    fig.tight_layout()
    fig.savefig(folder / "loss.png", dpi=100)
    plt.close(fig)
    names.append("loss.png")
    if curve:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        tasks = sorted(curve[-1][1]["tasks"])
        for task in tasks:
            ax.plot(
                [tokens / 1e6 for tokens, _ in curve],
                [r["tasks"][task]["success"] for _, r in curve],
                marker="o",
                label=task,
            )
        ax.set_xlabel("tokens seen (M)")
        ax.set_ylabel("dev success")
        ax.legend()
        ax.set_title("dev success during pretraining")
        fig.tight_layout()
        fig.savefig(folder / "success.png", dpi=100)
        plt.close(fig)
        names.append("success.png")
    return names


def read_metrics(run: Path) -> list[dict]:
    """The run's ``metrics.jsonl``, one entry per step in step order (a resumed run
    rewrites its last steps; the later line wins)."""
    by_step = {}
    for line in (run / "metrics.jsonl").open():
        entry = json.loads(line)
        by_step[entry["step"]] = entry
    return [by_step[k] for k in sorted(by_step)]


def measure(
    run: Path, protocol: TrainConfig, curve_scale: float, agentbench_data: Path | None
) -> dict:
    """What the report of ``run`` states that takes a model or the machine: the matmul
    peaks, the protocol's evaluation of the final model, the learning curve (snapshots
    and the final model, instances scaled by ``curve_scale``), the copying accuracy and,
    with ``agentbench_data``, AgentBench's own dev files."""
    metrics = read_metrics(run)
    tokens_at = {m["step"]: m["tokens_seen"] for m in metrics}
    snapshots = sorted((run / "snapshots").glob("step_*"), key=lambda p: int(p.name[5:]))
    points = [(tokens_at[int(p.name[5:])], p) for p in snapshots]
    points.append((metrics[-1]["tokens_seen"], run / "model"))
    dev_episodes = {task: expert_dev_episodes(task, 40) for task in COPY_TASKS}
    return {
        "peaks": {
            name: matmul_peak(dtype)
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
        },
        "final": evaluate(run / "model", protocol),
        "curve": [(tokens, evaluate(model, protocol, curve_scale)) for tokens, model in points],
        "copying": [(tokens, copy_accuracy(model, dev_episodes)) for tokens, model in points],
        "agentbench": (
            agentbench_scores(run / "model", protocol, agentbench_data)
            if agentbench_data is not None
            else {}
        ),
    }


def protocol_text(protocol: TrainConfig) -> str:
    """The protocol's settings in one sentence."""
    e, r = protocol.eval, protocol.rollout
    return (
        f"`configs/demo-cpu.yaml`'s eval: split `{e.split}`, instances per task "
        f"{dict(e.instances_by_task)} x {e.samples_per_instance} attempts, temperature "
        f"{e.temperature}, seed {protocol.seed}, prompt `{r.prompt}`, "
        f"{r.max_tokens_per_turn} tokens per turn, context {r.max_context}, turn limit "
        f"{r.max_turns} (environment settings {protocol.env_kwargs})"
    )


def score_table(final: dict) -> list[str]:
    """Markdown lines: each task's dev success, mean reward and share of episodes ended at
    their first turn, and the mean success over tasks (the model card's columns)."""
    first_turn = first_turn_share(final)
    return [
        "| task | dev success (episodes) | mean reward | ended at the first turn |",
        "|---|---|---|---|",
        *(
            f"| {t} | {final['tasks'][t]['success']:.3f} ({final['tasks'][t]['n']}) | "
            f"{final['tasks'][t]['reward']:.3f} | {first_turn[t]:.2f} |"
            for t in sorted(final["tasks"])
        ),
        f"| mean over tasks | {final['mean_success']:.3f} | | |",
    ]


def write_report(
    run: Path,
    measured: dict,
    protocol: TrainConfig,
    *,
    threads: int,
    curve_scale: float,
    results: Path = RESULTS,
) -> Path:
    """Write the generated report of ``run`` from :func:`measure`'s ``measured``:
    ``results/base-model/<run folder's name>/report.md``, its plots and ``evals.json``
    beside it. Returns the report's path. ``results/base-model.md`` is written by hand
    and is never touched here."""
    summary = json.loads((run / "model" / "pretrain.json").read_text())
    metrics = read_metrics(run)
    final, curve, copying = measured["final"], measured["curve"], measured["copying"]
    peaks, agentbench = measured["peaks"], measured["agentbench"]
    rate = statistics.median(m["tokens_per_s"] for m in metrics)
    padding = 1 - sum(m["tokens"] for m in metrics) / sum(m["padded_tokens"] for m in metrics)
    flops = 6 * summary["parameters"] * rate / 1e9

    folder = results / "base-model" / run.name
    folder.mkdir(parents=True, exist_ok=True)
    plots = _plots(metrics, curve, folder)
    tasks = sorted(final["tasks"])
    lines = [
        f"# agentgym-tiny pretraining run `{run.name}`",
        "",
        f"Generated by `python -m benchmarks.base_model {run}` on {cpu_model()}, "
        f"{threads} threads. The shipped model and the history of its runs: "
        "[../../base-model.md](../../base-model.md).",
        "",
        "## Pretraining",
        "",
        f"- Model: Qwen2, {summary['parameters'] / 1e6:.2f}M parameters, vocabulary "
        f"{summary['vocabulary']}; {summary['steps']} steps, "
        f"{summary['tokens_seen'] / 1e6:.1f}M tokens seen "
        f"({summary['tokens_per_epoch'] / 1e6:.1f}M per epoch).",
        f"- Data: solved expert episodes {summary['episodes']}.",
        f"- Wall time: data {summary['data_seconds'] / 60:.1f} min, training "
        f"{summary['train_seconds'] / 60:.1f} min.",
        f"- Speed: median {rate:,.0f} tokens/s; {flops:.0f} GFLOP/s by 6 x parameters x "
        f"tokens (attention left out), {flops / peaks['fp32']:.0%} of this run's measured "
        f"fp32 matmul peak ({peaks['fp32']:.0f} GFLOP/s; bf16: {peaks['bf16']:.0f} GFLOP/s, "
        f"so training runs in fp32); padding {padding:.1%} of the tokens computed.",
        "",
        *(f"![{name}]({name})" for name in plots),
        "",
        "## Dev success on the protocol",
        "",
        f"Protocol: {protocol_text(protocol)}. Evaluation took {final['seconds'] / 60:.1f} min.",
        "",
        *score_table(final),
        "",
        f"Learning curve (the same instances scaled by {curve_scale}; episodes in brackets):",
        "",
        f"| tokens seen (M) | {' | '.join(tasks)} | mean |",
        f"|---|{'---|' * len(tasks)}---|",
        *(
            f"| {tokens / 1e6:.1f} | {_row(result, tasks)} | {result['mean_success']:.3f} |"
            for tokens, result in curve
        ),
        "",
        "## Copying names from the question",
        "",
        "Teacher-forced next-token accuracy on the expert's tokens of 40 dev episodes per "
        "task: tokens that occur in the task text (the names to copy: paths, tables, "
        "entities) against all others.",
        "",
        *_copy_header("tokens seen (M)"),
        *(f"| {tokens / 1e6:.1f} | {_copy_cells(acc)} |" for tokens, acc in copying),
        "",
    ]
    if agentbench:
        lines += ["## AgentBench's own dev files", "", *agentbench_table(agentbench), ""]
    report = folder / "report.md"
    write_generated(report, "\n".join(lines))
    evals = {k: measured[k] for k in ("final", "curve", "copying", "agentbench")}
    (folder / "evals.json").write_text(json.dumps(evals, indent=1), encoding="utf-8")
    return report


def update_card(final: dict, protocol: TrainConfig, card: Path = CARD) -> None:
    """Replace the model card's score table (between its ``scores`` markers) with
    ``final``'s."""
    if not card.exists():
        return
    block = "\n".join(
        [
            "<!-- scores -->",
            f"Protocol: {protocol_text(protocol)}.",
            "",
            *score_table(final),
            "<!-- /scores -->",
        ]
    )
    text = card.read_text(encoding="utf-8")
    card.write_text(
        re.sub(r"<!-- scores -->.*<!-- /scores -->", lambda _: block, text, flags=re.S),
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, nargs="?")
    parser.add_argument("--copying", nargs="+", metavar="MODEL", default=None)
    parser.add_argument("--agentbench", metavar="MODEL", default=None)
    parser.add_argument("--agentbench-data", type=Path, default=None)
    parser.add_argument("--paired", nargs=2, metavar=("BEFORE", "AFTER"), default=None)
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--curve-scale", type=float, default=0.25)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.copying:
        print("\n".join(copying_table(args.copying)))
        return
    if args.paired:
        before, after = args.paired
        print(paired_comparison(before, after, args.split, args.out))
        return
    if args.agentbench:
        if args.agentbench_data is None:
            parser.error("--agentbench needs --agentbench-data DIR")
        scores = agentbench_scores(args.agentbench, load_config(PROTOCOL), args.agentbench_data)
        print("\n".join(agentbench_table(scores)))
        return
    if args.run_dir is None:
        parser.error("give RUN_DIR, or --copying MODEL ...")
    protocol = load_config(PROTOCOL)
    measured = measure(args.run_dir, protocol, args.curve_scale, args.agentbench_data)
    report = write_report(
        args.run_dir, measured, protocol, threads=args.threads, curve_scale=args.curve_scale
    )
    update_card(measured["final"], protocol)
    print(report.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
