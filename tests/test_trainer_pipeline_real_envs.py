"""The whole trainer pipeline on two real AgentBench environments, not the test-only ones.

DB (SQLite in memory) and KG (the shipped graph in the embedded store) in one
``MultiTaskVectorEnv``: expert SFT, two RL steps of rollout -> update with the EPPO
pacer, then a dev evaluation, on a tiny model, through the public entry points
(``load_config``, ``run_training``). Checked: every record keeps the two tasks apart
under the ids their environments report in ``info["task_id"]`` ("db", "kg"), with their
own episodes, tokens and clip range, and the evaluation scores each task on its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.train]

TASK_IDS = ["db", "kg"]
SLOTS = 2  # per task: one GRPO group of two


def test_db_and_kg_train_and_evaluate_with_per_task_metrics(tmp_path: Path) -> None:
    import torch

    from agentgym_eppo.trainer import load_config, run_training

    torch.set_num_threads(1)
    run_dir = tmp_path / "run"
    config = load_config(
        None,
        [
            f"output_dir={run_dir}",
            f"tasks={{AgentBench-DB-v0: {SLOTS}, AgentBench-KG-v0: {SLOTS}}}",
            "skip_unavailable_tasks=false",
            "seed=0",
            "threads=1",
            "bf16=false",
            "tensorboard=false",
            "progress=false",
            "model.vocab_size=400",
            "model.hidden_size=32",
            "model.layers=1",
            "model.heads=2",
            "model.kv_heads=1",
            "model.max_position_embeddings=2064",
            "sft.episodes_per_task=2",
            "sft.epochs=1",
            "sft.batch_episodes=4",
            "rollout.group_size=2",
            "rollout.max_turns=8",
            "rollout.max_tokens_per_turn=16",
            "rollout.max_context=2048",
            "rollout.prompt=compact",
            "rollout.backend=serial",
            "clip.policy=eppo",
            "rl.steps=2",
            "rl.save_every=2",
            "eval.stages=[after_rl]",
            "eval.max_instances_per_task=2",
        ],
    )
    run_training(config)

    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == [1, 2]
    for record in records:
        assert sorted(record["tasks"]) == TASK_IDS
        assert record["global"]["episodes"] == 2 * SLOTS
        assert record["global"]["tokens"] == sum(t["tokens"] for t in record["tasks"].values())
        for task, metrics in record["tasks"].items():
            assert metrics["tokens"] > 0, task
            assert 0.0 <= metrics["success"] <= 1.0, task
            assert math.isfinite(metrics["clip_eps"]), task  # EPPO paces each task

    report = json.loads((run_dir / "eval_after_rl.json").read_text())
    assert report["stage"] == "after_rl" and report["split"] == "dev"
    assert sorted(report["tasks"]) == TASK_IDS
    for task, scores in report["tasks"].items():
        assert scores["n"] == 2, task
        assert 0.0 <= scores["success"] <= 1.0, task
