"""The CLI as a user meets it: one-line errors with a non-zero exit, --debug for the
traceback, `train` that needs a config, help that shows defaults, and `eval` that uses
the prompt style the checkpoint records."""

from __future__ import annotations

import argparse
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support import trainer_test_envs  # noqa: E402, F401  (registers the test tasks)

from agentgym_eppo.trainer.cli import build_parser, main  # noqa: E402
from agentgym_eppo.trainer.rollout.openai_endpoint import EndpointError  # noqa: E402
from agentgym_eppo.trainer.training.checkpoint import policy_card, save_checkpoint  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402

pytestmark = pytest.mark.train
UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
TOKENIZER = ["--tokenizer", "agentgym-tiny"]  # the served model's (else a warning line)


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_an_unreachable_endpoint_is_one_line_and_a_non_zero_exit(capsys):
    code = main(["eval", "--endpoint", UNREACHABLE, "--model", "m", *TOKENIZER, "--tasks", "kg"])
    assert code == 1
    line = _error_line(capsys)
    assert line.startswith("agentgym-eppo eval: error: cannot reach ")
    assert f"{UNREACHABLE}/chat/completions" in line


def test_debug_shows_the_traceback_instead(capsys):
    with pytest.raises(EndpointError, match="cannot reach"):
        main(["--debug", "eval", "--endpoint", UNREACHABLE, "--model", "m", "--tasks", "kg"])
    with pytest.raises(EndpointError, match="cannot reach"):
        main(["eval", "--debug", "--endpoint", UNREACHABLE, "--model", "m", "--tasks", "kg"])


def test_a_missing_checkpoint_folder_is_one_line_naming_it(tmp_path, capsys):
    missing = tmp_path / "no-such-run" / "checkpoints" / "sft"
    assert main(["eval", "--checkpoint", str(missing), "--tasks", "kg"]) == 1
    line = _error_line(capsys)
    assert line.startswith("agentgym-eppo eval: error: ") and str(missing) in line


def test_an_unknown_task_lists_the_known_ones(capsys):
    code = main(["eval", "--endpoint", UNREACHABLE, "--model", "m", *TOKENIZER, "--tasks", "dbb"])
    assert code == 1
    assert _error_line(capsys) == (
        "agentgym-eppo eval: error: unknown task 'dbb' (did you mean 'db'?); "
        "known: alfworld, db, kg, os, webshop"
    )


def test_train_without_a_config_does_not_start_a_default_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "rl.steps=1"])
    assert exit_info.value.code == 2
    assert "one of the arguments --config --defaults is required" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was written


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


@pytest.mark.parametrize(
    "name", ["train", "pretrain", "eval", "fetch-model", "diagnose", "paired", "compare"]
)
def test_every_subcommand_help_describes_each_argument_and_shows_defaults(name):
    sub = _subcommands(build_parser())[name]
    text = sub.format_help()
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{name}: {action.dest} has no help"
        shown = action.default not in (None, argparse.SUPPRESS, False, True)
        if shown and not action.required and action.nargs not in ("*", "+"):
            assert f"(default: {action.default})" in text, f"{name}: {action.dest}"


def _checkpoint(path, prompt_style):
    tokenizer = build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=400)
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1)
    save_checkpoint(path, model, tokenizer, card=policy_card(prompt_style))
    return path


def _eval(checkpoint, *extra):
    args = ["eval", "--checkpoint", str(checkpoint), "--tasks", "support.trainer_test_envs:Echo-v0"]
    return main([*args, "--max-tokens", "8", "--max-instances", "1", *extra])


def test_eval_uses_the_prompt_the_checkpoint_records_and_warns_when_told_otherwise(
    tmp_path, capsys
):
    checkpoint = _checkpoint(tmp_path / "ckpt", "compact")
    assert _eval(checkpoint) == 0
    assert "warning" not in capsys.readouterr().err
    assert _eval(checkpoint, "--prompt", "full") == 0
    err = capsys.readouterr().err
    assert (
        "warning: the checkpoint was trained with prompt style compact; evaluating with full" in err
    )
    assert _eval(checkpoint, "--prompt", "compact", "--output", str(tmp_path / "e.json")) == 0
    assert "warning" not in capsys.readouterr().err
    assert json.loads((tmp_path / "e.json").read_text())["tasks"]["echo"]["n"] == 1


