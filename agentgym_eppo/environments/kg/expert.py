"""The expert: replays a question's gold tool sequence, then submits its last variable.

The gold actions number their variables from ``#0`` as if nothing else had happened.
When the agent has made other calls in between, its variables shift the numbering, so
the expert keeps a map from gold variable numbers to the variables its own calls
actually created. Its next call is therefore right from any state in which turns are
left: after a detour the agent (or a trainer using the expert) can pick up the plan.

The gold actions name the question's entities by Freebase id, which the agent never
sees (the task text lists names only), so the expert writes the name instead: the
environment resolves either, and an agent imitating the expert (SFT) learns a call it
can make from what it is shown rather than an id it would have to guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...core import FunctionCall
from .actions import VARIABLE_TOOLS, variable_index


class GoldExpert:
    """Tracks progress through ``calls`` (the parsed gold actions) for one episode."""

    def __init__(
        self, calls: Sequence[FunctionCall], entities: Mapping[str, str] | None = None
    ) -> None:
        self._calls = tuple(calls)
        self._names = {entity_id: name for name, entity_id in (entities or {}).items()}
        self._cursor = 0
        self._made = 0
        self._actual: dict[int, int] = {}

    def next_call(self) -> FunctionCall:
        """The expert's next call: the next gold action, or ``final_answer`` at the end.

        Raises ``ValueError`` if the task has no gold actions that create a variable.
        """
        if not any(call.name in VARIABLE_TOOLS for call in self._calls):
            raise ValueError("this task has no gold actions creating a variable: no expert for it")
        if self._cursor < len(self._calls):
            call = self._calls[self._cursor]
            arguments = {key: self._renumber(value) for key, value in call.arguments.items()}
            return self._named(FunctionCall(call.name, arguments))
        return FunctionCall("final_answer", {"variable": f"#{self._actual[self._made - 1]}"})

    def observe(self, call: FunctionCall, variables_before: int, variables_after: int) -> None:
        """Record a call the environment ran; advance if it was the expert's next call."""
        if self._cursor >= len(self._calls) or self._named(call) != self.next_call():
            return
        self._cursor += 1
        if variables_after > variables_before:
            self._actual[self._made] = variables_before
            self._made += 1

    def _named(self, call: FunctionCall) -> FunctionCall:
        """``call`` with every question entity's id replaced by its name."""
        arguments = {key: self._names.get(value, value) for key, value in call.arguments.items()}
        return FunctionCall(call.name, arguments)

    def _renumber(self, value: str) -> str:
        index = variable_index(value)
        return value if index is None else f"#{self._actual[index]}"
