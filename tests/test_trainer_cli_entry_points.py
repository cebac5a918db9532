"""The ``agentgym-eppo`` console script's ``diagnose``, ``compare`` and ``eval --endpoint``,
each run as a user runs it: the installed script in a subprocess, a YAML config in a
temporary folder, the two small test tasks of ``tests/support/trainer_test_envs.py`` (found
through ``PYTHONPATH``), and for ``eval --endpoint`` a scripted OpenAI-compatible chat
server on loopback. The functions under these commands have their own tests; these
check the wiring: arguments, exit codes, what is printed and what is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support.chat_servers import ChatServer, Reply, echo_but_tiger

pytestmark = pytest.mark.train

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
SCRIPT = Path(sys.executable).with_name("agentgym-eppo")
ECHO, LOOKUP = "support.trainer_test_envs:Echo-v0", "support.trainer_test_envs:Lookup-v0"
TINY_RUN = {
    "tasks": {ECHO: 2, LOOKUP: 2},
    "seed": 0,
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
        "max_position_embeddings": 512,
    },
    "sft": {"episodes_per_task": 4, "epochs": 2, "batch_episodes": 4, "lr": 0.003},
    "rollout": {
        "group_size": 2,
        "max_tokens_per_turn": 16,
        "max_context": 384,
        "backend": "serial",
        "generation_batch": 8,
    },
    "rl": {"steps": 2, "lr": 1e-4, "save_every": 1, "keep_checkpoints": 1},
    "eval": {"max_instances_per_task": 1},
}


def agentgym_eppo(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the console script as a user would; the test tasks come from ``PYTHONPATH``."""
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: pip install -e '.[all]' installs it"
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), str(REPO_ROOT)]),
        "OMP_NUM_THREADS": "1",
        **env,
    }
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# ---------------------------------------------------------------------- diagnose


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-step run of ``agentgym-eppo train`` (SFT, RL, evals)."""
    root = tmp_path_factory.mktemp("run")
    config = root / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_RUN))
    _ok(agentgym_eppo("train", "--config", str(config), f"output_dir={root / 'out'}", cwd=root))
    return root / "out"


@pytest.mark.slow
def test_diagnose_writes_the_report_of_a_run_and_prints_its_path(trained_run: Path) -> None:
    stdout = _ok(agentgym_eppo("diagnose", str(trained_run), cwd=trained_run.parent))
    report = Path(stdout.strip().splitlines()[-1])
    assert report.parent == trained_run and report.is_file()
    text = report.read_text()
    assert "echo" in text and "lookup" in text
    summary = json.loads((trained_run / "diagnostics.json").read_text())
    assert (summary["run_dir"], summary["steps"]) == (str(trained_run), 2)
    assert sorted(summary["tasks"]) == ["echo", "lookup"]
    assert summary["diagnostics"] is not None  # computed from the two RL steps


def test_diagnose_of_a_missing_folder_fails_saying_what_to_pass(tmp_path: Path) -> None:
    result = agentgym_eppo("diagnose", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert result.returncode != 0
    assert f"{tmp_path / 'nowhere'} is not a directory; pass a run directory" in result.stderr


def test_a_command_missing_its_argument_is_a_usage_error(tmp_path: Path) -> None:
    result = agentgym_eppo("diagnose", cwd=tmp_path)
    assert result.returncode == 2
    assert "the following arguments are required: run_dir" in result.stderr


# ---------------------------------------------------------------------- compare


@pytest.mark.slow
def test_compare_trains_every_method_and_prints_the_report_path(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        yaml.safe_dump({**TINY_RUN, "rl": {**TINY_RUN["rl"], "steps": 1}})
    )
    config = {
        "output_dir": str(tmp_path / "out"),
        "base_config": str(tmp_path / "base.yaml"),
        "seeds": [0],
        "methods": {
            "grpo": {"clip.policy": "fixed"},
            "eppo": {"clip.policy": "eppo"},
        },
        "parallel_runs": 1,
    }
    (tmp_path / "compare.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    stdout = _ok(agentgym_eppo("compare", str(tmp_path / "compare.yaml"), cwd=tmp_path))
    assert "[compare] 2 of 2 runs to go" in stdout
    report = Path(stdout.strip().splitlines()[-1])
    assert report == tmp_path / "out" / "report.md" and report.is_file()
    text = report.read_text()
    assert "grpo" in text and "eppo" in text
    again = _ok(agentgym_eppo("compare", str(tmp_path / "compare.yaml"), cwd=tmp_path))
    assert "[compare] 0 of 2 runs to go" in again  # finished runs are not trained again


def test_compare_of_a_missing_config_fails_naming_it(tmp_path: Path) -> None:
    result = agentgym_eppo("compare", str(tmp_path / "absent.yaml"), cwd=tmp_path)
    assert result.returncode != 0
    assert "absent.yaml" in result.stderr


# ---------------------------------------------------------------------- eval --endpoint


def test_eval_endpoint_prints_and_writes_per_task_success(
    serve_chat: Callable[[Reply], ChatServer], tmp_path: Path
) -> None:
    chat_server = serve_chat(echo_but_tiger)  # a model that says the word, except "tiger"
    output = tmp_path / "eval.json"
    stdout = _ok(
        agentgym_eppo(
            "eval",
            "--endpoint",
            chat_server.url,
            "--model",
            "tiny",
            "--tasks",
            ECHO,
            "--api-key-env",
            "TINY_KEY",
            "--output",
            str(output),
            cwd=tmp_path,
            TINY_KEY="secret-k",
        )
    )
    printed = json.loads(stdout)
    assert json.loads(output.read_text()) == printed
    echo = printed["tasks"]["echo"]  # dev words: apple, ocean, tiger
    assert echo["n"] == 3
    assert echo["success"] == pytest.approx(2 / 3)
    assert echo["statuses"] == {"completed": 2, "agent_invalid_action": 1}
    assert printed["mean_success"] == pytest.approx(2 / 3)
    assert len(chat_server.requests) == 3
    assert {r["auth"] for r in chat_server.requests} == {"Bearer secret-k"}
    assert {r["model"] for r in chat_server.requests} == {"tiny"}


def test_eval_endpoint_without_a_model_name_says_so(tmp_path: Path) -> None:
    result = agentgym_eppo(
        "eval", "--endpoint", "http://127.0.0.1:9/v1", "--tasks", ECHO, cwd=tmp_path
    )
    assert result.returncode == 1
    assert "eval --endpoint needs --model (the served model's name)" in result.stderr
