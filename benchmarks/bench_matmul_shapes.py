"""How close to the CPU's matmul peak can a GRPO update get at these model sizes?

The trainer benchmark (:mod:`benchmarks.bench_trainer`) states the update's share of the
peak of a 2048 x 2048 matmul. A model of 10M or 50M parameters multiplies much thinner
matrices (hidden 288 or 576), and a CPU's matmul kernels reach less of the peak on those.
This benchmark measures that ceiling with the update's own shapes, then our update against
it, in one run:

* **peak**: the best GFLOP/s of a 2048 x 2048 matmul in the update's precision (bf16
  where the CPU has it, else fp32), as the trainer benchmark measures it;
* **ceiling at the model's shapes**: every linear layer of the model (attention
  projections, MLP, LM head) at the update's token count (a group of 8, the trainer
  benchmark's prompt plus 64 or 512 completion tokens), timed as the update runs it: two
  forward products (the scoring pass and the training pass) and the two backward
  products (input and weight gradients), in the update's precision. Their FLOPs over
  their summed best times is the most an update built from these matmuls can reach;
* **our update**: :class:`~agentgym_eppo.trainer.training.update.PolicyUpdater`'s step
  (the trainer benchmark's ``ours`` measurement, median of timed steps, its own process),
  its FLOPs (8 x parameters x tokens plus attention) over its time, as a share of the
  peak and of the ceiling.

Writes ``benchmarks/results/matmul_shapes.md``: ``python -m benchmarks.run matmul_shapes``
(about 5 minutes on 2 cores).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import torch

from benchmarks.bench_trainer import (
    BF16,
    GROUP,
    LENGTHS,
    THREADS,
    _model,
    _prompt,
    _tokenizer,
    in_subprocess,
    size_facts,
)
from benchmarks.machine import best_matmul_seconds, cpu_model, matmul_peak
from benchmarks.report import write_generated

SIZES = ("10M", "50M")  # the sizes the issue sets its goal at
DTYPE = torch.bfloat16 if BF16 else torch.float32
RESULTS = Path(__file__).resolve().parent / "results" / "matmul_shapes.md"


def linear_shapes(size: str) -> list[tuple[int, int]]:
    """(in, out) features of every linear layer of the benchmark's model of ``size``."""
    model = _model(_tokenizer(), size)
    return [
        (module.in_features, module.out_features)
        for module in model.modules()
        if isinstance(module, torch.nn.Linear)
    ]


def shape_ceiling(shapes: list[tuple[int, int]], tokens: int) -> float:
    """GFLOP/s of the update's linear products at ``tokens`` rows: per layer two forward
    products (tokens x in @ in x out), the input gradient (tokens x out @ out x in) and
    the weight gradient (in x tokens @ tokens x out)."""
    flops = seconds = 0.0
    timed: dict[tuple[int, int, int], float] = {}  # the layers repeat: time each shape once
    for fan_in, fan_out in shapes:
        products = [(tokens, fan_in, fan_out)] * 2 + [
            (tokens, fan_out, fan_in),
            (fan_in, tokens, fan_out),
        ]
        for m, k, n in products:
            if (m, k, n) not in timed:
                a, b = torch.randn(m, k).to(DTYPE), torch.randn(k, n).to(DTYPE)
                timed[(m, k, n)] = best_matmul_seconds(a, b)
            flops += 2 * m * k * n
            seconds += timed[(m, k, n)]
    return flops / seconds / 1e9


def main() -> None:
    torch.set_num_threads(THREADS)
    load_before = os.getloadavg()
    peak = matmul_peak(DTYPE)
    prompt = len(_prompt(_tokenizer()))
    rows = []
    for size in SIZES:
        shapes = linear_shapes(size)
        for length in LENGTHS:
            tokens = GROUP * (prompt + length)
            ceiling = shape_ceiling(shapes, tokens)
            ours = in_subprocess({"side": "ours", "size": size, "length": length})
            achieved = size_facts(size, prompt, length)["update_flops"] / ours["update"] / 1e9
            rows.append((size, length, tokens, ceiling, ours["update"], achieved))
    load_after = os.getloadavg()
    lines = report(peak, rows, load_before, load_after)
    write_generated(RESULTS, "\n".join(lines))
    print("\n".join(lines))


def report(peak, rows, load_before, load_after) -> list[str]:  # type: ignore[no-untyped-def]
    precision = "bf16 autocast" if BF16 else "fp32"
    lines = [
        "# The update's matmul ceiling at 10M and 50M parameters",
        "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; CPU: {cpu_model()}, "
        f"{os.cpu_count()} cores; load average (1/5/15 min) "
        f"{'/'.join(f'{x:.1f}' for x in load_before)} before, "
        f"{'/'.join(f'{x:.1f}' for x in load_after)} after; torch {torch.__version__}, "
        f"{THREADS} torch threads, {precision}.",
        f"- Peak: {peak:.0f} GFLOP/s ({str(DTYPE).removeprefix('torch.')} 2048 x 2048 matmul, "
        "best of 5).",
        "- Ceiling: the model's linear layers at the update's token count (prompt plus "
        "completion, a group of 8), two forward and two backward products each, best of 5 "
        "per shape; our update: the trainer benchmark's `ours` step (median, own process).",
        "",
        "| size | completion | tokens | ceiling, GFLOP/s | ceiling / peak | our update, s "
        "| our update, GFLOP/s | update / peak | update / ceiling |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, length, tokens, ceiling, seconds, achieved in rows:
        lines.append(
            f"| {size} | {length} | {tokens} | {ceiling:.0f} | {100 * ceiling / peak:.0f}% "
            f"| {seconds:.2f} | {achieved:.0f} | {100 * achieved / peak:.0f}% "
            f"| {100 * achieved / ceiling:.0f}% |"
        )
    lines += ["", "Run: `python -m benchmarks.run matmul_shapes`."]
    return lines


if __name__ == "__main__":
    main()
