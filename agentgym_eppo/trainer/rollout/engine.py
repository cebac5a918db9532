"""The rollout engine interface: token ids in, sampled token ids out.

The rollout loop only needs :class:`RolloutEngine`: given the contexts of the slots
waiting for an action, return each one's next assistant turn as token ids (ending with
the end-of-turn token unless the length limit cut it), and take new weights after an
update. :class:`~agentgym_eppo.trainer.rollout.hf.HFGenerateEngine` runs the policy in
this process; the SGLang engines (:mod:`agentgym_eppo.trainer.rollout.sglang`) plug in
behind the same two methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class RolloutEngine(Protocol):
    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[list[int]]:
        """One assistant turn per context (greedy when ``temperature == 0``)."""
        ...

    def update_weights(self, model: Any) -> None:
        """Make the engine sample from ``model``'s current weights."""
        ...
