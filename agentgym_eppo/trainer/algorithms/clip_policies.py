"""Clip policies: where the ratio bounds ``[lower, upper]`` of the clipped loss come from.

One interface for GRPO's fixed range, EPPO's per-task paced range, and the baselines
the paper compares against (section 5.1: DCPO, BAPO; plus DAPO's clip-higher):

* :meth:`ClipPolicy.begin_step` runs once per training step with the step's mean
  token entropy (and loss-token count) per task, and returns the nominal clip range
  per task for the metrics (``clip_eps``);
* :meth:`ClipPolicy.bounds` gives per-token bounds for a micro-batch of loss tokens.

A policy is one class plus one registration: :func:`register_clip_policy` (an alias of
``CLIP_POLICIES.register``) files it under the name ``clip.policy`` selects, and its
config fields are declared once, on the class, as the dataclass ``Params`` (each field a
:func:`~agentgym_eppo.trainer.config_fields.help_field`). The ``clip`` config section
(``ClipConfig``) is built from the registered policies' ``Params``, so a policy added
from user code is configured, validated and selected like the built-in ones
(``docs/trainer.md``, "Add a clip policy"). The config validation builds the chosen
policy (:meth:`ClipPolicy.from_params`) when the config is loaded, so a bad range fails
at once.
"""

from __future__ import annotations

import abc
import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from agentgym_eppo.core.registry import Registry
from agentgym_eppo.trainer.config_fields import help_field as _help

from . import defaults as d
from .pacer import EPPOPacer, PacerParams

GLOBAL_KEY = "__all__"  # the one key EPPO's pacer sees when pacing is not task-wise
COMMON_KEYS = ("policy",)
"""The ``clip`` section's keys that belong to no policy."""


@dataclass
class ClipTokens:
    """The loss tokens of a micro-batch, flat, as a clip policy needs them."""

    task_index: torch.Tensor  # [N] long, index into task_names
    task_names: Sequence[str]
    old_logprobs: torch.Tensor  # [N] log-probabilities under the rollout policy
    advantages: torch.Tensor  # [N]
    ratio: torch.Tensor  # [N] current importance ratio, detached


@dataclass
class NoParams:
    """A policy without settings."""


class ClipPolicy(abc.ABC):
    """Supplies the ratio bounds of the clipped surrogate (see the module docstring).

    A subclass declares its settings as ``Params`` (a dataclass whose fields carry their
    help, see :func:`register_clip_policy`) and is built from them by :meth:`from_params`.
    ``config_prefix`` says how they appear in the ``clip`` config section: ``None`` (the
    default), as a section named after the policy (``clip.<name>.<field>``); a string,
    as flat keys with that prefix (the built-in baselines' ``clip.dapo_eps_low``).
    """

    Params: ClassVar[type[Any]] = NoParams
    config_prefix: ClassVar[str | None] = None

    @classmethod
    def from_params(cls, params: Any) -> ClipPolicy:
        """The policy of ``params`` (a ``Params``); by default ``cls(**fields)``."""
        return cls(**{f.name: getattr(params, f.name) for f in dataclasses.fields(params)})

    @property
    def task_pacer(self) -> EPPOPacer | None:
        """The per-task pacer this policy updates in :meth:`begin_step`, if any: the run
        then reports that pacer instead of feeding one of its own
        (:class:`~agentgym_eppo.trainer.algorithms.pacer.TaskPacing`)."""
        return None

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


def section_fields(name: str, policy: type[ClipPolicy]) -> list[tuple[str, Any, Any]]:
    """``(key, type, dataclasses.field)`` of every ``clip`` config key the policy
    registered as ``name`` declares: one nested section, or its flat prefixed keys."""
    params = policy.Params
    if policy.config_prefix is None:
        # @dataclass writes a signature where a class has no docstring: skip that one
        own = params.__doc__ or ""
        own = "" if own.startswith(f"{params.__name__}(") else own
        doc = (own or policy.__doc__ or f"clip policy {name}").strip().splitlines()[0]
        return [(name, params, dataclasses.field(default_factory=params, metadata={"help": doc}))]
    hints = typing.get_type_hints(params)
    rows = []
    for f in dataclasses.fields(params):
        if f.default_factory is not dataclasses.MISSING:
            copied = dataclasses.field(default_factory=f.default_factory, metadata=f.metadata)
        else:
            copied = dataclasses.field(default=f.default, metadata=f.metadata)
        rows.append((policy.config_prefix + f.name, hints[f.name], copied))
    return rows


