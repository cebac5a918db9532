"""EPPO inside TRL: ``EPPOGRPOTrainer`` trains a tiny model on two of our environments,
each task clipped at the range its own entropy earns, and resumes its pacer exactly."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from support.trl_tiny import CALL, TASKS, tiny_grpo_trainer  # noqa: E402
from support.vector_test_envs import COUNT, GUESS  # noqa: E402

from agentgym_eppo.adapters.trl import (  # noqa: E402
    build_multitask_dataset,
    trl_environment_factories,
)
from agentgym_eppo.adapters.trl_eppo import PACER_STATE_FILE, EPPOGRPOTrainer  # noqa: E402
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer  # noqa: E402


def make_trainer(output_dir: Path, steps: int, **config: Any) -> EPPOGRPOTrainer:
    """The tiny trainer of tests/support/trl_tiny.py, with EPPO."""
    return tiny_grpo_trainer(
        EPPOGRPOTrainer,
        output_dir,
        steps,
        shuffle_dataset=False,  # each step's two prompts: one per task
        gradient_checkpointing=False,
        **config,
    )


def logged(trainer: EPPOGRPOTrainer, quantity: str) -> list[dict[str, float]]:
    """Per logged step: ``{task: value}`` of ``eppo/<task>/<quantity>``."""
    rows = []
    for entry in trainer.state.log_history:
        values = {
            key.split("/")[1]: value
            for key, value in entry.items()
            if key.startswith("eppo/") and key.endswith(f"/{quantity}")
        }
        if values:
            rows.append(values)
    return rows


@pytest.mark.slow
@pytest.mark.train
def test_each_tasks_eps_is_what_the_pacer_gives_for_its_logged_entropy(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path / "run", steps=3, save_strategy="steps", save_steps=1)
    trainer.train()
    entropies, eps = logged(trainer, "entropy"), logged(trainer, "eps")
    assert len(entropies) == len(eps) == 3
    assert all(set(row) == set(TASKS) for row in entropies)
    replay = EPPOPacer(eps0=trainer.args.epsilon)
    for step_entropy, step_eps in zip(entropies, eps, strict=True):
        assert replay.update(step_entropy) == pytest.approx(step_eps, rel=1e-6)
    assert eps[0] == {GUESS: 0.2, COUNT: 0.2}  # first step: every ratio is 1
    assert eps[-1][GUESS] != pytest.approx(eps[-1][COUNT])  # entropies moved apart
    assert all(
        set(row) == set(TASKS) and all(0 <= v <= 1 for v in row.values())
        for row in logged(trainer, "clipped_share")
    )
    assert all(math.isfinite(v) for row in logged(trainer, "zscore") for v in row.values())

    # resuming from the first checkpoint restores the pacer, which then continues exactly
    checkpoint = tmp_path / "run" / "checkpoint-1"
    assert (checkpoint / PACER_STATE_FILE).exists()
    resumed = make_trainer(tmp_path / "resumed", steps=3)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    expected = EPPOPacer(eps0=trainer.args.epsilon)
    for step_entropy in entropies[:1]:
        expected.update(step_entropy)
    # the log history starts with the checkpoint's step 1, then the resumed steps 2 and 3
    resumed_entropies, resumed_eps = logged(resumed, "entropy")[1:], logged(resumed, "eps")[1:]
    assert len(resumed_eps) == 2
    for step_entropy, step_eps in zip(resumed_entropies, resumed_eps, strict=True):
        assert expected.update(step_entropy) == pytest.approx(step_eps, rel=1e-6)
    assert resumed.pacer.step == 3


@pytest.mark.train
def test_trls_loss_clips_each_sample_at_its_tasks_eps(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path, steps=1)
    trainer._task_names = ["guess", "count"]  # the tasks of eppo_task's indices
    trainer.current_gradient_accumulation_steps = 1  # set by train() at each step
    tokenizer = trainer.processing_class
    prompt = tokenizer(["Find the word."] * 2, return_tensors="pt")
    completion = tokenizer([CALL] * 2, return_tensors="pt")
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model,
        torch.cat([prompt["input_ids"], completion["input_ids"]], dim=1),
        torch.cat([prompt["attention_mask"], completion["attention_mask"]], dim=1),
        completion["input_ids"].size(1),
    )
    inputs = {
        "prompt_ids": prompt["input_ids"],
        "prompt_mask": prompt["attention_mask"],
        "completion_ids": completion["input_ids"],
        "completion_mask": completion["attention_mask"],
        "advantages": torch.tensor([1.0, 1.0]),
        # every token's ratio to the old policy is 1.25: above 1 + 0.2, below 1 + 0.3
        "old_per_token_logps": logps.detach() - math.log(1.25),
        "eppo_eps": torch.tensor([[0.2], [0.3]]),
        "eppo_task": torch.tensor([0, 1]),
        "num_items_in_batch": completion["attention_mask"].sum(),  # dapo's normalizer
    }
    loss = trainer._compute_loss(trainer.model, inputs)
    metrics = trainer._metrics["train"]
    assert metrics["eppo/guess/clipped_share"] == [1.0]
    assert metrics["eppo/count/clipped_share"] == [0.0]
    assert metrics["clip_ratio/region_mean"] == [pytest.approx(0.5)]  # TRL's own count
    # TRL's loss: -min(r A, clip(r) A) per token: 1.2 for the first sample, 1.25 for the second
    assert loss.item() == pytest.approx(-(1.2 + 1.25) / 2, rel=1e-5)
    assert trainer.epsilon_low == trainer.epsilon_high == 0.2  # restored after the call


def test_a_dataset_without_the_task_column_is_refused(tmp_path: Path) -> None:
    dataset = build_multitask_dataset(TASKS, rows=4).remove_columns("environment")
    with pytest.raises(ValueError, match="no task column 'environment'"):
        trainer = make_trainer(tmp_path, steps=1)
        EPPOGRPOTrainer(
            model=trainer.model,
            processing_class=trainer.processing_class,
            args=trainer.args,
            train_dataset=dataset,
            environment_factory=trl_environment_factories(TASKS),
        )
