"""The comparison's config, run plan, lock and report-only mode (no training needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from support.handmade_runs import write_episodes, write_run

from agentgym_eppo.trainer.compare import (
    FINISHED,
    _as_override_args,
    _lock,
    collect_confirmations,
    confirmed_dir,
    is_finished,
    load_compare_config,
    planned_runs,
    run_compare,
)

REPO = Path(__file__).resolve().parents[1]


def write_config(path: Path, **changes: object) -> Path:
    raw: dict[str, object] = {
        "output_dir": str(path.parent / "out"),
        "base_config": "configs/demo-cpu.yaml",
        "seeds": [0, 1],
        "methods": {"grpo_tan": {"clip.policy": "fixed"}, "eppo": {"clip.policy": "eppo"}},
    }
    raw.update(changes)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_the_shipped_cpu_comparison_plans_the_papers_methods_headline_pair_first() -> None:
    config = load_compare_config(REPO / "configs" / "compare-cpu.yaml")
    assert list(config.methods) == [
        "grpo_tan",
        "eppo",
        "eppo_no_trend",
        "eppo_no_taskwise",
        "dapo",
        "dcpo",
        "bapo",
        "rloo",
        "rloo_eppo",
    ]
    assert config.seeds == (0, 1, 2)
    assert config.method_seeds("grpo_tan") == config.method_seeds("eppo") == (0, 1, 2, 3, 4)
    assert config.torch_threads == 1
    assert config.overrides["rl.ppo_epochs"] == 8  # the pilot's chosen regime
    assert config.methods["eppo_no_taskwise"]["clip.eppo.taskwise"] is False
    assert config.methods["eppo_no_trend"]["clip.eppo.trend_constraint"] is False
    assert config.methods["grpo_tan"] == {
        "algorithm.advantage": "grpo",
        "algorithm.task_adv_norm": True,
        "clip.policy": "fixed",
    }
    assert config.methods["rloo_eppo"]["algorithm.advantage"] == "rloo"
    runs = planned_runs(config)
    assert len(runs) == 2 * 5 + 7 * 3
    assert runs[:10] == [(m, s) for s in range(5) for m in ("grpo_tan", "eppo")]
    assert runs[10:17] == [(m, 0) for m in list(config.methods)[2:]]
    assert config.confirm_split == "test"
    assert config.exported_slot("eppo", 3) == REPO_RELATIVE_RESULTS / "eppo" / "seed3"


REPO_RELATIVE_RESULTS = Path("benchmarks/results/compare-cpu/grid")


def test_the_shipped_five_task_grid_is_the_three_task_one_with_alfworld_and_webshop() -> None:
    three = load_compare_config(REPO / "configs" / "compare-cpu.yaml")
    five = load_compare_config(REPO / "configs" / "compare-cpu-five.yaml")
    assert five.methods == three.methods and five.headline == three.headline
    assert planned_runs(five) == planned_runs(three)
    assert five.confirm_split == "test"
    assert five.report_dir == Path("benchmarks/results/compare-cpu-five/grid") != three.report_dir
    assert five.output_dir != three.output_dir
    assert five.overrides["tasks"] == {"os": 16, "db": 16, "kg": 16, "alfworld": 4, "webshop": 4}
    assert five.overrides["eval.tasks"] == ["os", "db", "kg", "alfworld", "webshop"]
    assert five.overrides["rl.skip_zero_advantage"] is True  # the pilot's stated departure
    assert five.overrides["rl.ppo_epochs"] == three.overrides["rl.ppo_epochs"] == 8


def test_methods_can_have_their_own_seeds_and_the_headline_runs_first(tmp_path: Path) -> None:
    config = load_compare_config(
        write_config(
            tmp_path / "c.yaml",
            methods={"a": {}, "b": {}, "c": {}},
            seeds_by_method={"c": [5, 6, 7]},
            headline=["c", "b"],
        )
    )
    assert planned_runs(config) == [
        ("c", 5), ("b", 0), ("c", 6), ("b", 1), ("c", 7), ("a", 0), ("a", 1)
    ]  # fmt: skip
    assert config.report_dir == tmp_path / "out"


def test_runs_are_planned_seed_by_seed(tmp_path: Path) -> None:
    config = load_compare_config(write_config(tmp_path / "c.yaml"))
    assert planned_runs(config) == [("grpo_tan", 0), ("eppo", 0), ("grpo_tan", 1), ("eppo", 1)]
    assert config.run_slot("eppo", 1) == tmp_path / "out" / "runs" / "eppo" / "seed1"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"seeds": []}, r"'seeds' must be a non-empty list of integers, got \[\]"),
        ({"seeds": [0, 0]}, r"'seeds' repeats a seed"),
        ({"seeds": [0, "1"]}, r"'seeds' must be a non-empty list of integers"),
        ({"methods": {}}, r"'methods' must map method names to overrides"),
        ({"methods": {"../x": {}}}, r"method name '../x' must be a plain folder name"),
        ({"methods": {"a": ["clip.policy=eppo"]}}, r"'methods.a' must map dotted config keys"),
        ({"colour": "red"}, r"unknown key\(s\) \['colour'\]"),
        ({"sft": {"ckpt": "x"}}, r"'sft' takes 'checkpoint' and 'overrides'"),
        ({"torch_threads": 0}, r"'torch_threads' must be a positive integer, got 0"),
        ({"parallel_runs": "2"}, r"'parallel_runs' must be a positive integer, got '2'"),
        ({"seeds_by_method": {"zz": [0]}}, r"'seeds_by_method' names \['zz'\], not among"),
        ({"seeds_by_method": {"eppo": []}}, r"'seeds_by_method.eppo' must be a non-empty list"),
        ({"headline": ["eppo", "ppo"]}, r"'headline' names \['ppo'\], not among the methods"),
        ({"headline": "eppo"}, r"'headline' must be a list of method names"),
        ({"confirm_split": "tset", "headline": ["eppo"]}, r"'confirm_split' must be one of"),
        ({"confirm_split": "test"}, r"'confirm_split' confirms the headline runs"),
    ],
)
def test_bad_configs_are_refused_with_the_key_named(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_compare_config(write_config(tmp_path / "c.yaml", **changes))


def test_a_missing_required_key_or_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"output_dir": "x", "seeds": [0], "methods": {"a": {}}}))
    with pytest.raises(ValueError, match=r"missing required key 'base_config'"):
        load_compare_config(path)
    with pytest.raises(FileNotFoundError, match=r"comparison config .*nope\.yaml does not exist"):
        load_compare_config(tmp_path / "nope.yaml")


def test_a_variant_extends_a_comparison_naming_only_what_it_changes(tmp_path: Path) -> None:
    parent = write_config(
        tmp_path / "parent.yaml",
        overrides={"rl.steps": 20, "rl.ppo_epochs": 8},
        headline=["eppo"],
        confirm_split="test",
    )
    child = tmp_path / "variants" / "child.yaml"
    child.parent.mkdir()
    child.write_text(
        yaml.safe_dump(
            {
                "extends": "../parent.yaml",
                "output_dir": str(tmp_path / "out-five"),
                "seeds": [3],
                "overrides": {"rl.ppo_epochs": 4, "eval.tasks": ["os", "alfworld"]},
            }
        )
    )
    config = load_compare_config(child)
    parent_config = load_compare_config(parent)
    assert config.methods == parent_config.methods
    assert config.headline == ("eppo",) and config.confirm_split == "test"
    assert config.seeds == (3,) and config.output_dir == tmp_path / "out-five"
    assert config.overrides == {
        "rl.steps": 20,
        "rl.ppo_epochs": 4,
        "eval.tasks": ["os", "alfworld"],
    }
    (tmp_path / "parent.yaml").write_text(yaml.safe_dump({"extends": "variants/child.yaml"}))
    with pytest.raises(ValueError, match=r"'extends' makes a cycle"):
        load_compare_config(child)
    child.write_text(yaml.safe_dump({"extends": "../missing.yaml"}))
    with pytest.raises(FileNotFoundError, match=r"missing\.yaml does not exist"):
        load_compare_config(child)


def test_overrides_become_the_trainers_key_value_arguments() -> None:
    assert _as_override_args(
        {"clip.policy": "eppo", "rl.steps": 2, "clip.eppo.taskwise": False, "lr": 1e-05}
    ) == ["clip.policy=eppo", "rl.steps=2", "clip.eppo.taskwise=false", "lr=1.0e-05"]
    assert _as_override_args(
        {
            "output_dir": "runs/a: b",
            "seed": "7",
            "tasks": {"kg": 4, "db": 8},
            "eval.stages": ["after_rl"],
        }
    ) == ["output_dir='runs/a: b'", "seed='7'", "tasks={kg: 4, db: 8}", "eval.stages=[after_rl]"]
    parsed = {}
    for arg in _as_override_args({"output_dir": "runs/a: b", "seed": "7"}):
        key, raw = arg.split("=", 1)
        parsed[key] = yaml.safe_load(raw)
    assert parsed == {"output_dir": "runs/a: b", "seed": "7"}  # strings stay strings


def test_report_only_reads_finished_runs_and_marks_the_rest_missing(tmp_path: Path) -> None:
    config = load_compare_config(write_config(tmp_path / "c.yaml"))
    for method, seed in [("grpo_tan", 0), ("eppo", 0)]:
        run = write_run(config.run_slot(method, seed))
        (run / FINISHED).write_text(json.dumps({"run_dir": str(run), "seconds": 1.0}))
    sft = write_run(config.sft_slot)  # its eval_after_sft.json: os 0.25, db 0.125
    (sft / FINISHED).write_text(json.dumps({"run_dir": str(sft), "checkpoint": "unused"}))
    (config.run_slot("eppo", 1)).mkdir(parents=True)
    (config.run_slot("eppo", 1) / "failed.txt").write_text("Traceback ...\nValueError: boom\n")
    assert is_finished(config, "eppo", 0) and not is_finished(config, "eppo", 1)
    text = run_compare(tmp_path / "c.yaml", report_only=True).read_text()
    assert "Runs finished: 2 of 4 planned (2 methods x seeds [0, 1]): **PARTIAL**." in text
    assert "- `eppo/seed1`: ValueError: boom" in text
    assert "| start (shared) | - | 0.250 | 0.125 | 0.188 |" in text
    assert "| eppo | 1 | 0.500 (1 seed) | 0.250 (1 seed) | 0.375 (1 seed) |" in text


def test_the_report_reads_the_confirmations_exported_and_says_why_a_run_has_none(
    tmp_path: Path,
) -> None:
    """Seed 0 of both trained elsewhere (exported), only eppo's confirmed; grpo_tan seed 1
    trained here, not confirmed yet; eppo seed 1 still training."""
    path = write_config(
        tmp_path / "c.yaml",
        results_dir=str(tmp_path / "results"),
        headline=["grpo_tan", "eppo"],
        confirm_split="test",
    )
    config = load_compare_config(path)
    for method in ("grpo_tan", "eppo"):
        write_run(config.exported_slot(method, 0))
    write_episodes(
        confirmed_dir(config, "eppo", 0),
        {"os": [[True], [False]], "db": [[False], [False]]},
        stage="base",
        split="test",
    )
    here = write_run(config.run_slot("grpo_tan", 1))
    (here / FINISHED).write_text(json.dumps({"run_dir": str(here), "seconds": 1.0}))
    confirmation = collect_confirmations(config)
    assert confirmation is not None and confirmation.split == "test"
    assert [r.seed for r in confirmation.results["eppo"]] == [0]
    assert confirmation.results["eppo"][0].success == {"os": 0.5, "db": 0.0, "mean_success": 0.25}
    assert confirmation.results["grpo_tan"] == []
    assert confirmation.missing == {
        "grpo_tan": {
            0: "trained on another machine, whose checkpoints did not travel with the exported "
            "files: nothing is left to evaluate",
            1: "trained here, not confirmed yet",
        },
        "eppo": {1: "not finished yet"},
    }
    text = run_compare(path, report_only=True).read_text()
    assert "## Confirmation on the test split" in text
    assert "| eppo (EPPO) | 0 | 0.500 | 0.000 | 0.250 | 0.375 |" in text
    assert collect_confirmations(load_compare_config(write_config(tmp_path / "d.yaml"))) is None


def test_the_lock_refuses_a_second_live_comparison_and_is_released(tmp_path: Path) -> None:
    (tmp_path / "compare.lock").write_text(str(os.getppid()))
    with (
        pytest.raises(RuntimeError, match=r"another comparison \(pid \d+\) is writing"),
        _lock(tmp_path),
    ):
        pass
    (tmp_path / "compare.lock").write_text("999999999")  # a dead holder's stale lock
    with _lock(tmp_path):
        assert (tmp_path / "compare.lock").read_text() == str(os.getpid())
    assert not (tmp_path / "compare.lock").exists()
