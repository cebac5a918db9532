"""The memoized engine: same transcripts as the stock engine, sys.argv kept, memory bounded."""

from __future__ import annotations

import json
import multiprocessing
import random
import subprocess
import sys
from typing import Any

import pytest

from agentgym_eppo.environments.alfworld.engine import (
    ALFWorldEngine,
    EngineCaches,
    shared_caches,
)
from agentgym_eppo.environments.alfworld.games import game_data
from agentgym_eppo.environments.alfworld.tasks import load_task_set

pytestmark = pytest.mark.alfworld


def _games(*task_types: str) -> list[Any]:
    """The first dev game of each of ``task_types``."""
    chosen: dict[str, Any] = {}
    for record in load_task_set(None, "dev"):
        chosen.setdefault(record.task_type, record)
    return [chosen[task_type] for task_type in task_types]


def _transcript(engine: ALFWorldEngine, record: Any, seed: int) -> str:
    """Two episodes: the walkthrough with inadmissible commands mixed in, then random ones."""
    rng = random.Random(seed)
    engine.load(game_data(record.row))
    lines: list[Any] = []
    episodes = [
        ["dance on the table", *record.row["walkthrough"][:-1], "", record.row["walkthrough"][-1]],
        [],
    ]
    for plan in episodes:
        state = engine.reset()
        lines.append([state.feedback, state.admissible_commands, state.won])
        for command in plan or [None] * 4:
            command = command if command is not None else rng.choice(state.admissible_commands)
            state = engine.step(command)
            facts = sorted(str(fact) for fact in state.facts)
            lines.append([command, state.feedback, state.admissible_commands, state.won, facts])
    return json.dumps(lines)


def test_memoized_transcripts_equal_the_stock_engine_byte_for_byte() -> None:
    fast, stock = ALFWorldEngine(), ALFWorldEngine(memoize=False)
    games = _games(
        "pick_heat_then_place_in_recep", "pick_two_obj_and_place", "look_at_obj_in_light"
    )
    for seed, record in enumerate(games):
        fast_lines = _transcript(fast, record, seed)
        won = [line[3] for line in json.loads(fast_lines) if len(line) == 5]
        assert won.count(True) == 1, record.sample_id  # the walkthrough wins
        assert fast_lines == _transcript(stock, record, seed), record.sample_id
    assert fast.caches is not None and fast.caches.templates.hits > 0
    assert fast.caches.translations.hits > 0


def test_engine_restores_sys_argv_and_textworld_functions_after_each_call() -> None:
    import fast_downward
    import textworld.envs.pddl.textgen as textgen

    record = _games("pick_and_place_simple")[0]
    argv = list(sys.argv)
    stock = (fast_downward.pddl2sas, textgen._parse_and_convert, textgen.copy_context)
    for memoize in (True, False):
        ALFWorldEngine(memoize=memoize).play(game_data(record.row), ["look"])
        assert sys.argv == argv
        assert (fast_downward.pddl2sas, textgen._parse_and_convert, textgen.copy_context) == stock


def test_caches_hold_at_most_max_games() -> None:
    caches = EngineCaches(max_games=1)
    engine = ALFWorldEngine(caches=caches)
    for record in _games("pick_and_place_simple", "pick_two_obj_and_place"):
        engine.play(game_data(record.row), ["look"])
    assert (len(caches.translations), len(caches.logics)) == (2, 1)
    assert caches.translations.misses == 2
    with pytest.raises(ValueError, match="max_games must be at least 1"):
        EngineCaches(max_games=0)


def test_shared_caches_are_one_per_size_and_private_ones_stay_private() -> None:
    assert shared_caches(3) is shared_caches(3)
    assert shared_caches(3) is not shared_caches(4)
    assert shared_caches(3) is not shared_caches(3, replanning=True)
    assert shared_caches(3, replanning=True).replanning
    assert ALFWorldEngine().caches is not ALFWorldEngine().caches
    with pytest.raises(ValueError, match="max_games must be at least 1"):
        shared_caches(0)


def _play_in_forked_child(record: Any, connection: Any) -> None:
    caches = shared_caches(6)
    misses = caches.translations.misses
    transcript = _transcript(ALFWorldEngine(caches=caches), record, seed=4)
    caches.clear()
    connection.send((transcript, caches.translations.misses - misses))


def test_a_forked_child_inherits_a_valid_copy_of_the_shared_caches() -> None:
    """A worker forked after the parent played a game replays it from the inherited
    caches (no new translation), identically; what it does to its copy stays its own."""
    (record,) = _games("pick_clean_then_place_in_recep")
    caches = shared_caches(6)
    caches.clear()
    expected = _transcript(ALFWorldEngine(caches=caches), record, seed=4)
    entries = len(caches.translations)
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_play_in_forked_child, args=(record, sender))
    child.start()
    try:
        transcript, translated = receiver.recv()
    finally:
        child.join(timeout=120)
    assert child.exitcode == 0
    assert (transcript, translated) == (expected, 0)
    assert len(caches.translations) == entries > 0  # the child's clear() did not reach here


def test_step_before_load_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="no game loaded"):
        ALFWorldEngine().step("look")


def test_importing_the_env_without_alfworld_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['alfworld'] = None\n"
        "try:\n"
        "    import agentgym_eppo.environments.alfworld.env\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "pip install agentgym-eppo[alfworld]" in result.stdout


def test_closed_engine_refuses_calls_and_closes_once() -> None:
    engine = ALFWorldEngine()
    engine.close()
    engine.close()
    with pytest.raises(RuntimeError, match="engine is closed"):
        engine.reset()


def test_a_closed_engines_library_copy_is_reused_and_plays_identically() -> None:
    (record,) = _games("pick_and_place_simple")
    first = ALFWorldEngine()
    expected = _transcript(first, record, seed=3)
    library = first._pddl.downward_lib
    first.close()
    second = ALFWorldEngine()
    try:
        assert second._pddl.downward_lib is library
        assert _transcript(second, record, seed=3) == expected
    finally:
        second.close()
