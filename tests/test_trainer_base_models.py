"""Base models by name or folder: the shipped one loads everywhere, a bad one is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym_eppo.trainer.training.models import (
    NAMED_MODELS,
    ModelLoadError,
    build_tiny_model,
    build_tokenizer,
    load_policy,
    resolve_model_path,
    shipped_models,
)

pytestmark = pytest.mark.train
TEXTS = ["execute_sql SELECT name FROM table", "<tool_call>answer_action</tool_call>"] * 20


def _save(folder: Path, vocab_size: int = 300) -> Path:
    tokenizer = build_tokenizer(TEXTS, vocab_size=vocab_size)
    build_tiny_model(tokenizer, hidden_size=16, layers=1, heads=2, kv_heads=1).save_pretrained(
        folder
    )
    tokenizer.save_pretrained(folder)
    return folder


def test_a_missing_model_names_itself_and_the_shipped_models(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelLoadError) as caught:
        load_policy(missing)
    message = str(caught.value)
    assert "\n" not in message and str(missing) in message
    assert "shipped: " + (", ".join(shipped_models()) or "none") in message


def test_a_corrupt_folder_is_one_line_naming_the_path(tmp_path: Path) -> None:
    folder = _save(tmp_path / "model")
    (folder / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(
        ModelLoadError, match=rf"^model folder {folder}: cannot be loaded"
    ) as caught:
        load_policy(folder)
    assert "\n" not in str(caught.value)


def test_weights_missing_from_a_folder_are_refused(tmp_path: Path) -> None:
    folder = _save(tmp_path / "model")
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=rf"^model folder {folder}: cannot be loaded"):
        load_policy(folder)


def test_a_tokenizer_larger_than_the_embedding_is_refused(tmp_path: Path) -> None:
    folder = _save(tmp_path / "model", vocab_size=300)
    build_tokenizer(TEXTS * 5 + [" ".join(map(str, range(400)))], vocab_size=600).save_pretrained(
        folder
    )
    with pytest.raises(
        ModelLoadError, match=r"its tokenizer has \d+ tokens but the model embeds only"
    ):
        load_policy(folder)


def test_a_folder_shadows_a_shipped_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _save(tmp_path / "agentgym-tiny")
    assert resolve_model_path("agentgym-tiny") == "agentgym-tiny"


def test_the_cli_reports_a_missing_model_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentgym_eppo.trainer.cli", "eval", "--checkpoint",
         str(tmp_path / "nowhere"), "--tasks", "db"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"agentgym-eppo eval: error: model {str(tmp_path / 'nowhere')!r}: no such folder, and "
        f"not a shipped model (shipped: {', '.join(shipped_models()) or 'none'}), a named one "
        f"({', '.join(NAMED_MODELS)}) or a reachable Hugging Face name"
    ]


@pytest.mark.skipif(not shipped_models(), reason="no shipped model in this checkout")
def test_the_shipped_model_loads_by_name_with_its_prompt_card() -> None:
    from transformers import AutoModelForCausalLM

    from agentgym_eppo.trainer.training.checkpoint import read_policy_card

    path = Path(resolve_model_path("agentgym-tiny"))
    assert path.name == "agentgym-tiny" and path.parent.name == "models"
    model, tokenizer = load_policy("agentgym-tiny")
    assert model.config.model_type == "qwen2" and len(tokenizer) <= model.config.vocab_size
    assert read_policy_card(path) == {"prompt_style": "compact", "call_format": "hermes"}
    assert AutoModelForCausalLM.from_pretrained(path).num_parameters() == model.num_parameters()
    assert sum(f.stat().st_size for f in path.iterdir()) < 30 * 2**20
    assert json.loads((path / "pretrain.json").read_text())["prompt"] == "compact"
