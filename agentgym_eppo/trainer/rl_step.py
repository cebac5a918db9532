"""One RL step, the only one: play rounds -> update -> sync weights -> record.

:func:`rl_step` is what ``agentgym-eppo train`` runs each step (:mod:`.run`), and what
the scale tests and the scale benchmark run over Ray env actors, Ray rollout actors or
an SGLang engine: the parts differ, the step does not. Its options are arguments:

* the rollout engine (:func:`~agentgym_eppo.trainer.distributed.launch.make_rollout_engine`
  builds it from the config): in process, in Ray actors, SGLang, or a
  :class:`~agentgym_eppo.trainer.rollout.stale.StaleMixEngine` that samples a share of
  the turns from a lagging copy of the policy (``engine.stale_share``);
* the updater: single process or FSDP2
  (:func:`~agentgym_eppo.trainer.distributed.launch.make_policy_updater`);
* :class:`StepSettings`: the step seed, the rollout limits, the prompt style and DAPO's
  dynamic sampling;
* :class:`~agentgym_eppo.trainer.algorithms.pacer.TaskPacing`: the per-task pace the
  record reports.

The step's randomness is a function of ``(seed, step)`` only (:func:`step_seed`), so a
resumed run draws the same instances and the same mini-batches as an unbroken one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from agentgym_eppo.trainer.algorithms.pacer import TaskPacing
from agentgym_eppo.trainer.config import TrainConfig
from agentgym_eppo.trainer.rollout.engine import RolloutEngine
from agentgym_eppo.trainer.rollout.episodes import (
    Episode,
    RolloutLimits,
    mixed_groups,
    play_episodes,
    slot_info,
    start_episode,
)
from agentgym_eppo.trainer.rollout.stale import StaleMixEngine
from agentgym_eppo.trainer.training.update import (
    PolicyUpdater,
    UpdateResult,
    UpdateSettings,
    step_record,
)


def step_seed(seed: int, step: int) -> int:
    """The sampler seed of RL step ``step``: a function of (seed, step) only (exact resume).

    >>> step_seed(0, 1), step_seed(0, 1) == step_seed(0, 1), step_seed(0, 2) == step_seed(1, 2)
    (7919, True, False)
    """
    return (int(seed) * 1_000_003 + int(step) * 7_919) % (2**31 - 1)


def update_settings(config: TrainConfig, bf16: bool) -> UpdateSettings:
    """The :class:`UpdateSettings` a :class:`~agentgym_eppo.trainer.config.TrainConfig` describes."""
    a, r = config.algorithm, config.rl
    return UpdateSettings(
        advantage=a.advantage,
        task_adv_norm=a.task_adv_norm,
        task_norm_over=a.task_norm_over,
        kl_coef=a.kl_coef,
        entropy_coef=a.entropy_coef,
        dual_clip_c=a.dual_clip_c,
        ppo_epochs=r.ppo_epochs,
        mini_batches=r.mini_batches,
        micro_batch_tokens=r.micro_batch_tokens,
        max_grad_norm=r.max_grad_norm,
        temperature=config.rollout.temperature,
        logprob_chunk=r.logprob_chunk,
        skip_zero_advantage=r.skip_zero_advantage,
        bf16=bf16,
        old_logprobs=r.old_logprobs,
    )


@dataclass(frozen=True)
class StepSettings:
    """What a step needs besides its parts: the seed its :func:`step_seed` derives from,
    the rollout limits, the prompt style, and DAPO's dynamic sampling
    (``dynamic_sampling_rounds`` > 1 plays further rounds until the groups with differing
    rewards fill one round's worth of groups of ``group_size``)."""

    seed: int
    limits: RolloutLimits
    prompt_style: str = "full"
    group_size: int = 1
    dynamic_sampling_rounds: int = 1

    @classmethod
    def from_config(cls, config: TrainConfig) -> StepSettings:
        r = config.rollout
        return cls(
            seed=config.seed,
            limits=RolloutLimits(r.max_tokens_per_turn, r.max_context, r.temperature),
            prompt_style=r.prompt,
            group_size=r.group_size,
            dynamic_sampling_rounds=config.rl.dynamic_sampling_rounds,
        )


@dataclass
class StepOutcome:
    """One step: every episode played, those the update trained on, the update's result
    and the ``metrics.jsonl`` record."""

    played: list[Episode]
    trained: list[Episode]
    result: UpdateResult
    record: dict[str, Any]


def rl_step(
    step: int,
    venv: Any,
    engine: RolloutEngine,
    updater: PolicyUpdater,
    tokenizer: Any,
    settings: StepSettings,
    pacing: TaskPacing | None = None,
) -> StepOutcome:
    """RL step ``step``: every slot of ``venv`` plays (one round, or more under dynamic
    sampling), ``updater`` takes one update, ``engine`` gets the new weights (so the next
    step samples from the updated policy), and the record is built. ``pacing`` None
    leaves the record's pace fields empty."""
    started = time.perf_counter()
    stale_before = engine.stale_turns if isinstance(engine, StaleMixEngine) else 0
    played, trained, rounds = _sample(step, venv, engine, tokenizer, settings)
    rollout_seconds = time.perf_counter() - started
    generator = torch.Generator().manual_seed(step_seed(settings.seed, step))
    result = updater.step(trained, generator)
    engine.update_weights(updater.model)  # the weight sync (a no-op for the in-process engine)
    paces = pacing.after_update(result.task_entropy) if pacing is not None else {}
    record = step_record(
        step, played, result, paces, rollout_seconds, started, trained=trained, rounds=rounds
    )
    if isinstance(engine, StaleMixEngine):
        record["global"]["stale_turns"] = engine.stale_turns - stale_before
    return StepOutcome(played, trained, result, record)


def _sample(
    step: int, venv: Any, engine: RolloutEngine, tokenizer: Any, settings: StepSettings
) -> tuple[list[Episode], list[Episode], int]:
    """One step's episodes: ``(played, trained, rounds)``. Further rounds (dynamic
    sampling) go on from the step's seeded instance streams, so a resumed run draws the
    same."""
    played = _play_round(venv, engine, tokenizer, settings, step_seed(settings.seed, step))
    most = settings.dynamic_sampling_rounds
    if most == 1:
        return played, played, 1
    wanted = venv.num_envs // settings.group_size
    trained, rounds = mixed_groups(played), 1
    while rounds < most and len({e.group for e in trained}) < wanted:
        more = _play_round(venv, engine, tokenizer, settings, None)
        played, trained, rounds = played + more, trained + mixed_groups(more), rounds + 1
    return played, trained, rounds


def _play_round(
    venv: Any, engine: RolloutEngine, tokenizer: Any, settings: StepSettings, seed: int | None
) -> list[Episode]:
    """Reset every slot (reseeding the instance streams with ``seed``, unless None) and
    play the episodes to their ends."""
    observations, infos = venv.reset(seed=seed)
    episodes = [
        start_episode(tokenizer, i, observations[i], slot_info(infos, i), settings.prompt_style)
        for i in range(venv.num_envs)
    ]
    return play_episodes(venv, episodes, engine, tokenizer, settings.limits)
