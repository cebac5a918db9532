"""The TRL adapter: tool methods TRL can read, a multi-task dataset, and a real
``GRPOTrainer`` run on a tiny model that calls our environments' tools."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from support.trl_tiny import tiny_grpo_trainer  # noqa: E402
from support.vector_test_envs import COUNT, GUESS  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402

from agentgym_eppo.adapters.trl import (  # noqa: E402
    build_multitask_dataset,
    trl_environment_class,
)


def test_environment_class_has_one_public_method_per_tool_with_its_schema() -> None:
    cls = trl_environment_class(GUESS)
    public = sorted(
        name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")
    )
    assert public == ["die", "get_reward", "reset", "say", "wait"]
    env = cls()
    assert get_json_schema(env.say)["function"] == {
        "name": "say",
        "description": "Say a word.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "the word"}},
            "required": ["word"],
        },
        "return": {"type": "string", "description": "The tool's output."},
    }


def test_reset_plays_the_row_instance_and_reward_comes_from_the_env() -> None:
    env = trl_environment_class(GUESS)()
    assert env.reset(prompt=[], task_index=2) == "Guess the word of guess-train-2."
    assert env.say(word="alpha") == "not alpha"
    assert env.say(word="gamma") == "right"
    assert env.say(word="again") == "The episode is over; no further tool calls are accepted."
    assert env.get_reward() == 1.0
    env.reset(task_index=0)
    assert env.get_reward() == pytest.approx(-0.2)  # abandoned: agent_invalid_action
    assert env._info["status"] == "agent_invalid_action"


def test_multitask_dataset_interleaves_tasks_and_repeats_the_smaller_one() -> None:
    dataset = build_multitask_dataset([GUESS, COUNT])
    assert dataset.column_names == ["prompt", "environment", "task_index"]
    assert dataset["environment"] == [GUESS, COUNT] * 5
    assert sorted(dataset["task_index"][1::2]) == [0, 1, 2, 3, 4]
    assert sorted(dataset["task_index"][0::2]) == [0, 1, 1, 2, 2]  # the draw follows the task id
    assert dataset[0]["prompt"] == [
        {"role": "system", "content": "Find the word."},
        {"role": "user", "content": ""},
    ]
    assert len(build_multitask_dataset([GUESS, COUNT], rows=3)) == 3


@pytest.mark.slow
@pytest.mark.train
def test_grpo_trainer_trains_a_tiny_model_on_two_environments(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from trl import GRPOTrainer

    trainer = tiny_grpo_trainer(GRPOTrainer, tmp_path, steps=2)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logs) == 2
    assert all(entry["tools/call_frequency"] > 0 for entry in logs)
    assert all(-0.2 - 1e-6 <= entry["reward"] <= 1.0 for entry in logs)
    # The last batch's environments: every rollout called say("alpha") once; only the
    # Guess instance whose word is "alpha" completes, the others end unfinished.
    assert trainer.environments
    for env in trainer.environments:
        session = env._session
        won = session.reset_info["sample_id"] == "guess-train-0"
        assert session.turns == 1
        assert session.reward == pytest.approx(1.0 if won else -0.2)
        assert session.info["status"] == ("completed" if won else "agent_invalid_action")
