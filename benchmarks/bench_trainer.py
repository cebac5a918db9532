"""Our GRPO step against TRL's ``GRPOTrainer`` on the same tiny model, batch and threads.

Measured side by side in one run (medians over timed steps after a warm-up):

* a whole training step: 8 completions of 64 tokens sampled from one prompt, rewarded,
  and one policy update (ours: HF-generate engine + :class:`PolicyUpdater` with the EPPO
  clip; TRL: ``GRPOTrainer`` with its defaults, ``beta = 0``; ours with ``kl_coef = 0``
  to match);
* our rollout throughput (sampled tokens/s) and update time on their own;
* the EPPO pacer's share of our update step;
* our process's resident memory over 300 training steps (the paper's appendix C.2
  reports memory growing during training; ours should stay flat).

Writes ``benchmarks/results/trainer.md``.
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from agentgym_eppo.trainer.algorithms.clip_policies import EPPOClip
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer
from agentgym_eppo.trainer.rollout.chat import Transcript
from agentgym_eppo.trainer.rollout.episodes import Episode
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings

THREADS = 1
COMPLETIONS = 8
COMPLETION_TOKENS = 64
TIMED_STEPS = 10
WARMUP_STEPS = 2
RSS_STEPS = 300
PROMPT = "Count the files in /tmp and answer with the number. Use the bash tool."
CORPUS = [PROMPT, '{"name": "bash_action", "arguments": {"script": "ls /tmp | wc -l"}}'] * 50
MODEL_SIZE = {"hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2}
RESULTS = Path(__file__).resolve().parent / "results" / "trainer.md"


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reward(ids: list[int]) -> float:
    return (sum(ids) % 7) / 6.0  # any deterministic function of the sample will do


class OurStep:
    """Sample a group of completions, reward them, update: the loop of ``run.py``."""

    def __init__(self, tokenizer, model) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=True
        )
        if isinstance(self.prompt, dict) or hasattr(self.prompt, "keys"):
            self.prompt = self.prompt["input_ids"]
        self.engine = HFGenerateEngine(
            model, tokenizer.eos_token_id, tokenizer.pad_token_id, batch_size=COMPLETIONS
        )
        self.updater = PolicyUpdater(
            model,
            torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0),
            EPPOClip(EPPOPacer()),
            # one optimizer step per batch, as measured before the defaults split it in four
            UpdateSettings(kl_coef=0.0, temperature=1.0, mini_batches=1),
            pad_token_id=tokenizer.pad_token_id,
        )
        self.step_count = 0

    def __call__(self) -> dict[str, float]:
        started = time.perf_counter()
        outputs = self.engine.generate(
            [self.prompt] * COMPLETIONS, [COMPLETION_TOKENS] * COMPLETIONS, 1.0
        )
        rolled = time.perf_counter()
        episodes = []
        for k, ids in enumerate(outputs):
            transcript = Transcript(list(self.prompt))
            transcript.add_generated(ids)
            task = "os" if k % 2 else "db"  # two tasks, so the pacer has a cohort
            episodes.append(Episode(k, task, f"{task}:0", "0", transcript, reward=_reward(ids)))
        self.step_count += 1
        result = self.updater.step(episodes, torch.Generator().manual_seed(self.step_count))
        done = time.perf_counter()
        return {
            "step": done - started,
            "rollout": rolled - started,
            "update": done - rolled,
            "pacer": result.pacer_seconds,
            "tokens": float(sum(len(o) for o in outputs)),
        }


def bench_ours(tokenizer) -> dict[str, float]:
    step = OurStep(tokenizer, build_tiny_model(tokenizer, **MODEL_SIZE, seed=0))
    for _ in range(WARMUP_STEPS):
        step()
    timings = [step() for _ in range(TIMED_STEPS)]

    def median(key: str) -> float:
        return statistics.median(t[key] for t in timings)

    return {
        "step": median("step"),
        "rollout": median("rollout"),
        "update": median("update"),
        "pacer": median("pacer"),
        "rollout_tokens_per_s": statistics.median(t["tokens"] / t["rollout"] for t in timings),
    }


def bench_trl(tokenizer) -> dict[str, float]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.starts: list[float] = []
            self.ends: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            self.starts.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            self.ends.append(time.perf_counter())

    def reward(completion_ids, **kwargs):  # type: ignore[no-untyped-def]
        return [_reward(list(ids)) for ids in completion_ids]

    model = build_tiny_model(tokenizer, **MODEL_SIZE, seed=0)
    steps = WARMUP_STEPS + TIMED_STEPS
    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": PROMPT}]}] * (steps * COMPLETIONS)
    )
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as output_dir:
        args = GRPOConfig(
            output_dir=output_dir,
            max_steps=steps,
            per_device_train_batch_size=COMPLETIONS,
            num_generations=COMPLETIONS,
            max_completion_length=COMPLETION_TOKENS,
            learning_rate=1e-5,
            temperature=1.0,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            seed=0,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=reward,
            args=args,
            train_dataset=dataset,
            callbacks=[timer],
        )
        trainer.train()
    durations = [end - start for start, end in zip(timer.starts, timer.ends, strict=True)]
    lengths = [
        entry["completions/mean_length"]
        for entry in trainer.state.log_history
        if "completions/mean_length" in entry
    ]
    step = statistics.median(durations[WARMUP_STEPS:])
    tokens = statistics.median(lengths[WARMUP_STEPS:]) * COMPLETIONS if lengths else float("nan")
    return {"step": step, "tokens_per_step": tokens}


def bench_rss(tokenizer) -> list[tuple[int, float]]:
    step = OurStep(tokenizer, build_tiny_model(tokenizer, **MODEL_SIZE, seed=1))
    samples = []
    for k in range(1, RSS_STEPS + 1):
        step()
        if k == 1 or k % 50 == 0:
            samples.append((k, _rss_mb()))
    return samples


def main() -> None:
    torch.set_num_threads(THREADS)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = build_tokenizer(CORPUS, vocab_size=1024)
    params = sum(p.numel() for p in build_tiny_model(tokenizer, **MODEL_SIZE).parameters())
    load_before = os.getloadavg()[0]
    ours = bench_ours(tokenizer)
    trl = bench_trl(tokenizer)
    rss = bench_rss(tokenizer)
    load_after = os.getloadavg()[0]
    growth = rss[-1][1] - rss[1][1] if len(rss) > 1 else float("nan")
    lines = [
        "# Trainer benchmark: our GRPO step vs TRL's GRPOTrainer",
        "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other jobs (load average {load_before:.1f} before, "
        f"{load_after:.1f} after), torch {torch.__version__}, {THREADS} torch thread.",
        f"- Model: tiny Qwen2 ({params / 1e6:.2f}M parameters, vocabulary {len(tokenizer)}), fp32; "
        f"{COMPLETIONS} completions x {COMPLETION_TOKENS} tokens per step, one prompt (one GRPO "
        f"group), temperature 1, lr 1e-5, no KL (TRL's default beta = 0). Medians over "
        f"{TIMED_STEPS} steps after {WARMUP_STEPS} warm-up steps.",
        "",
        "| measure | ours | TRL GRPOTrainer | ours / TRL |",
        "|---|---|---|---|",
        f"| whole step (sample + reward + update), s | {ours['step']:.3f} | {trl['step']:.3f} | "
        f"{ours['step'] / trl['step']:.2f} |",
        f"| sampled tokens per step | {COMPLETIONS * COMPLETION_TOKENS} (max) | "
        f"{trl['tokens_per_step']:.0f} | |",
        f"| rollout (generate) only, s | {ours['rollout']:.3f} | - | |",
        f"| rollout throughput, sampled tokens/s | {ours['rollout_tokens_per_s']:.0f} | - | |",
        f"| update only (score + PPO step), s | {ours['update']:.3f} | - | |",
        f"| EPPO pacer, s (share of update) | {ours['pacer'] * 1e6:.0f} us "
        f"({100 * ours['pacer'] / ours['update']:.3f}%) | - | |",
        "",
        f"Resident memory of our training loop over {RSS_STEPS} steps (MB):",
        "",
        "| step | " + " | ".join(str(k) for k, _ in rss) + " |",
        "|---|" + "---|" * len(rss),
        "| RSS | " + " | ".join(f"{mb:.0f}" for _, mb in rss) + " |",
        "",
        f"Growth from step {rss[1][0] if len(rss) > 1 else 1} to step {rss[-1][0]}: "
        f"{growth:+.1f} MB.",
        "",
        "Run: `python -m benchmarks.run trainer`. Timings on a shared 2-core machine are noisy;",
        "compare the ratio, not the absolute numbers.",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
