"""The base-model benchmark's writer on a small synthetic run folder: the generated
report goes to ``base-model/<run name>/`` with its plots and evaluations, the
hand-written ``base-model.md`` is never written, and the model card's score block is
replaced between its markers and nowhere else. No model is loaded: the measurements are
made up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_eppo.trainer.config import load_config
from benchmarks.base_model import PROTOCOL, read_metrics, update_card, write_report

pytestmark = pytest.mark.train
TASKS = ("db", "os")


def _result(success: float, n: int) -> dict:
    episodes = [{"task_id": t, "turns": 1 + i % 2} for t in TASKS for i in range(n)]
    return {
        "tasks": {t: {"success": success, "n": n, "reward": success - 0.1} for t in TASKS},
        "mean_success": success,
        "seconds": 90.0,
        "episodes": episodes,
    }


def _run_dir(root: Path) -> Path:
    run = root / "tiny-base-synthetic"
    (run / "model").mkdir(parents=True)
    summary = {
        "parameters": 3_450_000,
        "vocabulary": 4096,
        "steps": 3,
        "tokens_seen": 3_000_000,
        "tokens_per_epoch": 2_000_000,
        "episodes": {"os": 5, "db": 5},
        "data_seconds": 60.0,
        "train_seconds": 120.0,
    }
    (run / "model" / "pretrain.json").write_text(json.dumps(summary))
    steps = [(1, 0.9), (2, 0.5), (3, 0.7), (3, 0.4)]  # step 3 rewritten by a resume
    lines = [
        {"step": s, "loss": loss, "tokens_seen": 1_000_000 * s, "tokens_per_s": 1500.0,
         "tokens": 900, "padded_tokens": 1000}
        for s, loss in steps
    ]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    return run


def test_report_goes_to_its_run_folder_and_never_to_the_hand_written_page(tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = _run_dir(tmp_path / "runs")
    results = tmp_path / "results"
    final = _result(0.5, 4)
    copy = {t: {"copied": 0.6, "other": 0.9, "copied_tokens": 10} for t in ("os", "db", "kg")}
    measured = {
        "peaks": {"fp32": 100.0, "bf16": 50.0},
        "final": final,
        "curve": [(2_000_000, _result(0.25, 1)), (3_000_000, _result(0.5, 1))],
        "copying": [(2_000_000, copy), (3_000_000, copy)],
        "agentbench": {},
    }
    report = write_report(
        run, measured, load_config(PROTOCOL), threads=2, curve_scale=0.25, results=results
    )

    folder = results / "base-model" / run.name
    assert report == folder / "report.md"
    assert not (results / "base-model.md").exists()
    text = report.read_text(encoding="utf-8")
    for plot in ("loss.png", "success.png"):
        assert (folder / plot).is_file()
        assert f"]({plot})" in text
    assert "[../../base-model.md](../../base-model.md)" in text
    assert "| os | 0.500 (4) | 0.400 | 0.50 |" in text
    assert "| 2.0 | 0.250 (1) | 0.250 (1) | 0.250 |" in text
    assert "| 3.0 | 0.500 (1) | 0.500 (1) | 0.500 |" in text
    assert "padding 10.0%" in text
    assert "| 3.0 | 0.600 | 0.900 | 0.600 | 0.900 | 0.600 | 0.900 |" in text
    assert [m["loss"] for m in read_metrics(run)] == [0.9, 0.5, 0.4]
    evals = json.loads((folder / "evals.json").read_text())
    assert evals["final"]["mean_success"] == 0.5 and set(evals) == {
        "final", "curve", "copying", "agentbench"
    }  # fmt: skip


def test_card_block_is_replaced_between_its_markers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    card = tmp_path / "README.md"
    card.write_text("before\n<!-- scores -->\nold table\n<!-- /scores -->\nafter\n")
    update_card(_result(0.5, 4), load_config(PROTOCOL), card)
    text = card.read_text()
    assert text.startswith("before\n<!-- scores -->\nProtocol: ")
    assert text.endswith("| mean over tasks | 0.500 | | |\n<!-- /scores -->\nafter\n")
    assert "old table" not in text
