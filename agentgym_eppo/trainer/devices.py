"""Where the policy runs and in which precision: device choice, bf16 detection, autocast,
and the description of the machine a run records."""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch


def resolve_device(setting: str) -> torch.device:
    """``auto``: cuda when available, else cpu; anything else is taken as a torch device."""
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(setting)


def check_device(setting: object) -> None:
    """Refuse a ``device`` config value that is neither ``auto`` nor a torch device name.

    >>> check_device("cuda:1")
    >>> check_device("gpu")
    Traceback (most recent call last):
    ...
    ValueError: device must be auto or a torch device (cpu, cuda, cuda:1), got 'gpu'
    """
    if setting == "auto":
        return
    try:
        torch.device(setting)  # type: ignore[call-overload]
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"device must be auto or a torch device (cpu, cuda, cuda:1), got {setting!r}"
        ) from error


BF16_SETTINGS = ("auto", True, False)


def check_bf16(setting: object) -> None:
    """Refuse a ``bf16`` config value other than ``auto``, ``true`` or ``false``."""
    if setting not in BF16_SETTINGS:
        raise ValueError(f"bf16 must be auto, true or false, got {setting!r}")


def resolve_bf16(
    setting: bool | str, device: torch.device, machine: Mapping[str, Any] | None = None
) -> bool:
    """``auto``: where the model runs on a GPU, or on a CPU with native bf16 (avx512_bf16 /
    AMX) whose kernels torch runs at AVX-512. With the kernels held to AVX2
    (``ATEN_CPU_CAPABILITY=avx2``), bf16 is emulated and several times slower than fp32,
    so ``auto`` gives fp32 there. A model kept on the CPU of a GPU machine is judged by
    its CPU: this one's, or ``machine`` (a run's record of :func:`describe_machine`).

    >>> resolve_bf16("auto", torch.device("cuda"))
    True
    >>> resolve_bf16("auto", torch.device("cpu"), {"cpu_flags": ["avx2"], "kernels": "AVX2"})
    False
    """
    if isinstance(setting, bool):
        return setting
    if device.type == "cuda":
        return True
    machine = machine or describe_machine()
    native = {"avx512_bf16", "amx_bf16"} & set(machine["cpu_flags"])
    return bool(native) and machine["kernels"] == "AVX512"


def autocast_context(
    enabled: bool, device: torch.device
) -> contextlib.AbstractContextManager[None]:
    """bf16 autocast for the ops on ``device`` (the model's), or nothing.

    >>> with autocast_context(True, torch.device("cpu")):
    ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
    torch.bfloat16
    """
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
"""The instruction-set flags that decide the CPU kernels' speed (and bf16's: native with
avx512_bf16 or AMX, emulated without)."""


def describe_machine() -> dict[str, Any]:
    """What a run records about the machine it ran on (``machine.jsonl``).

    ``kernels`` is the instruction set torch's CPU kernels use, which
    ``ATEN_CPU_CAPABILITY`` can hold below what the CPU has.

    >>> sorted(describe_machine())
    ['cores', 'cpu', 'cpu_flags', 'gpu', 'kernels', 'threads', 'torch']
    """
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cpu_flags": [flag for flag in CPU_FLAGS if flag in flags],
        "kernels": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
    }
