"""Intervals and paired tests against reference values computed with SciPy 1.14
(``scipy.stats.ttest_rel``, ``binomtest``, ``t.interval``) and Wilson's formula."""

from __future__ import annotations

import math

import pytest

from agentgym_eppo.trainer.analysis import stats


@pytest.mark.parametrize(
    ("t", "df", "expected"),
    [(2.776445105, 4, 0.975), (-1.5, 3, 0.11529), (0.0, 7, 0.5), (12.706204736, 1, 0.975)],
)
def test_t_cdf_matches_the_t_distribution(t: float, df: int, expected: float) -> None:
    assert stats.t_cdf(t, df) == pytest.approx(expected, abs=5e-5)


def test_t_quantile_inverts_the_cdf() -> None:
    assert stats.t_quantile(0.975, 4) == pytest.approx(2.776445105, abs=1e-6)
    assert stats.t_quantile(0.025, 9) == pytest.approx(-2.262157163, abs=1e-6)


def test_paired_t_test_matches_scipy_ttest_rel() -> None:
    a, b = [0.1, 0.2, 0.3, 0.25], [0.2, 0.4, 0.5, 0.2]
    greater = stats.paired_t_test(a, b, "greater")
    assert greater.statistic == pytest.approx(1.9044331628, abs=1e-8)
    assert greater.p_value == pytest.approx(0.0764809863, abs=1e-8)
    assert stats.paired_t_test(a, b, "two-sided").p_value == pytest.approx(2 * greater.p_value)
    assert stats.paired_t_test(a, b, "less").p_value == pytest.approx(1 - greater.p_value)


def test_identical_runs_give_no_evidence_of_a_difference() -> None:
    result = stats.paired_t_test([0.2, 0.3], [0.2, 0.3])
    assert result.statistic == 0.0 and result.p_value == pytest.approx(0.5)


def test_sign_test_is_the_exact_binomial_tail() -> None:
    differences = [1] * 9 + [-1] * 2 + [0] * 30  # zeros carry no information
    result = stats.sign_test(differences, "greater")
    assert result.statistic == 9
    assert result.p_value == pytest.approx(sum(math.comb(11, k) for k in range(9, 12)) / 2**11)
    assert result.p_value == pytest.approx(0.03271484375)
    assert stats.sign_test(differences, "less").p_value == pytest.approx(0.99414, abs=1e-5)


def test_mean_interval_is_student_t() -> None:
    interval = stats.mean_interval([0.12, 0.18, 0.15, 0.2, 0.1])
    assert interval.mean == pytest.approx(0.15)
    assert (interval.low, interval.high) == pytest.approx((0.0988048818, 0.2011951182), abs=1e-8)


def test_wilson_interval() -> None:
    interval = stats.wilson_interval(30, 100)
    assert (interval.low, interval.high) == pytest.approx((0.2189489, 0.3958485), abs=1e-6)
    assert stats.wilson_interval(0, 50).low == 0.0


def test_unknown_alternative_is_refused() -> None:
    with pytest.raises(ValueError, match="alternative must be one of"):
        stats.sign_test([1], "bigger")


def test_permutation_test_is_exact_where_the_null_can_be_enumerated() -> None:
    # One group of three +1s: 1 of the 8 equally likely sign patterns is as extreme.
    result = stats.paired_permutation_test({"os": [1, 1, 1]}, rounds=20_000, seed=1)
    assert result.statistic == 1.0
    assert result.p_value == 1 / 8
    assert result.method == "exact"


def test_exact_permutation_p_goes_below_the_monte_carlo_floor() -> None:
    # 20 of 20 instances improved in each of two tasks: p = 2**-40, far below the
    # 1 / 20,001 that 20,000 sign flips can resolve.
    result = stats.paired_permutation_test({"os": [1] * 20, "db": [1] * 20})
    assert result.method == "exact"
    assert result.p_value == pytest.approx(2.0**-40)


def test_exact_permutation_p_matches_brute_force_enumeration() -> None:
    import itertools

    differences = {"os": [1, 0, -1, 1, 0.5], "kg": [1, 1, -0.5]}
    values = [(1 / 2 / 5, v) for v in differences["os"]] + [
        (1 / 2 / 3, v) for v in differences["kg"]
    ]
    observed = sum(w * v for w, v in values)
    extreme = sum(
        sum(w * v * s for (w, v), s in zip(values, signs, strict=True)) >= observed - 1e-9
        for signs in itertools.product((1, -1), repeat=len(values))
    )
    result = stats.paired_permutation_test(differences)
    assert result.p_value == pytest.approx(extreme / 2 ** len(values))


def test_permutation_test_falls_back_to_monte_carlo_and_states_its_resolution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stats, "EXACT_STATES", 3)
    result = stats.paired_permutation_test({"os": [1, 1, 1]}, rounds=20_000, seed=1)
    assert result.p_value == pytest.approx(1 / 8, abs=0.01)
    assert result.method == "Monte Carlo, 20,000 sign flips, resolution 5e-05"


def test_permutation_test_weights_tasks_equally_and_finds_no_effect_in_noise() -> None:
    # A big task with no change beside a small task that improved: the statistic is the
    # mean of the two task means, not the mean over all 104 pairs.
    result = stats.paired_permutation_test({"os": [1, -1] * 50, "kg": [1, 1, 1, 1]}, seed=0)
    assert result.statistic == pytest.approx(0.5)
    balanced = stats.paired_permutation_test({"os": [1, -1] * 50}, seed=0)
    assert balanced.p_value > 0.4


def test_permutation_interval_is_over_instances_not_over_tasks() -> None:
    # Two tasks whose instances all improved or stayed: the test and the interval must
    # agree that the mean over tasks rose. A t interval over the two task means (1 degree
    # of freedom) spanned zero here; the interval over instances does not.
    differences = {"db": [1.0] * 20 + [0.0] * 12, "kg": [1.0] * 8 + [0.0] * 24}
    result = stats.paired_permutation_test(differences, seed=0)
    assert result.p_value < 0.001
    assert result.statistic == pytest.approx((20 / 32 + 8 / 32) / 2)
    assert 0.0 < result.difference.low < result.statistic < result.difference.high < 1.0


def test_mean_of_means_interval_with_one_group_is_the_t_interval() -> None:
    values = [0.0, 1.0, 1.0, -1.0, 0.5, 1.0]
    one = stats.mean_of_means_interval([values])
    plain = stats.mean_interval(values)
    assert (one.mean, one.low, one.high) == pytest.approx((plain.mean, plain.low, plain.high))


def test_mean_of_means_interval_degenerate_groups() -> None:
    # No spread anywhere: the interval is the point; single values add no variance; an
    # empty group is ignored, and nothing at all is refused.
    still = stats.mean_of_means_interval([[0.0, 0.0], [1.0], []])
    assert (still.mean, still.low, still.high) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="at least one non-empty group"):
        stats.mean_of_means_interval([[], []])


def test_a_null_too_costly_to_enumerate_falls_back_promptly() -> None:
    # 2**20 distinct sums from twenty distinct magnitudes, then a group of a thousand equal
    # ones: enumerating it would combine a billion pairs. It is sampled instead.
    import random

    rng = random.Random(0)
    differences = {"a": [rng.random() for _ in range(20)], "b": [1.0] * 1000}
    result = stats.paired_permutation_test(differences, rounds=200, seed=0)
    assert result.method.startswith("Monte Carlo, 200 sign flips")
    assert result.p_value <= 2 / 201
