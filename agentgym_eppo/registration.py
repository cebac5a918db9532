"""Gymnasium ids of the environments that exist, registered on ``import agentgym_eppo``.

``gym.make("agentgym_eppo:AgentBench-DB-v0")`` imports this package first, so the
ids resolve with no explicit import. An environment is listed here only once it works
end to end.
"""

from __future__ import annotations

import gymnasium as gym

from agentgym_eppo.core.registry import Registry

ENVIRONMENTS: Registry[tuple[str, str]] = Registry(
    "task",
    {
        "os": ("AgentBench-OS-v0", "agentgym_eppo.environments.os.env:OSEnv"),
        "db": ("AgentBench-DB-v0", "agentgym_eppo.environments.db.env:DBEnv"),
        "kg": ("AgentBench-KG-v0", "agentgym_eppo.environments.kg.env:KGEnv"),
        "alfworld": (
            "AgentBench-ALFWorld-v0",
            "agentgym_eppo.environments.alfworld.env:ALFWorldEnv",
        ),
        "webshop": (
            "AgentBench-WebShop-v0",
            "agentgym_eppo.environments.webshop.env:WebShopEnv",
        ),
    },
)
"""``info["task_id"]`` -> (Gymnasium id, entry point ``module:Class``)."""

TASK_IDS: tuple[str, ...] = tuple(ENVIRONMENTS)
"""The task ids, in AgentBench's order: the one list every other one derives from."""


def env_id_for(task_id: str) -> str:
    """The Gymnasium id of a task family (``"db"`` -> ``"AgentBench-DB-v0"``)."""
    try:
        return ENVIRONMENTS[task_id][0]
    except KeyError:
        raise KeyError(f"unknown task {task_id!r}; available: {', '.join(ENVIRONMENTS)}") from None


def register_environments() -> None:
    """Register every environment in :data:`ENVIRONMENTS` (idempotent)."""
    for env_id, entry_point in ENVIRONMENTS.values():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, disable_env_checker=True)
