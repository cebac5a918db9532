"""One RL update: score the rollouts, compute advantages, pace the clip, run PPO epochs.

The order is the paper's data flow: rollouts -> advantages (eq. 2 or RLOO, then eq. 4)
-> the clip policy's ``begin_step`` with each task's mean token entropy (eq. 5, measured
on the step's rollouts under the policy that sampled them) -> clipped-ratio epochs
over mini-batches, gradients accumulated over token-capped micro-batches, one AdamW
step per mini-batch.

:func:`micro_batch_loss` is the one loss step: the single-process :class:`PolicyUpdater`
and its FSDP2 form (:mod:`agentgym_eppo.trainer.distributed.fsdp`) both call it, and both
run the same epoch/mini-batch loop (:meth:`PolicyUpdater._train`); the FSDP form only
overrides where micro-batches come from, the forward, the backward and the sums over
ranks.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel

from agentgym_eppo.core import Status
from agentgym_eppo.trainer.algorithms import defaults as d
from agentgym_eppo.trainer.algorithms.advantages import (
    ADVANTAGE_ESTIMATORS,
    mixed_groups,
    normalize_by_task,
)
from agentgym_eppo.trainer.algorithms.clip_policies import ClipPolicy, ClipTokens
from agentgym_eppo.trainer.algorithms.losses import token_losses, token_sum
from agentgym_eppo.trainer.rollout.episodes import Episode, episodes_by_task, group_rewards

from .batching import FORWARD_TOKENS, MicroBatch, micro_batches, token_logprobs
from .flops import FlopCounter


@dataclass(frozen=True)
class UpdateSettings:
    """The update's knobs; defaults from :mod:`agentgym_eppo.trainer.algorithms.defaults`.

    ``old_logprobs`` says where the ratio's old log-probs and the pacer's entropy come
    from: ``rollout``, the sampling engine's own scores of the tokens it drew (the
    behaviour policy; an episode without a score for each of its tokens is re-scored);
    ``rescore``, a forward of the current weights over every episode before the update
    (verl's "bypass" and "decoupled" modes). The in-process engine samples with the
    weights the update starts from, so the two agree within float error there; they
    differ where the sampler lags (a stale engine, which reports no scores) or computes
    otherwise (bf16 decoding).
    """

    advantage: str = d.ADVANTAGE
    task_adv_norm: bool = d.TASK_ADV_NORM
    task_norm_over: str = d.TASK_NORM_OVER
    kl_coef: float = d.KL_COEF
    entropy_coef: float = d.ENTROPY_COEF
    dual_clip_c: float | None = d.DUAL_CLIP_C
    ppo_epochs: int = d.PPO_EPOCHS
    mini_batches: int = d.MINI_BATCHES
    micro_batch_tokens: int = d.MICRO_BATCH_TOKENS
    max_grad_norm: float = d.MAX_GRAD_NORM
    temperature: float = d.TEMPERATURE
    logprob_chunk: int = d.LOGPROB_CHUNK
    skip_zero_advantage: bool = False
    bf16: bool = False
    old_logprobs: str = d.OLD_LOGPROBS

    def __post_init__(self) -> None:
        ADVANTAGE_ESTIMATORS.lookup(self.advantage, where="advantage")
        if self.task_norm_over not in d.TASK_NORM_OVER_CHOICES:
            raise ValueError(
                f"task_norm_over must be one of {', '.join(d.TASK_NORM_OVER_CHOICES)}, "
                f"got {self.task_norm_over!r}"
            )
        if self.old_logprobs not in d.OLD_LOGPROBS_SOURCES:
            raise ValueError(
                f"old_logprobs must be one of {', '.join(d.OLD_LOGPROBS_SOURCES)}, "
                f"got {self.old_logprobs!r}"
            )
        if self.ppo_epochs < 1 or self.mini_batches < 1:
            raise ValueError(
                f"ppo_epochs and mini_batches must be >= 1, got {self.ppo_epochs}, "
                f"{self.mini_batches}"
            )


@dataclass
class Scored:
    """Per-episode tensors over its loss tokens, measured before the update."""

    old_logprobs: list[torch.Tensor]
    entropy: list[torch.Tensor]
    ref_logprobs: list[torch.Tensor] | None
    rescored: int = 0  # episodes whose old log-probs came from a scoring forward


@dataclass
class UpdateResult:
    """What one update did. The two clip shares are per task, over every token of every
    mini-batch and epoch of the step (the first mini-batch's ratios are all 1):

    * ``task_ratio_outside_share``: the share of tokens whose importance ratio lay outside
      their clip range ``[lower, upper]`` (``[1 - eps, 1 + eps]`` for fixed and EPPO);
    * ``task_clipped_share``: the share whose gradient the clip removed (a bound or the
      dual clip). A ratio outside the range on the side the advantage pushes away from
      keeps its gradient, so this share is at most the first.
    """

    loss: float = 0.0
    kl: float = 0.0
    grad_norm: float = 0.0
    lr: float = 0.0  # the optimizer's learning rate (first parameter group) this update
    tokens: int = 0
    rescored_episodes: int = 0
    task_entropy: dict[str, float] = field(default_factory=dict)
    task_tokens: dict[str, int] = field(default_factory=dict)
    task_clip_eps: dict[str, float] = field(default_factory=dict)
    task_ratio_outside_share: dict[str, float] = field(default_factory=dict)
    task_clipped_share: dict[str, float] = field(default_factory=dict)
    advantages: list[float] = field(default_factory=list)
    pacer_seconds: float = 0.0
    score_seconds: float = 0.0
    train_seconds: float = 0.0
    gflop: float = 0.0  # the scoring, reference and training passes' work (over all ranks)


def mixed_group_share(episodes: Sequence[Episode]) -> float:
    """The share of the episodes' GRPO groups whose rewards are not all equal: the groups
    that give a group-relative advantage anything but zero (``task_error`` episodes, which
    the update leaves out, do not count: :func:`~agentgym_eppo.trainer.rollout.episodes.group_rewards`).

    >>> from agentgym_eppo.trainer.rollout.chat import Transcript
    >>> def played(group, reward):
    ...     return Episode(0, "os", group, "s", Transcript([1], [1]), reward=reward)
    >>> mixed_group_share([played("a", 1.0), played("a", 0.0), played("b", 0.0), played("b", 0.0)])
    0.5
    """
    rewards = group_rewards(episodes)
    return sum(len(r) > 1 for r in rewards.values()) / max(1, len(rewards))


def step_record(
    step: int,
    episodes: Sequence[Episode],
    result: UpdateResult,
    paces: Mapping[str, Any],
    rollout_seconds: float,
    started: float,
    *,
    trained: Sequence[Episode] | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    """The ``metrics.jsonl`` record of one RL step (every field: ``docs/trainer.md``).
    ``episodes`` are all the step played; ``trained`` those given to the update (all of
    them unless dynamic sampling, over ``rounds`` rounds, kept fewer); ``paces`` each
    task's :class:`~agentgym_eppo.trainer.algorithms.pacer.TaskPace`."""
    tasks: dict[str, dict[str, Any]] = {}
    for task_id, played in episodes_by_task(episodes).items():
        pace = paces.get(task_id)
        tasks[task_id] = {
            "success": sum(e.success for e in played) / len(played),
            "reward": sum(e.reward for e in played) / len(played),
            "episode_length": sum(e.turns for e in played) / len(played),
            "mixed_groups": mixed_group_share(played),
            "aborts": dict(Counter(e.status for e in played if e.status != "completed")),
            "tokens": result.task_tokens.get(task_id, 0),
            "entropy": result.task_entropy.get(task_id),
            "entropy_ema": pace.ema if pace else None,
            "collapse_ratio": pace.collapse_ratio if pace else None,
            "zscore": pace.zscore if pace else None,
            "clip_eps": result.task_clip_eps.get(task_id),
            "ratio_outside_share": result.task_ratio_outside_share.get(task_id, 0.0),
            "clipped_share": result.task_clipped_share.get(task_id, 0.0),
        }
    seconds = time.perf_counter() - started
    return {
        "step": step,
        "global": {
            "loss": result.loss,
            "kl": result.kl,
            "grad_norm": result.grad_norm,
            "lr": result.lr,
            "tokens": result.tokens,
            "rescored_episodes": result.rescored_episodes,
            "episodes": len(episodes),
            "trained_episodes": len(episodes if trained is None else trained),
            "rounds": rounds,
            "success": sum(e.success for e in episodes) / max(1, len(episodes)),
            "reward": sum(e.reward for e in episodes) / max(1, len(episodes)),
            "seconds": seconds,
            "rollout_seconds": rollout_seconds,
            "score_seconds": result.score_seconds,
            "train_seconds": result.train_seconds,
            "pacer_seconds": result.pacer_seconds,
            "update_gflop": result.gflop,
        },
        "tasks": tasks,
    }


@dataclass
class MicroLoss:
    """One micro-batch's part of the update (see :func:`micro_batch_loss`)."""

    loss: torch.Tensor  # this micro-batch's share of the mini-batch's token-mean loss
    kl: float  # its share of the mini-batch's mean KL
    task_of_token: torch.Tensor  # [N] long, on the CPU
    outside: torch.Tensor  # [N] bool, on the CPU: the ratio lies outside its bounds
    clipped: torch.Tensor  # [N] bool, on the CPU: the clip removed the token's gradient


@dataclass
class StepContext:
    """What every micro-batch of one update reads: the step's episodes and their scores."""

    episodes: Sequence[Episode]
    scored: Scored
    advantages: torch.Tensor  # [episodes]
    task_names: list[str]
    trained: list[int]  # the episodes the loss sees (PolicyUpdater._trained)

    def __post_init__(self) -> None:
        self.task_index = {name: k for k, name in enumerate(self.task_names)}


def micro_batch_loss(
    batch: MicroBatch,
    logp: torch.Tensor,
    entropy: torch.Tensor,
    context: StepContext,
    batch_tokens: int,
    clip_policy: ClipPolicy,
    settings: UpdateSettings,
) -> MicroLoss:
    """The loss of one micro-batch given the policy's log-probs and entropy on its tokens.

    The importance ratio is computed once: its detached value goes to the clip policy for
    the bounds, the ratio itself (with its gradient) into the clipped surrogate.
    """
    members = batch.members
    device = logp.device
    episodes, scored = context.episodes, context.scored
    old = torch.cat([scored.old_logprobs[i] for i in members]).to(device)
    ref = (
        torch.cat([scored.ref_logprobs[i] for i in members]).to(device)
        if scored.ref_logprobs is not None
        else None
    )
    counts = torch.tensor([episodes[i].generated_tokens for i in members])
    adv = context.advantages[members].repeat_interleave(counts).to(device)
    task_of_token = torch.tensor(
        [context.task_index[episodes[i].task_id] for i in members]
    ).repeat_interleave(counts)
    logp = logp.float()
    ratio = torch.exp(logp - old)
    lower, upper = clip_policy.bounds(
        ClipTokens(task_of_token.to(device), context.task_names, old, adv, ratio.detach())
    )
    terms = token_losses(ratio, logp, entropy, adv, lower, upper, ref, settings.dual_clip_c)
    loss = token_sum(terms, batch_tokens, settings.kl_coef, settings.entropy_coef)
    return MicroLoss(
        loss=loss,
        kl=float(terms.kl.detach().sum()) / batch_tokens,
        task_of_token=task_of_token,
        outside=terms.outside.cpu(),
        clipped=terms.clipped.cpu(),
    )


class ClipCounts:
    """Per-task token counts behind :class:`UpdateResult`'s two clip shares."""

    def __init__(self, tasks: int) -> None:
        self.counts = torch.zeros(3, tasks, dtype=torch.float64)  # outside, clipped, all

    def add(self, micro: MicroLoss) -> None:
        tasks = self.counts.shape[1]
        task = micro.task_of_token
        self.counts[0] += torch.bincount(task[micro.outside], minlength=tasks).double()
        self.counts[1] += torch.bincount(task[micro.clipped], minlength=tasks).double()
        self.counts[2] += torch.bincount(task, minlength=tasks).double()

    def shares(
        self, task_names: Sequence[str], totals: Sequence[float]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """``(ratio outside, gradient clipped)`` per task from the flattened ``totals``."""
        n = len(task_names)
        outside, clipped, counted = totals[:n], totals[n : 2 * n], totals[2 * n :]
        return (
            {name: outside[k] / counted[k] for k, name in enumerate(task_names) if counted[k]},
            {name: clipped[k] / counted[k] for k, name in enumerate(task_names) if counted[k]},
        )


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
        self.flops = FlopCounter(model)

    @torch.no_grad()
    def score(self, episodes: Sequence[Episode], trained: Sequence[int] | None = None) -> Scored:
        """Log-probs and entropy of every loss token under the policy that sampled it, and,
        when the KL term is on, reference log-probs of the episodes in ``trained``
        (default: all with a loss token; the others never reach the loss). With
        ``old_logprobs: rollout`` an episode the engine scored keeps those scores; the
        others are scored by a forward of the current weights. An episode without loss
        tokens gets empty tensors and is in no micro-batch."""
        s = self.settings
        transcripts = [episode.transcript for episode in episodes]
        with_tokens = [i for i, episode in enumerate(episodes) if episode.generated_tokens > 0]
        old: list[torch.Tensor] = [torch.zeros(0)] * len(episodes)
        entropy: list[torch.Tensor] = [torch.zeros(0)] * len(episodes)
        rescored = []
        for i in with_tokens:
            sampled = episodes[i].behaviour_scores() if s.old_logprobs == "rollout" else None
            if sampled is None:
                rescored.append(i)
                continue
            old[i] = torch.tensor(sampled.logprobs, dtype=torch.float32)
            entropy[i] = torch.tensor(sampled.entropy, dtype=torch.float32)
        batches = micro_batches(transcripts, rescored, s.micro_batch_tokens, self.pad_token_id)
        for batch in batches:
            logp, ent = token_logprobs(
                self.model, batch, s.temperature, s.logprob_chunk, s.bf16, FORWARD_TOKENS
            )
            self._count(batch)
            self._scatter(batch.members, batch.member_of_token, logp, old)
            self._scatter(batch.members, batch.member_of_token, ent, entropy)
        if not self._uses_reference or self.ref_model is None:
            return Scored(old, entropy, None, len(rescored))
        ref: list[torch.Tensor] = [torch.zeros(0)] * len(episodes)
        referenced = with_tokens if trained is None else list(trained)
        if referenced != rescored:  # else the policy's micro-batches serve
            batches = micro_batches(
                transcripts, referenced, s.micro_batch_tokens, self.pad_token_id
            )
        for batch in batches:
            ref_logp, _ = token_logprobs(
                self.ref_model, batch, s.temperature, s.logprob_chunk, s.bf16, FORWARD_TOKENS
            )
            self._count(batch)
            self._scatter(batch.members, batch.member_of_token, ref_logp, ref)
        return Scored(old, entropy, ref, len(rescored))

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
        """Per-episode advantages: the configured estimator per group, then eq. 4 per task."""
        rewards = torch.tensor([episode.reward for episode in episodes], dtype=torch.float32)
        groups = [episode.group for episode in episodes]
        estimator = ADVANTAGE_ESTIMATORS.lookup(self.settings.advantage, where="advantage")
        advantages = estimator(rewards, groups)
        if self.settings.task_adv_norm:
            counts = torch.tensor([episode.generated_tokens for episode in episodes])
            include = (
                mixed_groups(rewards, groups)
                if self.settings.task_norm_over == "mixed_groups"
                else None
            )
            advantages = normalize_by_task(
                advantages, [e.task_id for e in episodes], counts, include=include
            )
        return advantages

    def step(self, episodes: Sequence[Episode], generator: torch.Generator) -> UpdateResult:
        """The whole update for one training step's episodes.

        Episodes that ended as ``task_error`` (a backend or worker failure, not the
        policy's doing) are left out of the advantages, the entropy and the loss; the
        step's metrics still count them.
        """
        episodes = [e for e in episodes if e.status != Status.TASK_ERROR.value]
        result = UpdateResult(lr=self.optimizer.param_groups[0]["lr"])
        advantages = self.advantages(episodes)
        result.advantages = advantages.tolist()
        started = time.perf_counter()
        trained_episodes = self._trained(episodes, advantages)
        scored = self.score(episodes, trained_episodes)
        result.score_seconds = time.perf_counter() - started
        result.rescored_episodes = scored.rescored
        task_names = sorted({episode.task_id for episode in episodes})
        result.task_entropy, result.task_tokens = self.task_entropy(episodes, scored, task_names)
        result.tokens = sum(result.task_tokens.values())
        paced = time.perf_counter()
        result.task_clip_eps = self.clip_policy.begin_step(result.task_entropy, result.task_tokens)
        result.pacer_seconds = time.perf_counter() - paced
        if result.tokens == 0:
            result.gflop = self._gflop_counted()
            return result
        trained = time.perf_counter()
        context = StepContext(episodes, scored, advantages, task_names, trained_episodes)
        self._train(context, generator, result)
        result.train_seconds = time.perf_counter() - trained
        result.gflop = self._gflop_counted()
        return result

    def _count(self, batch: MicroBatch, passes: int = 1) -> None:
        """Count ``passes`` forward-pass equivalents over ``batch``'s unpadded rows."""
        self.flops.add(batch.lengths, passes)

    def _gflop_counted(self) -> float:
        """The step's counted GFLOP, summed over ranks (a collective under FSDP)."""
        return self._sum_over_ranks([self.flops.take()])[0] / 1e9

    def _trained(self, episodes: Sequence[Episode], advantages: torch.Tensor) -> list[int]:
        """The episodes the loss sees: all with a loss token, less (with
        ``skip_zero_advantage``) those whose advantage is exactly 0."""
        skip = self.settings.skip_zero_advantage
        return [
            i
            for i, episode in enumerate(episodes)
            if episode.generated_tokens > 0 and not (skip and float(advantages[i]) == 0.0)
        ]

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

    # The loop below is shared with the FSDP updater; these five hooks are what differ.

    def _train_batches(
        self, episodes: Sequence[Episode], indices: Sequence[int]
    ) -> list[MicroBatch]:
        """The micro-batches of ``indices`` this process trains on."""
        transcripts = [episode.transcript for episode in episodes]
        return micro_batches(
            transcripts, indices, self.settings.micro_batch_tokens, self.pad_token_id
        )

    def _forward(self, batch: MicroBatch) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.settings
        return token_logprobs(
            self.model, batch, s.temperature, s.logprob_chunk, s.bf16, FORWARD_TOKENS
        )

    def _backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def _sum_over_ranks(self, values: Sequence[float]) -> list[float]:
        return list(values)

    def _clip_grad_norm(self) -> float:
        return float(
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.max_grad_norm)
        )

    def _train(
        self, context: StepContext, generator: torch.Generator, result: UpdateResult
    ) -> None:
        """PPO epochs over shuffled mini-batches, one optimizer step per mini-batch.

        With ``skip_zero_advantage`` the mini-batches are drawn as without it (the same
        episodes, the same token-mean denominator), then their zero-advantage episodes are
        left out of the forward and backward; a mini-batch left empty takes no step.
        """
        settings = self.settings
        episodes = context.episodes
        counts = ClipCounts(len(context.task_names))
        losses, kls, norms = [], [], []
        trainable = [i for i, episode in enumerate(episodes) if episode.generated_tokens > 0]
        trained = set(context.trained)
        self.model.train()
        for _ in range(settings.ppo_epochs):
            order = [trainable[i] for i in torch.randperm(len(trainable), generator=generator)]
            size = -(-len(order) // settings.mini_batches)
            for start in range(0, len(order), size):
                mini = order[start : start + size]
                batch_tokens = sum(episodes[i].generated_tokens for i in mini)
                mini = [i for i in mini if i in trained]
                if not mini:
                    continue
                loss_total = kl_total = 0.0
                for batch in self._train_batches(episodes, mini):
                    logp, entropy = self._forward(batch)
                    if not batch.members:  # an FSDP rank's idle pass: collectives stay in step
                        self._backward(logp.sum() * 0.0)
                        continue
                    self._count(batch, passes=3)  # forward and backward
                    micro = micro_batch_loss(
                        batch, logp, entropy, context, batch_tokens, self.clip_policy, settings
                    )
                    self._backward(micro.loss)
                    loss_total += float(micro.loss.detach())
                    kl_total += micro.kl
                    counts.add(micro)
                norm = self._clip_grad_norm()
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                total_loss, total_kl = self._sum_over_ranks([loss_total, kl_total])
                losses.append(total_loss)
                kls.append(total_kl)
                norms.append(norm)
        if losses:
            result.loss = sum(losses) / len(losses)
            result.kl = sum(kls) / len(kls)
            result.grad_norm = sum(norms) / len(norms)
        totals = self._sum_over_ranks(counts.counts.flatten().tolist())
        result.task_ratio_outside_share, result.task_clipped_share = counts.shares(
            context.task_names, totals
        )
