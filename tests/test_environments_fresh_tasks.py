"""Fresh task instances for pretraining: new, deterministic, and never a dev or test one."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_eppo  # noqa: F401  (registers the environments)
from agentgym_eppo.core import asset_path, read_json_or_jsonl
from agentgym_eppo.environments import fresh
from agentgym_eppo.registration import ENVIRONMENTS, env_id_for

CHEAP = {"os": 40, "db": 40, "kg": 40, "webshop": 40}


@pytest.mark.parametrize("task_id", sorted(CHEAP))
def test_fresh_instances_are_new_distinct_and_deterministic(task_id: str) -> None:
    rows = fresh.fresh_tasks(task_id, CHEAP[task_id], seed=11)
    hashes = [fresh.content_hash(task_id, row) for row in rows]
    assert len(rows) == CHEAP[task_id]
    assert len(set(hashes)) == len(hashes)
    assert not set(hashes) & fresh.heldout_hashes(task_id)
    id_field = getattr(fresh._source(task_id), "ID_FIELD", "sample_id")
    assert [row[id_field] for row in rows[:2]] == [f"{task_id}-fresh11-0", f"{task_id}-fresh11-1"]
    assert fresh.fresh_tasks(task_id, CHEAP[task_id], seed=11) == rows
    other = {fresh.content_hash(task_id, row) for row in fresh.fresh_tasks(task_id, 40, seed=12)}
    assert other != set(hashes)


@pytest.mark.parametrize("task_id", ["os", "db", "kg", "alfworld", "webshop"])
def test_heldout_hashes_cover_every_dev_and_test_instance(task_id: str) -> None:
    rows = [
        row
        for split in ("dev", "test")
        for row in read_json_or_jsonl(ENVIRONMENTS[task_id].task_file(split))
    ]
    heldout = fresh.heldout_hashes(task_id)
    assert {fresh.content_hash(task_id, row) for row in rows} == heldout
    assert len(heldout) == len(rows)  # no two held-out instances share a key


def test_a_generated_dev_instance_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    # The generators draw from spaces too large to hit a dev question by chance in a
    # test, so the draw is made to return two dev questions among new ones.
    source = fresh._source("kg")
    dev = read_json_or_jsonl(asset_path("kg", "dev.jsonl.gz"))[:2]
    real = source.fresh_tasks
    monkeypatch.setattr(source, "fresh_tasks", lambda count, seed: dev + real(count, seed))
    rows = fresh.fresh_tasks("kg", 10, seed=3)
    assert len(rows) == 10
    assert {row["question"] for row in rows}.isdisjoint(row["question"] for row in dev)


def test_webshop_fresh_goals_never_target_a_dev_or_test_product() -> None:
    from agentgym_eppo.environments.webshop.fresh import excluded_targets

    rows = fresh.fresh_tasks("webshop", 300, seed=5)
    assert not {row["asin"] for row in rows} & excluded_targets()


def test_unknown_task_names_the_known_ones() -> None:
    with pytest.raises(
        KeyError, match=r"did you mean 'kg'\?.*known: os, db, kg, alfworld, webshop"
    ):
        fresh.fresh_tasks("kgg", 1, seed=0)


@pytest.mark.parametrize(
    ("task_id", "count", "kwargs"),
    [
        ("os", 3, {"command_timeout": 5}),
        ("db", 5, {}),
        ("kg", 5, {}),
        ("webshop", 5, {}),
        ("alfworld", 1, {"max_turns": 30}),
    ],
)
def test_the_expert_solves_fresh_instances(task_id: str, count: int, kwargs: dict) -> None:
    rows = fresh.fresh_tasks(task_id, count, seed=21)
    env = gym.make(env_id_for(task_id), tasks=rows, **kwargs)
    try:
        for index in range(count):
            _, info = env.reset(options={"index": index})
            assert info["sample_id"] == f"{task_id}-fresh21-{index}"
            terminated = truncated = False
            while not (terminated or truncated):
                _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            assert info["success"] is True and reward == 1.0
    finally:
        env.close()
