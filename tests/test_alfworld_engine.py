"""The memoized engine: same transcripts as the stock engine, sys.argv kept, memory bounded."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from typing import Any

import pytest

from agentgym_eppo.environments.alfworld.engine import ALFWorldEngine, EngineCaches
from agentgym_eppo.environments.alfworld.games import TASK_TYPES, game_data
from agentgym_eppo.environments.alfworld.tasks import load_task_set

pytestmark = pytest.mark.alfworld


def _one_game_per_type() -> list[Any]:
    """The first dev game of each of the six task types."""
    chosen: dict[str, Any] = {}
    for record in load_task_set(None, "dev"):
        chosen.setdefault(record.task_type, record)
    return [chosen[task_type] for task_type in TASK_TYPES]


def _transcript(engine: ALFWorldEngine, record: Any, seed: int) -> str:
    """Two episodes of the game: its walkthrough, then random and inadmissible commands."""
    rng = random.Random(seed)
    engine.load(game_data(record.row))
    lines: list[Any] = []
    for episode in range(2):
        state = engine.reset()
        lines.append([state.feedback, state.admissible_commands, state.won])
        plan = list(record.row["walkthrough"]) if episode == 0 else []
        for turn in range(12):
            if plan:
                command = plan.pop(0)
            elif turn % 4 == 3:
                command = "dance on the table"
            else:
                command = rng.choice(state.admissible_commands)
            state = engine.step(command)
            facts = sorted(str(fact) for fact in state.facts)
            lines.append([command, state.feedback, state.admissible_commands, state.won, facts])
    return json.dumps(lines)


def test_memoized_transcripts_equal_the_stock_engine_byte_for_byte() -> None:
    fast, stock = ALFWorldEngine(), ALFWorldEngine(memoize=False)
    for seed, record in enumerate(_one_game_per_type()):
        assert _transcript(fast, record, seed) == _transcript(stock, record, seed), record.sample_id
    assert fast.caches is not None and fast.caches.templates.hits > 0
    assert fast.caches.translations.hits > 0


def test_engine_gives_the_caller_its_sys_argv_back() -> None:
    record = _one_game_per_type()[0]
    before = list(sys.argv)
    for memoize in (True, False):
        engine = ALFWorldEngine(memoize=memoize)
        engine.play(game_data(record.row), ["look"])
        assert sys.argv == before


def test_engine_restores_textworld_functions_after_each_call() -> None:
    import fast_downward
    import textworld.envs.pddl.textgen as textgen

    stock = (fast_downward.pddl2sas, textgen._parse_and_convert, textgen.copy_context)
    ALFWorldEngine().play(game_data(_one_game_per_type()[1].row), ["look"])
    assert (fast_downward.pddl2sas, textgen._parse_and_convert, textgen.copy_context) == stock


def test_translation_and_logic_caches_hold_at_most_max_games() -> None:
    caches = EngineCaches(max_games=2)
    engine = ALFWorldEngine(caches=caches)
    for record in _one_game_per_type()[:4]:
        engine.play(game_data(record.row), ["look"])
    assert len(caches.translations) <= 4 and len(caches.logics) <= 2
    with pytest.raises(ValueError, match="max_games must be at least 1"):
        EngineCaches(max_games=0)


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
