"""The three entropy diagnostics of figure 1(c), on hand-made curves whose answers are known."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym_eppo.trainer.analysis import diagnostics
from agentgym_eppo.trainer.analysis.diagnostics import (
    crossover_count,
    diagnose_curves,
    late_spike_amplitude,
    late_window,
    trend_r2,
    trend_r2_per_task,
)

LOG_T = np.log(np.arange(1, 4, dtype=np.float64))


def test_docstring_examples_hold() -> None:
    assert doctest.testmod(diagnostics).failed == 0


# --- crossover count -------------------------------------------------------------------------


def test_crossover_counts_each_flip_of_a_pair() -> None:
    assert crossover_count({"a": [3, 1, 3], "b": [2, 2, 2]}) == 2


def test_crossover_sums_over_unordered_pairs() -> None:
    # a-b, a-c and b-c each go from negative through zero to positive: one crossing each.
    curves = {"a": [1, 2, 3], "b": [2, 2, 2], "c": [3, 2, 1]}
    assert crossover_count(curves) == 3


def test_crossover_through_a_tie_counts_once_and_a_touch_counts_none() -> None:
    assert crossover_count({"a": [1, 0, -1], "b": [0, 0, 0]}) == 1
    assert crossover_count({"a": [1, 0, 1], "b": [0, 0, 0]}) == 0
    assert crossover_count({"a": [0, 0, 1, 0, 0, -1], "b": [0] * 6}) == 1


def test_crossover_of_equal_or_parallel_curves_is_zero() -> None:
    assert crossover_count({"a": [0.5] * 5, "b": [0.5] * 5}) == 0
    assert crossover_count({"a": [5, 4, 3], "b": [4, 3, 2], "c": [3, 2, 1]}) == 0


def test_crossover_of_one_task_or_none_is_zero() -> None:
    assert crossover_count({"a": [3, 1, 2, 0]}) == 0
    assert crossover_count({}) == 0


def test_crossover_remembers_the_sign_across_missing_steps() -> None:
    assert crossover_count({"a": [1, math.nan, 3], "b": [2, 2, 2]}) == 1
    assert crossover_count({"a": [3, math.nan, 3], "b": [2, 2, 2]}) == 0


def test_crossover_counts_every_flip_of_an_oscillation() -> None:
    a = [1.0, -1.0] * 5
    assert crossover_count({"a": a, "b": [0.0] * 10}) == 9


@given(
    st.lists(
        st.lists(st.integers(-5, 5), min_size=6, max_size=6),
        min_size=2,
        max_size=4,
    )
)
def test_crossover_is_unchanged_by_a_common_increasing_map_and_by_reversing_time(
    rows: list[list[int]],
) -> None:
    curves = {f"t{k}": row for k, row in enumerate(rows)}
    count = crossover_count(curves)
    cubed = {k: [x**3 + 2 * x for x in v] for k, v in curves.items()}  # strictly increasing
    assert crossover_count(cubed) == count
    assert crossover_count({k: v[::-1] for k, v in curves.items()}) == count
    assert 0 <= count <= 5 * len(rows) * (len(rows) - 1) // 2


# --- trend R^2 -------------------------------------------------------------------------------


def test_trend_r2_of_a_line_in_log_t_is_one() -> None:
    t = np.arange(1, 21)
    assert trend_r2({"a": 2.0 - 0.3 * np.log(t)}) == pytest.approx(1.0, abs=1e-12)


def test_trend_r2_of_a_curve_uncorrelated_with_log_t_is_zero() -> None:
    # (x2 - x3, x3 - x1, x1 - x2) sums to 0 and is orthogonal to x = log t.
    x1, x2, x3 = LOG_T
    assert trend_r2({"a": [x2 - x3, x3 - x1, x1 - x2]}) == pytest.approx(0.0, abs=1e-12)


def test_trend_r2_is_the_mean_over_tasks() -> None:
    x1, x2, x3 = LOG_T
    curves = {"line": [1 + x for x in LOG_T], "flat_fit": [x2 - x3, x3 - x1, x1 - x2]}
    assert trend_r2_per_task(curves) == {
        "line": pytest.approx(1.0),
        "flat_fit": pytest.approx(0.0, abs=1e-12),
    }
    assert trend_r2(curves) == pytest.approx(0.5)


def test_trend_r2_equals_squared_correlation_with_log_t() -> None:
    curve = np.random.default_rng(7).normal(size=40).cumsum()
    expected = np.corrcoef(np.log(np.arange(1, 41)), curve)[0, 1] ** 2
    assert trend_r2({"walk": curve}) == pytest.approx(expected, rel=1e-9)


def test_trend_r2_fits_in_plain_floats_not_numpys_log_or_lapack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Their last digits change with the CPU; a report rebuilt elsewhere must not."""
    curve = np.random.default_rng(7).normal(size=40).cumsum()
    expected = trend_r2({"walk": curve})

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("the trend fit must not call it")

    monkeypatch.setattr(np, "log", refused)
    monkeypatch.setattr(np, "polyfit", refused)
    assert trend_r2({"walk": curve}) == expected


