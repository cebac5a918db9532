"""The shipped OS task set: sizes, determinism, and every task solvable by its example
while the empty answer fails (the sweep that ``test_os_expected_answer.py`` shares,
``os_sweeps``)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from support.os_backends import skip_unless
from support.os_sweeps import sweep

from agentgym_eppo.core import asset_path, write_jsonl_gz
from agentgym_eppo.environments.os import generator
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


def solve_every_task(split: str, warmup: int = 0) -> None:
    """The shared sweep of ``split`` (``os_sweeps``): no task failed twice, and few once."""
    skip_unless("bwrap")
    played = sweep(split, warmup)
    size = len(load_tasks(None, split))
    assert [task.index for task in played.played] == list(range(size))
    assert played.failures == []
    assert len(played.retried) <= max(1, size // 100), played.retried


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
