"""EPPO in verl 0.9.1: a policy loss registered as ``eppo``, and the pacing of each step.

verl's actor calls a registered policy loss with fixed arguments (``old_log_prob,
log_prob, advantages, response_mask, loss_agg_mode, config, rollout_is_weights``, from
``verl.workers.utils.losses.ppo_loss``), after selecting only those fields of the
micro-batch. None of them says which task a sample belongs to. So EPPO comes in three
parts:

* :func:`pace_batch`, once per training step, on the step's batch after verl's
  old-log-prob pass: each task's mean token entropy over the response tokens (eq. 5;
  verl's pass returns the per-token ``entropys`` of the full distribution), keyed on
  the sample's task (``non_tensor_batch["agentgym_task"]``, which
  :class:`~agentgym_eppo.adapters.verl.AgentGymAgentLoop` writes). The pacer takes them
  (:meth:`EPPOPacer.update`) and each sample's ε goes into the batch as ``eppo_eps``.
* :func:`eppo_ppo_loss`: verl's ``ppo_loss`` with the micro-batch's ``eppo_eps`` handed
  to the loss; install it as the actor's loss function in place of ``ppo_loss``
  (``actor.set_loss_fn(partial(eppo_ppo_loss, config=actor_config))``).
* :func:`compute_policy_loss_eppo`, registered under ``eppo``
  (``actor.policy_loss.loss_mode=eppo``): the clipped loss of our trainer
  (:func:`~agentgym_eppo.trainer.algorithms.losses.clipped_policy_loss`) with per-sample
  bounds ``[1 - ε, 1 + ε · clip_ratio_high / clip_ratio_low]`` and verl's dual clip
  (``clip_ratio_c``), aggregated by verl's ``agg_loss``. Called without per-sample ε
  (plain ``ppo_loss``), it raises rather than fall back to one global range.

Calling :func:`pace_batch` inside verl's ``RayPPOTrainer.fit`` and installing the loss
function on the actor worker are left to the user's trainer: verl 0.9.1 offers no hook
for either, and neither is run here (no GPU).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.workers.utils.losses import ppo_loss

from agentgym_eppo.trainer.algorithms.losses import clipped_policy_loss
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer

LOSS_NAME = "eppo"
TASK_KEY = "agentgym_task"
EPS_KEY = "eppo_eps"

_SAMPLE_EPS: ContextVar[torch.Tensor | None] = ContextVar("eppo_sample_eps", default=None)


def pace_batch(pacer: EPPOPacer, batch: Any, task_key: str = TASK_KEY) -> dict[str, float]:
    """One pacer step on a verl ``DataProto`` holding ``entropys`` and ``response_mask``
    (per token) and ``non_tensor_batch[task_key]`` (per sample); writes ``eppo_eps``
    (one ε per sample) into ``batch.batch`` and returns each task's ε."""
    tasks = [str(task) for task in np.asarray(batch.non_tensor_batch[task_key]).tolist()]
    mask = batch.batch["response_mask"].float()
    sums = (batch.batch["entropys"].float() * mask).sum(dim=1).tolist()
    counts = mask.sum(dim=1).tolist()
    totals: dict[str, list[float]] = {}
    for task, s, n in zip(tasks, sums, counts, strict=True):
        total = totals.setdefault(task, [0.0, 0.0])
        total[0] += s
        total[1] += n
    entropy = {task: s / n for task, (s, n) in totals.items() if n > 0}  # eq. 5
    eps = pacer.update(entropy)
    fallback = {task: pacer.eps0 for task in tasks}
    batch.batch[EPS_KEY] = torch.tensor(
        [eps.get(task, fallback[task]) for task in tasks], dtype=torch.float32
    )
    return eps


@contextmanager
def sample_eps(eps: torch.Tensor) -> Iterator[None]:
    """Within the block, the ``eppo`` loss clips sample ``i`` at ``eps[i]``."""
    token = _SAMPLE_EPS.set(eps)
    try:
        yield
    finally:
        _SAMPLE_EPS.reset(token)


def eppo_ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None) -> Any:
    """verl's ``ppo_loss`` on a micro-batch, its ``eppo_eps`` given to the ``eppo`` loss."""
    if EPS_KEY not in data.keys():  # noqa: SIM118 (a TensorDict has no `in` of its own)
        raise KeyError(f"the micro-batch has no {EPS_KEY!r}: run pace_batch on the step's batch")
    with sample_eps(data[EPS_KEY]):
        return ppo_loss(config, model_output, data, dp_group)


@register_policy_loss(LOSS_NAME)
def compute_policy_loss_eppo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's policy-loss signature; each sample clipped at its own ε (see the module)."""
    eps = _SAMPLE_EPS.get()
    if eps is None:
        raise RuntimeError(
            "the eppo policy loss needs each sample's ε: install eppo_ppo_loss as the "
            "actor's loss function and run pace_batch each step"
        )
    eps = eps.to(log_prob.device, log_prob.dtype).reshape(-1, 1)
    high_over_low = config.clip_ratio_high / config.clip_ratio_low
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0))
    losses, clipped = clipped_policy_loss(
        ratio, advantages, 1 - eps, 1 + eps * high_over_low, dual_clip_c=config.clip_ratio_c
    )
    if rollout_is_weights is not None:
        losses = losses * rollout_is_weights
    loss = agg_loss(
        loss_mat=losses,
        loss_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        **config.global_batch_info,
    )
    mask = response_mask.float()
    metrics = {
        "actor/pg_clipfrac": ((clipped.float() * mask).sum() / mask.sum().clamp(min=1)).item(),
        "actor/eppo_eps_mean": eps.mean().item(),
    }
    return loss, metrics
