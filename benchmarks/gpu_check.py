"""The GPU-machine check of the scaling path: rollouts, weight sync, an FSDP2 step, in bf16.

**Not run yet on a GPU**: no GPU machine was lent to the task that wrote it; run it on
one and commit its output (``benchmarks/results/gpu_check.md``). It installs nothing and
reaches no network. SGLang is optional: ``--engine auto`` (the default) takes the
in-process ``sglang.Engine`` when the ``gpu`` extra is installed and the trainer's own
HF engine otherwise, so one call on a bare torch + transformers image still checks the
rollout engine, the log-prob agreement and the FSDP2 step.

1. Builds a small Qwen2 from a config (``--hidden``/``--layers``, default 1024 x 16,
   about 0.3B parameters with the 32k vocabulary) and a BPE tokenizer trained offline,
   and saves both.
2. Samples ``--batch`` turns of ``--new-tokens`` tokens at T 0.8 with the chosen engine
   (:class:`SGLangInProcessEngine`, or :class:`HFGenerateEngine` decoding from a bf16
   copy of the weights) and prints tokens/s; checks the engine's log-probs against the
   trainer's recomputation (mean absolute difference, fp32 and bf16).
3. Times the weight sync after an update: SGLang both ways
   (``update_weights_from_tensor`` and disk); the HF engine shares the trainer's module,
   so its sync is the bf16 copy it remakes at its next call: a one-token call is timed
   before and after the weights move.
4. Runs one FSDP2 policy update (actor fp32, reference bf16, bf16 autocast,
   checkpointing, micro-batches of 16,384 tokens) on every visible GPU under torchrun
   and prints its tokens/s.

Run: ``python benchmarks/gpu_check.py`` (``--help`` for the sizes). ``--allow-cpu`` runs
the same steps on CPU (HF engine, one gloo rank) at whatever size is given, for trying
the script before a GPU call; its report goes to ``--out``, never to the results file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "gpu_check.md"


def build(folder: Path, hidden: int, layers: int, vocab: int) -> Path:
    from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer

    texts = [f"Call the tool {i} with the word {w}." for i in range(200) for w in ("a", "b")]
    tokenizer = build_tokenizer(texts, vocab_size=vocab)
    model = build_tiny_model(
        tokenizer,
        hidden_size=hidden,
        layers=layers,
        heads=hidden // 64,
        kv_heads=max(1, hidden // 512),
    )
    path = folder / "model"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def model_facts(path: Path) -> tuple[int, int]:
    """(parameter count, vocabulary size) of the saved model."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=False)
    return sum(p.numel() for p in model.parameters()), model.config.vocab_size


def contexts_for(batch: int, vocab: int, length: int = 256) -> list[list[int]]:
    """``batch`` distinct prompts of ``length`` token ids inside the vocabulary."""
    return [[(7 * i + j) % (vocab - 20) + 10 for j in range(length)] for i in range(batch)]


def logprob_gap(
    model: torch.nn.Module, contexts: list[list[int]], turns: list[tuple[list[int], list[float]]],
    bf16: bool,
) -> float:  # fmt: skip
    """Mean absolute difference between an engine's log-probs of its sampled tokens and the
    trainer's recomputation (the first 8 turns that sampled something)."""
    from agentgym_eppo.trainer.rollout.chat import Transcript
    from agentgym_eppo.trainer.training.batching import micro_batches, token_logprobs

    sampled = [(c, t) for c, t in zip(contexts, turns, strict=True) if t[0]][:8]
    diffs = []
    for context, (tokens, logprobs) in sampled:
        transcript = Transcript(context + tokens, [0] * len(context) + [1] * len(tokens))
        with torch.no_grad():
            batch = micro_batches([transcript], [0], 65536, 0)[0]
            ours = token_logprobs(model, batch, 0.8, bf16=bf16)[0]
        diffs.append(float((ours.float().cpu() - torch.tensor(logprobs)).abs().mean()))
    return sum(diffs) / len(diffs)


