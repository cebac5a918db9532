"""Clip policies: fixed, DAPO clip-higher, EPPO (task-wise and global), DCPO and BAPO."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agentgym_eppo.trainer.algorithms.clip_policies import (  # noqa: E402
    BAPOClip,
    ClipTokens,
    DAPOClip,
    DCPOClip,
    EPPOClip,
    FixedClip,
)
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer  # noqa: E402


def _tokens(tasks, names=("os", "db"), old_logprobs=None, advantages=None, ratio=None):
    n = len(tasks)
    return ClipTokens(
        task_index=torch.tensor(tasks),
        task_names=list(names),
        old_logprobs=torch.zeros(n) if old_logprobs is None else torch.tensor(old_logprobs),
        advantages=torch.ones(n) if advantages is None else torch.tensor(advantages),
        ratio=torch.ones(n) if ratio is None else torch.tensor(ratio),
    )


def test_fixed_and_dapo_bounds():
    lower, upper = FixedClip().bounds(_tokens([0, 1]))
    assert lower.tolist() == pytest.approx([0.8, 0.8])
    assert upper.tolist() == pytest.approx([1.2, 1.2])
    lower, upper = DAPOClip().bounds(_tokens([0]))
    assert (lower.item(), upper.item()) == pytest.approx((0.8, 1.28))
    assert DAPOClip().begin_step({"os": 1.0}, {"os": 5}) == {"os": 0.28}


def test_eppo_gives_each_tasks_tokens_its_own_range():
    policy = EPPOClip(EPPOPacer())
    policy.begin_step({"os": 2.0, "db": 1.0}, {"os": 4, "db": 4})
    eps = policy.begin_step({"os": 1.0, "db": 1.0}, {"os": 4, "db": 4})
    lower, upper = policy.bounds(_tokens([0, 1, 1]))
    assert upper.tolist() == pytest.approx([1 + eps["os"], 1 + eps["db"], 1 + eps["db"]])
    assert lower.tolist() == pytest.approx([1 - eps["os"], 1 - eps["db"], 1 - eps["db"]])
    assert eps["os"] < eps["db"]


def test_eppo_without_taskwise_pacing_shares_one_token_weighted_range():
    pacer = EPPOPacer(eps_min=0.01)
    policy = EPPOClip(pacer, taskwise=False)
    assert policy.begin_step({"os": 2.0, "db": 1.0}, {"os": 1, "db": 3}) == {"os": 0.2, "db": 0.2}
    assert pacer.tasks["__all__"].reference == pytest.approx((2.0 + 3.0) / 4)
    eps = policy.begin_step({"os": 3.0, "db": 3.0}, {"os": 1, "db": 1})
    assert eps["os"] == eps["db"] < 0.2  # the global EMA rose: trend constraint


def test_eppo_refuses_tokens_of_a_task_it_was_not_paced_for():
    policy = EPPOClip(EPPOPacer())
    policy.begin_step({"os": 1.0}, {"os": 1})
    with pytest.raises(KeyError, match=r"no clip range for tasks \['db'\]"):
        policy.bounds(_tokens([0, 1]))


def test_eppo_accepts_a_task_without_tokens_this_step():
    policy = EPPOClip(EPPOPacer())
    eps = policy.begin_step({"os": 1.0}, {"os": 3, "db": 0})
    lower, upper = policy.bounds(_tokens([0, 0]))
    assert upper.tolist() == pytest.approx([1 + eps["os"]] * 2)
    assert lower.tolist() == pytest.approx([1 - eps["os"]] * 2)


def test_eppo_state_round_trips():
    policy = EPPOClip(EPPOPacer())
    policy.begin_step({"os": 2.0, "db": 1.0}, {"os": 1, "db": 1})
    other = EPPOClip(EPPOPacer(), taskwise=False)
    other.load_state_dict(policy.state_dict())
    assert other.taskwise
    nxt = {"os": 1.5, "db": 1.1}
    assert other.begin_step(nxt, {"os": 1, "db": 1}) == policy.begin_step(nxt, {"os": 1, "db": 1})


def test_dcpo_bounds_widen_for_rare_tokens():
    q = torch.tensor([1.0, 0.5, 0.01])
    lower, upper = DCPOClip().bounds(_tokens([0, 0, 0], old_logprobs=q.log().tolist()))
    expected_lower = [0.5 + 0.5 * math.sqrt(max(1 - 0.64 / x, 0)) for x in q.tolist()]
    expected_upper = [min(0.5 + 0.5 * math.sqrt(1 + 0.8 / x), 10.0) for x in q.tolist()]
    assert lower.tolist() == pytest.approx(expected_lower, abs=1e-6)
    assert upper.tolist() == pytest.approx(expected_upper, abs=1e-6)
    assert lower[2].item() == 0.5 and upper[2].item() == pytest.approx(0.5 + 0.5 * math.sqrt(81))


def test_bapo_keeps_its_start_bounds_when_positives_dominate():
    policy = BAPOClip()
    assert policy.balance(torch.tensor([1.0, 1.0]), torch.tensor([1.0, -0.5])) == (0.6, 1.2)


def test_bapo_raises_the_upper_bound_until_the_positive_share_reaches_rho0():
    # positive tokens at ratios 1.0 and 1.32 (A = 1); one negative token r = 1, A = -2.
    ratio = torch.tensor([1.0, 1.32, 1.0])
    advantages = torch.tensor([1.0, 1.0, -2.0])
    # c_high = 1.2, 1.25, 1.3: P = 1.0, N = 2.0 -> share 1/3 < 0.4; c_high = 1.35:
    # P = 2.32, share 2.32 / 4.32 = 0.54 -> stop at the first c_high above 1.32.
    low, high = BAPOClip().balance(ratio, advantages)
    assert low == 0.6
    assert high == pytest.approx(1.35)


def test_bapo_raises_the_lower_bound_once_the_upper_bound_is_capped():
    # only negatives: the share stays 0 until every negative token falls below c_low
    ratio = torch.tensor([0.7, 1.0])
    advantages = torch.tensor([0.1, -1.0])
    low, high = BAPOClip(max_high=1.3).balance(ratio, advantages)
    assert high == pytest.approx(1.3)
    assert low == pytest.approx(0.9)  # capped; the negative token at r = 1 still counts
    policy = BAPOClip(max_high=1.3)
    lower, upper = policy.bounds(
        _tokens([0, 0], advantages=advantages.tolist(), ratio=ratio.tolist())
    )
    assert lower.tolist() == pytest.approx([0.9, 0.9]) and upper.tolist() == pytest.approx(
        [1.3, 1.3]
    )
    assert policy.begin_step({"os": 1.0}, {"os": 2}) == {"os": pytest.approx(0.3)}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: DCPOClip(eps_low=0.0), r"need eps_low > 0 and eps_high > 0, got 0.0, 0.2"),
        (lambda: DCPOClip(eps_high=-0.1), r"need eps_low > 0 and eps_high > 0"),
        (lambda: DCPOClip(r_max=1.0), r"need r_max > 1, got 1.0"),
        (lambda: BAPOClip(c_low=1.0), r"need 0 < c_low < 1 < c_high, got 1.0, 1.2"),
        (lambda: BAPOClip(c_high=0.9), r"need 0 < c_low < 1 < c_high"),
        (lambda: BAPOClip(rho0=0.0), r"need 0 < rho0 < 1, got 0.0"),
        (lambda: BAPOClip(step_high=0.0), r"need step_high > 0 and step_low > 0"),
        (lambda: BAPOClip(max_high=1.1), r"need c_high <= max_high and c_low <= max_low < 1"),
        (lambda: BAPOClip(max_low=1.0), r"need c_high <= max_high and c_low <= max_low < 1"),
    ],
)
def test_dcpo_and_bapo_refuse_arguments_outside_their_ranges(build, message):
    with pytest.raises(ValueError, match=message):
        build()
