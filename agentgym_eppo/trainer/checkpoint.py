"""Checkpoints that resume a run exactly.

A checkpoint directory holds the model and tokenizer (``save_pretrained``, so any HF
tool loads it) and ``trainer_state.pt``: the RL step it follows, the optimizer, the
clip policy (EPPO's pacer), and the Python/NumPy/torch RNG states. Data needs no
iterator state: each RL step's task instances are drawn from a sampler reseeded with
``(seed, step)``, so step ``t + 1`` after a resume draws what it would have drawn.
A checkpoint is written to a temporary directory and renamed into place, and
``checkpoints/latest`` names the newest one, so a run killed mid-save still resumes
from the previous checkpoint.
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

STATE_FILE = "trainer_state.pt"
LATEST = "latest"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    directory: Path,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    state: dict[str, Any] | None = None,
    keep: int | None = None,
) -> Path:
    """Write ``directory`` atomically; with ``state`` also mark it ``latest`` and prune
    all but the ``keep`` newest ``step_*`` siblings."""
    directory = Path(directory)
    staging = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    if state is not None:
        torch.save(state, staging / STATE_FILE)
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
    if state is not None:
        # Written aside and renamed: a process killed mid-write leaves the old marker.
        marker = directory.parent / (LATEST + ".tmp")
        marker.write_text(directory.name + "\n", encoding="utf-8")
        os.replace(marker, directory.parent / LATEST)
        if keep is not None:
            steps = sorted(directory.parent.glob("step_*"), key=lambda p: int(p.name[5:]))
            for old in steps[:-keep]:
                if old != directory:
                    shutil.rmtree(old, ignore_errors=True)
    return directory


@dataclass
class ResumePoint:
    directory: Path
    state: dict[str, Any]


def latest_checkpoint(checkpoints: Path) -> ResumePoint | None:
    """The newest complete RL checkpoint under ``checkpoints`` (None when there is none)."""
    marker = Path(checkpoints) / LATEST
    if not marker.exists():
        return None
    directory = Path(checkpoints) / marker.read_text(encoding="utf-8").strip()
    state = torch.load(directory / STATE_FILE, weights_only=False)
    return ResumePoint(directory, state)
