"""``diagnose_run`` on run directories written here in the layout of docs/trainer.md."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from support.handmade_runs import DB_ENTROPY, OS_ENTROPY, write_run

from agentgym_eppo.trainer.analysis.report import diagnose_run
from agentgym_eppo.trainer.analysis.run_dir import eval_path, read_evals, read_metrics


def test_diagnose_run_writes_summary_json_with_the_known_diagnostics(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    assert diagnose_run(run) == run / "diagnostics.md"
    summary = json.loads((run / "diagnostics.json").read_text())
    assert summary["steps"] == 10
    assert summary["tasks"] == ["os", "db"]
    diagnostics = summary["diagnostics"]
    assert diagnostics["crossover_count"] == 3
    assert diagnostics["late_spike_per_task"] == {"os": 0.25, "db": 0.5}
    assert diagnostics["late_spike_max"] == 0.5
    log_t = np.log(np.arange(1, 11))
    expected_r2 = {
        task: np.corrcoef(log_t, curve)[0, 1] ** 2
        for task, curve in (("os", OS_ENTROPY), ("db", DB_ENTROPY))
    }
    assert diagnostics["trend_r2_per_task"] == pytest.approx(expected_r2)
    assert diagnostics["trend_r2"] == pytest.approx(sum(expected_r2.values()) / 2)
    assert summary["eval_success"]["after_rl"] == {"os": 0.5, "db": 0.25}
    assert summary["eval_mean_success"] == {
        "base": 0.0,
        "after_sft": 0.1875,
        "after_rl": 0.375,
    }


def test_diagnose_run_draws_every_plot_as_png_and_svg(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    diagnose_run(run)
    for stem in ("entropy", "clip_eps", "zscore", "train_success", "eval_success"):
        png = run / "plots" / f"{stem}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        svg = ET.parse(run / "plots" / f"{stem}.svg").getroot()
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"


def test_svg_plots_are_byte_identical_across_runs(tmp_path: Path) -> None:
    first, second = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    diagnose_run(first)
    diagnose_run(second)
    assert (first / "plots/entropy.svg").read_bytes() == (second / "plots/entropy.svg").read_bytes()


def test_markdown_summary_tables_and_embedded_plots(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    text = diagnose_run(run).read_text()
    assert "| crossover count (pairwise sign flips) | 3 | lower |" in text
    assert "| late spike amplitude (max over tasks, last 3 steps) | 0.5000 | lower |" in text
    assert "| after_rl | 0.500 | 0.250 | 0.375 |" in text
    # os: entropy 2.0 -> 0.25, clip at the last step 0.15 (os below db), success 0.8..1.0.
    assert "| os | 2.000 | 0.250 |" in text
    assert "| 0.2500 | 0.150 | 0.900 |" in text
    assert "![entropy](plots/entropy.png)" in text
    assert "![eval_success](plots/eval_success.png)" in text


def test_a_fixed_clip_run_without_zscores_gets_no_zscore_plot(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", with_zscore=False)
    text = diagnose_run(run).read_text()
    assert not (run / "plots" / "zscore.png").exists()
    assert "zscore" not in text
    assert (run / "plots" / "entropy.png").exists()


def test_a_task_missing_from_a_step_is_a_gap_not_a_zero(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[3])
    del record["tasks"]["db"]  # step 4: no db sample
    lines[3] = json.dumps(record)
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert math.isnan(read_metrics(run).task_series("entropy")["db"][3])
    diagnose_run(run)
    assert json.loads((run / "diagnostics.json").read_text())["diagnostics"]["crossover_count"] == 3


def test_a_relogged_step_keeps_its_last_record_and_steps_are_sorted(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", steps=3)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    rewritten = json.loads(lines[0])
    rewritten["tasks"]["os"]["entropy"] = 9.0
    (run / "metrics.jsonl").write_text(
        "\n".join([lines[2], lines[1], lines[0], json.dumps(rewritten)])
    )
    metrics = read_metrics(run)
    assert metrics.steps.tolist() == [1, 2, 3]
    assert metrics.task_series("entropy")["os"].tolist() == [9.0, 1.5, 0.5]


def test_the_unterminated_last_line_of_a_live_run_is_skipped(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", steps=4)
    with (run / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 5, "tasks": {"os": {"entr')
    assert read_metrics(run).num_steps == 4


def test_a_malformed_line_is_named(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", steps=3)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines[1] = "{oops"
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not a JSON object"):
        diagnose_run(run)
    (run / "metrics.jsonl").write_text('{"step": "one", "tasks": {}}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:1: 'step' must be an integer, got 'one'"):
        diagnose_run(run)


def test_a_directory_without_metrics_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"metrics\.jsonl does not exist"):
        diagnose_run(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"is not a directory"):
        diagnose_run(tmp_path / "nowhere")


def test_a_run_before_its_first_rl_step_reports_its_evals_only(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "metrics.jsonl").write_text("")
    text = diagnose_run(run).read_text()
    assert "No RL step in `metrics.jsonl` yet" in text
    assert "| after_sft | 0.250 | 0.125 | 0.188 |" in text
    assert json.loads((run / "diagnostics.json").read_text())["diagnostics"] is None
    assert sorted(p.name for p in (run / "plots").iterdir()) == [
        "eval_success.png",
        "eval_success.svg",
    ]


def test_eval_reports_come_in_training_order(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    assert list(read_evals(run)) == ["base", "after_sft", "after_rl"]
    (run / "eval_after_rl.json").write_text("[1, 2]")
    with pytest.raises(
        ValueError,
        match=r"eval_after_rl\.json: not an evaluation \(expected an object with a 'tasks'",
    ):
        read_evals(run)


def test_a_run_written_before_the_rename_has_its_eval_before_sft_read_as_base(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path / "run")
    old = run / "eval_before_sft.json"
    base = json.loads((run / "eval_base.json").read_text())
    old.write_text(json.dumps({**base, "stage": "before_sft"}))
    (run / "eval_base.json").unlink()
    assert eval_path(run, "base") == old
    evals = read_evals(run)
    assert list(evals) == ["base", "after_sft", "after_rl"]
    assert evals["base"]["tasks"] == base["tasks"]


def test_an_sft_only_run_without_metrics_gets_its_eval_table(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "metrics.jsonl").unlink()
    (run / "eval_after_rl.json").unlink()
    text = diagnose_run(run).read_text()
    assert "RL steps: 0; tasks: none." in text
    assert "| after_sft | 0.250 | 0.125 | 0.188 |" in text


def test_the_eval_table_names_the_split_it_was_played_on(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    assert "## Success on the dev split" in diagnose_run(run).read_text()
    for path in run.glob("eval_*.json"):
        path.write_text(path.read_text().replace('"split": "dev"', '"split": "test"'))
    text = diagnose_run(run).read_text()
    assert "## Success on the test split" in text and "dev split" not in text
