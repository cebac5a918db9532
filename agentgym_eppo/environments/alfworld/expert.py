"""alfworld's handcoded expert, driven the way alfworld's ``AlfredExpert`` wrapper drives it.

The expert (``HandCodedTWAgent``) keeps its own memory of what it has seen, so it must
observe every state the game goes through, whoever chose the command: the
environment feeds it each step's state and the command actually applied, and
:meth:`HandCodedExpert.next_action` is its plan for the next one. Like ``AlfredExpert``,
its first action is ``look`` and it falls back to ``look`` when it has no admissible
plan.

Differences from alfworld: the task parameters come from the game record instead of
a ``traj_data.json`` beside the game file; the expert's random choices (which of several
mugs to take) use its own seeded generator rather than the process-wide one, so its
plans are reproducible; and the expert is told that a ``move X to Y`` command was a
put. alfworld 0.4.2's grammar renamed "put X in/on Y" to "move X to Y" but its expert
still recognises a put by the word "put", so after a put it believes it still holds
the object and never finishes a pick-two task.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from .engine import ALFWorldEngine, GameState

try:
    import alfworld.gen.constants as alfred_constants
    from alfworld.agents.expert import HandCodedTWAgent
except ImportError as error:  # pragma: no cover - the engine import fails first
    raise ImportError(f"the ALFWorld expert needs the alfworld package ({error})") from error

FALLBACK_ACTION = "look"
_PUT_AS_EXPERT_KNOWS_IT = "put "


def task_parameters(task_type: str, pddl_params: Mapping[str, Any]) -> dict[str, Any]:
    """``traj_data``'s task parameters as the expert reads them (class names lower-cased)."""
    params = {**pddl_params, "task_type": task_type}
    return {
        key: value.lower() if value in alfred_constants.OBJECTS else value
        for key, value in params.items()
    }


class HandCodedExpert:
    """Follows one episode and proposes the handcoded expert's next command."""

    def __init__(
        self, task_type: str, pddl_params: Mapping[str, Any], *, seed: int = 0, max_steps: int = 200
    ) -> None:
        self._agent = HandCodedTWAgent(max_steps=max_steps)
        params = task_parameters(task_type, pddl_params)
        self._agent.task_params = params
        self._agent.policy = self._agent.get_task_policy(params)(params, max_steps=max_steps)
        self._rng = random.Random(seed)
        self._next = FALLBACK_ACTION

    def start(self, state: GameState) -> None:
        """Observe the game's first state (the room description)."""
        self._with_own_rng(lambda: self._agent.observe(state.feedback))
        self._next = FALLBACK_ACTION

    def observe(self, state: GameState, command: str) -> None:
        """Observe the state that ``command`` led to, and plan the next command."""
        known = (
            _PUT_AS_EXPERT_KNOWS_IT + command[len("move ") :]
            if command.startswith("move ")
            else command
        )
        try:
            action = self._with_own_rng(
                lambda: self._agent.act(state.as_expert_state(), 0, state.won, known)
            )
        except Exception:  # the expert gives up (timeout, no subgoal left): alfworld looks
            action = FALLBACK_ACTION
        self._next = action if action in state.admissible_commands else FALLBACK_ACTION

    def next_action(self) -> str:
        return self._next

    def _with_own_rng(self, call: Any) -> Any:
        saved = random.getstate()
        random.setstate(self._rng.getstate())
        try:
            return call()
        finally:
            self._rng.setstate(random.getstate())
            random.setstate(saved)


def solve(
    engine: ALFWorldEngine,
    game: Mapping[str, Any],
    record: Mapping[str, Any],
    *,
    max_steps: int,
    seed: int = 0,
) -> list[str] | None:
    """Play ``game`` with the expert alone; its commands if it wins within ``max_steps``."""
    expert = HandCodedExpert(record["task_type"], record["pddl_params"], seed=seed)
    engine.load(game)
    state = engine.reset()
    expert.start(state)
    commands: list[str] = []
    for _ in range(max_steps):
        command = expert.next_action()
        state = engine.step(command)
        commands.append(command)
        if state.won:
            return commands
        expert.observe(state, command)
    return None
