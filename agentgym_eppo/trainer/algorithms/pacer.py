"""The EPPO pacer: a per-task clip range paced by each task's entropy (paper section 4.2).

One :meth:`EPPOPacer.update` per training step takes the step's mean token entropy of
every task that produced tokens and returns the clip range each of them trains with:

* eq. 6: EMA of the entropy, ``H̄ = β H̄ + (1 - β) H`` (the first value seen is both the
  EMA and the reference ``H(0)``);
* eq. 7: collapse ratio ``R = H̄ / H(0)``;
* eq. 8: z-score of ``R`` across the task cohort (population std, ddof 0, plus 1e-8);
* eq. 9: ``ε = ε0 (1 + α tanh z)``;
* eqs. 10-11: trend constraint ``ε /= 1 + relu(H̄(t) - H̄(t-1))`` (the change of the EMA
  since the task's previous update);
* last, the clamp to ``[ε_min, ε_max]`` (appendix A.2).

The cohort of eq. 8 is every task the pacer has seen (a task absent from a step keeps
its last ratio), so a task that appears late joins with ``R = 1`` and leaves the other
tasks' EMAs and references untouched. With one task, or when every ratio is equal,
``z = 0`` and the paced range is ``ε0``.

``taskwise=False`` in the trainer's config (the paper's "w/o task-wise clip" ablation)
is not a pacer option: the trainer feeds one global entropy under one key instead.

This module owns the pacer: its settings (:class:`PacerParams`, the ``clip.eppo``
config section with EPPO's ``taskwise``), the pacer itself, and :class:`TaskPacing`, the
one pacer of a run, which the EPPO clip updates or the run feeds for its metrics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agentgym_eppo.trainer.config_fields import help_field as _help

from . import defaults as d
from .defaults import Z_SCORE_EPS

_MIN_REFERENCE = 1e-12  # a task whose first entropy is 0 gets a ratio against this floor


@dataclass
class TaskPace:
    """The pacer's record of one task after an update (all the quantities of eqs. 5-11)."""

    entropy: float  # H_i(t), eq. 5, as measured this step
    reference: float  # H_i(0), the first entropy seen
    ema: float  # H̄_i(t), eq. 6
    ema_change: float  # ΔH̄_i(t), eq. 10 (0 at the first update)
    collapse_ratio: float  # R_i(t), eq. 7
    zscore: float  # z_i(t), eq. 8
    paced_eps: float  # ε0 · s_i(t), eq. 9, before the trend constraint
    clip_eps: float  # after eq. 11 and the clamp: the range the task trains with
    updates: int  # how many updates carried this task


@dataclass
class PacerParams:
    """The EPPO pacer (paper section 4.2, eqs. 5-11; defaults from appendix A.2).

    Checked when built: the pacer is built once, so its range checks are the ones that
    apply (``ValueError`` naming ``clip.eppo``).
    """

    eps0: float = _help("Base clip range epsilon_0 (paper appendix A.2: 0.2).", d.EPPO_EPS0)
    alpha: float = _help(
        "Pacing strength alpha in s = 1 + alpha tanh(z) (eq. 9), in [0, 1) (paper appendix "
        "A.2: 0.4).",
        d.EPPO_ALPHA,
    )
    beta: float = _help(
        "Entropy EMA decay beta (eq. 6), in [0, 1) (paper appendix A.2: 0.95).", d.EPPO_BETA
    )
    eps_min: float = _help(
        "Lower clamp of the paced clip range (paper appendix A.2: 0.15).", d.EPPO_EPS_MIN
    )
    eps_max: float = _help(
        "Upper clamp of the paced clip range (paper appendix A.2: 0.3).", d.EPPO_EPS_MAX
    )
    trend_constraint: bool = _help(
        "Divide the clip by 1 + relu(EMA change) (eqs. 10-11); False = the paper's "
        "'w/o trend constraint' ablation.",
        True,
    )

    def __post_init__(self) -> None:
        try:
            EPPOPacer.from_params(self)
        except ValueError as error:
            raise ValueError(f"clip.eppo: {error}") from None


