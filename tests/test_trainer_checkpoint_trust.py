"""Resuming from a run folder that came from elsewhere: its trainer state cannot run
code, and nothing it names leads outside it. A model folder from elsewhere cannot run
code either (``load_policy``, ``eval --checkpoint``)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agentgym_eppo.trainer.training.checkpoint import (
    STATE_FILE,
    UnsafeCheckpointError,
    latest_checkpoint,
    rng_state,
    set_rng_state,
)


class WritesAFile:
    """Unpickling this runs ``os.system`` (a pickle's way to run code)."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.target}",))


def _run_folder(root: Path, state: dict[str, Any], name: str = "step_1") -> Path:
    """``root/checkpoints/<name>/trainer_state.pt`` marked ``latest``; the checkpoints path."""
    checkpoints = root / "checkpoints"
    (checkpoints / name).mkdir(parents=True)
    torch.save(state, checkpoints / name / STATE_FILE)
    (checkpoints / "latest").write_text(name + "\n")
    return checkpoints


def test_a_state_that_would_run_code_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    target = tmp_path / "ran"
    checkpoints = _run_folder(tmp_path / "run", {"step": 1, "payload": WritesAFile(target)})
    with pytest.raises(
        UnsafeCheckpointError, match=r"trainer_state\.pt: refused: it holds posix\.system"
    ):
        latest_checkpoint(checkpoints)
    assert not target.exists()


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "symlinked folder", "symlinked marker",
                                 "symlinked state"])  # fmt: skip
def test_a_latest_marker_leading_outside_the_run_folder_is_refused(
    tmp_path: Path, how: str
) -> None:
    elsewhere = _run_folder(tmp_path / "elsewhere", {"step": 7}, "step_7") / "step_7"
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    marker = checkpoints / "latest"
    if how == "dot-dot":
        marker.write_text("../../elsewhere/checkpoints/step_7\n")
    elif how == "absolute":
        marker.write_text(f"{elsewhere}\n")
    elif how == "symlinked folder":
        (checkpoints / "step_7").symlink_to(elsewhere, target_is_directory=True)
        marker.write_text("step_7\n")
    elif how == "symlinked marker":
        marker.symlink_to(elsewhere.parent / "latest")
    else:
        (checkpoints / "step_7").mkdir()
        (checkpoints / "step_7" / STATE_FILE).symlink_to(elsewhere / STATE_FILE)
        marker.write_text("step_7\n")
    with pytest.raises(UnsafeCheckpointError, match="refused"):
        latest_checkpoint(checkpoints)


def test_the_rng_states_are_saved_as_plain_values_and_resume_the_draws(tmp_path: Path) -> None:
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    checkpoints = _run_folder(tmp_path / "run", {"step": 2, "rng": rng_state()})
    # weights-only as it is, with no type allowed beyond tensors and plain values
    torch.load(checkpoints / "step_1" / STATE_FILE, weights_only=True)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    resumed = latest_checkpoint(checkpoints)
    assert resumed is not None and resumed.state["step"] == 2
    set_rng_state(resumed.state["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected


def test_a_state_of_the_earlier_format_still_resumes(tmp_path: Path) -> None:
    """Earlier states held NumPy's RNG state as an array: allowed for them, and only that."""
    np.random.seed(5)
    earlier = {"python": random.getstate(), "numpy": np.random.get_state(),
               "torch": torch.get_rng_state()}  # fmt: skip
    expected = float(np.random.rand())
    checkpoints = _run_folder(tmp_path / "run", {"step": 4, "rng": earlier})
    resumed = latest_checkpoint(checkpoints)
    assert resumed is not None
    set_rng_state(resumed.state["rng"])
    assert float(np.random.rand()) == expected


def test_no_marker_is_no_checkpoint(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path / "checkpoints") is None


def test_weights_that_would_run_code_are_refused_and_run_nothing(tmp_path: Path) -> None:
    """The model half of a checkpoint: transformers loads a pickled weights file
    weights-only (this guards that, for the folders resume loads)."""
    from agentgym_eppo.trainer.training.models import (
        ModelLoadError,
        build_tiny_model,
        build_tokenizer,
        load_policy,
    )

    tokenizer = build_tokenizer(["say the word", "open the box"], vocab_size=300)
    folder = tmp_path / "run" / "checkpoints" / "step_1"
    build_tiny_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "model.safetensors").unlink()
    target = tmp_path / "ran"
    torch.save({"payload": WritesAFile(target)}, folder / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match=r"cannot be loaded .*Weights only load failed"):
        load_policy(folder)
    assert not target.exists()


def _folder_naming_its_own_code(root: Path, target: Path) -> Path:
    """A model folder whose configs name ``crafted.py``, which writes ``target`` when run."""
    folder = root / "model"
    folder.mkdir(parents=True)
    (folder / "crafted.py").write_text(
        f"import pathlib\npathlib.Path({str(target)!r}).write_text('ran')\n"
    )
    (folder / "config.json").write_text(json.dumps({
        "model_type": "agentgym_crafted",
        "auto_map": {"AutoConfig": "crafted.Config", "AutoModelForCausalLM": "crafted.Model"},
    }))  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "CraftedTokenizer",
        "auto_map": {"AutoTokenizer": ["crafted.CraftedTokenizer", None]},
    }))  # fmt: skip
    return folder


LOAD_POLICY = (
    "import sys; from agentgym_eppo.trainer.training.models import load_policy; "
    "load_policy(sys.argv[1])"
)
EVAL_CHECKPOINT = (
    "import sys; from agentgym_eppo.trainer.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.parametrize("stdin", ["y", "closed"])
@pytest.mark.parametrize("how", ["load_policy", "eval --checkpoint"])
def test_a_model_folder_naming_code_of_its_own_is_refused_and_runs_nothing(
    tmp_path: Path, how: str, stdin: str
) -> None:
    """Left to decide, transformers asked on stdin whether to run the folder's code, and a
    ``y`` ran it; now nothing is asked and nothing runs, whatever stdin holds."""
    target = tmp_path / "ran"
    folder = _folder_naming_its_own_code(tmp_path, target)
    if how == "load_policy":
        argv = [sys.executable, "-c", LOAD_POLICY, str(folder)]
    else:
        argv = [sys.executable, "-c", EVAL_CHECKPOINT, "eval", "--checkpoint", str(folder),
                "--tasks", "db"]  # fmt: skip
    answered = subprocess.run(
        argv,
        input="y\n" if stdin == "y" else None,
        stdin=subprocess.DEVNULL if stdin == "closed" else None,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not target.exists()
    assert answered.returncode != 0
    assert (
        f"model folder {folder}: its config.json names code of its own (auto_map: "
        in answered.stderr
    )
    assert "remote code is not run" in answered.stderr
    assert "Do you wish to run the custom code" not in answered.stdout


@pytest.mark.parametrize("config", ["config.json", "tokenizer_config.json"])
def test_either_config_naming_code_refuses_the_folder_for_the_tokenizer_too(
    tmp_path: Path, config: str
) -> None:
    from agentgym_eppo.trainer.training.models import ModelLoadError, load_tokenizer

    target = tmp_path / "ran"
    folder = _folder_naming_its_own_code(tmp_path, target)
    other = "tokenizer_config.json" if config == "config.json" else "config.json"
    (folder / other).write_text("{}")
    with pytest.raises(ModelLoadError, match=rf"its {config} names code of its own"):
        load_tokenizer(folder)
    assert not target.exists()
