"""``run_compare`` end to end with the real trainer on a tiny model and two tiny tasks.

Two methods x two seeds, two RL steps each, from one SFT checkpoint, two runs at a time in
spawned processes (``parallel_runs: 2``); plus a method whose config is invalid, so a
failing run is exercised too. Then the comparison is started again, one run at a time
(finished runs are skipped) after a run's finished marker is removed (the trainer resumes
that run from its last RL checkpoint).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from support import trainer_test_envs

from agentgym_eppo.trainer.compare import FINISHED, load_compare_config, run_compare

pytestmark = [pytest.mark.slow, pytest.mark.train]

TASKS = {
    "echo": "support.trainer_test_envs:Echo-v0",
    "lookup": "support.trainer_test_envs:Lookup-v0",
}
BASE_CONFIG = {
    "tasks": {env_id: 2 for env_id in TASKS.values()},
    "threads": 1,
    "bf16": False,
    "tensorboard": False,
    "progress": False,
    "model": {
        "vocab_size": 300,
        "hidden_size": 32,
        "layers": 1,
        "heads": 2,
        "kv_heads": 1,
        "max_position_embeddings": 1024,
    },
    "sft": {"episodes_per_task": 4, "epochs": 6, "batch_episodes": 4, "lr": 0.003},
    "rollout": {
        "group_size": 2,
        "max_tokens_per_turn": 24,
        "max_context": 1024,
        "backend": "serial",
        "generation_batch": 8,
    },
    "rl": {"steps": 2, "lr": 1e-4, "save_every": 1, "keep_checkpoints": 1},
    "eval": {"max_instances_per_task": 1},
}


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The comparison config after one full pass; its output folder is ``<dir>/out``."""
    assert trainer_test_envs.WORDS  # registers the two tasks' Gymnasium ids
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("compare")
    (root / "base.yaml").write_text(yaml.safe_dump(BASE_CONFIG))
    config = {
        "output_dir": str(root / "out"),
        "base_config": str(root / "base.yaml"),
        "seeds": [0, 1],
        "methods": {
            "grpo_tan": {"algorithm.task_adv_norm": True, "clip.policy": "fixed"},
            "eppo": {"algorithm.task_adv_norm": True, "clip.policy": "eppo"},
            "broken": {"clip.policy": "nonsense"},
        },
        "parallel_runs": 2,
    }
    path = root / "compare.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    run_compare(path)
    return path


def metrics_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_every_run_starts_from_the_one_sft_checkpoint(comparison: Path) -> None:
    config = load_compare_config(comparison)
    sft = config.sft_slot / "checkpoints" / "sft"
    assert (sft / "config.json").is_file()
    for method in ("grpo_tan", "eppo"):
        for seed in (0, 1):
            resolved = yaml.safe_load((config.run_slot(method, seed) / "config.yaml").read_text())
            assert resolved["init_checkpoint"] == str(sft)
            assert resolved["seed"] == seed
            assert resolved["threads"] == 1


def test_runs_train_their_method_and_evaluate_after_rl_only(comparison: Path) -> None:
    config = load_compare_config(comparison)
    for seed in (0, 1):
        fixed, eppo = config.run_slot("grpo_tan", seed), config.run_slot("eppo", seed)
        assert [r["step"] for r in metrics_of(fixed)] == [1, 2]
        assert {task["clip_eps"] for r in metrics_of(fixed) for task in r["tasks"].values()} == {
            0.2
        }
        eppo_clips = [task["clip_eps"] for r in metrics_of(eppo) for task in r["tasks"].values()]
        assert all(0.15 <= eps <= 0.3 for eps in eppo_clips)
        assert sorted(p.name for p in eppo.glob("eval_*.json")) == ["eval_after_rl.json"]
        assert (eppo / "diagnostics.md").is_file() and (eppo / "plots" / "entropy.svg").is_file()
    assert sorted(p.name for p in config.sft_slot.glob("eval_*.json")) == ["eval_after_sft.json"]


def test_the_report_counts_finished_runs_and_names_the_failed_ones(comparison: Path) -> None:
    config = load_compare_config(comparison)
    text = (config.output_dir / "report.md").read_text()
    assert "Runs finished: 4 of 6 planned (3 methods x seeds [0, 1]): **PARTIAL**." in text
    assert (
        "- `broken/seed0`: agentgym_eppo.core.registry.UnknownNameError: "
        "clip.policy: unknown clip policy 'nonsense'; known: bapo, dapo, dcpo, eppo, fixed"
    ) in text
    assert "| start (shared) | - |" in text
    assert "| eppo | 2 |" in text and "| grpo_tan | 2 |" in text
    assert (config.output_dir / "plots" / "diagnostics.png").is_file()
    data = json.loads((config.output_dir / "report.json").read_text())
    assert [r["seed"] for r in data["methods"]["eppo"]] == [0, 1]
    assert set(data["methods"]["eppo"][0]["success"]) == {"echo", "lookup", "mean_success"}


