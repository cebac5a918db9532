"""The ``clip`` config section: ``clip.policy`` names a registered clip policy, and every
other key is declared by a registered policy on its class, laid out here again whenever a
policy is registered.

>>> ClipConfig(policy="fixed", eps=0.1).build().eps_high
0.1
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentgym_eppo.trainer.algorithms import defaults as d
from agentgym_eppo.trainer.algorithms.clip_policies import (
    CLIP_POLICIES,
    ClipPolicy,
    make_clip_policy,
    params_of,
    section_fields,
)
from agentgym_eppo.trainer.algorithms.pacer import PacerParams
from agentgym_eppo.trainer.config_fields import help_field as _help


@dataclass
class ClipConfig:
    """Where the ratio bounds come from (section 5.1's baselines).

    ``policy`` names a registered clip policy; every other field is declared by a
    registered policy, on its class (``Params``), and laid out here by
    :func:`~agentgym_eppo.trainer.algorithms.clip_policies.section_fields`. The fields
    are declared again whenever a policy is registered
    (:func:`~agentgym_eppo.trainer.algorithms.clip_policies.register_clip_policy`), so a
    policy added from user code is configured, validated and dumped like the built-in
    ones.
    """

    policy: str = _help("", d.CLIP_POLICY)  # declared again below, with the registry's help

    def __post_init__(self) -> None:
        """The chosen policy is built once: its range checks are the ones that apply (the
        pacer's settings, ``clip.eppo``, checked themselves when they were built)."""
        CLIP_POLICIES.lookup(self.policy, where="clip.policy")
        try:
            self.build()
        except ValueError as error:
            raise ValueError(f"clip.policy={self.policy}: {error}") from None

    def build(self) -> ClipPolicy:
        """A new instance of the chosen policy with its configured ``Params``."""
        return make_clip_policy(self.policy, self.params())

    def params(self, name: str | None = None) -> Any:
        """The ``Params`` of the policy ``name`` (default: the chosen one) as configured."""
        return params_of(self, name or self.policy)

    @property
    def pacer(self) -> PacerParams:
        """The pacer's settings, ``clip.eppo``: the run paces every task under every
        policy, for its metrics (:class:`~agentgym_eppo.trainer.algorithms.pacer.TaskPacing`)."""
        params: PacerParams = self.params("eppo")
        return params


def _policy_help() -> str:
    names = " | ".join(CLIP_POLICIES)
    return (
        f"The clip policy, by its registered name: {names} (register_clip_policy adds one, "
        "see docs/trainer.md). Default: EPPO, the paper's method."
    )


def _declare_clip_fields() -> None:
    """Declare :class:`ClipConfig`'s fields again: ``policy``, then the keys of every
    registered policy in registration order (``CLIP_POLICIES`` calls it on each change)."""
    rows: list[tuple[str, Any, Any]] = [
        ("policy", str, field(default=d.CLIP_POLICY, metadata={"help": _policy_help()}))
    ]
    for name, policy in CLIP_POLICIES.items():
        rows += section_fields(name, policy)
    generated = ("__init__", "__repr__", "__eq__", "__hash__", "__match_args__")
    for attr in (*generated, *ClipConfig.__dataclass_fields__, "__dataclass_fields__"):
        if attr in ClipConfig.__dict__:
            delattr(ClipConfig, attr)
    ClipConfig.__annotations__ = {key: kind for key, kind, _ in rows}
    for key, _, declared in rows:
        setattr(ClipConfig, key, declared)
    dataclass(ClipConfig)


_declare_clip_fields()
CLIP_POLICIES.watch(_declare_clip_fields)
