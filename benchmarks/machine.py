"""What the results files say about the machine they were measured on."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import torch


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
