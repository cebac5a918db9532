"""What the LLM-rollout API hands back for one slot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StepOutcome:
    """The result of stepping (or aborting) one slot of a :class:`MultiTaskVectorEnv`.

    ``info`` is the sub-environment's plain per-step info plus the vector env's keys
    (``group``, and ``worker_restarted``/``trajectory``/``error`` when the slot's worker
    died). ``done`` is ``terminated or truncated``: the slot waits for ``reset_some``.
    """

    index: int
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated
