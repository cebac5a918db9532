"""GRPO (eq. 2), RLOO and task advantage normalization (eq. 4) on hand-computed values."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agentgym_eppo.trainer.algorithms.advantages import (  # noqa: E402
    grpo_advantages,
    mixed_groups,
    normalize_by_task,
    rloo_advantages,
)


def test_grpo_standardises_within_each_group_with_population_std():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5])
    groups = ["a", "a", "a", "a", "b", "b"]
    advantages = grpo_advantages(rewards, groups)
    # group a: mean 0.5, population std 0.5 -> +-1 (minus the 1e-6 in the denominator)
    scale = 0.5 / (0.5 + 1e-6)
    assert advantages[:4].tolist() == pytest.approx([scale, -scale, -scale, scale], abs=1e-7)
    # group b: equal rewards -> 0
    assert advantages[4:].tolist() == [0.0, 0.0]


def test_grpo_groups_need_not_be_contiguous():
    rewards = torch.tensor([1.0, 3.0, 0.0, 2.0])
    advantages = grpo_advantages(rewards, [0, 1, 0, 1])
    assert advantages.tolist() == pytest.approx([1.0, 1.0, -1.0, -1.0], abs=1e-5)


def test_rloo_subtracts_the_mean_of_the_other_members():
    rewards = torch.tensor([1.0, 0.0, 0.0, -0.2])
    advantages = rloo_advantages(rewards, ["g"] * 4)
    expected = [1.0 - (-0.2 / 3), 0.0 - (0.8 / 3), 0.0 - (0.8 / 3), -0.2 - (1.0 / 3)]
    assert advantages.tolist() == pytest.approx(expected, abs=1e-6)
    assert advantages.sum().item() == pytest.approx(0.0, abs=1e-6)


def test_rloo_group_of_one_has_zero_advantage():
    assert rloo_advantages(torch.tensor([0.7]), ["solo"]).tolist() == [0.0]


def test_task_normalization_weights_episodes_by_their_loss_tokens():
    advantages = torch.tensor([1.0, -1.0, 2.0, 4.0])
    tasks = ["os", "os", "db", "db"]
    counts = torch.tensor([3, 1, 1, 1])
    normalized = normalize_by_task(advantages, tasks, counts)
    # os tokens: [1, 1, 1, -1] -> mean 0.5, std sqrt(0.75)
    std = math.sqrt(0.75)
    assert normalized[:2].tolist() == pytest.approx(
        [0.5 / (std + 1e-6), -1.5 / (std + 1e-6)], abs=1e-6
    )
    # db tokens: [2, 4] -> mean 3, std 1
    assert normalized[2:].tolist() == pytest.approx([-1 / (1 + 1e-6), 1 / (1 + 1e-6)], abs=1e-6)
    # every task's loss tokens now have zero mean and unit variance
    token_values = normalized.repeat_interleave(counts)
    assert token_values[:4].mean().item() == pytest.approx(0.0, abs=1e-6)
    assert token_values[:4].std(unbiased=False).item() == pytest.approx(1.0, abs=1e-5)


def test_task_normalization_leaves_episodes_without_tokens_at_zero():
    normalized = normalize_by_task(
        torch.tensor([5.0, 1.0, 3.0]), ["kg", "kg", "kg"], torch.tensor([0, 2, 2])
    )
    assert normalized[0].item() == 0.0
    assert normalized[1:].tolist() == pytest.approx([-1.0, 1.0], abs=1e-5)


def test_eq4_over_every_episode_moves_an_equal_reward_group_off_zero():
    # eq. 4 as the paper writes it: the all-failed group (advantage 0 from GRPO) is in
    # the task's statistics, and comes out at -mean/std on each of its tokens
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    groups = ["a", "a", "a", "b", "b", "b"]
    counts = torch.tensor([10, 40, 40, 40, 40, 40])  # the failures are the long episodes
    advantages = grpo_advantages(rewards, groups)
    assert advantages[3:].tolist() == [0.0, 0.0, 0.0]
    every = normalize_by_task(advantages, ["os"] * 6, counts)
    assert (every[3:] > 0.2).all()  # the failures of group b are reinforced
    mixed = mixed_groups(rewards, groups)
    assert mixed.tolist() == [True, True, True, False, False, False]
    only_mixed = normalize_by_task(advantages, ["os"] * 6, counts, include=mixed)
    assert only_mixed[3:].tolist() == [0.0, 0.0, 0.0]
    tokens = only_mixed[:3].double().repeat_interleave(counts[:3])  # group a's tokens
    assert tokens.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert tokens.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-5)


def test_shapes_are_checked_with_a_clear_message():
    with pytest.raises(ValueError, match=r"one value per key \(3\), got shape \(2,\)"):
        grpo_advantages(torch.tensor([1.0, 0.0]), ["a", "a", "b"])
    with pytest.raises(ValueError, match=r"token_counts must have one count per episode"):
        normalize_by_task(torch.tensor([1.0, 0.0]), ["a", "a"], torch.tensor([1]))