def test_trend_r2_of_a_constant_curve_is_one() -> None:
    assert trend_r2({"a": [0.1] * 10}) == 1.0


def test_trend_r2_of_short_runs() -> None:
    assert trend_r2({"a": [0.7, 0.2]}) == pytest.approx(1.0)
    assert math.isnan(trend_r2({"a": [0.7]}))
    assert math.isnan(trend_r2({}))


def test_trend_r2_leaves_missing_steps_out_of_the_fit() -> None:
    t = np.arange(1, 7)
    line = 1.0 + 0.5 * np.log(t)
    line[[1, 4]] = math.nan
    assert trend_r2({"a": line}) == pytest.approx(1.0)
    # A task with no fit (all missing) does not drag the mean down.
    assert trend_r2({"a": line, "b": [math.nan] * 6}) == pytest.approx(1.0)


# --- late spike amplitude --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "tail", "window"),
    [(10, 0.3, 3), (1, 0.3, 1), (3, 0.3, 1), (5, 0.3, 2), (100, 0.3, 30), (7, 1.0, 7)],
)
def test_late_window_is_max_one_round_tail_times_steps(
    steps: int, tail: float, window: int
) -> None:
    assert late_window(steps, tail) == window


def test_late_spike_takes_the_largest_rise_inside_the_window_only() -> None:
    # T = 10, window = steps 8..10; the rise of 3.0 at step 6 is outside it.
    curve = [5, 4, 3, 2, 1, 4, 3.5, 4.0, 3.75, 4.0]
    assert late_spike_amplitude({"a": curve}) == {"a": 0.5}


def test_late_spike_includes_the_rise_into_the_first_window_step() -> None:
    curve = [5, 4, 3, 2, 1, 1, 1, 3, 2, 1]  # window steps 8..10; h8 - h7 = 2
    assert late_spike_amplitude({"a": curve}) == {"a": 2.0}


def test_late_spike_is_zero_without_a_rise() -> None:
    assert late_spike_amplitude({"falling": [5, 4, 3, 2], "flat": [1, 1, 1, 1]}) == {
        "falling": 0.0,
        "flat": 0.0,
    }


def test_late_spike_of_short_runs() -> None:
    assert late_spike_amplitude({"a": [0.4]}) == {"a": 0.0}
    assert late_spike_amplitude({"a": [0.4, 0.9]}) == {"a": pytest.approx(0.5)}
    assert late_spike_amplitude({}) == {}


def test_late_spike_is_per_task_and_honours_tail() -> None:
    curves = {"a": [1, 3, 2, 2.5], "b": [2, 1, 1, 1]}
    assert late_spike_amplitude(curves) == {"a": 0.5, "b": 0.0}  # window: step 4 only
    assert late_spike_amplitude(curves, tail=1.0) == {"a": 2.0, "b": 0.0}


def test_late_spike_skips_rises_that_touch_a_missing_step() -> None:
    assert late_spike_amplitude({"a": [3, 2, 1, math.nan, 4.0]}, tail=0.5) == {"a": 0.0}


def test_late_spike_rejects_a_tail_outside_zero_one() -> None:
    with pytest.raises(ValueError, match=r"tail must be a share of training in \(0, 1\], got 0"):
        late_spike_amplitude({"a": [1, 2]}, tail=0)


# --- validation and the bundle ---------------------------------------------------------------


def test_curves_of_different_lengths_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"pad missing steps with NaN\), got lengths"):
        crossover_count({"a": [1, 2, 3], "b": [1, 2]})


def test_non_vector_and_infinite_curves_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"curve of task 'a' must be one value per step"):
        trend_r2({"a": [[1, 2], [3, 4]]})
    with pytest.raises(ValueError, match=r"curve of task 'b' holds an infinite entropy"):
        late_spike_amplitude({"b": [1, math.inf]})


def test_diagnose_curves_bundles_all_three() -> None:
    curves = {"a": [3, 1, 3], "b": [2, 2, 2]}
    result = diagnose_curves(curves, tail=1.0)
    assert result.crossover_count == 2
    assert result.late_spike_per_task == {"a": 2.0, "b": 0.0}
    assert result.late_spike_max == 2.0
    assert result.trend_r2 == pytest.approx(trend_r2(curves))
    assert result.as_dict()["late_spike_max"] == 2.0
