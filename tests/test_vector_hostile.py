"""No step can stall a MultiTaskVectorEnv, and a killed run's temp folders
do not pile up.

A step past ``step_timeout`` ends its slot as ``task_error`` with its worker replaced;
the other slots go on. The slow step is the test task's own ``wait`` tool, a real
sleep in a real worker process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support.vector_test_envs import GUESS, say

from agentgym_eppo.vector import MultiTaskVectorEnv
from agentgym_eppo.vector.workers.leftovers import ROOT_PREFIX, remove_stale_roots


def wait(seconds: float) -> dict[str, object]:
    return {"name": "wait", "arguments": {"seconds": str(seconds)}}


@pytest.mark.parametrize("collect", ["step_some", "collect_steps"])
def test_a_step_past_the_deadline_ends_its_slot_as_task_error_and_the_others_go_on(
    collect: str,
) -> None:
    venv = MultiTaskVectorEnv({GUESS: 2}, backend="subprocess", step_timeout=3.0)
    try:
        venv.reset()
        stuck_pid = venv.pool.pids()[0]
        if collect == "step_some":
            stuck, other = venv.step_some([0, 1], [wait(600), say("nope")])
        else:
            venv.submit_steps([0, 1], [wait(600), say("nope")])
            outcomes: dict[int, object] = {}
            while len(outcomes) < 2:
                for outcome in venv.collect_steps(timeout=None):
                    outcomes[outcome.index] = outcome
            stuck, other = outcomes[0], outcomes[1]  # type: ignore[assignment]
        assert stuck.info["status"] == "task_error"  # type: ignore[attr-defined]
        assert stuck.info["worker_restarted"] is True  # type: ignore[attr-defined]
        assert "step_timeout of 3 s" in stuck.info["error"]  # type: ignore[attr-defined]
        assert stuck.terminated  # type: ignore[attr-defined]
        assert other.info["status"] == "running"  # type: ignore[attr-defined]
        assert venv.pool.pids()[0] != stuck_pid  # replaced
        # Both slots play on: the replaced worker's slot after a reset.
        right = venv.call_some([1], "expert_action")
        assert venv.step_some([1], right)[0].info["status"] == "completed"
        venv.reset_some([0])
        right = venv.call_some([0], "expert_action")
        assert venv.step_some([0], right)[0].info["status"] == "completed"
    finally:
        venv.close()


def test_a_step_within_the_deadline_is_untouched() -> None:
    venv = MultiTaskVectorEnv({GUESS: 1}, backend="subprocess", step_timeout=30.0)
    try:
        venv.reset()
        pid = venv.pool.pids()[0]
        outcome = venv.step_some([0], [wait(0.2)])[0]
        assert (outcome.observation, outcome.info["status"]) == ("waited", "running")
        assert venv.pool.pids() == [pid]
    finally:
        venv.close()


def test_step_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="step_timeout must be positive"):
        MultiTaskVectorEnv({GUESS: 1}, backend="serial", step_timeout=0)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_start_up_removes_the_temp_folders_of_runs_that_were_killed(tmp_path: Path) -> None:
    dead = tmp_path / f"{ROOT_PREFIX}{_dead_pid()}-abc"
    (dead / "worker-0").mkdir(parents=True)
    (dead / "worker-0" / "episode.db").write_text("left by a SIGKILLed run")
    live = tmp_path / f"{ROOT_PREFIX}{os.getpid()}-def"
    live.mkdir()
    unrelated = tmp_path / "agentgym-vector-notapid"
    unrelated.mkdir()
    removed = remove_stale_roots(str(tmp_path))
    assert removed == [str(dead)]
    assert not dead.exists() and live.exists() and unrelated.exists()


def test_a_pid_reused_by_a_newer_process_does_not_keep_a_folder(tmp_path: Path) -> None:
    root = tmp_path / f"{ROOT_PREFIX}{os.getpid()}-old"
    root.mkdir()
    os.utime(root, (1_000_000_000, 1_000_000_000))  # changed in 2001, before this process began
    assert remove_stale_roots(str(tmp_path)) == [str(root)]


def test_a_killed_runs_folder_is_gone_after_the_next_run_starts() -> None:
    """End to end: a process SIGKILLed with a live pool leaves its root; a new process
    making a pool removes it."""
    script = (
        "import os, signal, sys; sys.path.insert(0, 'tests')\n"
        "from support.vector_test_envs import GUESS\n"
        "from agentgym_eppo.vector import MultiTaskVectorEnv\n"
        "venv = MultiTaskVectorEnv({GUESS: 1}, backend='subprocess')\n"
        "print(venv.pool.temp_root, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    root = Path(killed.stdout.strip())
    assert root.name.startswith(ROOT_PREFIX) and root.parent == Path(tempfile.gettempdir())
    assert root.exists()
    restart = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from support.vector_test_envs import GUESS\n"
        "from agentgym_eppo.vector import MultiTaskVectorEnv\n"
        "MultiTaskVectorEnv({GUESS: 1}, backend='subprocess').close()\n"
    )
    subprocess.run([sys.executable, "-c", restart], timeout=120, check=True)
    assert not root.exists()
