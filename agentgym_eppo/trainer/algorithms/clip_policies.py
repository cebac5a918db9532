"""Clip policies: where the ratio bounds ``[lower, upper]`` of the clipped loss come from.

One interface for GRPO's fixed range, EPPO's per-task paced range, and the baselines
the paper compares against (section 5.1: DCPO, BAPO; plus DAPO's clip-higher):

* :meth:`ClipPolicy.begin_step` runs once per training step with the step's mean
  token entropy (and loss-token count) per task, and returns the nominal clip range
  per task for the metrics (``clip_eps``);
* :meth:`ClipPolicy.bounds` gives per-token bounds for a micro-batch of loss tokens.

:data:`CLIP_POLICIES` maps ``clip.policy`` to the builder of each; the config validation
builds the chosen one when the config is loaded, so a bad range fails at once.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from agentgym_eppo.core.registry import Registry

from . import defaults as d
from .pacer import EPPOPacer

GLOBAL_KEY = "__all__"  # the one key EPPO's pacer sees when pacing is not task-wise


@dataclass
class ClipTokens:
    """The loss tokens of a micro-batch, flat, as a clip policy needs them."""

    task_index: torch.Tensor  # [N] long, index into task_names
    task_names: Sequence[str]
    old_logprobs: torch.Tensor  # [N] log-probabilities under the rollout policy
    advantages: torch.Tensor  # [N]
    ratio: torch.Tensor  # [N] current importance ratio, detached


class ClipPolicy(abc.ABC):
    """Supplies the ratio bounds of the clipped surrogate (see the module docstring)."""

    name: str

    @abc.abstractmethod
    def begin_step(
        self, entropy: Mapping[str, float], tokens: Mapping[str, int]
    ) -> dict[str, float]:
        """Start a training step; return the nominal clip range per task in ``entropy``."""

    @abc.abstractmethod
    def bounds(self, batch: ClipTokens) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token ``(lower, upper)`` ratio bounds for ``batch``."""

    def state_dict(self) -> dict[str, object]:
        return {}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        del state


class FixedClip(ClipPolicy):
    """PPO/GRPO's symmetric range ``[1 - eps_low, 1 + eps_high]`` (eq. 3; 0.2 each)."""

    name = "fixed"

    def __init__(self, eps_low: float = d.CLIP_EPS, eps_high: float = d.CLIP_EPS) -> None:
        if not 0 < eps_low < 1 or eps_high <= 0:
            raise ValueError(f"need 0 < eps_low < 1 and eps_high > 0, got {eps_low}, {eps_high}")
        self.eps_low = eps_low
        self.eps_high = eps_high

    def begin_step(
        self, entropy: Mapping[str, float], tokens: Mapping[str, int]
    ) -> dict[str, float]:
        return dict.fromkeys(entropy, self.eps_high)

    def bounds(self, batch: ClipTokens) -> tuple[torch.Tensor, torch.Tensor]:
        lower = torch.full_like(batch.ratio, 1 - self.eps_low)
        return lower, torch.full_like(batch.ratio, 1 + self.eps_high)


class DAPOClip(FixedClip):
    """DAPO's clip-higher (Yu et al., 2025, arXiv 2503.14476): ``[1 - 0.2, 1 + 0.28]``.

    The decoupled, larger upper bound lets low-probability tokens grow, against
    entropy collapse. DAPO's token-mean reduction is the trainer's default already.
    """

    name = "dapo"

    def __init__(self, eps_low: float = d.DAPO_EPS_LOW, eps_high: float = d.DAPO_EPS_HIGH) -> None:
        super().__init__(eps_low, eps_high)


