"""SmolLM2-135M-Instruct (``smollm2-135m-instruct``) measured: zero-shot success on the
evaluation protocol, and rollout throughput against plain ``generate``.

    python -m benchmarks.real_model eval --prompt full --instances os=4 db=4 ... --out F.json
    python -m benchmarks.real_model throughput --rows 4 --new-tokens 32 --out F.json
    python -m benchmarks.real_model first-turns --new-tokens 96 --out F.json

``eval`` is the protocol of ``configs/demo-cpu.yaml`` (``benchmarks/base_model.py``'s
:func:`~benchmarks.base_model.evaluate`: its rollout limits, temperature, seed, slots
and environment settings) with the prompt style and the instance counts given here, one
attempt per instance (the protocol has two): the counts are cut to what the CPU allows,
and the results file says so. ``throughput`` samples two turns of one batch with the
trainer's engine (:class:`~agentgym_eppo.trainer.rollout.hf.HFGenerateEngine`, which
keeps each row's KV cache across turns) and with ``model.generate``: first-turn contexts
of DB dev instances (full prompt), then each context with its sampled turn and a fixed
reply; both at temperature 1 with no end-of-turn token, so both write exactly
``rows x new_tokens`` tokens a turn. Rates are per CPU second of the process as well as
per wall second. Then one update step (the protocol's settings) on the engine's
episodes, its tokens per CPU second and its share of the fp32 matmul peak. ``first-turns`` decodes the model's greedy first
turn on one dev instance of each task. Each prints and writes JSON with the CPU and load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from agentgym_eppo.trainer.config import load_config
from agentgym_eppo.trainer.devices import describe_machine
from agentgym_eppo.trainer.training.models import load_policy

from .base_model import PROTOCOL, evaluate

MODEL = "smollm2-135m-instruct"


def machine() -> dict[str, Any]:
    described = describe_machine()
    return {
        "cpu": described["cpu"],
        "flags": sorted(set(described["cpu_flags"]) & {"avx512f", "avx512_bf16", "amx_bf16"}),
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
    }


def zero_shot(prompt: str, instances: dict[str, int]) -> dict[str, Any]:
    protocol = load_config(
        PROTOCOL,
        [
            f"rollout.prompt={prompt}",
            "eval.samples_per_instance=1",
            "eval.instances_by_task={" + ", ".join(f"{t}: {n}" for t, n in instances.items()) + "}",
        ],
    )
    before = machine()
    result = evaluate(MODEL, protocol)
    result.update(prompt=prompt, machine_before=before, machine_after=machine())
    return result


def first_turn_contexts(tokenizer: Any, rows: int) -> list[list[int]]:
    from agentgym_eppo.trainer.rollout.episodes import slot_info, start_episode
    from agentgym_eppo.vector import MultiTaskVectorEnv

    venv = MultiTaskVectorEnv({"db": rows}, split="dev", seed=0)
    try:
        observations, infos = venv.reset(seed=0)
        return [
            start_episode(tokenizer, i, observations[i], slot_info(infos, i)).transcript.tokens
            for i in range(rows)
        ]
    finally:
        venv.close()


class _Clock:
    """Wall and CPU seconds of a block (the CPU time of this process: under a shared
    CPU the wall time says more about the neighbours than about the code)."""

    def __enter__(self) -> _Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def rates(self, tokens: int) -> dict[str, float]:
        return {
            "tokens": tokens,
            "wall_s": self.wall,
            "cpu_s": self.cpu,
            "tokens_per_wall_s": tokens / self.wall,
            "tokens_per_cpu_s": tokens / self.cpu,
        }


REPLY = "Query OK, 1 row affected (0.01 sec)\nRows matched: 1  Changed: 1  Warnings: 0"
"""The environment reply appended after the first turn (a DB update's, as MySQL prints it)."""


def throughput(rows: int, new_tokens: int) -> dict[str, Any]:
    """Two turns of rollout with the engine and with ``generate`` on one batch (the second
    turn's contexts: the first turn's, its sampled tokens and :data:`REPLY`), then one
    update step (the protocol's update settings) on the engine's episodes."""
    from agentgym_eppo.trainer.rollout.chat import Transcript, observation_token_ids
    from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine

    model, tokenizer = load_policy(MODEL)
    first = first_turn_contexts(tokenizer, rows)
    reply = observation_token_ids(tokenizer, REPLY)
    never = -1  # no end-of-turn token: every row writes new_tokens tokens
    engine = HFGenerateEngine(model, never, tokenizer.pad_token_id)
    before = machine()
    results: dict[str, Any] = {}
    transcripts: list[Any] = []
    for name in ("engine", "generate"):
        sample = engine.generate if name == "engine" else _generate(model, tokenizer)
        torch.manual_seed(0)
        with _Clock() as turn1:
            turns = sample(first, [new_tokens] * rows, 1.0)
        second = [c + t + reply for c, t in zip(first, turns, strict=True)]
        with _Clock() as turn2:
            again = sample(second, [new_tokens] * rows, 1.0)
        written = rows * new_tokens
        results[name] = {
            "turn_1": turn1.rates(sum(map(len, turns))),
            "turn_2": turn2.rates(sum(map(len, again))),
            "tokens_per_cpu_s": 2 * written / (turn1.cpu + turn2.cpu),
        }
        if name == "engine":
            for context, turn, turn_2 in zip(first, turns, again, strict=True):
                transcript = Transcript(list(context))
                transcript.add_generated(turn)
                transcript.add_template(reply)
                transcript.add_generated(turn_2)
                transcripts.append(transcript)
    update, update_clock, tokens = update_step(model, tokenizer, transcripts)
    params = sum(p.numel() for p in model.parameters())
    peak = cpu_matmul_peak()
    achieved = 6 * params * tokens / update_clock.cpu / 1e9
    return {
        "rows": rows,
        "context_tokens": [len(c) for c in first],
        "reply_tokens": len(reply),
        "new_tokens": new_tokens,
        **results,
        "engine_over_generate_cpu": results["engine"]["tokens_per_cpu_s"]
        / results["generate"]["tokens_per_cpu_s"],
        "update": {
            **update_clock.rates(tokens),
            "loss_tokens": update.tokens,
            "gflops_per_cpu_s_6nt": achieved,
            "fp32_matmul_peak_gflops_per_cpu_s": peak,
            "share_of_peak": achieved / peak,
        },
        "machine_before": before,
        "machine_after": machine(),
    }


def _generate(model: Any, tokenizer: Any) -> Any:
    """``model.generate`` behind the engine's call signature (left-padded batch, sampling
    at the temperature with no top-k or top-p, no end-of-turn token)."""

    def sample(
        contexts: list[list[int]], budgets: list[int], temperature: float
    ) -> list[list[int]]:
        width = max(map(len, contexts))
        pads = torch.tensor([width - len(c) for c in contexts])
        padded = torch.tensor([[tokenizer.pad_token_id] * (width - len(c)) + c for c in contexts])
        mask = (torch.arange(width)[None] >= pads[:, None]).long()
        with torch.inference_mode():
            out = model.generate(
                input_ids=padded,
                attention_mask=mask,
                max_new_tokens=max(budgets),
                min_new_tokens=max(budgets),
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                eos_token_id=None,
                pad_token_id=tokenizer.pad_token_id,
            )
        return [row[width:].tolist() for row in out]

    return sample


def cpu_matmul_peak(size: int = 2048, repeats: int = 10) -> float:
    """fp32 GFLOP per CPU second of a square matmul at the current thread count."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    with _Clock() as clock:
        for _ in range(repeats):
            a @ b
    return 2 * size**3 * repeats / clock.cpu / 1e9


def update_step(model: Any, tokenizer: Any, transcripts: list[Any]) -> tuple[Any, _Clock, int]:
    """One :class:`PolicyUpdater` step (the protocol's settings) on ``transcripts``, as
    groups of two with rewards 1 and 0 (so every advantage is non-zero)."""
    from agentgym_eppo.trainer.rl_step import update_settings
    from agentgym_eppo.trainer.rollout.episodes import Episode
    from agentgym_eppo.trainer.training.update import PolicyUpdater

    protocol = load_config(PROTOCOL)
    episodes = []
    for i, transcript in enumerate(transcripts):
        episodes.append(
            Episode(
                i, "db", f"g{i // 2}", str(i), transcript, reward=float(i % 2), status="completed"
            )
        )
    settings = update_settings(protocol, bf16=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=protocol.rl.lr)
    ref = None
    if settings.kl_coef > 0:
        import copy

        ref = copy.deepcopy(model).eval().requires_grad_(False)
    updater = PolicyUpdater(
        model,
        optimizer,
        protocol.clip.build(),
        settings,
        pad_token_id=tokenizer.pad_token_id,
        ref_model=ref,
    )
    with _Clock() as clock:
        result = updater.step(episodes, torch.Generator().manual_seed(0))
    return result, clock, sum(len(e.transcript) for e in episodes)


def first_turns(max_new_tokens: int) -> dict[str, str]:
    """The model's greedy first turn on the first dev instance of each task (full prompt)."""
    from agentgym_eppo.trainer.rollout.episodes import slot_info, start_episode
    from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
    from agentgym_eppo.vector import MultiTaskVectorEnv

    model, tokenizer = load_policy(MODEL)
    protocol = load_config(PROTOCOL)
    tasks = ["os", "db", "kg", "alfworld", "webshop"]
    venv = MultiTaskVectorEnv(
        dict.fromkeys(tasks, 1), split="dev", seed=0, env_kwargs=protocol.env_kwargs
    )
    try:
        observations, infos = venv.reset(seed=0)
        contexts = [
            start_episode(tokenizer, i, observations[i], slot_info(infos, i)).transcript.tokens
            for i in range(len(tasks))
        ]
    finally:
        venv.close()
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    turns = engine.generate(contexts, [max_new_tokens] * len(tasks), temperature=0.0)
    return {task: tokenizer.decode(turn) for task, turn in zip(tasks, turns, strict=True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("eval", "throughput", "first-turns"))
    parser.add_argument("--prompt", default="full", choices=("full", "compact"))
    parser.add_argument("--instances", nargs="*", default=["os=4", "db=4", "kg=4"])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.what == "eval":
        counts = {k: int(v) for k, v in (item.split("=") for item in args.instances)}
        result = zero_shot(args.prompt, counts)
    elif args.what == "throughput":
        result = throughput(args.rows, args.new_tokens)
    else:
        result = {"turns": first_turns(args.new_tokens), "machine": machine()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "episodes"}, indent=2))


if __name__ == "__main__":
    main()