def test_a_second_start_skips_finished_runs_and_resumes_an_unfinished_one(
    comparison: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_compare_config(comparison)
    kept = config.run_slot("grpo_tan", 0) / FINISHED
    kept_marker = kept.read_text()
    kept_mtime = kept.stat().st_mtime_ns
    interrupted = config.run_slot("eppo", 1)
    before = metrics_of(interrupted)
    (interrupted / FINISHED).unlink()
    sequential = yaml.safe_load(comparison.read_text())
    sequential["parallel_runs"] = 1  # in this process, so capsys sees the trainer's output
    comparison.write_text(yaml.safe_dump(sequential, sort_keys=False))
    capsys.readouterr()
    run_compare(comparison)
    output = capsys.readouterr().out
    assert "[compare] 3 of 6 runs to go" in output  # eppo/seed1 and the two broken runs
    assert "resuming after RL step 2" in output
    assert kept.stat().st_mtime_ns == kept_mtime and kept.read_text() == kept_marker
    assert (interrupted / FINISHED).is_file()
    assert metrics_of(interrupted) == before


def test_a_named_start_is_evaluated_once_and_the_report_rebuilds_from_the_exports(
    comparison: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A comparison from an existing checkpoint: the start gets the protocol's evaluation
    once, finished runs' small files go to ``results_dir``, the headline run's final
    checkpoint is evaluated on the confirmation split as part of the run, and the report
    is rebuilt from the exported files alone after the run folders are gone; a
    comparison started again from the exports trains and evaluates nothing again."""
    first = load_compare_config(comparison)
    raw = yaml.safe_load(comparison.read_text())
    raw.update(
        output_dir=str(tmp_path / "out"),
        results_dir=str(tmp_path / "results"),
        seeds=[0],
        methods={"eppo": raw["methods"]["eppo"]},
        headline=["eppo"],
        confirm_split="test",
        parallel_runs=1,
        sft={"checkpoint": str(first.sft_slot / "checkpoints" / "sft")},
    )
    path = tmp_path / "compare.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    run_compare(path)
    config = load_compare_config(path)
    start = tmp_path / "results" / "start"
    assert sorted(p.name for p in start.glob("eval_*.json")) == ["eval_base.json"]
    exported = config.exported_slot("eppo", 0)
    assert sorted(p.name for p in exported.iterdir()) == [
        "config.yaml",
        "confirm-test",
        "diagnostics.md",
        "eval_after_rl.json",
        "machine.jsonl",
        "metrics.jsonl",
    ]
    assert json.loads((exported / "machine.jsonl").read_text())["kernels"] == (
        torch.backends.cpu.get_cpu_capability()
    )
    confirmed = json.loads((exported / "confirm-test" / "eval_base.json").read_text())
    assert confirmed["split"] == "test"
    evaluated = yaml.safe_load((exported / "confirm-test" / "config.yaml").read_text())
    final = config.run_slot("eppo", 0) / "checkpoints" / "step_2"
    assert evaluated["model"]["path"] == str(final)
    assert metrics_of(exported) == metrics_of(config.run_slot("eppo", 0))
    before = json.loads((tmp_path / "results" / "report.json").read_text())
    shutil.rmtree(tmp_path / "out")
    run_compare(path, report_only=True)
    assert json.loads((tmp_path / "results" / "report.json").read_text()) == before
    run_compare(path)  # a fresh machine with the exports: nothing trains or evaluates again
    assert "[compare] 0 of 1 runs to go" in capsys.readouterr().out
    assert not (tmp_path / "out" / "start").exists()
    assert not (tmp_path / "out" / "runs").exists()
    assert [r["seed"] for r in before["methods"]["eppo"]] == [0]
    assert before["start_success"] is not None
    confirmation = before["confirmation"]  # the report reads the exported confirmation
    assert confirmation["split"] == "test" and confirmation["missing"] == {"eppo": {}}
    assert confirmation["methods"]["eppo"][0]["success"] == pytest.approx(
        {task: entry["success"] for task, entry in confirmed["tasks"].items()}
        | {"mean_success": confirmed["mean_success"]}
    )
