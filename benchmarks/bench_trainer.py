"""Our GRPO step against TRL's ``GRPOTrainer``, at three model sizes, side by side in one run.

For each model size (Qwen2 architecture, about 1M, 10M and 50M parameters) and each
completion length (64 and 512 tokens), group size 8, one prompt, the same threads:

* **whole GRPO step** (sample 8 completions, reward, one policy update): ours
  (:class:`~agentgym_eppo.trainer.rollout.hf.HFGenerateEngine` +
  :class:`~agentgym_eppo.trainer.training.update.PolicyUpdater`, EPPO clip, no KL) and
  TRL's ``GRPOTrainer`` (its defaults, ``beta = 0``); every completion runs to the full
  length (end-of-turn suppressed) so that both do the same work;
* **rollout** sampled tokens/s: our engine, and plain ``transformers`` ``generate`` on the
  same batch (left-padded, KV cache within the call: what our engine did before prefix
  reuse);
* **update** time and its share of the CPU's measured matmul peak (FLOPs: 2 x parameters
  x tokens for the scoring pass, 6 x for the training pass, plus attention);
* **peak RSS** of each side (each measurement runs in its own process).

Then a multi-turn rollout (8 episodes, 4 turns, 64 sampled and 96 observation tokens per
turn after a 600-token prompt) at 10M: our engine, which keeps each episode's KV cache
across turns, against plain ``generate``, which encodes the conversation again every turn.
And the RSS of our training loop over 300 steps at 10M.

Roofline: fp32 and bf16 matmul peaks and memory bandwidth measured here; for decoding,
the bytes of weights and KV cache read per sampled token against that bandwidth.

Writes ``benchmarks/results/trainer.md``: ``python -m benchmarks.run trainer``. The same
in fp32 on both sides (where the CPU has bf16): ``BENCH_PRECISION=fp32 python -m
benchmarks.run trainer`` writes ``trainer-fp32.md``. One measurement alone:
``python -m benchmarks.bench_trainer --one '{"side": "ours", "size": "10M", "length": 64}'``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from agentgym_eppo.trainer.algorithms.clip_policies import EPPOClip
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer
from agentgym_eppo.trainer.devices import autocast_context, resolve_bf16, resolve_device
from agentgym_eppo.trainer.rollout.chat import Transcript
from agentgym_eppo.trainer.rollout.episodes import Episode
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.training.flops import forward_flops
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings
from benchmarks import isolated
from benchmarks.machine import cpu_model, matmul_peak
from benchmarks.report import write_generated

THREADS = 2
PRECISION = os.environ.get("BENCH_PRECISION", "auto")
"""``auto``: bf16 autocast on both sides where the CPU has native bf16 (TRL's
``GRPOConfig`` turns it on by default there), fp32 master weights; ``fp32``: fp32 on
both sides, written to ``trainer-fp32.md``."""
BF16 = PRECISION != "fp32" and resolve_bf16("auto", resolve_device("auto"))
GROUP = 8
LENGTHS = (64, 512)
SIZES: dict[str, dict[str, int]] = {
    "1M": {"hidden_size": 128, "layers": 4, "heads": 4, "kv_heads": 2},
    "10M": {"hidden_size": 288, "layers": 8, "heads": 6, "kv_heads": 2},
    "50M": {"hidden_size": 576, "layers": 10, "heads": 9, "kv_heads": 3},
}
TIMED = {64: 5, 512: 3}  # timed steps per length, after one warm-up step
MULTI_TURN = {"size": "10M", "prompt": 600, "turns": 4, "sampled": 64, "observation": 96}
LONG_CONTEXT = {"size": "10M", "context": 2000, "sampled": 128}
RSS_STEPS = 300
PROFILE = {"size": "10M", "length": 512}
PROFILE_TOP = 12
PROMPT = "Count the files in /tmp and answer with the number. Use the bash tool."
CORPUS = [PROMPT, '{"name": "bash_action", "arguments": {"script": "ls /tmp | wc -l"}}'] * 50
RESULTS = (
    Path(__file__).resolve().parent
    / "results"
    / ("trainer-fp32.md" if PRECISION == "fp32" else "trainer.md")
)


def _tokenizer():  # type: ignore[no-untyped-def]
    return build_tokenizer(CORPUS, vocab_size=1024)


def _model(tokenizer, size: str, seed: int = 0):  # type: ignore[no-untyped-def]
    return build_tiny_model(tokenizer, **SIZES[size], max_position_embeddings=8192, seed=seed)


def _prompt(tokenizer) -> list[int]:  # type: ignore[no-untyped-def]
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _reward(ids: list[int]) -> float:
    return (sum(ids) % 7) / 6.0  # any deterministic function of the sample will do


def _status_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, from ``/proc/self/status``
    (``ru_maxrss`` would carry the parent's peak over into a forked child)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class NoEndEngine(HFGenerateEngine):
    """Our engine with an end-of-turn id that is never sampled: every row runs its budget."""

    def __init__(self, model, tokenizer) -> None:  # type: ignore[no-untyped-def]
        super().__init__(
            model, len(tokenizer) + 1, tokenizer.pad_token_id, batch_size=GROUP, bf16=BF16
        )


class PlainGenerate:
    """``transformers`` ``generate`` on one left-padded batch, every row to ``length``."""

    def __init__(self, model, tokenizer) -> None:  # type: ignore[no-untyped-def]
        self.model, self.pad = model, tokenizer.pad_token_id

    @torch.inference_mode()
    def generate(self, contexts: list[list[int]], lengths: list[int], temperature: float):  # type: ignore[no-untyped-def]
        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, context in enumerate(contexts):
            ids[row, width - len(context) :] = torch.tensor(context)
            mask[row, width - len(context) :] = 1
        with autocast_context(BF16, self.model.device):
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max(lengths),
                min_new_tokens=max(lengths),
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                pad_token_id=self.pad,
            )
        return [row[:n] for row, n in zip(out[:, width:].tolist(), lengths, strict=True)]


class OurStep:
    """Sample a group of completions, reward them, update: the loop of ``run.py``."""

    def __init__(self, tokenizer, model, length: int) -> None:  # type: ignore[no-untyped-def]
        self.prompt, self.length = _prompt(tokenizer), length
        self.engine = NoEndEngine(model, tokenizer)
        self.updater = PolicyUpdater(
            model,
            torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0),
            EPPOClip(EPPOPacer()),
            # one optimizer step per batch, as TRL's default does
            UpdateSettings(kl_coef=0.0, temperature=1.0, mini_batches=1, bf16=BF16),
            pad_token_id=tokenizer.pad_token_id,
        )
        self.steps = 0

    def __call__(self) -> dict[str, float]:
        started = time.perf_counter()
        outputs = self.engine.generate([self.prompt] * GROUP, [self.length] * GROUP, 1.0)
        rolled = time.perf_counter()
        episodes = []
        for k, ids in enumerate(outputs):
            transcript = Transcript(list(self.prompt))
            transcript.add_generated(ids)
            task = "os" if k % 2 else "db"  # two tasks, so the pacer has a cohort
            episodes.append(Episode(k, task, f"{task}:0", "0", transcript, reward=_reward(ids)))
        self.steps += 1
        result = self.updater.step(episodes, torch.Generator().manual_seed(self.steps))
        done = time.perf_counter()
        tokens = float(sum(len(o) for o in outputs))
        return {"step": done - started, "rollout": rolled - started, "update": done - rolled,
                "pacer": result.pacer_seconds, "tokens": tokens}  # fmt: skip


# ---------------------------------------------------------------------- measurements


def measure_ours(size: str, length: int) -> dict[str, float]:
    tokenizer = _tokenizer()
    step = OurStep(tokenizer, _model(tokenizer, size), length)
    step()
    timings = [step() for _ in range(TIMED[length])]
    result = {key: statistics.median(t[key] for t in timings) for key in timings[0]}
    result["rollout_tokens_per_s"] = statistics.median(t["tokens"] / t["rollout"] for t in timings)
    return result


def measure_generate(size: str, length: int) -> dict[str, float]:
    tokenizer = _tokenizer()
    engine = PlainGenerate(_model(tokenizer, size), tokenizer)
    prompt = _prompt(tokenizer)
    seconds = []
    for _ in range(TIMED[length] + 1):
        started = time.perf_counter()
        engine.generate([prompt] * GROUP, [length] * GROUP, 1.0)
        seconds.append(time.perf_counter() - started)
    rollout = statistics.median(seconds[1:])
    return {"rollout": rollout, "rollout_tokens_per_s": GROUP * length / rollout}


def measure_trl(size: str, length: int) -> dict[str, float]:
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

    tokenizer = _tokenizer()
    model = _model(tokenizer, size)
    steps = 1 + TIMED[length]
    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": PROMPT}]}] * (steps * GROUP)
    )
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as output_dir:
        args = GRPOConfig(
            output_dir=output_dir,
            max_steps=steps,
            per_device_train_batch_size=GROUP,
            num_generations=GROUP,
            max_completion_length=length,
            learning_rate=1e-5,
            temperature=1.0,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            seed=0,
            dataloader_num_workers=0,
            bf16=BF16,
            generation_kwargs={"min_new_tokens": length},
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
        e["completions/mean_length"]
        for e in trainer.state.log_history
        if "completions/mean_length" in e
    ]
    return {"step": statistics.median(durations[1:]),
            "tokens": statistics.median(lengths[1:]) * GROUP if lengths else float("nan")}  # fmt: skip


def _engine_and_tokens(side: str, size: str):  # type: ignore[no-untyped-def]
    """Ours or plain ``generate`` on a fresh model of ``size``, and a seeded source of
    random token ids (never the special ones)."""
    tokenizer = _tokenizer()
    model = _model(tokenizer, size)
    engine = NoEndEngine(model, tokenizer) if side == "ours" else PlainGenerate(model, tokenizer)
    generator = torch.Generator().manual_seed(0)
    vocabulary = len(tokenizer) - 2

    def tokens(n: int) -> list[int]:
        return (torch.randint(3, vocabulary, (n,), generator=generator)).tolist()

    return engine, tokens


def measure_multi_turn(side: str) -> dict[str, float]:
    """8 episodes x 4 turns: sampled tokens/s over the whole rollout."""
    spec = MULTI_TURN
    engine, tokens = _engine_and_tokens(side, str(spec["size"]))
    prompt = tokens(int(spec["prompt"]))
    seconds = []
    for _ in range(2):  # a warm-up rollout, then the timed one
        contexts = [list(prompt) for _ in range(GROUP)]
        started = time.perf_counter()
        for _turn in range(int(spec["turns"])):
            turns = engine.generate(contexts, [int(spec["sampled"])] * GROUP, 1.0)
            contexts = [
                c + t + tokens(int(spec["observation"]))
                for c, t in zip(contexts, turns, strict=True)
            ]
        seconds.append(time.perf_counter() - started)
    sampled = GROUP * int(spec["turns"]) * int(spec["sampled"])
    return {"seconds": seconds[-1], "tokens_per_s": sampled / seconds[-1]}


def measure_long_context(side: str) -> dict[str, float]:
    """8 different contexts of 2,000 tokens (an agent's late turn), 128 tokens sampled each:
    decoding whose every step reads a long KV cache."""
    spec = LONG_CONTEXT
    engine, tokens = _engine_and_tokens(side, str(spec["size"]))
    seconds = []
    for _ in range(3):  # a warm-up, then two timed calls
        contexts = [tokens(int(spec["context"])) for _ in range(GROUP)]
        started = time.perf_counter()
        engine.generate(contexts, [int(spec["sampled"])] * GROUP, 1.0)
        seconds.append(time.perf_counter() - started)
    best = min(seconds[1:])
    return {"seconds": best, "tokens_per_s": GROUP * int(spec["sampled"]) / best}


def measure_rss(size: str) -> dict[str, Any]:
    tokenizer = _tokenizer()
    step = OurStep(tokenizer, _model(tokenizer, size, seed=1), 64)
    samples = []
    for k in range(1, RSS_STEPS + 1):
        step()
        if k == 1 or k % 50 == 0:
            samples.append((k, _status_mb("VmRSS")))
    return {"samples": samples}


def measure_profile(size: str, length: int) -> dict[str, Any]:
    """Where one step's time goes: torch profiler, the operators with the most own CPU time."""
    from torch.profiler import ProfilerActivity, profile

    tokenizer = _tokenizer()
    step = OurStep(tokenizer, _model(tokenizer, size), length)
    step()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        timing = step()
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    top = sorted(events, key=lambda event: event.self_cpu_time_total, reverse=True)[:PROFILE_TOP]
    return {
        "step": timing,
        "ops": [(event.key, event.count, event.self_cpu_time_total / total) for event in top],
    }


MEASUREMENTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "ours": lambda spec: measure_ours(spec["size"], spec["length"]),
    "generate": lambda spec: measure_generate(spec["size"], spec["length"]),
    "trl": lambda spec: measure_trl(spec["size"], spec["length"]),
    "profile": lambda spec: measure_profile(spec["size"], spec["length"]),
    "multi_turn": lambda spec: measure_multi_turn(spec["engine"]),
    "long_context": lambda spec: measure_long_context(spec["engine"]),
    "rss": lambda spec: measure_rss(spec["size"]),
}


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    result = MEASUREMENTS[spec["side"]](spec)
    result["peak_rss_mb"] = _status_mb("VmHWM")
    return result


