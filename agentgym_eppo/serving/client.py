"""A typed OpenEnv client for the served tasks.

:class:`AgentBenchClient` is OpenEnv's ``EnvClient`` with this package's types: ``step``
takes an action dict (``{"text": ...}`` or ``{"tool_call": {...}}``), a string (the
model's raw reply) or an :class:`~agentgym_eppo.serving.types.AgentBenchAction`, and
results carry an :class:`~agentgym_eppo.serving.types.AgentBenchObservation`. Any
OpenEnv client works as well: ``GenericEnvClient`` needs nothing from this package.

    with AgentBenchClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(index=0)
        result = env.step({"tool_call": {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}})
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .types import AgentBenchAction, AgentBenchObservation, AgentBenchState

ActionLike = AgentBenchAction | dict[str, Any] | str


class AgentBenchClient(EnvClient[ActionLike, AgentBenchObservation, AgentBenchState]):
    """OpenEnv's WebSocket client, typed for the AgentBench tasks."""

    def _step_payload(self, action: ActionLike) -> dict[str, Any]:
        if isinstance(action, str):
            return {"text": action}
        if isinstance(action, AgentBenchAction):
            return action.model_dump(exclude_none=True, exclude_defaults=True)
        return dict(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[AgentBenchObservation]:
        observation = AgentBenchObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> AgentBenchState:
        return AgentBenchState(**payload)
