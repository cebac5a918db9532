"""The statistics behind every learning claim: intervals and paired tests, exact where cheap.

Two kinds of pairing occur here. Within one run, an evaluation before and after
training plays the same instances (the same seed draws them), so success is compared
instance by instance: :func:`sign_test` on the per-instance differences (McNemar's
exact test when each instance is played once). Across runs, the methods of a
comparison share their training seeds, so a method's mean is compared with another's
seed by seed: :func:`paired_t_test`. Means over seeds get a Student-t interval
(:func:`mean_interval`), proportions a Wilson interval (:func:`wilson_interval`).

No SciPy: the t distribution comes from the regularized incomplete beta function
(a continued fraction, Numerical Recipes' ``betacf``), the binomial tail from exact
sums.

>>> round(t_cdf(2.776445, 4), 4)
0.975
>>> sign_test([1, 1, 1, 1, 1, 0, -1]).p_value  # 5 of 6 non-zero differences positive
0.109375
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ALTERNATIVES = ("greater", "less", "two-sided")


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2.0, 0.5)
    return 1.0 - tail if t > 0 else tail


def t_quantile(probability: float, df: float) -> float:
    """The ``probability`` quantile of Student's t (bisection on :func:`t_cdf`)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {probability}")
    low, high = -1e3, 1e3
    for _ in range(200):
        middle = 0.5 * (low + high)
        if t_cdf(middle, df) < probability:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


@dataclass(frozen=True)
class Interval:
    """A mean and its two-sided confidence interval."""

    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Mean of ``values`` with a Student-t interval (a single value: the interval is the point).

    >>> str(mean_interval([1.0, 2.0, 3.0]))
    '2.000 [-0.484, 4.484]'
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_interval needs at least one value")
    mean = sum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def mean_of_means_interval(groups: Sequence[Sequence[float]], confidence: float = 0.95) -> Interval:
    """The unweighted mean over groups of each group's mean, with a Student-t interval
    from the values' spread within each group: standard error ``sqrt(sum_k s_k^2 / n_k) /
    K`` and Welch-Satterthwaite degrees of freedom. With one group it is
    :func:`mean_interval`; a group of one value adds no variance.

    >>> str(mean_of_means_interval([[1.0, 2.0, 3.0]]))
    '2.000 [-0.484, 4.484]'
    >>> str(mean_of_means_interval([[0.0, 1.0] * 50, [1.0] * 4]))
    '0.750 [0.700, 0.800]'
    """
    groups = [list(map(float, g)) for g in groups if len(g)]
    if not groups:
        raise ValueError("mean_of_means_interval needs at least one non-empty group")
    k = len(groups)
    means = [sum(g) / len(g) for g in groups]
    mean = sum(means) / k
    variances = [  # (variance of the group's mean, its degrees of freedom)
        (sum((v - m) ** 2 for v in g) / (len(g) - 1) / len(g), len(g) - 1)
        for g, m in zip(groups, means, strict=True)
        if len(g) > 1
    ]
    total = sum(v for v, _ in variances)
    n = sum(len(g) for g in groups)
    if total == 0.0:
        return Interval(mean, mean, mean, n)
    df = total**2 / sum(v * v / d for v, d in variances)
    half = t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(total) / k
    return Interval(mean, mean - half, mean + half, n)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """A proportion with Wilson's score interval.

    >>> str(wilson_interval(30, 100))
    '0.300 [0.219, 0.396]'
    """
    if n <= 0:
        raise ValueError("wilson_interval needs n > 0")
    z = _normal_quantile(0.5 + confidence / 2.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, centre - half, centre + half, n)


