"""The GPU-machine check of the scaling path: SGLang rollouts, weight sync, an FSDP2 step.

**Not run yet**: no GPU machine was lent to the task that wrote it; run it on one and
commit its output (``benchmarks/results/gpu_check.md``). It installs nothing and
reaches no network: it needs the ``gpu`` extra (``sglang``) already installed.

1. Builds a small Qwen2 from a config (``--hidden``/``--layers``, default 1024 x 16,
   about 0.3B parameters with the 32k vocabulary) and a BPE tokenizer trained offline,
   and saves both.
2. Starts an in-process ``sglang.Engine`` on it (:class:`SGLangInProcessEngine`),
   samples ``--batch`` turns of ``--new-tokens`` tokens with the EPPO paper's
   sampling (T 0.8, top-p 1) and prints tokens/s; checks SGLang's log-probs against
   the trainer's recomputation (mean absolute difference).
3. Times the weight sync after an update both ways: ``update_weights_from_tensor``
   and disk (save + ``update_weights_from_disk``).
4. Runs one FSDP2 policy update (actor fp32, reference bf16, checkpointing,
   micro-batches of 16,384 tokens) on every visible GPU under torchrun and prints its
   tokens/s.

Run: ``python benchmarks/gpu_check.py`` (``--help`` for the sizes).
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


def parameter_count(path: Path) -> int:
    from transformers import AutoModelForCausalLM

    return sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(path).parameters())


def sglang_part(path: Path, batch: int, new_tokens: int, report: dict) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentgym_eppo.trainer.rollout.chat import Transcript
    from agentgym_eppo.trainer.rollout.sglang import SGLangInProcessEngine
    from agentgym_eppo.trainer.training.batching import micro_batches, token_logprobs

    tokenizer = AutoTokenizer.from_pretrained(path)
    started = time.perf_counter()
    engine = SGLangInProcessEngine(path, tokenizer.eos_token_id, mem_fraction_static=0.4)
    report["sglang_start_s"] = time.perf_counter() - started
    contexts = [[(7 * i + j) % 1000 + 10 for j in range(256)] for i in range(batch)]
    budgets = [new_tokens] * batch
    engine.generate_samples(contexts[:4], [8] * 4, 0.8)  # warm-up
    started = time.perf_counter()
    samples = engine.generate_samples(contexts, budgets, 0.8)
    seconds = time.perf_counter() - started
    generated = sum(len(s.tokens) for s in samples)
    report["sglang_tokens_per_s"] = generated / seconds
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).cuda()
    diffs = []
    for context, sample in list(zip(contexts, samples, strict=True))[:8]:
        transcript = Transcript(
            context + sample.tokens, [0] * len(context) + [1] * len(sample.tokens)
        )
        with torch.no_grad():
            ours = token_logprobs(model, micro_batches([transcript], [0], 65536, 0)[0], 0.8)[0]
        diffs.append(float((ours.cpu() - torch.tensor(sample.logprobs)).abs().mean()))
    report["logprob_mean_abs_diff"] = sum(diffs) / len(diffs)
    for parameter in model.parameters():
        parameter.data.mul_(1.001)
    engine.update_weights(model)
    report["sync_tensor_s"] = engine.last_sync.seconds
    report["sync_bytes"] = engine.last_sync.bytes
    with tempfile.TemporaryDirectory() as folder:
        engine.sync, engine.sync_dir = "disk", Path(folder)
        engine.update_weights(model)
        report["sync_disk_s"] = engine.last_sync.seconds
    engine.shutdown()


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
    actor = shard_model(AutoModelForCausalLM.from_pretrained(path), gradient_checkpointing=True)
    reference = shard_reference(AutoModelForCausalLM.from_pretrained(path), bf16=True)
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
                [(k + j) % 1000 + 10 for j in range(length)],
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--fsdp-step", nargs=2, metavar=("MODEL", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--episodes", type=int, default=64, help="episodes of the FSDP step")
    parser.add_argument("--length", type=int, default=2048, help="tokens per episode")
    args = parser.parse_args()
    if args.fsdp_step:
        fsdp_step(*args.fsdp_step, args.episodes, args.length)
        return
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check needs a CUDA GPU (and the gpu extra); none is visible here")
    report: dict = {"gpus": torch.cuda.device_count(), "gpu": torch.cuda.get_device_name(0)}
    with tempfile.TemporaryDirectory() as folder:
        path = build(Path(folder), args.hidden, args.layers, args.vocab)
        report["parameters_m"] = (
            sum(
                p.numel()
                for p in __import__("transformers")
                .AutoModelForCausalLM.from_pretrained(path)
                .parameters()
            )
            / 1e6
        )
        sglang_part(path, args.batch, args.new_tokens, report)
        out = Path(folder) / "fsdp.json"
        subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone",
             f"--nproc_per_node={torch.cuda.device_count()}", __file__,
             "--fsdp-step", str(path), str(out),
             "--episodes", str(args.episodes), "--length", str(args.length)],
            check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1200,
        )  # fmt: skip
        report.update(json.loads(out.read_text()))
    lines = ["# GPU check (benchmarks/gpu_check.py)", "", "| measure | value |", "|---|---|"]
    lines += [f"| {key} | {value:.4g} |" if isinstance(value, float) else f"| {key} | {value} |"
              for key, value in report.items()]  # fmt: skip
    RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
