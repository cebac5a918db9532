"""Off-policy sampling as AgentRL does it: a share of the turns comes from a stale engine.

:class:`StaleMixEngine` sends a fixed share of each generate call's contexts (drawn by a
seeded generator) to a second engine whose weights are synced only every
``stale_every`` updates, the rest to the fresh engine synced after every update. The
stale engine keeps serving while the fresh one waits for new weights, which is what
lets an asynchronous pipeline overlap sampling with training; the policy loss sees
those turns as off-policy data (the clip range bounds how far the update follows them).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence

from transformers import PreTrainedModel

from .engine import RolloutEngine
from .hf import HFGenerateEngine


class SnapshotHFEngine(HFGenerateEngine):
    """An :class:`HFGenerateEngine` over its own copy of the weights: ``update_weights``
    copies them in (the in-process engine shares the trainer's module and never lags)."""

    def __init__(self, model: PreTrainedModel, *args: object, **kwargs: object) -> None:
        super().__init__(copy.deepcopy(model).eval(), *args, **kwargs)  # type: ignore[arg-type]

    def update_weights(self, model: PreTrainedModel) -> None:
        self.model.load_state_dict(model.state_dict())


class StaleMixEngine:
    """A ``RolloutEngine`` mixing a fresh engine and a stale one (see module doc)."""

    def __init__(
        self,
        fresh: RolloutEngine,
        stale: RolloutEngine,
        stale_share: float,
        stale_every: int,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= stale_share < 1.0:
            raise ValueError(f"stale_share must be in [0, 1), got {stale_share}")
        if stale_every < 1:
            raise ValueError(f"stale_every must be >= 1, got {stale_every}")
        self.fresh, self.stale = fresh, stale
        self.stale_share, self.stale_every = stale_share, stale_every
        self.updates = 0
        self.stale_turns = 0
        self.fresh_turns = 0
        self._random = random.Random(seed)

    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[list[int]]:
        count = round(self.stale_share * len(contexts))
        stale = set(self._random.sample(range(len(contexts)), count))
        fresh = [i for i in range(len(contexts)) if i not in stale]
        chosen = sorted(stale)
        results: list[list[int]] = [[] for _ in contexts]
        for engine, rows in ((self.fresh, fresh), (self.stale, chosen)):
            if rows:
                outputs = engine.generate(
                    [contexts[i] for i in rows], [max_new_tokens[i] for i in rows], temperature
                )
                for row, output in zip(rows, outputs, strict=True):
                    results[row] = output
        self.stale_turns += len(chosen)
        self.fresh_turns += len(fresh)
        return results

    def update_weights(self, model: PreTrainedModel) -> None:
        """Sync the fresh engine now, the stale one every ``stale_every``-th update."""
        self.fresh.update_weights(model)
        self.updates += 1
        if self.updates % self.stale_every == 0:
            self.stale.update_weights(model)
