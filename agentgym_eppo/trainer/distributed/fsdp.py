"""FSDP2 training: the policy update of :class:`~agentgym_eppo.trainer.training.update.PolicyUpdater`
sharded over ranks with ``torch.distributed.fsdp.fully_shard``.

* The actor is sharded in fp32 (each decoder layer its own unit, the rest in the root
  unit), the frozen reference in bf16 (half the memory; it only scores tokens for the
  KL term). Gradient checkpointing recomputes each decoder layer in the backward.
* Each rank scores and trains on its share of the step's episodes (balanced by token
  count, fixed for the step so that its old log-probs stay local); micro-batches stay capped at ``micro_batch_tokens`` (EPPO appendix A: 16,384).
  FSDP's collectives need the same number of forward/backward passes on every rank, so
  a rank with fewer micro-batches runs zero-weighted one-token passes.
* The loss stays the token mean over the *whole* batch (every rank divides by the
  global token count); FSDP averages gradients over ranks, so each rank's loss is
  multiplied by the world size, and the sharded gradient equals the single-process one
  (``tests/test_scale_fsdp.py`` checks this on 2 gloo ranks).
* Advantages, the per-task entropy handed to the clip policy and the clip statistics
  are computed over all ranks, so every rank's clip policy takes the same step.

Launch with ``torchrun --nproc_per_node N`` (or Ray trainer ranks,
:mod:`.ray_trainer`); :func:`init_distributed` reads the usual environment variables,
:func:`exit_distributed` ends a torchrun rank and :func:`leave_distributed` a Ray one.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from typing import NoReturn

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel

from agentgym_eppo.trainer.algorithms.clip_policies import ClipPolicy
from agentgym_eppo.trainer.rollout.episodes import Episode
from agentgym_eppo.trainer.training.batching import MicroBatch, micro_batches, token_logprobs
from agentgym_eppo.trainer.training.models import set_gradient_checkpointing
from agentgym_eppo.trainer.training.update import (
    PolicyUpdater,
    Scored,
    UpdateSettings,
)


def init_distributed(backend: str | None = None) -> tuple[int, int]:
    """Join the process group torchrun (or a Ray rank) describes; return (rank, world size).

    ``backend`` None: nccl when CUDA is available, else gloo. On GPU each rank takes the
    device ``LOCAL_RANK``.
    """
    if not dist.is_initialized():
        chosen = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if chosen == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(chosen)
    return dist.get_rank(), dist.get_world_size()


def leave_distributed() -> None:
    """Every rank leaves the process group together (a barrier, then its destruction);
    nothing when there is none. A Ray trainer rank, whose process Ray keeps, ends here."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def exit_distributed(code: int = 0) -> NoReturn:
    """End a torchrun rank: :func:`leave_distributed`, then exit the process at once with
    ``code``, skipping the interpreter's teardown.

    Call it last, after every file is written; never in a process someone else owns (a
    Ray actor). Torch's gloo process group, still held by the sharded modules when Python
    tears down, now and then aborts a rank at exit ("terminate called without an active
    exception", about 1 run in 25 on a loaded 2-core machine), and torchrun then reports
    the whole job as failed.
    """
    leave_distributed()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Scorer(nn.Module):
    """The FSDP root: one forward = the trainer's chunked token log-probs and entropy.

    Calling the decoder and the output embedding inside this module's forward is what
    lets the root FSDP unit gather the embedding, final norm and head (which
    :func:`~agentgym_eppo.trainer.training.batching.token_logprobs` reaches outside the model's
    own ``forward``).
    """

    def __init__(self, model: PreTrainedModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, batch: MicroBatch, temperature: float, chunk_size: int, bf16: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return token_logprobs(self.model, batch, temperature, chunk_size, bf16)


def shard_model(
    model: PreTrainedModel,
    dtype: torch.dtype = torch.float32,
    gradient_checkpointing: bool = False,
    reshard_after_forward: bool = True,
) -> Scorer:
    """Cast ``model`` to ``dtype``, shard each decoder layer and the rest; return the root."""
    model.to(dtype)  # type: ignore[arg-type]
    if gradient_checkpointing:
        set_gradient_checkpointing(model, True)
    if torch.cuda.is_available():
        model.to(torch.device("cuda", torch.cuda.current_device()))  # type: ignore[arg-type]
    for layer in model.get_decoder().layers:
        fully_shard(layer, reshard_after_forward=reshard_after_forward)
    scorer = Scorer(model)
    fully_shard(scorer, reshard_after_forward=reshard_after_forward)
    return scorer


def shard_reference(model: PreTrainedModel, bf16: bool = True) -> Scorer:
    """The frozen reference: no gradients, bf16 unless told otherwise."""
    model.requires_grad_(False)
    model.eval()
    return shard_model(model, torch.bfloat16 if bf16 else torch.float32)


def rank_share(lengths: Sequence[int], rank: int, world: int) -> list[int]:
    """Indices into ``lengths`` this rank trains on: longest first to the least-loaded rank.

    Deterministic (ties go to the lower rank), so every rank computes the same split.
    """
    loads = [0] * world
    owner = [0] * len(lengths)
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        target = min(range(world), key=lambda r: (loads[r], r))
        owner[index] = target
        loads[target] += lengths[index]
    return [i for i in range(len(lengths)) if owner[i] == rank]


def _idle_batch(pad_token_id: int) -> MicroBatch:
    """A one-token batch whose loss is multiplied by zero (keeps collectives in step)."""
    return MicroBatch(
        members=[],
        input_ids=torch.full((1, 2), pad_token_id, dtype=torch.long),
        attention_mask=torch.ones((1, 2), dtype=torch.long),
        rows=torch.zeros(1, dtype=torch.long),
        positions=torch.zeros(1, dtype=torch.long),
        targets=torch.full((1,), pad_token_id, dtype=torch.long),
        member_of_token=torch.zeros(1, dtype=torch.long),
    )


def _all_sum(values: Sequence[float]) -> list[float]:
    tensor = torch.tensor(list(values), dtype=torch.float64)
    if torch.cuda.is_available() and dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor)
    return tensor.cpu().tolist()


