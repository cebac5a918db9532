"""What the results files say about the machine they were measured on."""

from __future__ import annotations

import time

import torch

from agentgym_eppo.trainer.devices import describe_machine


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else what ``platform`` knows (what a
    training run records, :func:`~agentgym_eppo.trainer.devices.describe_machine`)."""
    return str(describe_machine()["cpu"])


def best_matmul_seconds(a: torch.Tensor, b: torch.Tensor, repeats: int = 5) -> float:
    """Best wall time of ``a @ b`` over ``repeats`` calls, after one warm-up call."""
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - started)
    return best


def matmul_peak(dtype: torch.dtype, n: int = 2048, repeats: int = 5) -> float:
    """Best GFLOP/s of an n x n matmul in ``dtype`` with this process's threads: the
    machine's measured peak that the benchmarks state shares of.

    >>> matmul_peak(torch.float32, n=64, repeats=1) > 0
    True
    """
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    return 2 * n**3 / best_matmul_seconds(a, b, repeats) / 1e9
