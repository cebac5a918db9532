"""EPPO in verl 0.9.1: a policy loss registered as ``eppo``, the pacing of each step, and
:class:`EPPORayPPOTrainer`, verl's ``RayPPOTrainer`` that does both.

verl's actor calls a registered policy loss with fixed arguments (``old_log_prob,
log_prob, advantages, response_mask, loss_agg_mode, config, rollout_is_weights``, from
``verl.workers.utils.losses.ppo_loss``), after selecting only those fields of the
micro-batch. None of them says which task a sample belongs to. So EPPO comes in parts:

* :func:`pace_batch`, once per training step, on the step's batch after verl's
  old-log-prob pass: each task's mean token entropy over the response tokens (eq. 5;
  verl's pass returns the per-token ``entropys`` of the full distribution), keyed on
  the sample's task (``non_tensor_batch["agentgym_task"]``, which
  :class:`~agentgym_eppo.adapters.verl.AgentGymAgentLoop` writes). The pacer takes them
  (:meth:`EPPOPacer.update`); each sample's ε goes into the batch as ``eppo_eps``, its
  task's index as ``eppo_task`` and the step's task names into ``meta_info``.
* :func:`eppo_ppo_loss`: verl's ``ppo_loss`` with the micro-batch's ``eppo_eps`` handed
  to the loss, plus each task's clipped and trained token counts as verl metrics; the
  actor's loss function in place of ``ppo_loss``.
* :func:`compute_policy_loss_eppo`, registered under ``eppo``
  (``actor.policy_loss.loss_mode=eppo``): the clipped loss of our trainer
  (:func:`~agentgym_eppo.trainer.algorithms.losses.clipped_policy_loss`) with per-sample
  bounds ``[1 - ε, 1 + ε · clip_ratio_high / clip_ratio_low]`` and verl's dual clip
  (``clip_ratio_c``), aggregated by verl's ``agg_loss``. Called without per-sample ε
  (plain ``ppo_loss``), it raises rather than fall back to one global range.
* :class:`EPPORayPPOTrainer` wires them into verl's training loop
  (``verl.trainer.ppo.ray_trainer.RayPPOTrainer.fit``) by extending five of its methods.

>>> EPPORayPPOTrainer.tested_verl
'==0.9.1'
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
import verl
from packaging.specifiers import SpecifierSet
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils import tensordict_utils
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.losses import ppo_loss

from agentgym_eppo.trainer.algorithms.losses import clipped_policy_loss
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer

LOSS_NAME = "eppo"
TASK_KEY = "agentgym_task"
EPS_KEY = "eppo_eps"
TASK_INDEX_KEY = "eppo_task"
TASKS_KEY = "eppo_tasks"
"""``meta_info`` key: the step's task names; ``eppo_task`` indexes into them."""
PACER_STATE_FILE = "eppo_pacer.json"


@dataclass
class _Clip:
    """One micro-batch's per-sample ε, and what the loss clipped with it (per sample)."""

    eps: torch.Tensor
    clipped_tokens: torch.Tensor | None = None
    tokens: torch.Tensor | None = None


_CLIP: ContextVar[_Clip | None] = ContextVar("eppo_clip", default=None)


def pace_batch(
    pacer: EPPOPacer,
    batch: Any,
    task_key: str = TASK_KEY,
    entropys: torch.Tensor | None = None,
) -> dict[str, float]:
    """One pacer step on a verl ``DataProto`` holding ``response_mask`` (per token),
    ``non_tensor_batch[task_key]`` (per sample) and the per-token entropies (``entropys``,
    from the batch unless given); writes ``eppo_eps`` and ``eppo_task`` (per sample) and
    ``meta_info["eppo_tasks"]`` into the batch and returns each measured task's ε."""
    tasks = [str(task) for task in np.asarray(batch.non_tensor_batch[task_key]).tolist()]
    mask = batch.batch["response_mask"].float()
    values = batch.batch["entropys"] if entropys is None else entropys
    sums = (values.float() * mask).sum(dim=1).tolist()
    counts = mask.sum(dim=1).tolist()
    totals: dict[str, list[float]] = {}
    for task, s, n in zip(tasks, sums, counts, strict=True):
        total = totals.setdefault(task, [0.0, 0.0])
        total[0] += s
        total[1] += n
    entropy = {task: s / n for task, (s, n) in totals.items() if n > 0}  # eq. 5
    eps = pacer.update(entropy)
    fallback = {task: pacer.eps0 for task in tasks}
    names = sorted(totals)
    batch.batch[EPS_KEY] = torch.tensor(
        [eps.get(task, fallback[task]) for task in tasks], dtype=torch.float32
    )
    batch.batch[TASK_INDEX_KEY] = torch.tensor([names.index(task) for task in tasks])
    batch.meta_info[TASKS_KEY] = names
    return eps