def test_a_checkpoint_without_a_card_takes_the_prompt_of_its_runs_config(tmp_path):
    from agentgym_eppo.trainer.training.checkpoint import read_policy_card

    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "sft"
    checkpoint.mkdir(parents=True)
    assert read_policy_card(checkpoint) is None
    (run / "config.yaml").write_text("rollout:\n  prompt: compact\n")
    assert read_policy_card(checkpoint) == {"prompt_style": "compact", "call_format": "hermes"}


def _evaluation(path, successes):
    episodes = [
        {"task_id": task, "sample_id": f"{task}-{i}", "success": bool(s), "reward": float(s)}
        for task, values in successes.items()
        for i, s in enumerate(values)
    ]
    tasks = {task: {"success": sum(values) / len(values)} for task, values in successes.items()}
    path.write_text(json.dumps({"tasks": tasks, "episodes": episodes}))
    return str(path)


def test_paired_compares_two_evaluations_instance_by_instance(tmp_path, capsys):
    before = _evaluation(tmp_path / "a.json", {"os": [0, 0, 1, 0], "db": [1, 1]})
    after = _evaluation(tmp_path / "b.json", {"os": [1, 1, 1, 0], "db": [0, 1]})
    assert main(["paired", before, after, "--before-name", "sft", "--after-name", "rl"]) == 0
    table = capsys.readouterr().out
    assert "| task | instances | success sft | success rl |" in table
    assert "| os | 4 | 0.250 | 0.750 |" in table
    assert "| db | 2 | 1.000 | 0.500 |" in table
    assert main(["paired", before, after, "--tasks", "os"]) == 0
    only_os = capsys.readouterr().out
    assert "| os | 4 |" in only_os and "| db |" not in only_os


def test_paired_refuses_a_file_that_is_not_an_evaluation_in_one_line(tmp_path, capsys):
    before = _evaluation(tmp_path / "a.json", {"os": [0, 1]})
    (tmp_path / "config.json").write_text(json.dumps({"seed": 0}))
    assert main(["paired", before, str(tmp_path / "config.json")]) == 1
    error = capsys.readouterr().err.strip()
    assert "config.json: not an evaluation" in error and "\n" not in error
    other = _evaluation(tmp_path / "c.json", {"kg": [1]})
    assert main(["paired", before, other]) == 1
    assert "share no instance" in capsys.readouterr().err


@pytest.mark.parametrize(
    "episodes, says",
    [
        ({"os": 1}, "'episodes' must be a list"),
        (["os"], "episode 0 is not an object with a 'task_id' and a 'sample_id'"),
        ([{"task_id": "os", "success": True}], "episode 0 is not an object"),
        (None, "an evaluation without its episodes"),
    ],
)
def test_paired_refuses_malformed_episodes_in_one_line(tmp_path, capsys, episodes, says):
    before = _evaluation(tmp_path / "a.json", {"os": [0, 1]})
    broken = {"tasks": {"os": {"success": 0.5}}}
    if episodes is not None:
        broken["episodes"] = episodes
    (tmp_path / "b.json").write_text(json.dumps(broken))
    assert main(["paired", before, str(tmp_path / "b.json")]) == 1
    error = capsys.readouterr().err.strip()
    assert f"{tmp_path / 'b.json'}: " in error and says in error and "\n" not in error


def test_success_gives_each_task_an_interval_over_its_instances(tmp_path, capsys):
    # os: 4 instances played twice (1, 0.5, 0, 0); kg: 4 instances played once (0, 0, 0, 1)
    os_attempts = [(f"os-{i // 2}", s) for i, s in enumerate([1, 1, 1, 0, 0, 0, 0, 0])]
    kg_attempts = [(f"kg-{i}", s) for i, s in enumerate([0, 0, 0, 1])]
    episodes = [
        {"task_id": sample.split("-")[0], "sample_id": sample, "success": bool(s), "reward": s}
        for sample, s in os_attempts + kg_attempts
    ]
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"tasks": {"os": {}, "kg": {}}, "episodes": episodes}))
    assert main(["success", str(path)]) == 0
    table = capsys.readouterr().out
    assert "| os | 4 | 8 | 0.375 | [-0.387, 1.137] |" in table
    assert "| kg | 4 | 4 | 0.250 | [-0.546, 1.046] |" in table
    assert "| mean over tasks | | 12 | 0.312 |" in table
    assert main(["success", str(path), "--tasks", "kg"]) == 0
    assert "| os |" not in capsys.readouterr().out
    assert main(["success", str(path), "--tasks", "webshop"]) == 1
    assert "a.json: the evaluation has no episodes" in capsys.readouterr().err