def timed_sample(engine_sample, contexts: list[list[int]], new_tokens: int) -> tuple[list, float]:
    """``engine_sample(contexts, budgets)`` after a short warm-up: (its turns, tokens/s)."""
    engine_sample(contexts[:4], [8] * min(4, len(contexts)))  # warm-up
    synchronize()
    started = time.perf_counter()
    turns = engine_sample(contexts, [new_tokens] * len(contexts))
    synchronize()
    return turns, sum(len(tokens) for tokens, _ in turns) / (time.perf_counter() - started)


def nudge(model: torch.nn.Module) -> None:
    """A stand-in for an optimizer step: every weight moves in place."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.001)


def sglang_part(path: Path, batch: int, new_tokens: int, vocab: int, report: dict) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentgym_eppo.trainer.rollout.sglang import SGLangInProcessEngine

    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    started = time.perf_counter()
    engine = SGLangInProcessEngine(path, tokenizer.eos_token_id, mem_fraction_static=0.4)
    report["engine_start_s"] = time.perf_counter() - started

    def sample(contexts: list[list[int]], budgets: list[int]) -> list:
        samples = engine.generate_samples(contexts, budgets, 0.8)
        return [(s.tokens, s.logprobs) for s in samples]

    contexts = contexts_for(batch, vocab)
    turns, report["engine_tokens_per_s"] = timed_sample(sample, contexts, new_tokens)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, trust_remote_code=False
    ).cuda()
    report["logprob_mean_abs_diff_fp32"] = logprob_gap(model, contexts, turns, bf16=False)
    report["logprob_mean_abs_diff_bf16"] = logprob_gap(model, contexts, turns, bf16=True)
    nudge(model)
    engine.update_weights(model)
    report["sync_tensor_s"] = engine.last_sync.seconds
    report["sync_bytes"] = engine.last_sync.bytes
    with tempfile.TemporaryDirectory() as folder:
        engine.sync, engine.sync_dir = "disk", Path(folder)
        engine.update_weights(model)
        report["sync_disk_s"] = engine.last_sync.seconds
    engine.shutdown()


def hf_part(path: Path, batch: int, new_tokens: int, vocab: int, report: dict) -> None:
    """The trainer's in-process engine: fp32 weights on the device, decoding from a bf16
    copy of them (``HFGenerateEngine(bf16=True)``, the trainer's ``bf16: true``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentgym_eppo.trainer.devices import resolve_device
    from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine

    device = resolve_device("auto")
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    started = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, trust_remote_code=False
    ).to(device)
    engine = HFGenerateEngine(
        model, tokenizer.eos_token_id, tokenizer.pad_token_id, batch_size=batch, bf16=True
    )
    report["engine_start_s"] = time.perf_counter() - started

    def sample(contexts: list[list[int]], budgets: list[int]) -> list:
        outputs = engine.generate(contexts, budgets, 0.8)
        return [(tokens, scores.logprobs) for tokens, scores in zip(outputs, engine.sampled_scores(), strict=True)]  # fmt: skip

    contexts = contexts_for(batch, vocab)
    turns, report["engine_tokens_per_s"] = timed_sample(sample, contexts, new_tokens)
    report["logprob_mean_abs_diff_fp32"] = logprob_gap(model, contexts, turns, bf16=False)
    report["logprob_mean_abs_diff_bf16"] = logprob_gap(model, contexts, turns, bf16=True)
    probe = contexts[:4]
    report["probe_call_s"] = timed_call(sample, probe)
    nudge(model)
    report["probe_call_after_update_s"] = timed_call(sample, probe)  # remakes the bf16 copy


def timed_call(engine_sample, contexts: list[list[int]]) -> float:
    """Seconds of one one-token call on ``contexts``."""
    synchronize()
    started = time.perf_counter()
    engine_sample(contexts, [1] * len(contexts))
    synchronize()
    return time.perf_counter() - started


ENGINES = {"sglang": sglang_part, "hf": hf_part}
"""The rollout engines the check can time, by ``--engine`` name."""