def params_of(section: Any, name: str) -> Any:
    """The ``Params`` of the policy registered as ``name``, read from a ``clip`` config
    section (``ClipConfig``) that :func:`section_fields` laid out."""
    policy = CLIP_POLICIES.lookup(name, where="clip.policy")
    if policy.config_prefix is None:
        return getattr(section, name)
    prefix = policy.config_prefix
    return policy.Params(
        **{f.name: getattr(section, prefix + f.name) for f in dataclasses.fields(policy.Params)}
    )


def _check_policy(name: str, policy: type[ClipPolicy]) -> None:
    """What :func:`register_clip_policy` refuses: not a policy class, undocumented or
    clashing config keys."""
    if not (isinstance(policy, type) and issubclass(policy, ClipPolicy)):
        raise TypeError(f"clip policy {name!r}: expected a ClipPolicy subclass, got {policy!r}")
    if not dataclasses.is_dataclass(policy.Params):
        raise TypeError(f"clip policy {name!r}: Params must be a dataclass (@dataclass)")
    undocumented = [f.name for f in dataclasses.fields(policy.Params) if not f.metadata.get("help")]
    if undocumented:
        raise ValueError(
            f"clip policy {name!r}: Params fields {undocumented} have no help; declare each "
            "with help_field(text, default) (agentgym_eppo.trainer.config_fields)"
        )
    taken = dict.fromkeys(COMMON_KEYS, "the clip section itself")
    for other, registered in CLIP_POLICIES.items():
        if other != name:
            taken |= {key: f"policy {other!r}" for key, _, _ in section_fields(other, registered)}
    for key, _, _ in section_fields(name, policy):
        if key in taken:
            raise ValueError(
                f"clip policy {name!r}: config key clip.{key} is already declared by "
                f"{taken[key]}; choose another config_prefix (None nests the fields under "
                f"clip.{name})"
            )


CLIP_POLICIES: Registry[type[ClipPolicy]] = Registry("clip policy", check=_check_policy)
"""``clip.policy`` -> the policy class (built by :meth:`ClipPolicy.from_params`)."""

register_clip_policy = CLIP_POLICIES.register
"""``register_clip_policy(name)`` as a class decorator, or ``register_clip_policy(name,
cls)``: the policy ``clip.policy: name`` selects (``replace=True`` replaces one)."""


def make_clip_policy(name: str, params: Any = None) -> ClipPolicy:
    """The clip policy registered as ``name``, built from ``params`` (its ``Params``;
    None: their defaults). ``UnknownNameError`` for a name nothing registered."""
    policy = CLIP_POLICIES.lookup(name, where="clip.policy")
    return policy.from_params(policy.Params() if params is None else params)


class ConstantClip(ClipPolicy):
    """One range ``[1 - eps_low, 1 + eps_high]`` for every token of every step; the
    ``fixed`` and ``dapo`` policies are two settings of it (their ``Params`` and
    defaults differ). Not registered itself."""

    def __init__(self, eps_low: float, eps_high: float) -> None:
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


@register_clip_policy("fixed")
class FixedClip(ConstantClip):
    """PPO/GRPO's symmetric range ``[1 - eps, 1 + eps]`` (eq. 3; 0.2), one ``eps`` in the
    config; built directly, ``eps_low`` and ``eps_high`` may differ."""

    @dataclass
    class Params:
        eps: float = _help("Clip range of the fixed policy (paper: 0.2).", d.CLIP_EPS)

    config_prefix = ""

    @classmethod
    def from_params(cls, params: Any) -> ClipPolicy:
        return cls(params.eps, params.eps)

    def __init__(self, eps_low: float = d.CLIP_EPS, eps_high: float = d.CLIP_EPS) -> None:
        super().__init__(eps_low, eps_high)