class EPPOPacer:
    """Entropy Pacing Policy Optimization's clip-range pacer, keyed by ``task_id``.

    >>> pacer = EPPOPacer()
    >>> pacer.update({"os": 2.0, "db": 1.0})
    {'os': 0.2, 'db': 0.2}
    >>> eps = pacer.update({"os": 1.0, "db": 1.0})  # os collapses faster than db
    >>> eps["os"] < 0.2 < eps["db"]
    True
    """

    def __init__(
        self,
        eps0: float = d.EPPO_EPS0,
        alpha: float = d.EPPO_ALPHA,
        beta: float = d.EPPO_BETA,
        eps_min: float = d.EPPO_EPS_MIN,
        eps_max: float = d.EPPO_EPS_MAX,
        trend_constraint: bool = True,
    ) -> None:
        if eps0 <= 0:
            raise ValueError(f"eps0 must be positive, got {eps0}")
        if not 0 <= alpha < 1:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        if not 0 <= beta < 1:
            raise ValueError(f"beta must be in [0, 1), got {beta}")
        if not 0 < eps_min <= eps_max:
            raise ValueError(f"need 0 < eps_min <= eps_max, got {eps_min} and {eps_max}")
        self.eps0 = eps0
        self.alpha = alpha
        self.beta = beta
        self.eps_min = eps_min
        self.eps_max = eps_max
        self.trend_constraint = trend_constraint
        self.step = 0
        self.tasks: dict[str, TaskPace] = {}

    @classmethod
    def from_params(cls, params: PacerParams) -> EPPOPacer:
        """The pacer of a ``clip.eppo`` config section."""
        p = params
        return cls(p.eps0, p.alpha, p.beta, p.eps_min, p.eps_max, p.trend_constraint)

    def update(self, entropy: Mapping[str, float]) -> dict[str, float]:
        """Advance one training step; return the clip range of every task in ``entropy``.

        ``entropy`` maps ``task_id`` to the step's mean token entropy (nats) over that
        task's generated tokens. Raises ``ValueError`` for a negative or non-finite value.
        """
        for task_id, value in entropy.items():
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"entropy of task {task_id!r} must be a finite number >= 0, got {value}"
                )
        self.step += 1
        for task_id, value in entropy.items():
            self._track(task_id, float(value))
        if not self.tasks:  # no task has had tokens yet (e.g. a step that trained nothing)
            return {}
        ratios = {task_id: pace.collapse_ratio for task_id, pace in self.tasks.items()}
        mean = sum(ratios.values()) / len(ratios)
        std = math.sqrt(sum((r - mean) ** 2 for r in ratios.values()) / len(ratios))  # ddof 0
        clip: dict[str, float] = {}
        for task_id in entropy:
            pace = self.tasks[task_id]
            pace.zscore = (pace.collapse_ratio - mean) / (std + Z_SCORE_EPS)  # eq. 8
            pace.paced_eps = self.eps0 * (1 + self.alpha * math.tanh(pace.zscore))  # eq. 9
            eps = pace.paced_eps
            if self.trend_constraint:
                eps = eps / (1 + max(pace.ema_change, 0.0))  # eq. 11
            pace.clip_eps = min(max(eps, self.eps_min), self.eps_max)
            clip[task_id] = pace.clip_eps
        return clip

    def _track(self, task_id: str, value: float) -> None:
        pace = self.tasks.get(task_id)
        if pace is None:
            # The first measurement anchors H(0) and starts the EMA: the paper leaves H(0)
            # open, and a task joining late must not be compared with entropy it never had.
            self.tasks[task_id] = TaskPace(
                entropy=value,
                reference=value,
                ema=value,
                ema_change=0.0,
                collapse_ratio=1.0,
                zscore=0.0,
                paced_eps=self.eps0,
                clip_eps=self.eps0,
                updates=1,
            )
            return
        previous = pace.ema
        pace.entropy = value
        pace.ema = self.beta * previous + (1 - self.beta) * value  # eq. 6
        pace.ema_change = pace.ema - previous  # eq. 10
        pace.collapse_ratio = pace.ema / max(pace.reference, _MIN_REFERENCE)  # eq. 7
        pace.updates += 1

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: hyperparameters, step and per-task records."""
        return {
            "eps0": self.eps0,
            "alpha": self.alpha,
            "beta": self.beta,
            "eps_min": self.eps_min,
            "eps_max": self.eps_max,
            "trend_constraint": self.trend_constraint,
            "step": self.step,
            "tasks": {task_id: asdict(pace) for task_id, pace in self.tasks.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the next update continues exactly where it left off."""
        restored = EPPOPacer(
            eps0=state["eps0"],
            alpha=state["alpha"],
            beta=state["beta"],
            eps_min=state["eps_min"],
            eps_max=state["eps_max"],
            trend_constraint=state["trend_constraint"],
        )
        self.__dict__.update(restored.__dict__)
        self.step = int(state["step"])
        self.tasks = {task_id: TaskPace(**pace) for task_id, pace in state["tasks"].items()}


class TaskPacing:
    """The one per-task pacer of a run, serving the clip and the metrics.

    Under task-wise EPPO the clip policy's own pacer is it (``clip_pacer``, which the
    clip updates in the update's ``begin_step``). Under every other policy, and under
    the global-entropy ablation whose pacer holds one key, a pacer built from ``params``
    is fed each task's entropy after the update, so the record shows how each task's
    entropy moves whatever the clip.
    """

    def __init__(self, params: PacerParams, clip_pacer: EPPOPacer | None = None) -> None:
        self.fed_by_clip = clip_pacer is not None
        self.pacer = clip_pacer if clip_pacer is not None else EPPOPacer.from_params(params)

    def after_update(self, task_entropy: Mapping[str, float]) -> Mapping[str, TaskPace]:
        """Each task's pace after this step's update."""
        if not self.fed_by_clip:
            self.pacer.update(task_entropy)
        return self.pacer.tasks
