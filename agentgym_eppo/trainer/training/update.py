"""One RL update: score the rollouts, compute advantages, pace the clip, run PPO epochs.

The order is the paper's data flow: rollouts -> advantages (eq. 2 or RLOO, then eq. 4)
-> the clip policy's ``begin_step`` with each task's mean token entropy (eq. 5, measured
on the step's rollouts under the policy that sampled them) -> clipped-ratio epochs
over mini-batches, gradients accumulated over token-capped micro-batches, one AdamW
step per mini-batch.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel

from agentgym_eppo.core import Status
from agentgym_eppo.trainer.algorithms.advantages import (
    grpo_advantages,
    normalize_by_task,
    rloo_advantages,
)
from agentgym_eppo.trainer.algorithms.clip_policies import ClipPolicy, ClipTokens
from agentgym_eppo.trainer.algorithms.losses import token_losses, token_sum
from agentgym_eppo.trainer.rollout.episodes import Episode

from .batching import micro_batches, token_logprobs


@dataclass(frozen=True)
class UpdateSettings:
    advantage: str = "grpo"
    task_adv_norm: bool = True
    kl_coef: float = 1e-4
    entropy_coef: float = 0.0
    dual_clip_c: float | None = 3.0
    ppo_epochs: int = 1
    mini_batches: int = 1
    micro_batch_tokens: int = 16384
    max_grad_norm: float = 1.0
    temperature: float = 0.8
    logprob_chunk: int = 1024
    bf16: bool = False


@dataclass
class Scored:
    """Per-episode tensors over its loss tokens, measured before the update."""

    old_logprobs: list[torch.Tensor]
    entropy: list[torch.Tensor]
    ref_logprobs: list[torch.Tensor] | None


@dataclass
class UpdateResult:
    loss: float = 0.0
    kl: float = 0.0
    grad_norm: float = 0.0
    tokens: int = 0
    task_entropy: dict[str, float] = field(default_factory=dict)
    task_tokens: dict[str, int] = field(default_factory=dict)
    task_clip_eps: dict[str, float] = field(default_factory=dict)
    task_clip_fraction: dict[str, float] = field(default_factory=dict)
    advantages: list[float] = field(default_factory=list)
    pacer_seconds: float = 0.0
    score_seconds: float = 0.0
    train_seconds: float = 0.0


class PolicyUpdater:
    """Owns the optimizer step of the RL loop (the model, its reference and the clip)."""

    def __init__(
        self,
        model: PreTrainedModel,
        optimizer: torch.optim.Optimizer,
        clip_policy: ClipPolicy,
        settings: UpdateSettings,
        pad_token_id: int,
        ref_model: PreTrainedModel | None = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.clip_policy = clip_policy
        self.settings = settings
        self.pad_token_id = pad_token_id
        self.ref_model = ref_model

    @torch.no_grad()
    def score(self, episodes: Sequence[Episode]) -> Scored:
        """Log-probs and entropy of every loss token under the current (rollout) policy,
        and under the reference when the KL term is on."""
        transcripts = [episode.transcript for episode in episodes]
        indices = list(range(len(episodes)))
        old: list[torch.Tensor] = [torch.zeros(0)] * len(episodes)
        entropy: list[torch.Tensor] = [torch.zeros(0)] * len(episodes)
        ref: list[torch.Tensor] | None = (
            [torch.zeros(0)] * len(episodes) if self._uses_reference else None
        )
        batches = micro_batches(
            transcripts, indices, self.settings.micro_batch_tokens, self.pad_token_id
        )
        for batch in batches:
            logp, ent = token_logprobs(
                self.model,
                batch,
                self.settings.temperature,
                self.settings.logprob_chunk,
                self.settings.bf16,
            )
            self._scatter(batch.members, batch.member_of_token, logp, old)
            self._scatter(batch.members, batch.member_of_token, ent, entropy)
            if ref is not None and self.ref_model is not None:
                ref_logp, _ = token_logprobs(
                    self.ref_model,
                    batch,
                    self.settings.temperature,
                    self.settings.logprob_chunk,
                    self.settings.bf16,
                )
                self._scatter(batch.members, batch.member_of_token, ref_logp, ref)
        return Scored(old, entropy, ref)

    @property
    def _uses_reference(self) -> bool:
        return self.ref_model is not None and self.settings.kl_coef != 0

    @staticmethod
    def _scatter(
        members: Sequence[int], owner: torch.Tensor, values: torch.Tensor, into: list[torch.Tensor]
    ) -> None:
        values = values.detach().float().cpu()
        for position, index in enumerate(members):
            into[index] = values[owner == position]

    def advantages(self, episodes: Sequence[Episode]) -> torch.Tensor:
        """Per-episode advantages: GRPO (eq. 2) or RLOO per group, then eq. 4 per task."""
        rewards = torch.tensor([episode.reward for episode in episodes], dtype=torch.float32)
        groups = [episode.group for episode in episodes]
        if self.settings.advantage == "grpo":
            advantages = grpo_advantages(rewards, groups)
        else:
            advantages = rloo_advantages(rewards, groups)
        if self.settings.task_adv_norm:
            counts = torch.tensor([episode.generated_tokens for episode in episodes])
            advantages = normalize_by_task(advantages, [e.task_id for e in episodes], counts)
        return advantages

    def step(self, episodes: Sequence[Episode], generator: torch.Generator) -> UpdateResult:
        """The whole update for one training step's episodes.

        Episodes that ended as ``task_error`` (a backend or worker failure, not the
        policy's doing) are left out of the advantages, the entropy and the loss; the
        step's metrics still count them.
        """
        episodes = [e for e in episodes if e.status != Status.TASK_ERROR.value]
        result = UpdateResult()
        started = time.perf_counter()
        scored = self.score(episodes)
        result.score_seconds = time.perf_counter() - started
        advantages = self.advantages(episodes)
        result.advantages = advantages.tolist()
        task_names = sorted({episode.task_id for episode in episodes})
        result.task_entropy, result.task_tokens = self.task_entropy(episodes, scored, task_names)
        result.tokens = sum(result.task_tokens.values())
        paced = time.perf_counter()
        result.task_clip_eps = self.clip_policy.begin_step(result.task_entropy, result.task_tokens)
        result.pacer_seconds = time.perf_counter() - paced
        if result.tokens == 0:
            return result
        trained = time.perf_counter()
        self._train(episodes, scored, advantages, task_names, generator, result)
        result.train_seconds = time.perf_counter() - trained
        return result

    def task_entropy(
        self, episodes: Sequence[Episode], scored: Scored, task_names: Sequence[str]
    ) -> tuple[dict[str, float], dict[str, int]]:
        """Each task's mean token entropy over its generated tokens (eq. 5), and its token
        count; a task without tokens this step has no entropy entry."""
        entropy_sum: dict[str, float] = defaultdict(float)
        tokens: dict[str, int] = defaultdict(int)
        for episode, ent in zip(episodes, scored.entropy, strict=True):
            entropy_sum[episode.task_id] += float(ent.sum())
            tokens[episode.task_id] += int(ent.numel())
        entropy = {t: entropy_sum[t] / tokens[t] for t in task_names if tokens[t]}
        return entropy, {t: tokens[t] for t in task_names}

    def _train(
        self,
        episodes: Sequence[Episode],
        scored: Scored,
        advantages: torch.Tensor,
        task_names: list[str],
        generator: torch.Generator,
        result: UpdateResult,
    ) -> None:
        settings = self.settings
        task_index = {name: k for k, name in enumerate(task_names)}
        clipped: dict[str, int] = defaultdict(int)
        counted: dict[str, int] = defaultdict(int)
        losses, kls, norms = [], [], []
        trainable = [i for i, episode in enumerate(episodes) if episode.generated_tokens > 0]
        transcripts = [episode.transcript for episode in episodes]
        self.model.train()
        for _ in range(settings.ppo_epochs):
            order = [trainable[i] for i in torch.randperm(len(trainable), generator=generator)]
            size = -(-len(order) // settings.mini_batches)
            for start in range(0, len(order), size):
                mini = order[start : start + size]
                batch_tokens = sum(episodes[i].generated_tokens for i in mini)
                loss_total = kl_total = 0.0
                for batch in micro_batches(
                    transcripts, mini, settings.micro_batch_tokens, self.pad_token_id
                ):
                    logp, entropy = token_logprobs(
                        self.model,
                        batch,
                        settings.temperature,
                        settings.logprob_chunk,
                        settings.bf16,
                    )
                    members = batch.members
                    device = logp.device
                    old = torch.cat([scored.old_logprobs[i] for i in members]).to(device)
                    ref = (
                        torch.cat([scored.ref_logprobs[i] for i in members]).to(device)
                        if scored.ref_logprobs is not None
                        else None
                    )
                    counts = torch.tensor([episodes[i].generated_tokens for i in members])
                    adv = advantages[members].repeat_interleave(counts).to(device)
                    owner_task = (
                        torch.tensor([task_index[episodes[i].task_id] for i in members])
                        .repeat_interleave(counts)
                        .to(device)
                    )
                    ratio = torch.exp(logp.detach().float() - old)
                    lower, upper = self.clip_policy.bounds(
                        ClipTokens(owner_task, task_names, old, adv, ratio)
                    )
                    terms = token_losses(
                        logp.float(), entropy, old, adv, lower, upper, ref, settings.dual_clip_c
                    )
                    loss = token_sum(terms, batch_tokens, settings.kl_coef, settings.entropy_coef)
                    loss.backward()
                    loss_total += float(loss.detach())
                    kl_total += float(terms.kl.detach().sum()) / batch_tokens
                    for name, k in task_index.items():
                        selected = owner_task == k
                        clipped[name] += int(terms.clipped[selected].sum())
                        counted[name] += int(selected.sum())
                norm = torch.nn.utils.clip_grad_norm_(
                    self.model.parameters(), settings.max_grad_norm
                )
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                losses.append(loss_total)
                kls.append(kl_total)
                norms.append(float(norm))
        result.loss = sum(losses) / len(losses)
        result.kl = sum(kls) / len(kls)
        result.grad_norm = sum(norms) / len(norms)
        result.task_clip_fraction = {
            name: clipped[name] / counted[name] for name in task_names if counted[name]
        }
