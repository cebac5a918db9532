"""Game sources: ALFWORLD_DATA's layout, AgentBench's task lists, and broken game files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentgym_eppo.core import TaskFormatError
from agentgym_eppo.environments.alfworld.env import ALFWorldEnv
from agentgym_eppo.environments.alfworld.games import game_data
from agentgym_eppo.environments.alfworld.tasks import load_task_set

pytestmark = pytest.mark.alfworld


def _write_game(folder: Path, row: dict[str, Any], *, solvable: bool = True) -> Path:
    """Write a shipped game the way ``alfworld-download`` lays games out."""
    folder.mkdir(parents=True)
    game = {**game_data(row), "solvable": solvable}
    (folder / "game.tw-pddl").write_text(json.dumps(game), encoding="utf-8")
    traj = {"task_type": row["task_type"], "pddl_params": row["pddl_params"]}
    (folder / "traj_data.json").write_text(json.dumps(traj), encoding="utf-8")
    return folder / "game.tw-pddl"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ALFWORLD_DATA folder holding three shipped dev games, one marked unsolvable."""
    root = tmp_path_factory.mktemp("alfworld_data")
    rows = [record.row for record in load_task_set(None, "dev")][:3]
    unseen = root / "json_2.1.1" / "valid_unseen"
    for i, row in enumerate(rows):
        name = f"{row['task_type']}-X-None-Y-{i}/trial_T0000_{i}"
        _write_game(unseen / name, row, solvable=i != 2)
    return root


def _play_with_expert(env: ALFWorldEnv, index: int) -> float:
    env.reset(options={"index": index})
    for _ in range(env.max_turns):
        _, reward, terminated, truncated, _ = env.step(env.expert_action())
        if terminated or truncated:
            return reward
    return 0.0


def test_full_set_under_alfworld_data_skips_unsolvable_games(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALFWORLD_DATA", str(data_dir))
    env = ALFWorldEnv(split="test")
    assert env.num_tasks == 2
    assert env.task_set[0].sample_id.endswith("trial_T0000_0")
    assert _play_with_expert(env, 0) == 1.0


def test_agentbench_task_list_resolves_against_data_dir(data_dir: Path, tmp_path: Path) -> None:
    games = sorted(str(path.relative_to(data_dir)) for path in data_dir.rglob("game.tw-pddl"))[:2]
    listing = tmp_path / "dev.json"
    listing.write_text(json.dumps({"pick_and_place": games[:1], "look_at_obj": games[1:]}))
    env = ALFWorldEnv(tasks=str(listing), data_dir=data_dir)
    assert [record.game_file for record in env.task_set] == [str(data_dir / g) for g in games]
    assert _play_with_expert(env, 1) == 1.0


def test_agentbench_list_without_data_names_alfworld_data(
    agentbench_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    listing = agentbench_data / "alfworld" / "dev.json"
    with pytest.raises(TaskFormatError, match="set ALFWORLD_DATA"):
        ALFWorldEnv(tasks=str(listing)).reset()


def test_agentbench_list_with_missing_games_names_the_game(
    agentbench_data: Path, tmp_path: Path
) -> None:
    listing = agentbench_data / "alfworld" / "dev.json"
    with pytest.raises(TaskFormatError, match=r"dev.json: game 'json_2.1.1/valid_unseen/"):
        ALFWorldEnv(tasks=str(listing), data_dir=tmp_path).reset()


def test_corrupt_game_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    row = load_task_set(None, "dev")[0].row
    game_file = _write_game(tmp_path / "broken", row)
    game_file.write_text('{"pddl_domain": "(define', encoding="utf-8")
    env = ALFWorldEnv(tasks=str(tmp_path))
    with pytest.raises(TaskFormatError, match=rf"{game_file}: not a valid game file"):
        env.reset()


def test_unsolvable_game_is_an_error_naming_the_file(tmp_path: Path) -> None:
    row = load_task_set(None, "dev")[0].row
    game_file = _write_game(tmp_path / "stuck", row, solvable=False)
    with pytest.raises(TaskFormatError, match=rf"{game_file}: the game is not marked solvable"):
        ALFWorldEnv(tasks=str(tmp_path)).reset()


def test_game_the_engine_cannot_parse_is_an_error_naming_the_file(tmp_path: Path) -> None:
    row = load_task_set(None, "dev")[0].row
    game_file = _write_game(tmp_path / "bad_pddl", row)
    game = json.loads(game_file.read_text())
    game["pddl_problem"] = "(define (problem p) (:domain alfred) (:init (atLocation"
    game_file.write_text(json.dumps(game))
    with pytest.raises(TaskFormatError, match=rf"{game_file}: the ALFWorld engine cannot load"):
        ALFWorldEnv(tasks=str(tmp_path)).reset()


def test_row_with_unknown_task_type_is_rejected() -> None:
    row = {**load_task_set(None, "dev")[0].row, "task_type": "juggle"}
    with pytest.raises(TaskFormatError, match=r"tasks\[0\]: unknown task_type 'juggle'"):
        ALFWorldEnv(tasks=[row]).reset()