def chosen_engine(name: str) -> str:
    """``auto``: SGLang where it is importable, else the HF engine."""
    if name != "auto":
        return name
    try:
        import sglang  # noqa: F401
    except ImportError:
        return "hf"
    return "sglang"


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def fsdp_step(path: str, out: str, episodes_count: int = 64, length: int = 2048) -> None:
    """Runs under torchrun: one FSDP2 update on 64 episodes of 2,048 tokens (a quarter
    of each is prompt)."""
    from transformers import AutoModelForCausalLM

    from agentgym_eppo.trainer.algorithms.clip_policies import FixedClip
    from agentgym_eppo.trainer.distributed.fsdp import (
        FSDPPolicyUpdater,
        exit_distributed,
        init_distributed,
        shard_model,
        shard_reference,
    )
    from agentgym_eppo.trainer.rollout.chat import Transcript
    from agentgym_eppo.trainer.rollout.episodes import Episode
    from agentgym_eppo.trainer.training.update import UpdateSettings

    rank, world = init_distributed()
    model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=False)
    vocab = model.config.vocab_size
    actor = shard_model(model, gradient_checkpointing=True)
    reference = shard_reference(
        AutoModelForCausalLM.from_pretrained(path, trust_remote_code=False), bf16=True
    )
    optimizer = torch.optim.AdamW(actor.parameters(), lr=1e-5)
    updater = FSDPPolicyUpdater(
        actor,
        optimizer,
        FixedClip(),
        UpdateSettings(micro_batch_tokens=16384, bf16=True),
        0,
        reference,
    )
    episodes = [
        Episode(
            k, "t", f"t:{k // 8}", "s",
            Transcript(
                [(k + j) % (vocab - 20) + 10 for j in range(length)],
                [0] * (length // 4) + [1] * (length - length // 4),
            ),
            reward=float(k % 2),
        )
        for k in range(episodes_count)
    ]  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    updater.step(episodes[: max(2, len(episodes) // 4)], generator)  # warm-up
    synchronize()
    started = time.perf_counter()
    result = updater.step(episodes, generator)
    synchronize()
    seconds = time.perf_counter() - started
    if rank == 0:
        tokens = sum(len(e.transcript) for e in episodes)
        Path(out).write_text(json.dumps({
            "fsdp_world": world, "fsdp_step_s": seconds, "fsdp_tokens_per_s": tokens / seconds,
            "fsdp_loss": result.loss,
            "fsdp_peak_gb": torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else 0.0,
        }))  # fmt: skip
    exit_distributed()


def main() -> None:
    from benchmarks.report import write_generated

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--engine", choices=["auto", *ENGINES], default="auto")
    parser.add_argument("--fsdp-step", nargs=2, metavar=("MODEL", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--episodes", type=int, default=64, help="episodes of the FSDP step")
    parser.add_argument("--length", type=int, default=2048, help="tokens per episode")
    parser.add_argument("--allow-cpu", action="store_true", help="a CPU trial, not a result")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the report goes")
    args = parser.parse_args()
    if args.fsdp_step:
        fsdp_step(*args.fsdp_step, args.episodes, args.length)
        return
    gpus = torch.cuda.device_count()
    if not gpus and not args.allow_cpu:
        raise SystemExit("gpu_check needs a CUDA GPU; none is visible here (--allow-cpu to try it)")
    if not gpus and args.out == RESULTS:
        raise SystemExit("a CPU trial is not the GPU result: give --out")
    engine = chosen_engine(args.engine)
    report: dict = {
        "gpus": gpus,
        "gpu": torch.cuda.get_device_name(0) if gpus else "none (CPU trial)",
        "torch": torch.__version__,
        "engine": engine,
    }
    with tempfile.TemporaryDirectory() as folder:
        path = build(Path(folder), args.hidden, args.layers, args.vocab)
        parameters, vocab = model_facts(path)
        report["parameters_m"] = parameters / 1e6
        ENGINES[engine](path, args.batch, args.new_tokens, vocab, report)
        out = Path(folder) / "fsdp.json"
        subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone",
             f"--nproc_per_node={max(1, gpus)}", __file__,
             "--fsdp-step", str(path), str(out),
             "--episodes", str(args.episodes), "--length", str(args.length)],
            check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1200,
        )  # fmt: skip
        report.update(json.loads(out.read_text()))
    lines = ["# GPU check (benchmarks/gpu_check.py)", "", "| measure | value |", "|---|---|"]
    lines += [f"| {key} | {value:.4g} |" if isinstance(value, float) else f"| {key} | {value} |"
              for key, value in report.items()]  # fmt: skip
    write_generated(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