def in_subprocess(spec: Mapping[str, Any]) -> dict[str, Any]:
    """One measurement of this benchmark in a fresh process (:mod:`benchmarks.isolated`)."""
    return isolated.in_subprocess("benchmarks.bench_trainer", spec)


# ---------------------------------------------------------------------- roofline


def memory_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Best GB/s of a large copy (bytes read plus bytes written)."""
    src = torch.ones(megabytes * 2**20 // 4)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - started)
    return 2 * src.numel() * 4 / best / 1e9


def size_facts(size: str, prompt: int, length: int) -> dict[str, float]:
    """Parameters, update FLOPs and decode bytes per sampled token for one configuration."""
    tokenizer = _tokenizer()
    model = _model(tokenizer, size)
    params = sum(p.numel() for p in model.parameters())
    c = model.config
    lengths = [prompt + length] * GROUP
    # scoring forward (1 pass) + training (forward and backward: 3 passes)
    flops = 4 * forward_flops(params, c.num_hidden_layers, c.hidden_size, lengths)
    kv_per_token = (
        2
        * c.num_hidden_layers
        * c.num_key_value_heads
        * (c.hidden_size // c.num_attention_heads)
        * 4
    )
    mean_context = prompt + length / 2
    decode_bytes = params * 4 / GROUP + kv_per_token * mean_context
    if BF16:  # the engine decodes with a bf16 copy of the weights: half the bytes
        decode_bytes /= 2
    return {"params": params, "update_flops": flops, "decode_bytes_per_token": decode_bytes}


# ---------------------------------------------------------------------- report


def main() -> None:
    torch.set_num_threads(THREADS)
    load_before = os.getloadavg()
    peaks = {"fp32": matmul_peak(torch.float32), "bf16": matmul_peak(torch.bfloat16)}
    bandwidth = memory_bandwidth()
    prompt = len(_prompt(_tokenizer()))
    rows = []
    for size in SIZES:
        for length in LENGTHS:
            results = {side: in_subprocess({"side": side, "size": size, "length": length})
                       for side in ("ours", "generate", "trl")}  # fmt: skip
            rows.append((size, length, size_facts(size, prompt, length), results))
    multi = {
        side: in_subprocess({"side": "multi_turn", "engine": side}) for side in ("ours", "generate")
    }
    long = {
        side: in_subprocess({"side": "long_context", "engine": side})
        for side in ("ours", "generate")
    }
    rss = in_subprocess({"side": "rss", "size": "10M"})["samples"]
    profiled = in_subprocess({"side": "profile", **PROFILE})
    load_after = os.getloadavg()
    lines = report(peaks, bandwidth, prompt, rows, multi, long, rss, load_before, load_after)
    lines += profile_report(profiled)
    write_generated(RESULTS, "\n".join(lines))
    print("\n".join(lines))


def report(peaks, bandwidth, prompt, rows, multi, long, rss, load_before, load_after) -> list[str]:  # type: ignore[no-untyped-def]
    best = peaks["bf16" if BF16 else "fp32"]
    lines = [
        "# Trainer benchmark: our GRPO step vs TRL's GRPOTrainer, at 1M, 10M and 50M parameters",
        "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; CPU: {cpu_model()}, "
        f"{os.cpu_count()} cores; load average (1/5/15 min) {'/'.join(f'{x:.1f}' for x in load_before)} "
        f"before, {'/'.join(f'{x:.1f}' for x in load_after)} after; torch {torch.__version__}, "
        f"{THREADS} torch threads; fp32 weights, "
        + (
            "bf16 autocast on both sides (native bf16 here; TRL's default)."
            if BF16
            else "fp32 compute."
        ),
        f"- Measured peaks ({THREADS} threads): matmul fp32 {peaks['fp32']:.0f} GFLOP/s, bf16 "
        f"{peaks['bf16']:.0f} GFLOP/s; memory bandwidth {bandwidth:.1f} GB/s (copy, read + write).",
        f"- Each step: one prompt ({prompt} tokens), {GROUP} completions (one GRPO group) run to the "
        "full length (end of turn suppressed on both sides), temperature 1, lr 1e-5, no KL "
        "(TRL's default beta = 0), one optimizer step per batch. Medians over 5 timed steps "
        "(64 tokens) or 3 (512), after one warm-up; each measurement in its own process.",
        "",
        "| size | completion | ours step, s | TRL step, s | TRL / ours (throughput ratio) "
        "| ours rollout, tok/s | generate, tok/s | ours / generate | ours update, s "
        f"| update share of the {'bf16' if BF16 else 'fp32'} peak | peak RSS ours / TRL, MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, length, facts, r in rows:
        ours, trl, gen = r["ours"], r["trl"], r["generate"]
        share = facts["update_flops"] / ours["update"] / 1e9 / best
        lines.append(
            f"| {size} ({facts['params'] / 1e6:.1f}M) | {length} | {ours['step']:.2f} | {trl['step']:.2f} "
            f"| {trl['step'] / ours['step']:.2f} | {ours['rollout_tokens_per_s']:.0f} "
            f"| {gen['rollout_tokens_per_s']:.0f} | {ours['rollout_tokens_per_s'] / gen['rollout_tokens_per_s']:.2f} "
            f"| {ours['update']:.2f} | {100 * share:.0f}% | {ours['peak_rss_mb']:.0f} / {trl['peak_rss_mb']:.0f} |"
        )
    pacer = [(r["ours"]["pacer"], r["ours"]["update"]) for *_, r in rows]
    lines += [
        "",
        "The EPPO pacer (its statistics and the per-task clip range, once per update) took "
        + ", ".join(
            f"{seconds * 1e6:.0f} us ({100 * seconds / update:.3f}%)" for seconds, update in pacer
        )
        + " of the update in the rows above.",
    ]
    lines += [
        "",
        "Decoding against memory bandwidth (weights read once per batched step, shared by the "
        f"{GROUP} rows, plus each row's KV cache at the mean context):",
        "",
        "| size | completion | bytes read per sampled token | ours, tok/s | bandwidth used, GB/s | share |",
        "|---|---|---|---|---|---|",
    ]
    for size, length, facts, r in rows:
        used = facts["decode_bytes_per_token"] * r["ours"]["rollout_tokens_per_s"] / 1e9
        lines.append(
            f"| {size} | {length} | {facts['decode_bytes_per_token'] / 1e3:.0f} kB "
            f"| {r['ours']['rollout_tokens_per_s']:.0f} | {used:.1f} | {100 * used / bandwidth:.0f}% |"
        )
    spec = MULTI_TURN
    ours, gen = multi["ours"], multi["generate"]
    lines += [
        "",
        f"Multi-turn rollout at {spec['size']}: {GROUP} episodes x {spec['turns']} turns, a "
        f"{spec['prompt']}-token prompt, {spec['sampled']} sampled and {spec['observation']} "
        "observation tokens per turn. Ours keeps each episode's KV cache across turns (the "
        "observation is appended); plain `generate` encodes the whole conversation every turn "
        "(what our engine did before).",
        "",
        "| engine | rollout, s | sampled tokens/s | peak RSS, MB |",
        "|---|---|---|---|",
        f"| ours (prefix reuse) | {ours['seconds']:.2f} | {ours['tokens_per_s']:.0f} | {ours['peak_rss_mb']:.0f} |",
        f"| plain generate | {gen['seconds']:.2f} | {gen['tokens_per_s']:.0f} | {gen['peak_rss_mb']:.0f} |",
        f"| ours / generate | | {ours['tokens_per_s'] / gen['tokens_per_s']:.2f}x | |",
        "",
        f"Long contexts at {LONG_CONTEXT['size']}: {GROUP} different contexts of "
        f"{LONG_CONTEXT['context']} tokens, {LONG_CONTEXT['sampled']} tokens sampled each (the "
        "better of two timed calls). Every decoding step reads the whole cache; ours writes "
        "each step's keys and values into buffers allocated once per call, `generate`'s "
        "`DynamicCache` concatenates the cache again at every step.",
        "",
        "| engine | call, s | sampled tokens/s |",
        "|---|---|---|",
        f"| ours | {long['ours']['seconds']:.2f} | {long['ours']['tokens_per_s']:.0f} |",
        f"| plain generate | {long['generate']['seconds']:.2f} | {long['generate']['tokens_per_s']:.0f} |",
        f"| ours / generate | | {long['ours']['tokens_per_s'] / long['generate']['tokens_per_s']:.2f}x |",
        "",
        f"Resident memory of our training loop at 10M over {RSS_STEPS} steps (MB):",
        "",
        "| step | " + " | ".join(str(k) for k, _ in rss) + " |",
        "|---|" + "---|" * len(rss),
        "| RSS | " + " | ".join(f"{mb:.0f}" for _, mb in rss) + " |",
        "",
        f"Growth from step {rss[1][0]} to step {rss[-1][0]}: {rss[-1][1] - rss[1][1]:+.1f} MB.",
        "",
        "Run: `python -m benchmarks.run trainer` (about 15 minutes on 2 cores; "
        "`BENCH_PRECISION=fp32` for fp32 on both sides: "
        "[trainer-fp32.md](trainer-fp32.md)). How much of the peak an update can reach "
        "at these model sizes: [matmul_shapes.md](matmul_shapes.md).",
    ]
    return lines


def profile_report(profiled: dict[str, Any]) -> list[str]:
    step = profiled["step"]
    lines = [
        "",
        f"Where our step's time goes at {PROFILE['size']}, {PROFILE['length']}-token completions "
        f"(torch profiler over one step after a warm-up: rollout {step['rollout']:.2f} s, update "
        f"{step['update']:.2f} s under the profiler); the {PROFILE_TOP} operators with the most "
        "own CPU time, as shares of all operators' own time:",
        "",
        "| operator | calls | share |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{name}` | {calls} | {100 * share:.1f}% |" for name, calls, share in profiled["ops"]
    ]
    return lines


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(run_one(json.loads(sys.argv[2]))))
    else:
        main()
