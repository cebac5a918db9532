"""Episode advantages: GRPO (eq. 2), RLOO, and AgentRL's task advantage normalization (eq. 4).

A multi-turn episode earns one scalar reward; every token the model generated in it
shares the episode's advantage. Groups are the G rollouts of one task instance
(``info["group"]`` of the vector env), identified here by any hashable key.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence

import torch

from agentgym_eppo.core.registry import Registry

from .defaults import GRPO_EPS, TASK_NORM_EPS


def _members(keys: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, key in enumerate(keys):
        members[key].append(index)
    return members


def grpo_advantages(
    rewards: torch.Tensor, groups: Sequence[Hashable], eps: float = GRPO_EPS
) -> torch.Tensor:
    """Eq. 2: ``(r - mean_group) / (std_group + eps)``, std over the group with 1/G (ddof 0).

    A group whose rewards are all equal gets advantage 0 for every member.
    """
    _check(rewards, groups)
    advantages = torch.zeros_like(rewards, dtype=torch.float64)
    for indices in _members(groups).values():
        group_rewards = rewards[indices].double()
        mean = group_rewards.mean()
        std = group_rewards.std(unbiased=False)
        advantages[indices] = (group_rewards - mean) / (std + eps)
    return advantages.to(torch.float32)


def rloo_advantages(rewards: torch.Tensor, groups: Sequence[Hashable]) -> torch.Tensor:
    """REINFORCE leave-one-out (Ahmadian et al., 2024): ``r_g - mean_{j != g} r_j``.

    Equal to ``G / (G - 1) * (r_g - mean_group)``; a group of one has no baseline and
    gets advantage 0.
    """
    _check(rewards, groups)
    advantages = torch.zeros_like(rewards, dtype=torch.float64)
    for indices in _members(groups).values():
        size = len(indices)
        if size < 2:
            continue
        group_rewards = rewards[indices].double()
        others_mean = (group_rewards.sum() - group_rewards) / (size - 1)
        advantages[indices] = group_rewards - others_mean
    return advantages.to(torch.float32)


def _check_estimator(name: str, estimator: object) -> None:
    if not callable(estimator):
        raise TypeError(
            f"advantage estimator {name!r}: expected a function (rewards, groups) -> "
            f"advantages, got {estimator!r}"
        )


ADVANTAGE_ESTIMATORS: Registry[Callable[[torch.Tensor, Sequence[Hashable]], torch.Tensor]] = (
    Registry(
        "advantage estimator",
        {"grpo": grpo_advantages, "rloo": rloo_advantages},
        check=_check_estimator,
    )
)
"""``algorithm.advantage`` -> the estimator: ``(rewards, groups) -> per-episode advantages``
(float32, one per episode)."""

register_advantage_estimator = ADVANTAGE_ESTIMATORS.register
"""``register_advantage_estimator(name)`` as a function decorator, or
``register_advantage_estimator(name, estimator)``: the estimator ``algorithm.advantage:
name`` selects."""


def mixed_groups(rewards: torch.Tensor, groups: Sequence[Hashable]) -> torch.Tensor:
    """Whether each episode's group holds at least two different rewards (a group that
    ended alike carries no policy-gradient signal: GRPO and RLOO give it 0).

    >>> mixed_groups(torch.tensor([1.0, 0.0, 1.0, 1.0]), ["a", "a", "b", "b"]).tolist()
    [True, True, False, False]
    """
    _check(rewards, groups)
    mixed = torch.zeros(rewards.shape, dtype=torch.bool)
    for indices in _members(groups).values():
        group_rewards = rewards[indices]
        mixed[indices] = bool((group_rewards != group_rewards[0]).any())
    return mixed


def normalize_by_task(
    advantages: torch.Tensor,
    tasks: Sequence[str],
    token_counts: torch.Tensor,
    eps: float = TASK_NORM_EPS,
    include: torch.Tensor | None = None,
) -> torch.Tensor:
    """Eq. 4 (AgentRL): standardise each task's token-level advantages in the batch.

    Every loss token of episode ``k`` carries ``advantages[k]``, so a task's token
    mean and (population) std weight each episode by its ``token_counts[k]``. Returns
    the normalized per-episode advantages; episodes with no loss token keep 0.

    ``include`` (one bool per episode; None: all, as eq. 4) limits the statistics to
    those episodes, and only they are normalized: the others keep advantage 0. With
    every episode in, a group whose rewards are all equal (advantage 0) comes out at
    ``-mean / std`` of its task, on every one of its tokens, whenever the task's
    token-weighted mean is not 0 (episodes of unequal length):

    >>> adv = torch.tensor([1.0, -1.0, 0.0, 0.0])  # a mixed group, then an equal one
    >>> tokens = torch.tensor([10, 30, 20, 20])  # the failure is the longer episode
    >>> [round(a, 2) for a in normalize_by_task(adv, ["os"] * 4, tokens).tolist()]
    [1.89, -1.13, 0.38, 0.38]
    >>> mixed = torch.tensor([True, True, False, False])
    >>> [round(a, 2) for a in normalize_by_task(adv, ["os"] * 4, tokens, include=mixed).tolist()]
    [1.73, -0.58, 0.0, 0.0]
    """
    _check(advantages, tasks)
    if token_counts.shape != advantages.shape:
        raise ValueError(
            f"token_counts must have one count per episode: shape {tuple(advantages.shape)}, "
            f"got {tuple(token_counts.shape)}"
        )
    if include is not None:
        if include.shape != advantages.shape:
            raise ValueError("include must hold one bool per episode")
        token_counts = torch.where(include, token_counts, 0)
    normalized = torch.zeros_like(advantages, dtype=torch.float64)
    for indices in _members(tasks).values():
        weights = token_counts[indices].double()
        total = weights.sum()
        if total <= 0:
            continue
        values = advantages[indices].double()
        mean = (weights * values).sum() / total
        std = torch.sqrt((weights * (values - mean) ** 2).sum() / total)
        normalized[indices] = torch.where(weights > 0, (values - mean) / (std + eps), 0.0)
    return normalized.to(torch.float32)


def _check(values: torch.Tensor, keys: Sequence[Hashable]) -> None:
    if values.dim() != 1 or values.shape[0] != len(keys):
        raise ValueError(
            f"expected a 1-D tensor with one value per key ({len(keys)}), "
            f"got shape {tuple(values.shape)}"
        )
