"""``AgentBench-ALFWorld-v0``: AgentBench's rules on the real engine, and bad input."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym_eppo  # noqa: F401 - registers the ids
from agentgym_eppo.core import ABORT_PENALTY
from agentgym_eppo.environments.alfworld.env import ALFWorldEnv

pytestmark = pytest.mark.alfworld


def act(action: str) -> dict[str, object]:
    return {"name": "take_action", "arguments": {"action": action}}


@pytest.fixture(scope="module")
def env() -> Iterator[ALFWorldEnv]:
    environment = ALFWorldEnv(split="dev")
    yield environment
    environment.close()


def test_reset_shows_room_task_and_available_actions(env: ALFWorldEnv) -> None:
    obs, info = env.reset(options={"index": 0})
    record = env.record
    assert record is not None and record.row is not None
    assert obs.startswith("You are in the middle of a room. Looking quickly around you, you see ")
    assert f"Your task is to: {record.row['task']}." in obs
    assert "Welcome to TextWorld" not in obs
    commands = env.admissible_commands
    assert obs.endswith(" AVAILABLE ACTIONS: " + "\n".join(commands) + "\n")
    assert (info["task_id"], info["sample_id"], info["max_turns"]) == ("alfworld", "dev-0000", 20)
    assert [tool["function"]["name"] for tool in info["tools"]] == ["take_action"]


def test_expert_wins_with_reward_one(env: ALFWorldEnv) -> None:
    env.reset(options={"index": 1})
    for _ in range(env.max_turns):
        obs, reward, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            break
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["status"] == "completed" and info["success"] is True and info["won"] is True
    assert "AVAILABLE ACTIONS" not in obs


def test_action_is_lower_cased_and_snapped_to_the_closest_command(env: ALFWorldEnv) -> None:
    env.reset(options={"index": 0})
    target = next(c for c in env.admissible_commands if c.startswith("go to "))
    receptacle = target.removeprefix("go to ").rsplit(" ", 1)[0]
    obs, reward, *_, info = env.step(act(f"Go to the {receptacle.upper()}"))
    assert info["command"].startswith(f"go to {receptacle} ")
    assert obs.startswith(f"You arrive at {info['command'].removeprefix('go to ')}.")
    assert reward == 0.0 and info["status"] == "running"


def test_inadmissible_empty_overlong_and_non_ascii_actions_change_nothing(env: ALFWorldEnv) -> None:
    env.reset(options={"index": 2})
    for action in ("dance", "", "x" * 100_000, "ouvrir le frigo ☃"):
        obs, reward, terminated, truncated, info = env.step(act(action))
        assert obs.startswith("Nothing happens. AVAILABLE ACTIONS: "), action[:20]
        assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, "running")


def test_third_identical_action_in_a_row_ends_as_invalid_action(env: ALFWorldEnv) -> None:
    env.reset(options={"index": 3})
    env.step(act("look"))
    env.step(act("LOOK "))
    obs, reward, terminated, truncated, info = env.step(act("look"))
    assert obs == "The same action 'look' was repeated 3 times in a row; the episode ends."
    assert (reward, terminated, truncated) == (ABORT_PENALTY, True, False)
    assert info["status"] == "agent_invalid_action"


def test_two_repeats_then_a_different_action_keep_going(env: ALFWorldEnv) -> None:
    env.reset(options={"index": 3})
    env.step(act("look"))
    env.step(act("look"))
    env.step(act("inventory"))
    *_, info = env.step(act("look"))
    assert info["status"] == "running"


def test_turn_limit_truncates_with_abort_penalty() -> None:
    env = ALFWorldEnv(split="dev", max_turns=2)
    env.reset(options={"index": 0})
    env.step(act("look"))
    _, reward, terminated, truncated, info = env.step(act("inventory"))
    assert (reward, terminated, truncated, info["status"]) == (
        ABORT_PENALTY,
        False,
        True,
        "task_limit_reached",
    )


def test_unparseable_call_aborts_as_invalid_action(env: ALFWorldEnv) -> None:
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step("I would like to look around")
    assert (reward, terminated, info["status"]) == (ABORT_PENALTY, True, "agent_invalid_action")


def test_same_seed_same_game_and_same_transcript() -> None:
    def play(seed: int) -> list[str]:
        env = ALFWorldEnv(split="dev")
        obs, _ = env.reset(seed=seed)
        seen = [obs]
        for _ in range(3):
            seen.append(env.step(env.expert_action())[0])
        return seen

    assert play(5) == play(5)


def test_envs_of_a_process_share_the_translation_and_play_the_stock_transcript(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second env resetting into a game the first one played translates nothing (the
    underlying ``pddl2sas`` is not called again) and plays it as the first did, which is
    also what the stock engine plays."""
    import fast_downward

    from agentgym_eppo.environments.alfworld import engine

    translated: list[str] = []
    stock_pddl2sas = engine._STOCK_PDDL2SAS

    def counting_pddl2sas(*args: Any, **kwargs: Any) -> Any:
        translated.append(args[1])
        return stock_pddl2sas(*args, **kwargs)

    monkeypatch.setattr(fast_downward, "pddl2sas", fast_downward.pddl2sas)  # put back after
    monkeypatch.setattr(engine, "_STOCK_PDDL2SAS", counting_pddl2sas)
    size = 5  # no other test uses this size, and the set starts empty
    engine.shared_caches(size).clear()

    def episode(env: ALFWorldEnv) -> list[str]:
        observation, _ = env.reset(seed=7, options={"index": 2})
        seen = [observation]
        for _ in range(4):
            observation, _, terminated, truncated, _ = env.step(env.expert_action())
            seen.append(observation)
            if terminated or truncated:
                break
        return seen

    first = ALFWorldEnv(split="dev", max_cached_games=size)
    second = ALFWorldEnv(split="dev", max_cached_games=size)
    stock = ALFWorldEnv(split="dev", memoize=False)
    try:
        transcript = episode(first)
        assert len(translated) == 1  # the plain translation; the optimised one is skipped
        assert episode(second) == transcript
        assert len(translated) == 1
        assert second._engine.caches is first._engine.caches
        assert episode(stock) == transcript
        assert len(translated) == 1 + 4  # stock: plain and optimised, on load and on reset
    finally:
        for env in (first, second, stock):
            env.close()


def test_gym_make_and_check_env_pass() -> None:
    env = gym.make("AgentBench-ALFWorld-v0", split="dev")
    assert isinstance(env.unwrapped, ALFWorldEnv) and env.unwrapped.num_tasks == 60
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.slow
def test_games_evicted_from_the_cache_reload_and_play_the_same() -> None:
    """3 games through a 2-game cache: every reset reloads an evicted game, which must
    play exactly as it did the first time. What the bounded cache does to memory (RSS
    over 500 episodes) is measured in ``benchmarks/bench_alfworld.py``, not asserted."""
    env = ALFWorldEnv(split="dev", max_cached_games=2)
    transcripts: dict[int, list[tuple[str, str]]] = {}
    for episode in range(12):
        game = episode % 3
        observation, _ = env.reset(options={"index": game})
        reply = env.step(act("inventory" if game % 2 else "look"))[0]
        transcripts.setdefault(game, []).append((observation, reply))
    for game, seen in transcripts.items():
        assert len(seen) == 4 and len(set(seen)) == 1, f"game {game} changed after a reload"