@contextmanager
def sample_eps(eps: torch.Tensor) -> Iterator[_Clip]:
    """Within the block, the ``eppo`` loss clips sample ``i`` at ``eps[i]``; the record
    yielded holds, after the loss, each sample's clipped and trained token counts."""
    clip = _Clip(eps)
    token = _CLIP.set(clip)
    try:
        yield clip
    finally:
        _CLIP.reset(token)


def eppo_ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None) -> Any:
    """verl's ``ppo_loss`` on a micro-batch, its ``eppo_eps`` given to the ``eppo`` loss.

    With ``eppo_task`` and ``eppo_tasks`` in the micro-batch (:func:`pace_batch` writes
    them), the metrics also hold ``eppo/<task>/clipped_tokens`` and ``eppo/<task>/tokens``
    for every task of the step (summed over micro-batches, as verl sums its loss): the
    task's trained tokens, and those whose ratio left the task's range on the side the
    advantage pushes."""
    if EPS_KEY not in data.keys():  # noqa: SIM118 (a TensorDict has no `in` of its own)
        raise KeyError(f"the micro-batch has no {EPS_KEY!r}: run pace_batch on the step's batch")
    with sample_eps(data[EPS_KEY]) as clip:
        loss, metrics = ppo_loss(config, model_output, data, dp_group)
    names = tensordict_utils.get(data, TASKS_KEY)
    if names is not None and TASK_INDEX_KEY in data.keys():  # noqa: SIM118
        assert clip.clipped_tokens is not None and clip.tokens is not None
        index = data[TASK_INDEX_KEY].to(clip.tokens.device)
        for i, task in enumerate(names):
            mine = index == i
            for name, counts in (("clipped_tokens", clip.clipped_tokens), ("tokens", clip.tokens)):
                value = counts[mine].sum().item()
                metrics[f"eppo/{task}/{name}"] = Metric(AggregationType.SUM, value)
    return loss, metrics


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
    clip = _CLIP.get()
    if clip is None:
        raise RuntimeError(
            "the eppo policy loss needs each sample's ε: install eppo_ppo_loss as the "
            "actor's loss function and run pace_batch each step"
        )
    eps = clip.eps.to(log_prob.device, log_prob.dtype).reshape(-1, 1)
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
    clip.clipped_tokens = (clipped.float() * mask).sum(dim=1).detach()
    clip.tokens = mask.sum(dim=1)
    metrics = {
        "actor/pg_clipfrac": (clip.clipped_tokens.sum() / clip.tokens.sum().clamp(min=1)).item(),
        "actor/eppo_eps_mean": eps.mean().item(),
    }
    return loss, metrics


