"""Where the policy runs and in which precision: device choice, bf16 detection, autocast."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch


def resolve_device(setting: str) -> torch.device:
    """``auto``: cuda when available, else cpu; anything else is taken as a torch device."""
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(setting)


BF16_SETTINGS = ("auto", True, False)


def check_bf16(setting: object) -> None:
    """Refuse a ``bf16`` config value other than ``auto``, ``true`` or ``false``."""
    if setting not in BF16_SETTINGS:
        raise ValueError(f"bf16 must be auto, true or false, got {setting!r}")


def resolve_bf16(setting: bool | str) -> bool:
    """``auto``: on a GPU, or on a CPU with native bf16 (avx512_bf16 / AMX)."""
    if isinstance(setting, bool):
        return setting
    if torch.cuda.is_available():
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def autocast_context(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """bf16 autocast on the model's device type, or nothing."""
    if not enabled:
        return contextlib.nullcontext()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.autocast(device_type=device, dtype=torch.bfloat16)
