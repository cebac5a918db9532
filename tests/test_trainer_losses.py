"""Clipped ratio loss, dual clip, k3 KL, token-mean reduction and chunked log-probs."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agentgym_eppo.trainer.algorithms.losses import (  # noqa: E402
    chunked_logprobs_and_entropy,
    clipped_policy_loss,
    k3_kl,
    token_losses,
    token_sum,
)


def _ratios(values):
    return torch.tensor(values, dtype=torch.float64)


def test_positive_advantage_is_clipped_above_the_upper_bound_only():
    loss, clipped = clipped_policy_loss(_ratios([0.5, 1.0, 1.5]), torch.tensor([2.0] * 3), 0.8, 1.2)
    # max(-A r, -A clip(r)): r=0.5 -> -1.0 (unclipped); r=1.0 -> -2; r=1.5 -> -2.4 (clipped)
    assert loss.tolist() == pytest.approx([-1.0, -2.0, -2.4])
    assert clipped.tolist() == [False, False, True]


def test_negative_advantage_is_clipped_below_and_dual_clipped_far_above():
    ratio = _ratios([0.5, 2.0, 4.0])
    loss, clipped = clipped_policy_loss(ratio, torch.tensor([-1.0] * 3), 0.8, 1.2, 3.0)
    # r=0.5 -> max(0.5, 0.8) = 0.8 (clipped); r=2 -> 2.0; r=4 -> min(4.0, 3.0) = 3.0 (dual)
    assert loss.tolist() == pytest.approx([0.8, 2.0, 3.0])
    assert clipped.tolist() == [True, False, True]


def test_per_token_bounds_are_honoured():
    loss, _ = clipped_policy_loss(
        _ratios([1.25, 1.25]),
        torch.tensor([1.0, 1.0]),
        torch.tensor([0.9, 0.7]),
        torch.tensor([1.1, 1.3]),
    )
    assert loss.tolist() == pytest.approx([-1.1, -1.25])


def test_dual_clip_constant_must_exceed_one():
    with pytest.raises(ValueError, match=r"dual clip constant must be > 1, got 1.0"):
        clipped_policy_loss(torch.ones(1), torch.ones(1), 0.8, 1.2, 1.0)


def test_gradient_of_the_unclipped_token_is_minus_advantage_times_ratio():
    logp = torch.tensor([math.log(1.1)], requires_grad=True)
    loss, _ = clipped_policy_loss(torch.exp(logp - 0.0), torch.tensor([0.5]), 0.8, 1.2)
    loss.sum().backward()
    assert logp.grad.item() == pytest.approx(-0.5 * 1.1)


def test_token_losses_tell_a_ratio_outside_the_range_from_a_clipped_gradient():
    # r=1.5 with A>0 is outside and clipped; r=1.5 with A<0 is outside but keeps its
    # gradient (the clip only binds on the side that would push the ratio further).
    ratio = _ratios([1.0, 1.5, 1.5, 0.5])
    terms = token_losses(
        ratio, torch.zeros(4), torch.zeros(4), torch.tensor([1.0, 1.0, -1.0, 1.0]), 0.8, 1.2
    )
    assert terms.outside.tolist() == [False, True, True, True]
    assert terms.clipped.tolist() == [False, True, False, False]


def test_k3_kl_matches_its_formula_and_is_zero_on_agreement():
    logp = torch.tensor([-1.0, -2.0, -0.5])
    ref = torch.tensor([-1.0, -1.0, -1.5])
    expected = [0.0, math.exp(1) - 1 - 1, math.exp(-1) + 1 - 1]
    assert k3_kl(logp, ref).tolist() == pytest.approx(expected)
    assert (k3_kl(logp, ref) >= 0).all()


def test_token_sum_is_the_batch_token_mean_across_micro_batches():
    logp = torch.zeros(3)
    terms = token_losses(
        ratio=torch.ones(3),
        logprobs=logp,
        entropy=torch.tensor([1.0, 2.0, 3.0]),
        advantages=torch.tensor([1.0, -2.0, 4.0]),
        lower=0.8,
        upper=1.2,
        ref_logprobs=torch.tensor([0.0, 0.0, math.log(2)]),
    )
    whole = token_sum(terms, batch_tokens=3, kl_coef=0.5, entropy_coef=0.1)
    kl_last = 2 - math.log(2) - 1
    expected = ((-1 + 2 - 4) + 0.5 * kl_last - 0.1 * 6) / 3
    assert whole.item() == pytest.approx(expected, abs=1e-6)
    first = token_losses(
        torch.ones(1), logp[:1], torch.tensor([1.0]), torch.tensor([1.0]), 0.8, 1.2
    )
    assert token_sum(first, batch_tokens=3, kl_coef=0.0).item() == pytest.approx(-1 / 3)


def test_chunked_logprobs_and_entropy_equal_the_full_softmax_with_gradients():
    torch.manual_seed(0)
    hidden = torch.randn(7, 5, requires_grad=True)
    weight = torch.randn(11, 5, requires_grad=True)
    targets = torch.randint(0, 11, (7,))
    logp, entropy = chunked_logprobs_and_entropy(
        hidden, weight, targets, temperature=0.8, chunk_size=3
    )
    full = torch.log_softmax((hidden @ weight.T) / 0.8, dim=-1)
    expected_logp = full.gather(-1, targets[:, None]).squeeze(-1)
    expected_entropy = -(full.exp() * full).sum(-1)
    assert torch.allclose(logp, expected_logp, atol=1e-6)
    assert torch.allclose(entropy, expected_entropy, atol=1e-6)
    (logp.sum() + entropy.sum()).backward()
    chunked_grad = hidden.grad.clone()
    hidden.grad = None
    (expected_logp.sum() + expected_entropy.sum()).backward()
    assert torch.allclose(chunked_grad, hidden.grad, atol=1e-5)


def test_uniform_distribution_has_entropy_log_vocabulary():
    _, entropy = chunked_logprobs_and_entropy(
        torch.zeros(2, 4), torch.randn(16, 4), torch.tensor([0, 3])
    )
    assert entropy.tolist() == pytest.approx([math.log(16)] * 2)
