"""Fresh DB tasks for pretraining: the shipped generator from a new seed, each verified.

:func:`content_key` (the question and the table's content) is what
:mod:`agentgym_eppo.environments.fresh` compares with the dev and test tasks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .generator import Verifier, generate_split


def content_key(row: Mapping[str, Any]) -> str:
    return json.dumps([row["description"], row["table"]], sort_keys=True)


def fresh_tasks(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` tasks whose labels the verifier computed on SQLite (deterministic in ``seed``)."""
    verifier = Verifier()
    try:
        return generate_split(f"fresh-{seed}", count, seed, verifier)
    finally:
        verifier.backend.close()
