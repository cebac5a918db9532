"""Fresh OS tasks for pretraining: the shipped generator's templates from a new seed.

:func:`content_key` is what makes two tasks the same task (the description, the set-up
script and the background job), the key :mod:`agentgym_eppo.environments.fresh` uses to
keep every dev and test task out of a pretraining stream.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from .generator import TEMPLATES


def content_key(row: Mapping[str, Any]) -> str:
    return json.dumps([row["description"], row.get("create"), row.get("start")], sort_keys=True)


def fresh_tasks(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` tasks, templates in turn, parameters from ``seed`` (distinct among themselves)."""
    rng = random.Random(f"os-fresh-{seed}")
    tasks: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(tasks) < count:
        task = TEMPLATES[len(tasks) % len(TEMPLATES)](rng)
        key = content_key(task)
        if key not in seen:
            seen.add(key)
            tasks.append(task)
    return tasks