class EPPORayPPOTrainer(RayPPOTrainer):
    """verl's ``RayPPOTrainer`` with EPPO's per-task clip range.

    Built with ``RayPPOTrainer``'s arguments, plus ``pacer=`` (default ``EPPOPacer`` with
    ``eps0 = actor.clip_ratio_low`` and the fields of the optional config section
    ``algorithm.eppo``: ``alpha``, ``beta``, ``eps_min``, ``eps_max``,
    ``trend_constraint``) and ``task_key=`` (the ``non_tensor_batch`` column naming each
    sample's task). Each extension calls verl's method and adds to it:

    * ``init_workers``: installs :func:`eppo_ppo_loss` as the actor workers' loss function
      (``set_loss_fn``, the call verl makes for its critic);
    * ``_compute_old_log_prob``: verl's pass returns per-token ``entropys``, which
      ``fit`` drops after logging their mean; :func:`pace_batch` runs on them first;
    * ``_update_actor``: adds per task ``eppo/<task>/entropy``, ``eps``, ``zscore`` and
      ``clipped_share`` to the actor's metrics, which ``fit`` logs;
    * ``_save_checkpoint`` / ``_load_checkpoint``: the pacer's state in each
      ``global_step_<n>`` folder (``eppo_pacer.json``), restored on resume.

    Raises ``ValueError`` when the actor's ``policy_loss.loss_mode`` is not ``eppo``,
    when ``algorithm.rollout_correction.bypass_mode`` skips the old-log-prob pass (no
    entropy to pace on) or when distillation replaces the actor's loss.
    """

    tested_verl = "==0.9.1"

    def __init__(
        self,
        *args: Any,
        pacer: EPPOPacer | None = None,
        task_key: str = TASK_KEY,
        **kwargs: Any,
    ) -> None:
        if verl.__version__ not in SpecifierSet(self.tested_verl):
            warnings.warn(
                f"EPPORayPPOTrainer is tested with verl{self.tested_verl}; this is verl "
                f"{verl.__version__}, whose private RayPPOTrainer methods may differ",
                stacklevel=2,
            )
        super().__init__(*args, **kwargs)
        actor = self.config.actor_rollout_ref.actor
        if actor.policy_loss.loss_mode != LOSS_NAME:
            raise ValueError(
                f"EPPORayPPOTrainer needs actor_rollout_ref.actor.policy_loss.loss_mode="
                f"{LOSS_NAME}, got {actor.policy_loss.loss_mode!r}"
            )
        correction = self.config.algorithm.get("rollout_correction") or {}
        if correction.get("bypass_mode", False):
            raise ValueError(
                "algorithm.rollout_correction.bypass_mode skips verl's old-log-prob pass, "
                "whose entropies EPPO paces on"
            )
        distillation = self.config.get("distillation") or {}
        if distillation.get("enabled", False):
            raise ValueError("distillation replaces the actor's loss; EPPO cannot run with it")
        settings = dict(self.config.algorithm.get("eppo") or {})
        self.pacer = (
            pacer if pacer is not None else EPPOPacer(eps0=float(actor.clip_ratio_low), **settings)
        )
        self.task_key = task_key
        self._pacing_metrics: dict[str, float] = {}

    def eppo_loss_fn(self) -> Any:
        """The actor's loss function: :func:`eppo_ppo_loss` with verl's actor config."""
        config = omega_conf_to_dataclass(self.config.actor_rollout_ref.actor)
        return partial(eppo_ppo_loss, config=config)

    def init_workers(self) -> None:
        super().init_workers()
        self.actor_rollout_wg.set_loss_fn(self.eppo_loss_fn())

    def _compute_old_log_prob(self, batch: Any) -> Any:
        old_log_prob, mfu = super()._compute_old_log_prob(batch)
        entropys = old_log_prob.batch["entropys"]
        eps = pace_batch(self.pacer, batch, self.task_key, entropys=entropys)
        self._pacing_metrics = {}
        for task in eps:
            pace = self.pacer.tasks[task]
            self._pacing_metrics[f"eppo/{task}/entropy"] = pace.entropy
            self._pacing_metrics[f"eppo/{task}/eps"] = pace.clip_eps
            self._pacing_metrics[f"eppo/{task}/zscore"] = pace.zscore
        return old_log_prob, mfu

    def _update_actor(self, batch: Any) -> Any:
        output = super()._update_actor(batch)
        metrics = output.meta_info["metrics"]
        metrics.update(clipped_shares(metrics, batch.meta_info[TASKS_KEY]))
        metrics.update(self._pacing_metrics)
        return output

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()
        folder = os.path.join(
            self.config.trainer.default_local_dir, f"global_step_{self.global_steps}"
        )
        with open(os.path.join(folder, PACER_STATE_FILE), "w", encoding="utf-8") as f:
            json.dump(self.pacer.state_dict(), f)

    def _load_checkpoint(self) -> Any:
        result = super()._load_checkpoint()
        folder = self._resumed_folder()
        if folder is None:
            return result
        path = os.path.join(folder, PACER_STATE_FILE)
        if not os.path.exists(path):
            warnings.warn(
                f"{folder} holds no {PACER_STATE_FILE}: the EPPO pacer starts afresh",
                stacklevel=2,
            )
            return result
        with open(path, encoding="utf-8") as f:
            self.pacer.load_state_dict(json.load(f))
        return result

    def _resumed_folder(self) -> str | None:
        """The ``global_step_<n>`` folder verl's ``_load_checkpoint`` resumed from."""
        trainer = self.config.trainer
        if trainer.resume_mode == "disable":
            return None
        if trainer.resume_mode == "resume_path":
            return os.path.abspath(trainer.resume_from_path)
        return find_latest_ckpt_path(os.path.abspath(trainer.default_local_dir))


def clipped_shares(metrics: dict[str, Any], tasks: list[str]) -> dict[str, float]:
    """Each task's ``eppo/<task>/clipped_share`` from the actor's summed token counts
    (``actor/eppo/<task>/clipped_tokens`` and ``.../tokens``, one value per mini-batch),
    which it removes from ``metrics``.

    >>> metrics = {"actor/eppo/os/clipped_tokens": [1.0, 2.0], "actor/eppo/os/tokens": [4.0, 8.0]}
    >>> clipped_shares(metrics, ["os"]), metrics
    ({'eppo/os/clipped_share': 0.25}, {})
    """
    shares: dict[str, float] = {}
    for task in tasks:
        counts = {
            name: float(np.sum(metrics.pop(f"actor/eppo/{task}/{name}")))
            for name in ("clipped_tokens", "tokens")
        }
        shares[f"eppo/{task}/clipped_share"] = counts["clipped_tokens"] / max(counts["tokens"], 1.0)
    return shares
