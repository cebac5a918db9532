"""The shipped games: sizes, task types, realistic rooms, and every one won by the expert."""

from __future__ import annotations

import functools
import multiprocessing
import random
import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import pytest

from agentgym_eppo.environments.alfworld.engine import ALFWorldEngine
from agentgym_eppo.environments.alfworld.expert import solve
from agentgym_eppo.environments.alfworld.games import (
    DEFAULT_MAX_EXPERT_STEPS,
    SPLIT_SIZES,
    TASK_TYPES,
    build_room,
    draft_games,
    game_data,
)
from agentgym_eppo.environments.alfworld.rooms import MAX_RECEPTACLES, MIN_RECEPTACLES, ROOM_KINDS
from agentgym_eppo.environments.alfworld.tasks import ALFWorldRecord, load_task_set

pytestmark = pytest.mark.alfworld


@pytest.mark.parametrize("split", list(SPLIT_SIZES))
def test_shipped_split_has_its_size_and_all_six_task_types(split: str) -> None:
    records = list(load_task_set(None, split))
    assert len(records) == SPLIT_SIZES[split]
    counts = Counter(record.task_type for record in records)
    assert set(counts) == set(TASK_TYPES)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert all(record.row["solvable"] and record.row["walkthrough"] for record in records)


def test_splits_share_no_game() -> None:
    problems = {
        split: {re.sub(r"plan_\w+", "", r.row["pddl_problem"]) for r in load_task_set(None, split)}
        for split in SPLIT_SIZES
    }
    assert not problems["train"] & problems["dev"]
    assert not problems["train"] & problems["test"]
    assert not problems["dev"] & problems["test"]


def test_shipped_rooms_hold_twenty_to_forty_receptacles() -> None:
    for split in SPLIT_SIZES:
        for record in load_task_set(None, split):
            receptacles = record.row["pddl_problem"].count(" - receptacle\n")
            assert MIN_RECEPTACLES <= receptacles <= MAX_RECEPTACLES, record.sample_id


def test_rooms_and_drafts_are_deterministic_in_the_seed() -> None:
    for kind in ROOM_KINDS.values():
        first, second = build_room(random.Random(7), kind), build_room(random.Random(7), kind)
        assert first == second
    drafts = [draft_games("dev", 11) for _ in range(2)]
    assert [next(drafts[0]) for _ in range(4)] == [next(drafts[1]) for _ in range(4)]


def test_game_names_use_alfreds_mangled_ids_that_demangle_to_numbered_names() -> None:
    record = load_task_set(None, "dev")[0]
    assert re.search(
        r"\n[A-Z][A-Za-z]+_bar__(plus|minus)_\d\d_dot_\d\d_bar_", record.row["pddl_problem"]
    )
    state = ALFWorldEngine().play(game_data(record.row), [])[0]
    assert re.search(r"you see a [a-z]+ \d+, ", state.feedback)
    assert re.search(r"\ba [a-z]+ 1\b", state.feedback)


_EXPERT_SHARD = 60
"""Games per expert test: each shard stays well inside the suite's per-test timeout on a slow CPU."""
_TRAIN_STRIDE = 5
"""Train games checked: every fifth (60 of 300). Each game takes about a second on a slow
2-core CPU, and all 300 took four of the suite's minutes; the evaluated splits (dev, test)
stay checked in full. A train game is built by the same generator, and kept only when
the expert wins it, so the sample guards the engine and the expert as well."""


def _expert_shards() -> list[tuple[str, int, int]]:
    """(split, first index, stride) of each expert test: train sampled, dev and test whole."""
    return [("train", 0, _TRAIN_STRIDE)] + [
        (split, start, 1)
        for split, size in SPLIT_SIZES.items()
        if split != "train"
        for start in range(0, size, _EXPERT_SHARD)
    ]


EXPERT_WORKERS = 2
"""Processes that replay the expert: the games are independent and single-threaded, so
the CI's two cores each take half of a shard."""


@functools.cache
def _engine() -> ALFWorldEngine:
    return ALFWorldEngine()


@functools.cache
def _records(split: str) -> list[ALFWorldRecord]:
    return list(load_task_set(None, split))


def _replay_expert(split: str, index: int) -> tuple[str, list[str], list[str]]:
    """In a worker process: a shipped game's sample id, the expert's commands and the
    game's walkthrough."""
    record = _records(split)[index]
    commands = solve(
        _engine(), game_data(record.row), record.row, max_steps=DEFAULT_MAX_EXPERT_STEPS
    )
    return record.sample_id, commands, record.row["walkthrough"]


@pytest.fixture(scope="module")
def expert_pool() -> Iterator[ProcessPoolExecutor]:
    """Worker processes for the expert's replays, started once for every shard."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(EXPERT_WORKERS, mp_context=spawn) as pool:
        yield pool


@pytest.mark.slow
@pytest.mark.parametrize(("split", "start", "stride"), _expert_shards())
def test_the_shipped_games_are_won_by_the_handcoded_expert_within_the_turn_limit(
    expert_pool: ProcessPoolExecutor, split: str, start: int, stride: int
) -> None:
    indices = range(len(_records(split)))[start : start + _EXPERT_SHARD * stride : stride]
    replays = expert_pool.map(_replay_expert, [split] * len(indices), indices)
    for sample_id, commands, walkthrough in replays:
        assert commands == walkthrough, sample_id