def _normal_quantile(probability: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(probability)


@dataclass(frozen=True)
class TestResult:
    """A paired test: the mean difference (b - a), its interval, the statistic, the p-value."""

    name: str
    alternative: str
    difference: Interval
    statistic: float
    p_value: float
    method: str
    """How the p-value was had: ``exact`` (enumerated), ``t distribution``, or Monte
    Carlo with its resolution."""

    def __str__(self) -> str:
        return (
            f"{self.name} ({self.alternative}): difference {self.difference}, "
            f"statistic {self.statistic:.3f}, p = {self.p_value:.4g} ({self.method})"
        )


def _check(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")


def paired_t_test(
    a: Sequence[float], b: Sequence[float], alternative: str = "greater"
) -> TestResult:
    """Student's paired t-test of ``b`` against ``a`` (``greater``: is b's mean above a's?).

    >>> result = paired_t_test([0.1, 0.2, 0.3], [0.2, 0.4, 0.5])
    >>> round(result.p_value, 4)
    0.0189
    """
    _check(alternative)
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("paired_t_test needs two sequences of the same length >= 2")
    differences = [y - x for x, y in zip(a, b, strict=True)]
    interval = mean_interval(differences)
    n = len(differences)
    sd = math.sqrt(sum((d - interval.mean) ** 2 for d in differences) / (n - 1))
    if sd == 0.0:
        statistic = math.copysign(math.inf, interval.mean) if interval.mean else 0.0
    else:
        statistic = interval.mean / (sd / math.sqrt(n))
    upper = 1.0 - t_cdf(statistic, n - 1) if math.isfinite(statistic) else float(statistic < 0)
    p = {
        "greater": upper,
        "less": 1.0 - upper,
        "two-sided": min(1.0, 2.0 * min(upper, 1.0 - upper)),
    }[alternative]
    return TestResult("paired t-test", alternative, interval, statistic, p, "t distribution")


def sign_test(differences: Sequence[float], alternative: str = "greater") -> TestResult:
    """Exact sign test on paired differences (zeros dropped); with 0/1 outcomes it is
    McNemar's exact test. The statistic is the number of positive differences."""
    _check(alternative)
    positive = sum(1 for d in differences if d > 0)
    negative = sum(1 for d in differences if d < 0)
    n = positive + negative

    def at_least(k: int) -> float:
        return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n if n else 1.0

    upper, lower = at_least(positive), 1.0 - at_least(positive + 1) if n else 1.0
    p = {
        "greater": upper,
        "less": lower,
        "two-sided": min(1.0, 2.0 * min(upper, lower)),
    }[alternative]
    interval = mean_interval(list(differences)) if differences else Interval(0.0, 0.0, 0.0, 0)
    return TestResult("sign test", alternative, interval, float(positive), p, "exact")


EXACT_STATES = 2_000_000
"""The most distinct values of the statistic that the exact sign-flip null may hold
before :func:`paired_permutation_test` falls back to Monte Carlo."""

EXACT_WORK = 20 * EXACT_STATES
"""The most (value, count) pairs one convolution step of the exact null may combine:
a long group of one magnitude after many distinct values would otherwise take minutes
before the result's size could be checked."""


def _sign_flip_null(groups: Sequence[Sequence[float]]) -> dict[float, float] | None:
    """The exact null distribution of the mean of group means under sign flips.

    Each non-zero difference ``v`` of group ``g`` adds ``+|v|`` or ``-|v|`` times the
    group's weight ``1 / (G * n_g)`` with probability 1/2. Differences of one magnitude
    within a group add a binomial count, so the distribution is built by convolving one
    binomial per (group, magnitude): ``{value: probability}``, values rounded to 12
    decimals so that equal sums meet. ``None`` when it would hold more than
    :data:`EXACT_STATES` values or a step would combine more than :data:`EXACT_WORK`
    pairs (then only sampling is affordable).

    >>> null = _sign_flip_null([[1.0, 1.0]])
    >>> sorted(null.items())
    [(-1.0, 0.25), (0.0, 0.5), (1.0, 0.25)]
    """
    null: dict[float, float] = {0.0: 1.0}
    for values in groups:
        weight = 1.0 / (len(groups) * len(values))
        magnitudes: dict[float, int] = {}
        for v in values:
            if v:
                magnitudes[abs(v)] = magnitudes.get(abs(v), 0) + 1
        for magnitude, count in magnitudes.items():
            if len(null) * (count + 1) > EXACT_WORK:
                return None
            step = magnitude * weight
            binomial = [
                (step * (2 * k - count), math.comb(count, k) / 2**count) for k in range(count + 1)
            ]
            merged: dict[float, float] = {}
            for base, p in null.items():
                for shift, q in binomial:
                    key = round(base + shift, 12)
                    merged[key] = merged.get(key, 0.0) + p * q
            if len(merged) > EXACT_STATES:
                return None
            null = merged
    return null


def paired_permutation_test(
    differences: Mapping[str, Sequence[float]],
    alternative: str = "greater",
    rounds: int = 20_000,
    seed: int = 0,
) -> TestResult:
    """Is the mean over groups of each group's mean paired difference above 0?

    ``differences`` maps a group (a task) to its per-instance differences (after -
    before). The statistic is the unweighted mean over groups of the group means, the
    figure a "mean dev success over tasks" reports. Under the null hypothesis each
    difference is as likely to have the other sign. The p-value is exact wherever the
    null distribution can be enumerated (:func:`_sign_flip_null`: always for 0/1
    outcomes and for means of a few episodes per instance); otherwise it is the share
    of ``rounds`` seeded random sign flips (plus the observed one) at least as extreme,
    a Monte Carlo p whose resolution, ``1 / (rounds + 1)``, the result's ``method``
    states: a p at that floor means "at most about this", not this. The interval is
    :func:`mean_of_means_interval` of the same differences (their spread within each
    group, the instances the test flips).

    >>> result = paired_permutation_test({"a": [1, 1, 0, 1], "b": [0, 1, 1, 0, 1]})
    >>> round(result.statistic, 3), round(result.p_value, 4), result.method
    (0.675, 0.0156, 'exact')
    """
    _check(alternative)
    import random

    groups = [list(map(float, values)) for values in differences.values() if len(values)]
    if not groups:
        raise ValueError("paired_permutation_test needs at least one non-empty group")

    def statistic(signs: list[list[float]] | None) -> float:
        means = []
        for k, values in enumerate(groups):
            flipped = (
                values if signs is None else [v * s for v, s in zip(values, signs[k], strict=True)]
            )
            means.append(sum(flipped) / len(flipped))
        return sum(means) / len(means)

    observed = statistic(None)
    null = _sign_flip_null(groups)
    if null is not None:
        upper = sum(p for value, p in null.items() if value >= observed - 1e-9)
        lower = sum(p for value, p in null.items() if value <= observed + 1e-9)
        upper, lower, method = min(1.0, upper), min(1.0, lower), "exact"
    else:
        rng = random.Random(seed)
        above = below = 1  # the observed assignment counts once
        for _ in range(rounds):
            value = statistic([[rng.choice((-1.0, 1.0)) for _ in g] for g in groups])
            above += value >= observed - 1e-12
            below += value <= observed + 1e-12
        upper, lower = above / (rounds + 1), below / (rounds + 1)
        method = f"Monte Carlo, {rounds:,} sign flips, resolution {1 / (rounds + 1):.2g}"
    p = {"greater": upper, "less": lower, "two-sided": min(1.0, 2.0 * min(upper, lower))}[
        alternative
    ]
    interval = mean_of_means_interval(groups)
    return TestResult("paired permutation test", alternative, interval, observed, p, method)
