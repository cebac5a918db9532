"""Helpers shared by the WebShop tests: playing an episode with a policy."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agentgym_eppo.environments.webshop.env import WebShopEnv

Policy = Callable[[WebShopEnv], Any]


def play(env: WebShopEnv, index: int, policy: Policy) -> tuple[float, dict[str, Any]]:
    """Run one episode of task ``index`` with ``policy``; return the final reward and info."""
    env.reset(options={"index": index})
    while True:
        _, reward, terminated, truncated, info = env.step(policy(env))
        if terminated or truncated:
            return reward, info


def random_policy(rng: random.Random) -> Policy:
    """Search a few random words of the instruction, or click a random clickable."""

    def act(env: WebShopEnv) -> dict[str, Any]:
        actions = env.available_actions()
        clickables = [c for c in actions["clickables"] if c != "search"]  # type: ignore[union-attr]
        if actions["has_search_bar"] or not clickables:
            words = env.record.instruction.split()
            keywords = " ".join(rng.sample(words, min(3, len(words))))
            return {"name": "search_action", "arguments": {"keywords": keywords}}
        return {"name": "click_action", "arguments": {"value": rng.choice(clickables)}}

    return act
