"""Entropy-stability diagnostics of multi-task training (EPPO paper, section 4.1, figure 1c).

Three numbers summarise how well a shared policy keeps each task's exploration pace:

- :func:`crossover_count`: how often the entropy ordering of two tasks flips (lower is better);
- :func:`trend_r2`: how well each task's entropy follows a straight line in ``log t``
  (higher is better);
- :func:`late_spike_amplitude`: the largest one-step entropy rise in the last 30% of
  training, per task (lower is better).

``curves`` maps a task id to that task's entropy per training step, ``t = 1, 2, ..., T``
(``metrics.jsonl``'s ``tasks.<id>.entropy``). All curves must have the same length. A ``NaN``
marks a step where the task had no samples: it carries no information, so it is skipped
(a pair's sign is remembered across it, a fit leaves it out, a rise needs both ends).
Pure functions over numpy; no plotting, no file access.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from numpy.typing import NDArray

Curves = Mapping[str, Sequence[float] | NDArray[np.floating]]

LATE_TAIL = 0.3
"""Share of training the late spike looks at: the paper's "last 30% of training"."""


def finite_mean(values: Iterable[float]) -> float:
    """The mean of the finite values (``NaN`` marks "no information"); ``NaN`` if none.

    >>> finite_mean([1.0, float("nan"), 3.0])
    2.0
    """
    finite = [float(v) for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def finite_std(values: Iterable[float]) -> float:
    """The sample standard deviation (ddof 1) of the finite values; 0 for fewer than two."""
    finite = [float(v) for v in values if math.isfinite(v)]
    return float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0


def _as_arrays(curves: Curves) -> dict[str, NDArray[np.float64]]:
    """Validate ``curves`` and return float arrays of one common length."""
    arrays: dict[str, NDArray[np.float64]] = {}
    for task, values in curves.items():
        array = np.asarray(values, dtype=np.float64)
        if array.ndim != 1:
            raise ValueError(
                f"curve of task {task!r} must be one value per step (1-D), got shape {array.shape}"
            )
        if np.isinf(array).any():
            raise ValueError(f"curve of task {task!r} holds an infinite entropy; expected finite")
        arrays[str(task)] = array
    lengths = {task: len(array) for task, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"curves must all have one value per step (pad missing steps with NaN), "
            f"got lengths {lengths}"
        )
    return arrays


def _sign_flips(difference: NDArray[np.float64]) -> int:
    """Sign changes of a difference series, strictly positive to strictly negative or back.

    Zeros (ties) and NaNs hold no sign: the last strict sign is remembered across them,
    so ``+, 0, -`` is one crossing (the curves met and crossed) and ``+, 0, +`` is none
    (they touched).
    """
    signs = np.sign(difference[np.isfinite(difference)])
    strict = signs[signs != 0]
    return int(np.count_nonzero(strict[1:] != strict[:-1]))


def crossover_count(curves: Curves) -> int:
    """Sign flips of every pairwise entropy difference, summed over unordered task pairs.

    Figure 1(c)'s "crossover count": for tasks ``i < j`` the series ``H_i(t) - H_j(t)``
    is followed over steps and each flip from strictly positive to strictly negative (or
    back) counts one. One task, or constant curves, give 0.

    >>> crossover_count({"a": [3, 1, 3], "b": [2, 2, 2]})
    2
    """
    arrays = _as_arrays(curves)
    return sum(_sign_flips(arrays[i] - arrays[j]) for i, j in combinations(sorted(arrays), 2))


def _r2_on_log_t(entropy: NDArray[np.float64]) -> float:
    """R^2 of the least-squares line ``H(t) ~ a + b log t`` over the finite steps.

    A curve the line fits exactly (including a constant one, whose total variance is 0)
    scores 1. Fewer than two finite points define no fit: ``NaN``.

    The fit is the closed form in plain floats (``math.log``, ``math.fsum``), not
    ``np.polyfit``: NumPy's vectorised log and LAPACK's least squares change their last
    digits with the CPU's instruction set, and a comparison report rebuilt on another
    machine must give the same numbers.
    """
    points = [
        (math.log(t), float(h)) for t, h in enumerate(entropy.tolist(), start=1) if math.isfinite(h)
    ]
    if len(points) < 2:
        return math.nan
    n = len(points)
    x_mean = math.fsum(x for x, _ in points) / n
    y_mean = math.fsum(y for _, y in points) / n
    sxx = math.fsum((x - x_mean) ** 2 for x, _ in points)
    slope = math.fsum((x - x_mean) * (y - y_mean) for x, y in points) / sxx
    intercept = y_mean - slope * x_mean
    residual = math.fsum((y - (intercept + slope * x)) ** 2 for x, y in points)
    total = math.fsum((y - y_mean) ** 2 for _, y in points)
    scale = max(1.0, max(abs(y) for _, y in points)) ** 2 * n
    if total <= 1e-24 * scale:
        return 1.0
    return 1.0 - residual / total


def trend_r2_per_task(curves: Curves) -> dict[str, float]:
    """Each task's R^2 of a linear fit of entropy on ``log t`` (``NaN`` under two points)."""
    return {task: _r2_on_log_t(array) for task, array in _as_arrays(curves).items()}


def trend_r2(curves: Curves) -> float:
    """Figure 1(c)'s "trend R^2": the mean over tasks of :func:`trend_r2_per_task`.

    Tasks without a fit (fewer than two finite steps) are left out of the mean; ``NaN``
    when no task has one.

    >>> round(trend_r2({"a": [2.0, 1.0, 0.5]}), 3)
    0.998
    """
    values = [v for v in trend_r2_per_task(curves).values() if not math.isnan(v)]
    return float(np.mean(values)) if values else math.nan


def late_window(num_steps: int, tail: float = LATE_TAIL) -> int:
    """How many final steps the late-spike window covers: ``max(1, round(tail * T))``.

    ``round`` is Python's (halves go to the even neighbour; docs/diagnostics.md).
    """
    if not 0.0 < tail <= 1.0:
        raise ValueError(f"tail must be a share of training in (0, 1], got {tail!r}")
    return max(1, round(tail * num_steps))


def late_spike_amplitude(curves: Curves, tail: float = LATE_TAIL) -> dict[str, float]:
    """Per task, the largest one-step rise ``H[t] - H[t-1]`` over the last steps of training.

    The window is the last :func:`late_window` steps ``t`` of the task's ``T`` steps; the
    rise into a window step may start from the step before the window. 0 when entropy
    never rises there (a falling or flat tail, a single-step run, or ``NaN`` gaps).

    >>> late_spike_amplitude({"a": [5, 4, 3, 2, 1, 1.5, 1.25, 2.0, 1.0, 0.5]})
    {'a': 0.75}
    """
    arrays = _as_arrays(curves)
    amplitudes: dict[str, float] = {}
    for task, array in arrays.items():
        window = late_window(len(array), tail)
        first = max(1, len(array) - window)  # 0-based index of the first step with a predecessor
        rises = array[first:] - array[first - 1 : -1] if len(array) > 1 else np.empty(0)
        rises = rises[np.isfinite(rises)]
        amplitudes[task] = float(max(0.0, rises.max(initial=0.0)))
    return amplitudes


@dataclass(frozen=True)
class EntropyDiagnostics:
    """The three diagnostics of one run, as figure 1(c) reports them."""

    crossover_count: int
    trend_r2: float
    trend_r2_per_task: dict[str, float]
    late_spike_per_task: dict[str, float]

    @property
    def late_spike_max(self) -> float:
        """The run's late spike: the largest over tasks (0 with no task)."""
        return max(self.late_spike_per_task.values(), default=0.0)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict, including :attr:`late_spike_max`."""
        return {
            "crossover_count": self.crossover_count,
            "trend_r2": self.trend_r2,
            "trend_r2_per_task": dict(self.trend_r2_per_task),
            "late_spike_max": self.late_spike_max,
            "late_spike_per_task": dict(self.late_spike_per_task),
        }


def diagnose_curves(curves: Curves, tail: float = LATE_TAIL) -> EntropyDiagnostics:
    """All three diagnostics of one set of entropy curves."""
    return EntropyDiagnostics(
        crossover_count=crossover_count(curves),
        trend_r2=trend_r2(curves),
        trend_r2_per_task=trend_r2_per_task(curves),
        late_spike_per_task=late_spike_amplitude(curves, tail),
    )
