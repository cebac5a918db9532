"""A task added from outside the package: an environment class and one registration
call, and ``gym.make``, the vector env, the fresh-instance generator and the trainer's
config play it by its task id (no file of the package edited).

``SumEnv`` below is the example of ``docs/tasks.md`` ("Add a task"). This module is also
the task's generator (``fresh_tasks``, ``content_key``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentgym_eppo.core import (
    AgentBenchEnv,
    FunctionCall,
    TaskRecord,
    TaskSet,
    ToolResult,
    read_json_or_jsonl,
    string_tool,
    write_jsonl_gz,
)
from agentgym_eppo.registration import ENVIRONMENTS, env_id_for, register_task, unregister_task


@dataclass(frozen=True)
class SumRecord(TaskRecord):
    a: int
    b: int


class SumEnv(AgentBenchEnv[SumRecord]):
    """Add two numbers: one ``answer(total)`` call ends the episode."""

    task_id = "sum"
    tools = (string_tool("answer", "Give the sum.", total="the sum, in digits"),)
    default_max_turns = 2

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[SumRecord]:
        rows = read_json_or_jsonl(ENVIRONMENTS["sum"].task_file(split)) if tasks is None else tasks
        return TaskSet([SumRecord(r["sample_id"], r["a"], r["b"]) for r in rows], name=split)

    def _begin_episode(self, record: SumRecord) -> str:
        return f"What is {record.a} + {record.b}?"

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        right = call.arguments["total"].strip() == str(self.record.a + self.record.b)
        return ToolResult("right" if right else "wrong", done=True, reward=float(right))

    def _end_episode(self) -> None:
        pass

    def expert_action(self) -> dict[str, Any]:
        return {"name": "answer", "arguments": {"total": str(self.record.a + self.record.b)}}

    @property
    def system_prompt(self) -> str:
        return "Add the two numbers and call answer with the sum."


def fresh_tasks(count: int, seed: int) -> list[dict[str, Any]]:
    draw = random.Random(seed)
    return [
        {"sample_id": f"s{k}", "a": draw.randint(0, 9), "b": draw.randint(0, 9)}
        for k in range(count)
    ]


def content_key(row: Mapping[str, Any]) -> str:
    return f"{row['a']}+{row['b']}"


@pytest.fixture(scope="module")
def sum_task(tmp_path_factory) -> Iterator[str]:
    """The task ``sum`` registered while this module's tests run, its splits written to a
    folder of its own (drawn by its generator: dev and test hold 6 instances each)."""
    folder = tmp_path_factory.mktemp("sum")
    for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
        rows = fresh_tasks(16 if split == "train" else 6, seed)
        write_jsonl_gz(
            folder / f"{split}.jsonl.gz",
            [{**r, "sample_id": f"{split}-{r['sample_id']}"} for r in rows],
        )
    register_task(
        "sum",
        env_id="Sum-v0",
        env=SumEnv,
        task_files=str(folder / "{split}.jsonl.gz"),
        generator=__name__,
    )
    yield "sum"
    unregister_task("sum")
    assert "Sum-v0" not in gym.registry


def test_gym_make_plays_the_registered_task_by_its_id(sum_task):
    assert env_id_for(sum_task) == f"{__name__}:Sum-v0"  # a worker process imports us
    env = gym.make(env_id_for(sum_task), split="dev")
    observation, info = env.reset(options={"index": 0})
    assert info["task_id"] == "sum" and observation.startswith("What is ")
    _, reward, terminated, _, info = env.step(env.unwrapped.expert_action())
    assert (reward, terminated, info["success"]) == (1.0, True, True)
    assert env.unwrapped.num_tasks == 6
    env.close()


def test_the_vector_env_runs_the_registered_task_beside_a_shipped_one(sum_task):
    from agentgym_eppo.vector import EXPERT_ACTION, MultiTaskVectorEnv

    venv = MultiTaskVectorEnv({sum_task: 2, "kg": 2}, group_size=2, backend="serial")
    try:
        venv.reset(seed=0)
        assert venv.task_ids == ("sum", "sum", "kg", "kg")
        outcomes = venv.step_some([0, 1], [EXPERT_ACTION] * 2)
        assert [o.reward for o in outcomes] == [1.0, 1.0]
    finally:
        venv.close()


def test_the_generator_draws_fresh_instances_and_drops_held_out_ones(sum_task):
    from agentgym_eppo.environments import fresh

    held_out = fresh.heldout_hashes(sum_task)
    assert 0 < len(held_out) <= 12
    rows = fresh.fresh_tasks(sum_task, 20, seed=5)
    assert len(rows) == 20 and rows[0]["sample_id"] == "sum-fresh5-0"
    assert not {fresh.content_hash(sum_task, row) for row in rows} & held_out


def test_the_trainer_config_names_the_registered_task_and_trains_on_it(sum_task, tmp_path):
    pytest.importorskip("transformers")
    from test_trainer_training import _config

    from agentgym_eppo.trainer.config import load_config
    from agentgym_eppo.trainer.run import run_training

    with pytest.raises(ValueError, match=r"tasks: unknown task 'summ' \(did you mean 'sum'\?\)"):
        load_config(None, ["tasks={summ: 8}"])
    config = _config(tmp_path, "tasks={sum: 4}", "rl.steps=1", "eval.stages=[after_rl]")
    run = Path(run_training(config))
    record = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert set(record["tasks"]) == {"sum"}
    evaluation = json.loads((run / "eval_after_rl.json").read_text())
    assert evaluation["split"] == "dev" and evaluation["tasks"]["sum"]["n"] == 6


def test_a_task_without_an_expert_is_refused_where_a_run_records_expert_episodes(tmp_path):
    from agentgym_eppo.trainer.config import load_config

    register_task("blind", env_id="Blind-v0", env=SumEnv, expert=False)
    try:
        with pytest.raises(ValueError, match=r"tasks \['blind'\] register no expert"):
            load_config(None, ["tasks={blind: 8}"])
        config = load_config(None, ["tasks={blind: 8}", f"init_checkpoint={tmp_path}"])
        assert config.tasks == {"blind": 8}
    finally:
        unregister_task("blind")


def test_a_task_id_or_gymnasium_id_already_registered_is_refused(sum_task):
    with pytest.raises(ValueError, match="task 'sum' is already registered"):
        register_task("sum", env_id="Sum-v1", env=SumEnv)
    with pytest.raises(ValueError, match="Gymnasium id AgentBench-DB-v0 is task 'db'"):
        register_task("sum2", env_id="AgentBench-DB-v0", env=SumEnv)
    assert "sum2" not in ENVIRONMENTS
