"""EPPO inside TRL: a ``GRPOTrainer`` whose clip range per sample comes from :class:`EPPOPacer`.

:class:`EPPOGRPOTrainer` is TRL's ``GRPOTrainer`` with three additions, each an override
of one of its methods (nothing of TRL's loss is copied):

* ``_generate_and_score_completions``: after TRL has generated and scored a generation
  batch, each task's mean token entropy over the batch's completions is measured (eq.
  5: the entropy of the full next-token distribution, averaged over the tokens TRL's
  loss trains on, i.e. the completion mask times the tool mask) with TRL's own
  ``_get_per_token_logps_and_entropies`` in one forward pass without gradient; the
  pacer takes them (:meth:`EPPOPacer.update`, eqs. 6-11) and every sample gets its
  task's ε. The task is the row's ``task_column`` (``"environment"``, as
  :func:`~agentgym_eppo.adapters.trl.build_multitask_dataset` and TRL's multi-environment
  datasets write it). With TRL's defaults a generation batch is one optimizer step, so
  the pacer moves once per step.
* ``_compute_loss``: TRL's clipped loss runs with ``epsilon_low = ε`` and ``epsilon_high =
  ε · epsilon_high / epsilon`` per sample (a ``(B, 1)`` tensor; TRL's ``torch.clamp``
  broadcasts it), so TRL's loss types (``grpo``, ``bnpo``, ``dr_grpo``, ``dapo``,
  ``luspo``), token- or sequence-level importance sampling and the dual-clip ``delta``
  work as they do in TRL. Loss types without that two-sided clip (``cispo``, ``sapo``,
  ``vespo``) are refused when the trainer is built.
* ``_save_checkpoint`` / ``_load_optimizer_and_scheduler``: the pacer's state goes into
  each checkpoint folder (``eppo_pacer.json``) and comes back with
  ``train(resume_from_checkpoint=...)``, as TRL does for its own entropy controller.

Logged with TRL's metrics, per task: ``eppo/<task>/entropy`` (eq. 5), ``eppo/<task>/eps``,
``eppo/<task>/zscore`` (eq. 8) and ``eppo/<task>/clipped_share`` (the share of the task's
trained tokens whose ratio left its range on the side the advantage pushes, TRL's
``clip_ratio/region_mean`` per task).

>>> EPPOGRPOTrainer.tested_trl
'>=1.16,<1.17'
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import trl
from accelerate.utils import gather_object
from packaging.specifiers import SpecifierSet
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer

PACER_STATE_FILE = "eppo_pacer.json"
CLIPPED_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
"""TRL's loss types that clip the ratio to ``[1 - epsilon_low, 1 + epsilon_high]``."""


class EPPOGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with EPPO's per-task clip range; ``pacer`` defaults to
    ``EPPOPacer(eps0=args.epsilon)`` with the paper's α, β and bounds.

    Raises ``ValueError`` when the training dataset has no ``task_column`` or the loss
    type has no two-sided clip.
    """

    tested_trl = ">=1.16,<1.17"

    def __init__(
        self,
        *args: Any,
        pacer: EPPOPacer | None = None,
        task_column: str = "environment",
        **kwargs: Any,
    ) -> None:
        if trl.__version__ not in SpecifierSet(self.tested_trl):
            warnings.warn(
                f"EPPOGRPOTrainer is tested with trl{self.tested_trl}; this is trl "
                f"{trl.__version__}, whose private GRPOTrainer methods may differ",
                stacklevel=2,
            )
        super().__init__(*args, **kwargs)
        if self.loss_type not in CLIPPED_LOSS_TYPES:
            raise ValueError(
                f"EPPO paces the clip range of TRL's clipped losses {CLIPPED_LOSS_TYPES}; "
                f"loss_type={self.loss_type!r} has none"
            )
        columns = getattr(self.train_dataset, "column_names", None)
        if columns is not None and task_column not in columns:
            raise ValueError(
                f"the training dataset has no task column {task_column!r} (columns: "
                f"{columns}); pass task_column= or add one (build_multitask_dataset does)"
            )
        self.pacer = pacer if pacer is not None else EPPOPacer(eps0=float(self.epsilon_low))
        self.task_column = task_column
        self._eps_ratio_high = self.epsilon_high / self.epsilon_low
        self._task_names: list[str] = []  # a task's index in the batch's ``eppo_task`` tensor

    # ------------------------------------------------------------------ pacing

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        tasks = [str(row[self.task_column]) for row in inputs]
        if len(tasks) != output["completion_ids"].size(0):
            raise RuntimeError(f"{len(tasks)} rows but {output['completion_ids'].size(0)} samples")
        mode = self._mode()
        entropy = self._task_entropy(output, tasks)
        eps = self.pacer.update(entropy) if mode == "train" else {}
        for task, value in entropy.items():
            pace = self.pacer.tasks.get(task)
            self._metrics[mode][f"eppo/{task}/entropy"].append(value)
            if pace is not None:
                self._metrics[mode][f"eppo/{task}/eps"].append(pace.clip_eps)
                self._metrics[mode][f"eppo/{task}/zscore"].append(pace.zscore)
        for task in tasks:
            if task not in self._task_names:
                self._task_names.append(task)
        device = output["completion_ids"].device
        output["eppo_eps"] = torch.tensor(
            [[eps.get(task, self._current_eps(task))] for task in tasks], device=device
        )
        output["eppo_task"] = torch.tensor(
            [self._task_names.index(task) for task in tasks], device=device
        )
        return output

    def _mode(self) -> str:
        return "train" if self.model is not None and self.model.training else "eval"

    def _current_eps(self, task: str) -> float:
        pace = self.pacer.tasks.get(task)
        return pace.clip_eps if pace is not None else self.pacer.eps0

    def _trained_mask(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """The tokens TRL's loss trains on: completion tokens that are not tool output."""
        mask = batch["completion_mask"]
        return mask * batch["tool_mask"] if "tool_mask" in batch else mask

    def _task_entropy(self, output: Mapping[str, Any], tasks: Sequence[str]) -> dict[str, float]:
        """Eq. 5 per task: mean full-distribution token entropy over the trained tokens,
        summed over every process's samples."""
        completion_ids = output["completion_ids"]
        with torch.no_grad():
            _, entropies, _ = self._get_per_token_logps_and_entropies(
                self.model,
                torch.cat([output["prompt_ids"], completion_ids], dim=1),
                torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1),
                completion_ids.size(1),
                compute_entropy=True,
            )
        mask = self._trained_mask(output).float()
        per_sample = (entropies * mask).sum(dim=1).tolist(), mask.sum(dim=1).tolist()
        totals = self._sum_by_task(tasks, *per_sample)
        return {task: s / n for task, (s, n) in totals.items() if n > 0}

    def _sum_by_task(
        self, tasks: Sequence[str], sums: Sequence[float], counts: Sequence[float]
    ) -> dict[str, tuple[float, float]]:
        local: dict[str, tuple[float, float]] = {}
        for task, s, n in zip(tasks, sums, counts, strict=True):
            before = local.get(task, (0.0, 0.0))
            local[task] = (before[0] + s, before[1] + n)
        totals: dict[str, tuple[float, float]] = {}
        for task, (s, n) in gather_object(list(local.items())):
            before = totals.get(task, (0.0, 0.0))
            totals[task] = (before[0] + s, before[1] + n)
        return totals

    # ------------------------------------------------------------------ the loss

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        eps_low = inputs["eppo_eps"]
        eps_high = eps_low * self._eps_ratio_high
        logps: list[torch.Tensor] = []
        trl_logps = self._get_per_token_logps_and_entropies

        def recorded(*args: Any, **kwargs: Any) -> Any:
            result = trl_logps(*args, **kwargs)
            logps.append(result[0])
            return result

        # TRL's loss reads its clip bounds and its log-probs from the trainer: both are
        # swapped for this call only (the log-probs are recorded, not recomputed).
        saved = self.epsilon_low, self.epsilon_high
        self.epsilon_low, self.epsilon_high = eps_low, eps_high
        self._get_per_token_logps_and_entropies = recorded  # type: ignore[method-assign]
        try:
            loss: torch.Tensor = super()._compute_loss(model, inputs)
        finally:
            del self._get_per_token_logps_and_entropies
            self.epsilon_low, self.epsilon_high = saved
        self._log_clipped_share(inputs, logps[0].detach(), eps_low, eps_high)
        return loss

    def _log_clipped_share(
        self,
        inputs: Mapping[str, Any],
        logps: torch.Tensor,
        eps_low: torch.Tensor,
        eps_high: torch.Tensor,
    ) -> None:
        mask = self._trained_mask(inputs).float()
        old = inputs.get("old_per_token_logps")
        log_ratio = logps - (logps if old is None else old)
        if self.importance_sampling_level == "sequence":
            log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
        ratio = torch.exp(log_ratio)
        advantages = inputs["advantages"]
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1)
        clipped = ((ratio < 1 - eps_low) & (advantages < 0)) | (
            (ratio > 1 + eps_high) & (advantages > 0)
        )
        clipped_tokens = (clipped.float().expand_as(mask) * mask).sum(dim=1).tolist()
        tasks = [self._task_names[i] for i in inputs["eppo_task"].tolist()]
        mode = self._mode()
        totals = self._sum_by_task(tasks, clipped_tokens, mask.sum(dim=1).tolist())
        for task, (clipped_count, count) in totals.items():
            if count > 0:
                self._metrics[mode][f"eppo/{task}/clipped_share"].append(clipped_count / count)

    # ------------------------------------------------------------------ checkpoints

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(
                self._get_output_dir(trial=trial),
                f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}",
            )
            with open(os.path.join(folder, PACER_STATE_FILE), "w", encoding="utf-8") as handle:
                json.dump({"pacer": self.pacer.state_dict(), "tasks": self._task_names}, handle)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, PACER_STATE_FILE)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
            self.pacer.load_state_dict(state["pacer"])
            self._task_names = list(state["tasks"])
