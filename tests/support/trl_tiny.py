"""A real TRL ``GRPOTrainer`` (or a subclass) on a tiny model steered toward one tool call,
training on two of the vector test tasks: the wiring the TRL adapter tests share.

The same seed gives the same model, data and sampling. Import it after
``pytest.importorskip("trl")``: TRL and torch are needed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agentgym_eppo.adapters.trl import build_multitask_dataset, trl_environment_factories
from support.vector_test_envs import COUNT, GUESS

CALL = '<tool_call>\n{"name": "say", "arguments": {"word": "alpha"}}\n</tool_call>'
TASKS = [GUESS, COUNT]

Trainer = TypeVar("Trainer")


def tiny_grpo_trainer(
    trainer_class: Callable[..., Trainer], output_dir: Path, steps: int, **config: Any
) -> Trainer:
    """``trainer_class`` for ``steps`` steps of 4 rows (two per task); ``config`` adds to or
    overrides the ``GRPOConfig`` (no checkpoints unless ``save_strategy`` says so)."""
    import torch
    from trl import GRPOConfig
    from trl.chat_template_utils import qwen3_template

    from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    tokenizer = build_tokenizer([CALL, "Guess the word of guess-train-0. Find the word."] * 8, 400)
    tokenizer.response_template = qwen3_template  # how TRL reads calls out of Qwen-style text
    model = build_tiny_model(tokenizer)
    # An untrained tiny model writes no tool call; Hugging Face's sequence_bias steers its
    # sampling toward one, standing in for a model that has learnt to call tools.
    call_ids = tokenizer(CALL + "<|im_end|>", add_special_tokens=False)["input_ids"]
    bias = {tuple(call_ids[: n + 1]): 20.0 * (n + 1) for n in range(len(call_ids))}
    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=40,
        max_tool_calling_iterations=1,
        generation_kwargs={"sequence_bias": bias},
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        seed=0,
        **({"save_strategy": "no"} | config),
    )
    return trainer_class(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=build_multitask_dataset(TASKS, rows=4 * steps),
        environment_factory=trl_environment_factories(TASKS),
    )
