"""Checkpoints that resume a run exactly.

A checkpoint directory holds the model and tokenizer (``save_pretrained``, so any HF
tool loads it) and ``trainer_state.pt``: the RL step it follows, the optimizer, the
clip policy (EPPO's pacer), and the Python/NumPy/torch RNG states. Data needs no
iterator state: each RL step's task instances are drawn from a sampler reseeded with
``(seed, step)``, so step ``t + 1`` after a resume draws what it would have drawn.
A checkpoint is written to a temporary directory and renamed into place, and
``checkpoints/latest`` names the newest one, so a run killed mid-save still resumes
from the previous checkpoint.

A run folder may come from someone else, so resuming trusts nothing in it to run code
or to lead outside it (:func:`latest_checkpoint`): the trainer state holds only tensors
and plain Python values (the RNG states too) and is loaded weights-only; the model and
tokenizer load through ``from_pretrained``, which reads safetensors or weights-only
pickles and runs no code from the folder.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from transformers import PreTrainedModel, PreTrainedTokenizerBase

STATE_FILE = "trainer_state.pt"
LATEST = "latest"
CARD_FILE = "agentgym_policy.json"
"""How the checkpoint's policy talks to the tasks: ``{"prompt_style", "call_format"}``.
``agentgym-eppo eval`` reads it, so a checkpoint is scored with the prompt it learned."""
CALL_FORMAT = "hermes"  # the rollout writes calls as <tool_call>{json}</tool_call> (chat.py)


def rng_state() -> dict[str, Any]:
    """Every RNG's state as tensors and plain Python values (weights-only loadable)."""
    numpy_state = np.random.get_state(legacy=True)
    assert isinstance(numpy_state, tuple)  # legacy=True: MT19937's (kind, key, pos, ...)
    kind, key, position, has_gauss, gauss = numpy_state
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [kind, key.tolist(), int(position), int(has_gauss), float(gauss)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(tuple(state["numpy"]))  # a list, or the array tuple of older states
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    directory: Path,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    state: dict[str, Any] | None = None,
    keep: int | None = None,
    card: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``directory`` atomically; with ``state`` also mark it ``latest`` and prune
    all but the ``keep`` newest ``step_*`` siblings; with ``card`` (see :data:`CARD_FILE`)
    record how the policy was prompted."""
    directory = Path(directory)
    staging = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    if state is not None:
        torch.save(state, staging / STATE_FILE)
    if card is not None:
        (staging / CARD_FILE).write_text(json.dumps(dict(card), indent=2) + "\n", encoding="utf-8")
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


def policy_card(prompt_style: str) -> dict[str, str]:
    """The card of a policy trained with ``prompt_style`` by this trainer."""
    return {"prompt_style": prompt_style, "call_format": CALL_FORMAT}


def read_policy_card(directory: str | Path) -> dict[str, Any] | None:
    """The card saved with a checkpoint; for a checkpoint written before cards, the
    prompt style of its run's ``config.yaml`` (``RUN_DIR/checkpoints/<name>``); None for
    a folder from elsewhere."""
    path = Path(directory) / CARD_FILE
    if path.is_file():
        card = json.loads(path.read_text(encoding="utf-8"))
        return card if isinstance(card, dict) else None
    run_config = Path(directory).parent.parent / "config.yaml"
    if Path(directory).parent.name == "checkpoints" and run_config.is_file():
        values = yaml.safe_load(run_config.read_text(encoding="utf-8")) or {}
        prompt = (values.get("rollout") or {}).get("prompt") if isinstance(values, dict) else None
        if isinstance(prompt, str):
            return policy_card(prompt)
    return None


def choose_prompt_style(
    requested: str | None, card: Mapping[str, Any] | None
) -> tuple[str, str | None]:
    """The prompt style to evaluate a checkpoint with, and a warning when it is not the
    one the checkpoint's card records (``None`` when they agree or nothing is recorded).

    >>> choose_prompt_style(None, {"prompt_style": "compact"})
    ('compact', None)
    >>> choose_prompt_style("full", {"prompt_style": "compact"})[1]
    'the checkpoint was trained with prompt style compact; evaluating with full as asked'
    >>> choose_prompt_style(None, None)
    ('full', None)
    """
    recorded = str(card["prompt_style"]) if card and "prompt_style" in card else None
    if requested is None:
        return recorded or "full", None
    if recorded is not None and requested != recorded:
        return requested, (
            f"the checkpoint was trained with prompt style {recorded}; "
            f"evaluating with {requested} as asked"
        )
    return requested, None


@dataclass
class ResumePoint:
    directory: Path
    state: dict[str, Any]


class UnsafeCheckpointError(ValueError):
    """A run folder's checkpoint that resuming refuses: it would run code or leads outside
    the folder. The message names the path and what was found."""


# Globals a trainer state written before the RNG states were plain holds (NumPy's state
# as an array): allowed for such a state only, and nothing else.
_LEGACY_GLOBALS = {
    "numpy._core.multiarray._reconstruct": np._core.multiarray._reconstruct,  # type: ignore[attr-defined]
    "numpy.ndarray": np.ndarray,
    "numpy.dtype": np.dtype,
    "numpy.dtypes.UInt32DType": np.dtypes.UInt32DType,
}


def latest_checkpoint(checkpoints: Path) -> ResumePoint | None:
    """The newest complete RL checkpoint under ``checkpoints`` (None when there is none).

    Nothing the run folder (``checkpoints/..``) holds may lead outside it: the ``latest``
    marker must name one folder of ``checkpoints`` by a plain name (no ``..``, no absolute
    path), and neither that folder nor any file in it may be a link that leads out. The
    trainer state is loaded weights-only (:func:`load_trainer_state`). Anything else
    raises :class:`UnsafeCheckpointError`.
    """
    checkpoints = Path(checkpoints)
    marker = checkpoints / LATEST
    if not marker.exists() and not marker.is_symlink():
        return None
    _inside(checkpoints, checkpoints.parent)
    _inside(marker, checkpoints)
    name = marker.read_text(encoding="utf-8").strip()
    if not re.fullmatch(r"[\w][\w.-]*", name) or ".." in name:
        raise UnsafeCheckpointError(
            f"{marker}: names {name!r}, not a checkpoint folder of {checkpoints}; refused"
        )
    directory = checkpoints / name
    _inside(directory, checkpoints)
    for folder, subfolders, files in os.walk(directory):
        for entry in (*subfolders, *files):
            _inside(Path(folder) / entry, directory)
    return ResumePoint(directory, load_trainer_state(directory / STATE_FILE))


def load_trainer_state(path: Path) -> dict[str, Any]:
    """A ``trainer_state.pt`` loaded weights-only: tensors, containers and plain values,
    nothing that runs code. A state of an earlier version of this trainer (NumPy's RNG
    state as an array) loads too, with NumPy's array types allowed for it alone.

    Raises :class:`UnsafeCheckpointError` naming what else the file holds.
    """
    try:
        state = torch.load(path, weights_only=True)
    except pickle.UnpicklingError:
        found = set(torch.serialization.get_unsafe_globals_in_checkpoint(path))
        if not found <= set(_LEGACY_GLOBALS):
            raise UnsafeCheckpointError(
                f"{path}: refused: it holds {', '.join(sorted(found - set(_LEGACY_GLOBALS)))}, "
                "not only tensors and plain values (unpickling it could run code)"
            ) from None
        with torch.serialization.safe_globals(list(_LEGACY_GLOBALS.values())):
            state = torch.load(path, weights_only=True)
    if not isinstance(state, dict):
        raise UnsafeCheckpointError(f"{path}: not a trainer state (a {type(state).__name__})")
    return state


def _inside(path: Path, folder: Path) -> None:
    """Refuse ``path`` unless it (its links followed) lies in ``folder``."""
    if not path.resolve().is_relative_to(folder.resolve()):
        raise UnsafeCheckpointError(
            f"{path}: leads outside {folder} (to {path.resolve()}); refused"
        )
