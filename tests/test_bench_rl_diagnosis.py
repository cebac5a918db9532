"""The one-change-at-a-time table (``benchmarks/rl_diagnosis.py``) on a synthetic study:
each variant is named by what its config changes (plumbing such as ``output_dir`` is not
a change), paired against the base run's SFT evaluation on the instances both played,
and its training means are token weighted. No model is loaded: the runs are made up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.rl_diagnosis import diagnose, render

pytestmark = pytest.mark.train

BASE = {"seed": 0, "rl": {"lr": 1e-05, "steps": 2}, "algorithm": {"task_norm_over": "all"}}


def _eval(successes: dict[str, list[bool]]) -> dict:
    return {
        "tasks": {task: {"success": sum(v) / len(v)} for task, v in successes.items()},
        "episodes": [
            {"task_id": task, "sample_id": f"{task}-{i}", "success": ok, "reward": float(ok)}
            for task, outcomes in successes.items()
            for i, ok in enumerate(outcomes)
        ],
    }


def _step(kl: float) -> str:
    tasks = {
        "os": {"tokens": 300, "entropy": 0.1, "clipped_share": 0.0, "mixed_groups": 1.0},
        "db": {"tokens": 100, "entropy": 0.5, "clipped_share": 0.04, "mixed_groups": 0.0},
    }
    timing = {"seconds": 10.0, "rollout_seconds": 4.0, "score_seconds": 2.0, "train_seconds": 3.0}
    return json.dumps(
        {"global": {"kl": kl, "success": 0.5, **timing, "update_gflop": 500.0}, "tasks": tasks}
    )


def _run(root: Path, name: str, config: dict, after: dict, sft: dict | None = None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    (folder / "metrics.jsonl").write_text(_step(0.01) + "\n" + _step(0.03) + "\n")
    (folder / "eval_after_rl.json").write_text(json.dumps(after))
    machine = {"cpu_flags": ["avx2", "avx512_bf16"], "kernels": "AVX512"}
    (folder / "machine.jsonl").write_text(json.dumps(machine) + "\n")
    if sft is not None:
        (folder / "eval_after_sft.json").write_text(json.dumps(sft))


def test_each_variant_is_named_by_its_change_and_paired_with_the_sft_checkpoint(
    tmp_path: Path,
) -> None:
    sft = _eval({"os": [False, False, True, True], "db": [True, False]})
    _run(tmp_path, "all", {**BASE, "output_dir": "runs/all"}, sft, sft=sft)
    variant = {
        **BASE,
        "rl": {"lr": 2e-06, "steps": 2},
        "output_dir": "runs/lr",
        "init_checkpoint": "runs/all/checkpoints/sft",
        "sft": {"enabled": False},
    }
    _run(tmp_path, "lr", variant, _eval({"os": [True, True, True, True], "db": [True, False]}))

    result = diagnose(tmp_path, "all")

    assert result["sft"]["success"] == {"db": 0.5, "os": 0.5}
    assert result["instances"] == {"db": 2, "os": 4}
    base, lr = result["runs"]
    assert base["change"] == "none (the base's recipe)"
    assert base["difference"] == 0.0
    assert lr["change"] == "rl.lr=2e-06"
    assert lr["success"] == {"db": 0.5, "os": 1.0}
    assert lr["difference"] == pytest.approx(0.25)  # mean over tasks: (0.5 + 0) / 2
    assert lr["kl"] == pytest.approx(0.02)
    assert lr["entropy"] == pytest.approx((0.1 * 300 + 0.5 * 100) / 400)
    assert lr["clipped_share"] == pytest.approx(0.01)
    assert lr["mixed_groups"] == pytest.approx(0.5)
    table = render(result)
    assert "| lr | rl.lr=2e-06 | 0.50 | 1.00 | 0.750 | +0.250" in table


def test_seeds_of_one_setting_pool_per_instance_and_the_step_time_is_split(
    tmp_path: Path,
) -> None:
    sft = _eval({"os": [False, False, True, True], "db": [True, False]})
    _run(tmp_path, "all", {**BASE, "output_dir": "runs/all"}, sft, sft=sft)
    plumbing = {"init_checkpoint": "runs/all/checkpoints/sft", "sft": {"enabled": False}}
    # seed 1 of the base recipe wins one OS instance more
    _run(
        tmp_path,
        "s1",
        {**BASE, "seed": 1, **plumbing},
        _eval({"os": [True, False, True, True], "db": [True, False]}),
    )
    # the lr change at two seeds: +1 and +2 OS instances, DB lost once
    lr = {**BASE, "rl": {"lr": 2e-06, "steps": 2}, **plumbing}
    _run(tmp_path, "lr", lr, _eval({"os": [True, False, True, True], "db": [False, False]}))
    _run(
        tmp_path,
        "lr1",
        {**lr, "seed": 1},
        _eval({"os": [True, True, True, True], "db": [True, False]}),
    )

    (tmp_path / "lr1" / "machine.jsonl").write_text(
        json.dumps({"cpu_flags": ["avx2"], "kernels": "AVX2"})
    )
    result = diagnose(tmp_path, "all", peak={"gflops": {"fp32": 100.0, "bf16": 200.0}})

    settings = {s["setting"]: s for s in result["over_seeds"]}
    assert set(settings) == {"none (the base's recipe)", "rl.lr=2e-06"}
    base = settings["none (the base's recipe)"]
    assert base["runs"] == ["all", "s1"] and base["seeds"] == [0, 1]
    assert base["gains"] == [0.0, pytest.approx(0.125)]
    # per instance the mean over seeds: OS +0.5 on one instance of four, DB unchanged
    assert base["pooled_by_task"] == {"db": 0.0, "os": pytest.approx(0.125)}
    changed = settings["rl.lr=2e-06"]
    assert changed["gains"] == [pytest.approx(-0.125), pytest.approx(0.25)]
    assert changed["mean_gain"] == pytest.approx(0.0625)
    assert changed["pooled_by_task"] == {"db": pytest.approx(-0.25), "os": pytest.approx(0.375)}
    assert changed["pooled"] == pytest.approx(0.0625)
    timing = result["runs"][0]["timing"]
    assert timing["step_seconds"] == 10.0
    assert (timing["rollout_share"], timing["score_share"], timing["train_share"]) == (
        0.4,
        0.2,
        0.3,
    )
    assert timing["other_share"] == pytest.approx(0.1)
    assert timing["update_gflops"] == pytest.approx(1000 / 10)  # 2 x 500 GFLOP in 2 x (2 + 3) s
    table = render(result)
    # over two seeds: mean 0.0625, sd 0.265, t(0.975, 1) = 12.71: half-width 2.383
    assert changed["seed_interval"] == [
        pytest.approx(0.0625 - 2.383, abs=1e-3),
        pytest.approx(0.0625 + 2.383, abs=1e-3),
    ]
    # DB lost its one success at one seed of two: the sign test of a drop has 1 instance
    assert changed["p_lower_by_task"]["db"] == pytest.approx(0.5)
    assert changed["p_lower_by_task"]["os"] == 1.0
    assert "| rl.lr=2e-06 | 0, 1 | -0.125, +0.250 | +0.062 [-2.320, +2.445] |" in table
    # bf16: auto ran bf16 on a machine with native bf16, fp32 on one without
    assert "| all | 10.0 | 40% | 20% | 30% | 10% | 100 | bf16 | 50% |" in table
    assert "| lr1 | 10.0 | 40% | 20% | 30% | 10% | 100 | fp32 | 100% |" in table


def test_runs_that_only_evaluated_the_checkpoint_pool_into_the_reference(
    tmp_path: Path,
) -> None:
    sft = _eval({"os": [False, True], "db": [True, False]})
    sft["tasks"] = {"os": {"success": 0.5}, "db": {"success": 0.5}}
    _run(
        tmp_path,
        "all",
        {**BASE, "output_dir": "runs/all"},
        _eval({"os": [True, True], "db": [True, False]}),
        sft=sft,
    )
    # the checkpoint again under seed 1: it won OS instance 0 this time
    again = _eval({"os": [True, True], "db": [True, False]})
    again["tasks"] = {"os": {"success": 1.0}, "db": {"success": 0.5}}
    null = {**BASE, "seed": 1, "rl": {"lr": 1e-05, "steps": 0}, "sft": {"enabled": False}}
    _run(tmp_path, "null", null, again)

    result = diagnose(tmp_path, "all")

    assert [row["run"] for row in result["runs"]] == ["all"]
    # per instance the mean over both evaluations: OS instance 0 at 0.5, so OS at 0.75
    assert result["sft"] == {"success": {"db": 0.5, "os": 0.75}, "mean": 0.625}
    assert result["runs"][0]["difference"] == pytest.approx(0.125)  # OS +0.25, DB 0
    assert result["checkpoint_evaluations"] == [
        {"run": "all", "seed": 0, "success": {"db": 0.5, "os": 0.5}},
        {"run": "null", "seed": 1, "success": {"db": 0.5, "os": 1.0}},
    ]
    table = render(result)
    assert "| SFT checkpoint (2 evaluations) | | 0.50 | 0.75 | 0.625 |" in table
    assert "| null | 1 | 0.50 | 1.00 | 0.750 |" in table


def test_a_base_that_only_evaluated_its_checkpoint_is_the_reference_not_a_row(
    tmp_path: Path,
) -> None:
    checkpoint = _eval({"os": [False, True], "db": [True, False]})
    only_eval = {**BASE, "rl": {"lr": 1e-05, "steps": 0}, "sft": {"enabled": False}}
    _run(tmp_path, "checkpoint", only_eval, checkpoint)  # rl.steps=0: its eval_after_rl
    (tmp_path / "checkpoint" / "metrics.jsonl").unlink()
    _run(tmp_path, "recipe", BASE, _eval({"os": [True, True], "db": [True, False]}))

    result = diagnose(tmp_path, "checkpoint")

    assert [row["run"] for row in result["runs"]] == ["recipe"]
    assert result["reference_runs"] == ["checkpoint"]
    assert "checkpoint_evaluations" not in result  # one evaluation: no table of them
    assert result["sft"] == {"success": {"db": 0.5, "os": 0.5}, "mean": 0.5}
    assert result["runs"][0]["difference"] == 0.25
