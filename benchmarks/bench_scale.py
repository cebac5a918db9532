"""What scaling past one machine costs, measured on this CPU machine.

Three things a scaling plan needs (``docs/scaling.md``):

* **Weight sync** after each update, per model size: bytes moved and seconds by three
  paths side by side: an in-process ``load_state_dict`` copy (the floor), the Ray
  object store into one HF rollout actor (:class:`RayRolloutEngine`), and the disk
  path SGLang's ``/update_weights_from_disk`` takes (safetensors save by the trainer,
  then a load into a fresh model, as the server does minus its GPU copy).
* **Env step overhead** per back-end: 8 instant-env slots (``benchmarks/instant_env``:
  a step that costs nothing) stepped together with ``step_some``, serial vs
  subprocess vs Ray actors with 0.05 CPU each; steps per second and the per-step cost
  each back-end adds.
* **Rollout generation** through a Ray HF rollout actor vs the same
  :class:`HFGenerateEngine` in-process (8 contexts x 32 new tokens, greedy): the Ray
  round trip added to each turn.

Medians of ``ROUNDS`` runs. Run: ``python -m benchmarks.run scale``; writes
``benchmarks/results/scale.md``.
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as transformers_logging

from agentgym_eppo.trainer.distributed.config import RayConfig
from agentgym_eppo.trainer.distributed.ray_cluster import connect
from agentgym_eppo.trainer.distributed.ray_rollout import RayRolloutEngine
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer
from agentgym_eppo.vector import MultiTaskVectorEnv
from benchmarks.machine import cpu_model
from benchmarks.report import write_generated

from .instant_env import IDS as INSTANT_IDS
from .instant_env import NOOP_TEXT

RESULTS = Path(__file__).resolve().parent / "results" / "scale.md"
ROUNDS = 3
SIZES = (  # (hidden, layers, heads, kv_heads): about 0.1M, 8M and 53M parameters
    (64, 2, 2, 1),
    (256, 8, 4, 2),
    (512, 14, 8, 2),
)
GENERATION_SIZE = SIZES[1]
ENV_SLOTS = 8
ENV_SECONDS = 2.0


def median_seconds(run: Callable[[], object], rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def weight_sync(tokenizer, rows: list[str]) -> None:
    for hidden, layers, heads, kv in SIZES:
        model = build_tiny_model(
            tokenizer, hidden_size=hidden, layers=layers, heads=heads, kv_heads=kv
        )
        params = sum(p.numel() for p in model.parameters())
        state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        copy = build_tiny_model(
            tokenizer, hidden_size=hidden, layers=layers, heads=heads, kv_heads=kv
        )
        local = median_seconds(lambda m=model, c=copy: c.load_state_dict(m.state_dict()))
        engine = RayRolloutEngine(
            model,
            tokenizer.eos_token_id,
            tokenizer.pad_token_id,
            actor_options={"num_cpus": 0.5},
            timeout_s=300,
        )
        try:
            over_ray = median_seconds(lambda m=model, e=engine: e.update_weights(m))
        finally:
            engine.close()
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "weights"
            save = median_seconds(lambda m=model, p=path: m.save_pretrained(p))
            load = median_seconds(
                lambda p=path: AutoModelForCausalLM.from_pretrained(p, trust_remote_code=False)
            )
            disk_bytes = sum(f.stat().st_size for f in path.glob("*.safetensors"))
        mb = state_bytes / 1e6
        rows.append(
            f"| {hidden} x {layers} | {params / 1e6:.2f}M | {mb:.1f} | {local * 1e3:.1f} ({mb / local / 1e3:.2f}) "
            f"| {over_ray * 1e3:.1f} ({mb / over_ray / 1e3:.2f}) | {save * 1e3:.1f} + {load * 1e3:.1f} "
            f"({disk_bytes / 1e6 / (save + load) / 1e3:.2f}) |"
        )
        print(rows[-1], flush=True)


def env_steps(rows: list[str]) -> None:
    per_task = ENV_SLOTS // len(INSTANT_IDS)
    base = None
    for backend in ("serial", "subprocess", "ray"):
        options = {"actor_options": {"num_cpus": 0.05}} if backend == "ray" else {}
        venv = MultiTaskVectorEnv(
            dict.fromkeys(INSTANT_IDS, per_task), backend=backend, backend_options=options
        )
        try:
            rates = []
            for _ in range(ROUNDS):
                venv.reset(seed=0)
                steps, started = 0, time.perf_counter()
                running = list(range(venv.num_envs))
                while time.perf_counter() - started < ENV_SECONDS:
                    outcomes = venv.step_some(running, [NOOP_TEXT] * len(running))
                    steps += len(outcomes)
                    done = [o.index for o in outcomes if o.terminated or o.truncated]
                    if done:
                        venv.reset_some(done)
                rates.append(steps / (time.perf_counter() - started))
        finally:
            venv.close()
        rate = statistics.median(rates)
        base = base or rate
        added = (1 / rate - 1 / base) * 1e3 * ENV_SLOTS
        rows.append(f"| {backend} | {rate:,.0f} | {1e3 * ENV_SLOTS / rate:.2f} | {added:+.2f} |")
        print(rows[-1], flush=True)


def generation(tokenizer, rows: list[str]) -> None:
    hidden, layers, heads, kv = GENERATION_SIZE
    model = build_tiny_model(tokenizer, hidden_size=hidden, layers=layers, heads=heads, kv_heads=kv)
    contexts = [[5 + i, 6, 7, 8, 9 + i] * 8 for i in range(8)]
    budgets = [32] * 8
    local = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    engine = RayRolloutEngine(
        model,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
        actor_options={"num_cpus": 1},
        timeout_s=300,
    )
    try:
        engine.generate(contexts, budgets, 0.0)  # warm both
        local.generate(contexts, budgets, 0.0)
        local_times, ray_times = [], []
        for _ in range(2 * ROUNDS + 1):  # taking turns, so the machine's load falls on both
            local_times.append(median_seconds(lambda: local.generate(contexts, budgets, 0.0), 1))
            ray_times.append(median_seconds(lambda: engine.generate(contexts, budgets, 0.0), 1))
        in_process, over_ray = statistics.median(local_times), statistics.median(ray_times)
    finally:
        engine.close()
    rows.append(f"| in-process HFGenerateEngine | {in_process * 1e3:.0f} | - |")
    rows.append(
        f"| Ray HF rollout actor | {over_ray * 1e3:.0f} | {(over_ray - in_process) * 1e3:+.0f} |"
    )
    print(rows[-2:], flush=True)


def training_steps(tokenizer, rows: list[str]) -> None:
    """Whole RL steps (8 instant-env episodes, rollouts, update, weight sync): single
    process (serial envs, in-process engine) vs Ray (env actors + one rollout actor)."""
    from agentgym_eppo.trainer.algorithms.clip_policies import FixedClip
    from agentgym_eppo.trainer.distributed.config import ScaleConfig
    from agentgym_eppo.trainer.distributed.launch import make_rollout_engine, make_vector_env
    from agentgym_eppo.trainer.rl_step import StepSettings, rl_step
    from agentgym_eppo.trainer.rollout.episodes import RolloutLimits
    from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings

    tasks = dict.fromkeys(INSTANT_IDS, ENV_SLOTS // len(INSTANT_IDS))
    # greedy turns: both setups play the same episodes (same weights, same actions)
    limits = RolloutLimits(max_tokens_per_turn=16, max_context=2048, temperature=0.0)
    settings = StepSettings(seed=0, limits=limits, prompt_style="compact", group_size=2)
    setups = {
        "single process (serial envs, in-process HF engine)": ScaleConfig(),
        "Ray (env actors at 0.05 CPU, one HF rollout actor)": ScaleConfig(
            ray=RayConfig(address="auto", rollout_actor_cpus=0.5, get_timeout_s=300)
        ),
    }
    runs = {}
    try:
        for label, scale in setups.items():
            model = build_tiny_model(tokenizer, hidden_size=64, layers=2, heads=2, kv_heads=1)
            venv = make_vector_env(scale, tasks, 2, {}, seed=0, backend="serial")
            engine = make_rollout_engine(scale, model, tokenizer, tempfile.gettempdir())
            updater = PolicyUpdater(
                model,
                torch.optim.AdamW(model.parameters(), lr=1e-3),
                FixedClip(),
                # one optimizer step per batch, as measured before the defaults split it in four
                UpdateSettings(kl_coef=0.0, temperature=1.0, mini_batches=1),
                tokenizer.pad_token_id,
            )
            runs[label] = (venv, engine, updater, [], [])
            rl_step(0, venv, engine, updater, tokenizer, settings)  # warm-up
        for step in range(1, 2 * ROUNDS + 2):  # the setups take turns: the load falls on both
            for venv, engine, updater, times, turns in runs.values():
                started = time.perf_counter()
                outcome = rl_step(step, venv, engine, updater, tokenizer, settings)
                times.append(time.perf_counter() - started)
                turns.append(sum(e.turns for e in outcome.played))
    finally:
        for venv, engine, *_ in runs.values():
            close = getattr(engine, "close", None)
            if close is not None:
                close()
            venv.close()
    base = None
    for label, (_, _, _, times, turns) in runs.items():
        seconds = statistics.median(times)
        base = base or seconds
        rows.append(
            f"| {label} | {statistics.mean(turns):.1f} | {seconds * 1e3:.0f} "
            f"| {(seconds - base) * 1e3:+.0f} |"
        )
        print(rows[-1], flush=True)


def main() -> None:
    import ray

    torch.set_num_threads(1)
    transformers_logging.disable_progress_bar()
    tokenizer = build_tokenizer(["Say apple. Call say with the word."] * 50, vocab_size=4096)
    started = time.perf_counter()
    connect(RayConfig(address="local", num_cpus=os.cpu_count() or 2))
    ray_start = time.perf_counter() - started
    sync_rows: list[str] = []
    env_rows: list[str] = []
    gen_rows: list[str] = []
    step_rows: list[str] = []
    try:
        print("weight sync", flush=True)
        weight_sync(tokenizer, sync_rows)
        print("env steps", flush=True)
        env_steps(env_rows)
        print("generation", flush=True)
        generation(tokenizer, gen_rows)
        print("training steps", flush=True)
        training_steps(tokenizer, step_rows)
    finally:
        ray.shutdown()
    text = "\n".join([
        "# Scaling costs measured on CPU (bench_scale)",
        "",
        f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. Machine: "
        f"{os.cpu_count()} cores ({cpu_model()}), shared with other work, no GPU; Python "
        f"{platform.python_version()}, torch {torch.__version__}, ray {ray.__version__}; "
        f"torch threads 1. Medians of {ROUNDS} runs. `ray.init` took {ray_start:.1f} s.",
        "",
        "## Weight sync after an update (fp32 weights, vocabulary 4,096, tied embeddings)",
        "",
        "Milliseconds (GB/s in brackets). *In-process copy*: `load_state_dict` into a second "
        "model (the floor). *Ray object store*: `RayRolloutEngine.update_weights` into one HF "
        "rollout actor (`ray.put` + the actor's `load_state_dict`). *Disk*: `save_pretrained` "
        "(safetensors) + `from_pretrained`, the path of SGLang's `/update_weights_from_disk` "
        "without its GPU copy.",
        "",
        "| hidden x layers | parameters | state MB | in-process copy | Ray object store | disk: save + load |",
        "|---|---|---|---|---|---|",
        *sync_rows,
        "",
        f"## Env step cost per back-end ({ENV_SLOTS} instant-env slots, `step_some` on all)",
        "",
        "Env steps per second; ms per round of 8 steps; ms each round costs more than serial "
        "(the back-end's own cost; Ray actors ask for 0.05 CPU each).",
        "",
        "| back-end | steps/s | ms per round | ms added per round |",
        "|---|---|---|---|",
        *env_rows,
        "",
        f"## One rollout turn: Ray actor vs in-process ({GENERATION_SIZE[0]} x {GENERATION_SIZE[1]} "
        "model, 8 contexts x 32 tokens, greedy; the two take turns, medians of 7)",
        "",
        "| engine | ms per turn | Ray cost (ms) |",
        "|---|---|---|",
        *gen_rows,
        "",
        f"## A whole RL step: single process vs Ray ({ENV_SLOTS} instant-env episodes of up to 8 "
        "turns, 0.14M model, 16 tokens a turn, update, weight sync)",
        "",
        f"Greedy turns, so both setups play the same episodes; the setups take turns, "
        f"medians of {2 * ROUNDS + 1} steps.",
        "",
        "| setup | turns per step | ms per step | Ray cost (ms) |",
        "|---|---|---|---|",
        *step_rows,
        "",
        "Not measured here (no GPU): SGLang throughput, NCCL weight broadcast, FSDP on GPUs; "
        "`benchmarks/gpu_check.py` measures those on a GPU machine and has not been run.",
        "",
    ])  # fmt: skip
    write_generated(RESULTS, text)
    print(text)


if __name__ == "__main__":
    main()