def _all_max(value: int) -> int:
    tensor = torch.tensor([value], dtype=torch.long)
    if torch.cuda.is_available() and dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


class FSDPPolicyUpdater(PolicyUpdater):
    """:class:`PolicyUpdater` over FSDP2 ranks; every rank calls :meth:`step` with the
    same episodes (each trains on its share) and gets the same :class:`UpdateResult`."""

    def __init__(
        self,
        scorer: Scorer,
        optimizer: torch.optim.Optimizer,
        clip_policy: ClipPolicy,
        settings: UpdateSettings,
        pad_token_id: int,
        ref_scorer: Scorer | None = None,
    ) -> None:
        super().__init__(scorer.model, optimizer, clip_policy, settings, pad_token_id)
        self.scorer = scorer
        self.ref_scorer = ref_scorer
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    @property
    def _uses_reference(self) -> bool:
        return self.ref_scorer is not None and self.settings.kl_coef != 0

    def _batches(
        self, episodes: Sequence[Episode], indices: Sequence[int], owned: set[int]
    ) -> list[MicroBatch]:
        """This rank's micro-batches over the ``owned`` ones of ``indices``, padded to the
        ranks' largest count."""
        transcripts = [episode.transcript for episode in episodes]
        mine = [i for i in indices if i in owned]
        batches = (
            micro_batches(transcripts, mine, self.settings.micro_batch_tokens, self.pad_token_id)
            if mine
            else []
        )
        missing = _all_max(len(batches)) - len(batches)
        return batches + [_idle_batch(self.pad_token_id) for _ in range(missing)]

    def owned(self, episodes: Sequence[Episode]) -> set[int]:
        """The episodes this rank scores and trains on for the whole step."""
        lengths = [len(episode.transcript) for episode in episodes]
        return set(rank_share(lengths, self.rank, self.world))

    @torch.no_grad()
    def score(self, episodes: Sequence[Episode], trained: Sequence[int] | None = None) -> Scored:
        """Old (and reference) log-probs and entropy of this rank's episodes; the others
        stay empty. The reference scores every one of them, ``trained`` or not: ranks
        score in lock step over the same micro-batches."""
        s = self.settings
        old = [torch.zeros(0)] * len(episodes)
        entropy = [torch.zeros(0)] * len(episodes)
        ref = [torch.zeros(0)] * len(episodes) if self._uses_reference else None
        for batch in self._batches(episodes, range(len(episodes)), self.owned(episodes)):
            logp, ent = self.scorer(batch, s.temperature, s.logprob_chunk, s.bf16)
            if ref is not None and self.ref_scorer is not None:
                ref_logp, _ = self.ref_scorer(batch, s.temperature, s.logprob_chunk, False)
            if not batch.members:
                continue
            self._count(batch, passes=1 if ref is None else 2)
            self._scatter(batch.members, batch.member_of_token, logp, old)
            self._scatter(batch.members, batch.member_of_token, ent, entropy)
            if ref is not None:
                self._scatter(batch.members, batch.member_of_token, ref_logp, ref)
        rescored = sum(episode.generated_tokens > 0 for episode in episodes)  # every one
        return Scored(old, entropy, ref, rescored)

    def task_entropy(
        self, episodes: Sequence[Episode], scored: Scored, task_names: Sequence[str]
    ) -> tuple[dict[str, float], dict[str, int]]:
        """As one process computes it: a rank scores only its own episodes, so the
        entropy sums are added over ranks; token counts come from every episode."""
        local_sum: dict[str, float] = defaultdict(float)
        for episode, ent in zip(episodes, scored.entropy, strict=True):
            local_sum[episode.task_id] += float(ent.sum())
        sums = _all_sum([local_sum[t] for t in task_names])
        tokens = {
            t: sum(e.generated_tokens for e in episodes if e.task_id == t) for t in task_names
        }
        entropy = {t: sums[k] / tokens[t] for k, t in enumerate(task_names) if tokens[t]}
        return entropy, tokens

    # The update loop is PolicyUpdater._train; these hooks make it run over ranks.

    def _train_batches(
        self, episodes: Sequence[Episode], indices: Sequence[int]
    ) -> list[MicroBatch]:
        return self._batches(episodes, indices, self.owned(episodes))

    def _forward(self, batch: MicroBatch) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.settings
        return self.scorer(batch, s.temperature, s.logprob_chunk, s.bf16)

    def _backward(self, loss: torch.Tensor) -> None:
        (loss * self.world).backward()  # FSDP averages gradients over ranks

    def _sum_over_ranks(self, values: Sequence[float]) -> list[float]:
        return _all_sum(values)

    def _clip_grad_norm(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.max_grad_norm)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        return float(norm)


def full_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer gathered to full CPU tensors (all ranks must call it)."""
    state = {}
    for name, value in module.state_dict().items():
        if isinstance(value, DTensor):
            value = value.full_tensor()
        state[name] = value.detach().cpu()
    return state


__all__ = [
    "FSDPPolicyUpdater",
    "Scorer",
    "full_state_dict",
    "init_distributed",
    "rank_share",
    "shard_model",
    "shard_reference",
]