@register_clip_policy("eppo")
class EPPOClip(ClipPolicy):
    """EPPO (this paper, eq. 12): task ``i``'s tokens use ``[1 - eps_i(t), 1 + eps_i(t)]``.

    ``eps_i(t)`` comes from :class:`EPPOPacer` fed with each task's entropy. With
    ``taskwise=False`` (the paper's "w/o task-wise clip" ablation) the pacer sees one
    global entropy, the token mean over all tasks, and every task shares its range.
    """

    @dataclass
    class Params(PacerParams):
        """EPPO pacer settings."""

        taskwise: bool = _help(
            "Pace each task separately; False = one global entropy statistic (the paper's "
            "'w/o task-wise clip' ablation).",
            True,
        )

    @classmethod
    def from_params(cls, params: Any) -> ClipPolicy:
        return cls(EPPOPacer.from_params(params), taskwise=params.taskwise)

    def __init__(self, pacer: EPPOPacer, taskwise: bool = True) -> None:
        self.pacer = pacer
        self.taskwise = taskwise
        self._eps: dict[str, float] = {}

    @property
    def task_pacer(self) -> EPPOPacer | None:
        return self.pacer if self.taskwise else None

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


@register_clip_policy("dapo")
class DAPOClip(ConstantClip):
    """DAPO's clip-higher (Yu et al., 2025, arXiv 2503.14476): ``[1 - 0.2, 1 + 0.28]``.

    The decoupled, larger upper bound lets low-probability tokens grow, against
    entropy collapse. DAPO's token-mean reduction is the trainer's default already.
    """

    @dataclass
    class Params:
        eps_low: float = _help("DAPO lower range (arXiv 2503.14476: 0.2).", d.DAPO_EPS_LOW)
        eps_high: float = _help("DAPO upper range (arXiv 2503.14476: 0.28).", d.DAPO_EPS_HIGH)

    config_prefix = "dapo_"

    def __init__(self, eps_low: float = d.DAPO_EPS_LOW, eps_high: float = d.DAPO_EPS_HIGH) -> None:
        super().__init__(eps_low, eps_high)


@register_clip_policy("dcpo")
class DCPOClip(ClipPolicy):
    """DCPO's dynamic adaptive clipping (Yang et al., 2025, arXiv 2509.02333, eqs. 3-4).

    Bounds depend on the token's old probability ``q``, widening for rare tokens:
    ``lower(q) = 0.5 + 0.5 sqrt(max(1 - 4 eps_low / q, 0))``,
    ``upper(q) = min(0.5 + 0.5 sqrt(1 + 4 eps_high / q), r_max)`` with eps_low 0.16,
    eps_high 0.2, r_max 10. DCPO's smooth advantage standardization is an advantage
    estimator, not part of the clip, and is not included here.
    """

    @dataclass
    class Params:
        eps_low: float = _help("DCPO eps_low (arXiv 2509.02333: 0.16).", d.DCPO_EPS_LOW)
        eps_high: float = _help("DCPO eps_high (arXiv 2509.02333: 0.2).", d.DCPO_EPS_HIGH)
        r_max: float = _help("DCPO ratio cap r_max (arXiv 2509.02333: 10).", d.DCPO_R_MAX)

    config_prefix = "dcpo_"

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


@register_clip_policy("bapo")
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

    @dataclass
    class Params:
        # BAPO's one knob in the config is its target share; its start bounds, steps and
        # caps are algorithm 1's constants (``defaults.BAPO_*``), as the help says.
        rho0: float = _help(
            "BAPO target positive share rho0 (arXiv 2510.18927: 0.4), its one knob here: the "
            "start bounds [0.6, 1.2], their steps (0.05 up, 0.02 down) and caps (3.0, 0.9) "
            "are the paper's algorithm 1 constants (algorithms/defaults.py).",
            d.BAPO_RHO0,
        )

    config_prefix = "bapo_"

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