class EPPOClip(ClipPolicy):
    """EPPO (this paper, eq. 12): task ``i``'s tokens use ``[1 - eps_i(t), 1 + eps_i(t)]``.

    ``eps_i(t)`` comes from :class:`EPPOPacer` fed with each task's entropy. With
    ``taskwise=False`` (the paper's "w/o task-wise clip" ablation) the pacer sees one
    global entropy, the token mean over all tasks, and every task shares its range.
    """

    name = "eppo"

    def __init__(self, pacer: EPPOPacer, taskwise: bool = True) -> None:
        self.pacer = pacer
        self.taskwise = taskwise
        self._eps: dict[str, float] = {}

    def begin_step(
        self, entropy: Mapping[str, float], tokens: Mapping[str, int]
    ) -> dict[str, float]:
        if self.taskwise:
            self._eps = self.pacer.update(entropy)
            return dict(self._eps)
        total = sum(tokens.get(task, 0) for task in entropy)
        if total == 0:
            raise ValueError("the global entropy needs at least one loss token this step")
        mean = sum(entropy[task] * tokens.get(task, 0) for task in entropy) / total
        shared = self.pacer.update({GLOBAL_KEY: mean})[GLOBAL_KEY]
        self._eps = dict.fromkeys(entropy, shared)
        return dict(self._eps)

    def bounds(self, batch: ClipTokens) -> tuple[torch.Tensor, torch.Tensor]:
        # A task with no generated token this step has no entropy and no range; no token
        # reads its slot, so only the tasks that own tokens must have been paced.
        owners = sorted({batch.task_names[k] for k in batch.task_index.unique().tolist()})
        missing = [name for name in owners if name not in self._eps]
        if missing:
            raise KeyError(f"no clip range for tasks {missing}: call begin_step with their entropy")
        per_task = torch.tensor(
            [self._eps.get(name, self.pacer.eps0) for name in batch.task_names],
            dtype=batch.ratio.dtype,
            device=batch.ratio.device,
        )
        eps = per_task[batch.task_index]
        return 1 - eps, 1 + eps

    def state_dict(self) -> dict[str, object]:
        return {"pacer": self.pacer.state_dict(), "taskwise": self.taskwise}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        pacer_state = state["pacer"]
        assert isinstance(pacer_state, Mapping)
        self.pacer.load_state_dict(pacer_state)
        self.taskwise = bool(state["taskwise"])


class DCPOClip(ClipPolicy):
    """DCPO's dynamic adaptive clipping (Yang et al., 2025, arXiv 2509.02333, eqs. 3-4).

    Bounds depend on the token's old probability ``q``, widening for rare tokens:
    ``lower(q) = 0.5 + 0.5 sqrt(max(1 - 4 eps_low / q, 0))``,
    ``upper(q) = min(0.5 + 0.5 sqrt(1 + 4 eps_high / q), r_max)`` with eps_low 0.16,
    eps_high 0.2, r_max 10. DCPO's smooth advantage standardization is an advantage
    estimator, not part of the clip, and is not included here.
    """

    name = "dcpo"

    def __init__(
        self,
        eps_low: float = d.DCPO_EPS_LOW,
        eps_high: float = d.DCPO_EPS_HIGH,
        r_max: float = d.DCPO_R_MAX,
    ) -> None:
        if eps_low <= 0 or eps_high <= 0:
            raise ValueError(f"need eps_low > 0 and eps_high > 0, got {eps_low}, {eps_high}")
        if r_max <= 1:
            raise ValueError(f"r_max caps the upper bound above 1: need r_max > 1, got {r_max}")
        self.eps_low = eps_low
        self.eps_high = eps_high
        self.r_max = r_max

    def begin_step(
        self, entropy: Mapping[str, float], tokens: Mapping[str, int]
    ) -> dict[str, float]:
        return dict.fromkeys(entropy, self.eps_high)

    def bounds(self, batch: ClipTokens) -> tuple[torch.Tensor, torch.Tensor]:
        q = batch.old_logprobs.exp().clamp_min(1e-12)
        lower = 0.5 + 0.5 * torch.sqrt(torch.clamp(1 - 4 * self.eps_low / q, min=0.0))
        upper = torch.clamp(0.5 + 0.5 * torch.sqrt(1 + 4 * self.eps_high / q), max=self.r_max)
        return lower, upper


