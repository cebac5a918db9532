"""Fresh ALFWorld games for pretraining: new rooms and goals, each won by the expert.

:func:`content_key` is the goal sentence and the PDDL problem without its name line,
what :mod:`agentgym_eppo.environments.fresh` compares with the dev and test games.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .games import generate_split

_PROBLEM_NAME = re.compile(r"\(problem [^)]*\)")


ID_FIELD = "name"  # where a row keeps its sample id


def content_key(row: Mapping[str, Any]) -> str:
    problem = _PROBLEM_NAME.sub("", str(row["pddl_problem"]))
    return json.dumps([row["task"], problem])


def fresh_tasks(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` solvable games (task types in turn) with their walkthroughs."""
    return generate_split(f"fresh{seed}", count, seed=10_000 + seed)
