"""The shipped OS task set: sizes, determinism, and every task solvable by its example
while the empty answer fails."""

from __future__ import annotations

import gzip
import io
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from os_backends import skip_unless

from agentgym_eppo.core import asset_path, write_jsonl_gz
from agentgym_eppo.environments.os import generator
from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.environments.os.evaluation import judge
from agentgym_eppo.environments.os.sandbox import SandboxError
from agentgym_eppo.environments.os.tasks import load_tasks


@pytest.mark.parametrize(("split", "size"), [("train", 600), ("dev", 100), ("test", 100)])
def test_shipped_splits_load_with_their_sizes(split: str, size: int) -> None:
    tasks = load_tasks(None, split)
    assert len(tasks) == size
    assert tasks[0].sample_id == f"os-{split}-0000"
    assert all(task.init and (task.check or task.match) and task.example for task in tasks)
    assert not any(task.missing for task in tasks)


def test_generator_reproduces_the_shipped_bytes(tmp_path: Path) -> None:
    for split, tasks in generator.generate_all().items():
        path = tmp_path / f"{split}.jsonl.gz"
        write_jsonl_gz(path, tasks)
        assert path.read_bytes() == asset_path("os", f"{split}.jsonl.gz").read_bytes()


def test_splits_share_no_task() -> None:
    texts = {
        split: {t.description + repr(t.init) for t in load_tasks(None, split)}
        for split in generator.SPLIT_SIZES
    }
    assert (
        not texts["train"] & texts["dev"]
        and not texts["train"] & texts["test"]
        and not texts["dev"] & texts["test"]
    )


def test_every_family_of_the_generator_is_shipped() -> None:
    labels = {label for task in load_tasks(None, "dev") for label in task.labels}
    assert {
        "file",
        "text",
        "permission",
        "user",
        "process",
        "background",
        "archive",
        "disk",
        "scripting",
    } <= labels
    assert (
        len(io.BytesIO(gzip.decompress(asset_path("os", "train.jsonl.gz").read_bytes())).getvalue())
        < 2_000_000
    )


RANDOM_COMMANDS = (
    "ls -la",
    "pwd",
    "cd /tmp",
    "cd /var/log",
    "cd ..",
    "echo hello",
    "cat /etc/hostname",
    "whoami",
    "ls /root | head -3",
    "x=3; echo $x",
    "true",
    "false",
    "wc -l /etc/passwd",
    "mkdir -p /tmp/scratch && cd /tmp/scratch",
)
"""Valid commands an agent may run before handing over to the expert (no changes to the
task's own files)."""


RETRIED: list[tuple[int, object]] = []  # tasks that failed once in the current sweep


def _attempt(env: OSEnv, index: int, warmup: int) -> tuple[str, bool, str] | None:
    """None if the expert solves instance ``index`` (and the empty answer fails), else why not."""
    try:
        env.reset(options={"index": index})
    except SandboxError as error:
        return (str(index), False, f"sandbox did not start: {error}")
    assert env.sandbox is not None
    empty_passes = (
        judge(
            env.record,
            "",
            env.sandbox,
            expected=env._expected,  # the expected answer the episode's start took
            time_limit=env.script_timeout,
        )
        if not warmup
        else False
    )
    if not warmup:
        # A check stops the agent's processes while it runs, and the shell then reports
        # its background jobs as "Stopped" before its next prompt: the expert's
        # `pgrep -xc` answer read "[1] Stopped ...\n3" about one time in 30. An episode
        # is judged after its last turn, so only this early judge exposes the notices;
        # a no-op command takes them.
        env.sandbox.run_command("true", env.command_timeout)
    rng = random.Random(index)
    for script in rng.choices(RANDOM_COMMANDS, k=warmup):
        env.step({"name": "bash_action", "arguments": {"script": script}})
    while True:
        obs, reward, terminated, truncated, _ = env.step(env.expert_action())
        if terminated or truncated:
            break
    if empty_passes or reward != 1.0:
        return (env.record.sample_id, empty_passes, obs)
    return None


def solve(split: str, indices: range, warmup: int = 0) -> list[tuple[str, bool, str]]:
    """Solve the tasks at ``indices`` (after ``warmup`` random commands); return the
    failures (sample id, empty passed, obs).

    Each worker thread makes and closes its own environment: a bubblewrap sandbox must
    not outlive the thread that started it.
    """
    env = OSEnv(split=split, command_timeout=10.0)
    failures = []
    try:
        for index in indices:
            first = _attempt(env, index, warmup)
            if first is None:
                continue
            # A task that fails once and then passes is a race, not an unsolvable task:
            # since the sandbox's rework for hostile inputs about one episode in several hundred failed
            # so (a sandbox that fails to start is now set up again by OSEnv itself; a
            # failure after the start is not). Counted, bounded, retried once.
            RETRIED.append((index, first))
            again = _attempt(env, index, warmup)
            if again is not None:
                failures.append(again)
    finally:
        env.close()
    return failures


def solve_every_task(split: str, workers: int = 2, warmup: int = 0) -> None:
    skip_unless("bwrap")
    RETRIED.clear()
    size = len(load_tasks(None, split))
    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(
            lambda start: solve(split, range(start, size, workers), warmup), range(workers)
        )
        failures = [failure for part in parts for failure in part]
    assert failures == []
    assert len(RETRIED) <= max(1, size // 100), RETRIED


@pytest.mark.parametrize("split", ["dev", "test"])
def test_every_shipped_task_is_solvable_and_the_empty_answer_fails(split: str) -> None:
    solve_every_task(split)


def test_the_expert_solves_every_dev_task_after_random_commands() -> None:
    """The expert takes over from whatever state valid commands left (it used
    to answer with the output of any earlier command)."""
    solve_every_task("dev", warmup=3)


@pytest.mark.slow
def test_every_shipped_train_task_is_solvable_and_the_empty_answer_fails() -> None:
    solve_every_task("train")