class BAPOClip(ClipPolicy):
    """BAPO's balanced clipping (Xi et al., 2025, arXiv 2510.18927, algorithm 1).

    For each micro-batch, start from ``[c_low, c_high] = [0.6, 1.2]`` and, while the
    positive share ``rho = P / (P + N)`` is below ``rho0 = 0.4``, raise ``c_high`` by 0.05
    (up to 3.0), and once it is at its cap raise ``c_low`` by 0.02 (up to 0.9).
    Choices where the paper and its code differ: the share (paper) rather than the
    code's ratio P/N; ``c_high`` first (paper); per micro-batch (code). ``P`` and ``N``
    count only tokens that still carry gradient: ``P = sum r A`` over ``A > 0, r < c_high``
    and ``N = sum r |A|`` over ``A < 0, r > c_low`` (counting clipped tokens at their
    clipped value would make raising ``c_low`` worsen the balance).
    """

    name = "bapo"

    def __init__(
        self,
        c_low: float = d.BAPO_C_LOW,
        c_high: float = d.BAPO_C_HIGH,
        rho0: float = d.BAPO_RHO0,
        step_high: float = d.BAPO_STEP_HIGH,
        step_low: float = d.BAPO_STEP_LOW,
        max_high: float = d.BAPO_MAX_HIGH,
        max_low: float = d.BAPO_MAX_LOW,
    ) -> None:
        if not 0 < c_low < 1 < c_high:
            raise ValueError(f"need 0 < c_low < 1 < c_high, got {c_low}, {c_high}")
        if not 0 < rho0 < 1:
            raise ValueError(f"rho0 is a share: need 0 < rho0 < 1, got {rho0}")
        if step_high <= 0 or step_low <= 0:
            raise ValueError(f"need step_high > 0 and step_low > 0, got {step_high}, {step_low}")
        if not (c_high <= max_high and c_low <= max_low < 1):
            raise ValueError(
                f"need c_high <= max_high and c_low <= max_low < 1, got c_high {c_high}, "
                f"max_high {max_high}, c_low {c_low}, max_low {max_low}"
            )
        self.c_low, self.c_high, self.rho0 = c_low, c_high, rho0
        self.step_high, self.step_low = step_high, step_low
        self.max_high, self.max_low = max_high, max_low
        self.last = (c_low, c_high)

    def begin_step(
        self, entropy: Mapping[str, float], tokens: Mapping[str, int]
    ) -> dict[str, float]:
        return dict.fromkeys(entropy, self.last[1] - 1)

    def balance(self, ratio: torch.Tensor, advantages: torch.Tensor) -> tuple[float, float]:
        """Algorithm 1: the bounds that bring the positive share to ``rho0`` (or their caps)."""
        low, high = self.c_low, self.c_high
        ratio, advantages = ratio.double(), advantages.double()
        while True:
            positive = (ratio * advantages)[(advantages > 0) & (ratio < high)].sum().item()
            negative = (ratio * -advantages)[(advantages < 0) & (ratio > low)].sum().item()
            share = positive / (positive + negative) if positive + negative > 0 else 1.0
            if share >= self.rho0:
                break
            if high + self.step_high <= self.max_high + 1e-9:
                high += self.step_high
            elif low + self.step_low <= self.max_low + 1e-9:
                low += self.step_low
            else:
                break
        return low, high

    def bounds(self, batch: ClipTokens) -> tuple[torch.Tensor, torch.Tensor]:
        low, high = self.balance(batch.ratio, batch.advantages)
        self.last = (low, high)
        return torch.full_like(batch.ratio, low), torch.full_like(batch.ratio, high)


class EPPOSection(Protocol):
    """What the EPPO pacer reads of a config (``clip.eppo``: ``EPPOConfig``)."""

    eps0: float
    alpha: float
    beta: float
    eps_min: float
    eps_max: float
    trend_constraint: bool
    taskwise: bool


class ClipSection(Protocol):
    """What the clip-policy builders read of a config (``clip``: ``ClipConfig``)."""

    policy: str
    eps: float
    dapo_eps_low: float
    dapo_eps_high: float
    dcpo_eps_low: float
    dcpo_eps_high: float
    dcpo_r_max: float
    bapo_rho0: float

    @property
    def eppo(self) -> EPPOSection: ...


def make_pacer(eppo: EPPOSection) -> EPPOPacer:
    """The pacer of a ``clip.eppo`` config section."""
    return EPPOPacer(
        eppo.eps0, eppo.alpha, eppo.beta, eppo.eps_min, eppo.eps_max, eppo.trend_constraint
    )


def _eppo(clip: ClipSection) -> ClipPolicy:
    return EPPOClip(make_pacer(clip.eppo), taskwise=clip.eppo.taskwise)


CLIP_POLICIES: Registry[Callable[[ClipSection], ClipPolicy]] = Registry(
    "clip policy",
    {
        "fixed": lambda clip: FixedClip(clip.eps, clip.eps),
        "eppo": _eppo,
        "dapo": lambda clip: DAPOClip(clip.dapo_eps_low, clip.dapo_eps_high),
        "dcpo": lambda clip: DCPOClip(clip.dcpo_eps_low, clip.dcpo_eps_high, clip.dcpo_r_max),
        # BAPO's one knob in the config is its target share; its start bounds, steps and
        # caps are algorithm 1's constants (``defaults.BAPO_*``), as ``clip.bapo_rho0``'s
        # help says.
        "bapo": lambda clip: BAPOClip(rho0=clip.bapo_rho0),
    },
)
"""``clip.policy`` -> a builder taking the ``clip`` config section (``ClipConfig``)."""


def make_clip_policy(clip: ClipSection) -> ClipPolicy:
    """The clip policy a ``clip`` config section names (``UnknownNameError`` if none)."""
    return CLIP_POLICIES.lookup(clip.policy, where="clip.policy")(clip)
