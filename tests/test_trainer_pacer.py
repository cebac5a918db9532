"""The EPPO pacer (eqs. 5-11) on hand-computed sequences, appendix D's propositions, state."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer


def test_first_update_anchors_reference_and_gives_eps0():
    pacer = EPPOPacer()
    assert pacer.update({"os": 2.0, "db": 0.5}) == {"os": 0.2, "db": 0.2}
    assert pacer.tasks["os"].reference == 2.0
    assert pacer.tasks["os"].ema == 2.0
    assert pacer.tasks["db"].collapse_ratio == 1.0


def test_second_update_follows_eqs_6_to_11_by_hand():
    pacer = EPPOPacer(eps_min=0.01, eps_max=1.0)
    pacer.update({"os": 2.0, "db": 1.0})
    clip = pacer.update({"os": 1.0, "db": 3.0})
    ema_os = 0.95 * 2.0 + 0.05 * 1.0  # 1.95 (eq. 6)
    ema_db = 0.95 * 1.0 + 0.05 * 3.0  # 1.10
    r_os, r_db = ema_os / 2.0, ema_db / 1.0  # 0.975, 1.1 (eq. 7)
    mean = (r_os + r_db) / 2
    std = abs(r_os - r_db) / 2  # population std of two values
    z_os = (r_os - mean) / (std + 1e-8)  # eq. 8, about -1
    z_db = (r_db - mean) / (std + 1e-8)
    eps_os = 0.2 * (1 + 0.4 * math.tanh(z_os))  # eq. 9; EMA fell: no trend penalty
    eps_db = 0.2 * (1 + 0.4 * math.tanh(z_db)) / (1 + (ema_db - 1.0))  # eq. 11
    assert clip["os"] == pytest.approx(eps_os)
    assert clip["db"] == pytest.approx(eps_db)
    assert pacer.tasks["db"].ema_change == pytest.approx(0.1)
    assert pacer.tasks["os"].zscore == pytest.approx(-1.0, abs=1e-6)


def test_clamp_comes_last():
    pacer = EPPOPacer()
    pacer.update({"os": 2.0, "db": 1.0})
    clip = pacer.update({"os": 1.0, "db": 1.0})
    # unclamped os: 0.2 * (1 - 0.4 tanh 1) = 0.139 -> 0.15
    assert clip["os"] == 0.15
    assert clip["db"] == pytest.approx(0.2 * (1 + 0.4 * math.tanh(1.0)))


def test_one_task_or_equal_ratios_get_eps0_before_the_trend_constraint():
    single = EPPOPacer()
    single.update({"kg": 1.0})
    assert single.update({"kg": 0.2}) == {"kg": 0.2}
    equal = EPPOPacer()
    equal.update({"a": 2.0, "b": 1.0})
    assert equal.update({"a": 1.0, "b": 0.5}) == {"a": 0.2, "b": 0.2}


def test_trend_constraint_can_be_switched_off():
    pacer = EPPOPacer(trend_constraint=False)
    pacer.update({"kg": 1.0})
    assert pacer.update({"kg": 5.0}) == {"kg": 0.2}
    constrained = EPPOPacer(eps_min=0.01)
    constrained.update({"kg": 1.0})
    assert constrained.update({"kg": 5.0})["kg"] == pytest.approx(0.2 / 1.2)


def test_late_task_joins_without_touching_the_others_state():
    pacer = EPPOPacer()
    pacer.update({"os": 2.0})
    pacer.update({"os": 1.0})
    before = dict(vars(pacer.tasks["os"]))
    clip = pacer.update({"webshop": 3.0})
    assert set(clip) == {"webshop"}
    assert pacer.tasks["webshop"].reference == 3.0
    assert vars(pacer.tasks["os"])["ema"] == before["ema"]
    assert vars(pacer.tasks["os"])["reference"] == before["reference"]
    # the newcomer (R = 1) is ahead of os (R < 1) in the cohort: a wider range
    assert clip["webshop"] > 0.2


def test_a_step_without_any_task_paces_nothing():
    # dynamic sampling can leave a step with no trained task, even the first one
    pacer = EPPOPacer()
    assert pacer.update({}) == {}
    assert pacer.update({"os": 2.0}) == {"os": 0.2}
    assert pacer.update({}) == {} and pacer.tasks["os"].ema == 2.0


def test_bad_entropy_and_bad_hyperparameters_are_refused():
    pacer = EPPOPacer()
    with pytest.raises(ValueError, match=r"entropy of task 'os' must be a finite number >= 0"):
        pacer.update({"os": float("nan")})
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\), got 1.5"):
        EPPOPacer(alpha=1.5)
    with pytest.raises(ValueError, match=r"need 0 < eps_min <= eps_max"):
        EPPOPacer(eps_min=0.3, eps_max=0.2)


def test_state_round_trips_through_a_json_checkpoint():
    pacer = EPPOPacer(alpha=0.3)
    sequence = [{"os": 2.0, "db": 1.0}, {"os": 1.5, "db": 1.2}, {"db": 0.9}]
    for entropies in sequence:
        pacer.update(entropies)
    restored = EPPOPacer()
    restored.load_state_dict(json.loads(json.dumps(pacer.state_dict())))
    assert restored.state_dict() == pacer.state_dict()
    nxt = {"os": 1.0, "db": 1.3, "kg": 2.0}
    assert restored.update(nxt) == pacer.update(nxt)


entropy_values = st.floats(min_value=0.0, max_value=12.0, allow_nan=False)
steps = st.lists(
    st.dictionaries(
        st.sampled_from(["os", "db", "kg", "alfworld", "webshop"]), entropy_values, min_size=1
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(steps, st.floats(min_value=0.0, max_value=0.99))
def test_proposition_1_clip_is_uniformly_bounded(sequence, alpha):
    """Appendix D, Prop. 1: eps in [(1 - a) eps0, (1 + a) eps0] when eps_min >= (1 - a) eps0."""
    eps0 = 0.2
    pacer = EPPOPacer(eps0=eps0, alpha=alpha, eps_min=(1 - alpha) * eps0, eps_max=1.0)
    for entropies in sequence:
        for task_id, eps in pacer.update(entropies).items():
            assert (1 - alpha) * eps0 - 1e-12 <= eps <= (1 + alpha) * eps0 + 1e-12
            pace = pacer.tasks[task_id]
            assert (1 - alpha) * eps0 - 1e-12 <= pace.paced_eps <= (1 + alpha) * eps0 + 1e-12


@settings(max_examples=200, deadline=None)
@given(steps)
def test_proposition_2_trend_constraint_contracts_only_when_entropy_rises(sequence):
    """Appendix D, Prop. 2: gamma = 1 if dH <= 0, else 1 / (1 + dH) < 1 (no clamp here)."""
    pacer = EPPOPacer(eps_min=1e-9, eps_max=10.0)
    for entropies in sequence:
        for task_id, eps in pacer.update(entropies).items():
            pace = pacer.tasks[task_id]
            gamma = eps / pace.paced_eps
            if pace.ema_change <= 0:
                assert gamma == pytest.approx(1.0)
            else:
                assert gamma == pytest.approx(1 / (1 + pace.ema_change))
                assert gamma < 1 or pace.ema_change < 1e-15  # below float resolution


@given(
    st.floats(min_value=0.01, max_value=5.0),
    st.floats(min_value=0.01, max_value=5.0),
    st.floats(min_value=0.0, max_value=0.99),
)
def test_proposition_2_clip_is_lipschitz_in_the_entropy_rise(rise_a, rise_b, alpha):
    """Eq. 17: |eps(a) - eps(b)| <= (1 + alpha) eps0 |a - b| for positive rises (one task)."""

    def eps_after_rise(rise):
        pacer = EPPOPacer(alpha=alpha, beta=0.5, eps_min=1e-9, eps_max=10.0)
        pacer.update({"t": 1.0})
        # EMA change = (1 - beta) * (H - 1) = rise  ->  H = 1 + 2 * rise
        return pacer.update({"t": 1.0 + 2 * rise})["t"]

    bound = (1 + alpha) * 0.2 * abs(rise_a - rise_b)
    assert abs(eps_after_rise(rise_a) - eps_after_rise(rise_b)) <= bound + 1e-12
