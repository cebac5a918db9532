"""Fresh WebShop goals for pretraining: new instructions over the shipped catalog.

Goals are drawn as the shipped ones were (WebShop's own recipe), from a new seed;
:mod:`agentgym_eppo.environments.fresh` drops every goal whose instruction matches a dev
or test goal's, and every goal whose target product is the target of a dev or test goal
(``excluded_targets``): a pretrained model never sees the held-out products as answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ...core import read_json_or_jsonl
from .catalog import Catalog, shipped_catalog
from .generator import generate_goals
from .search import SearchEngine
from .tasks import shipped_goals_path


@lru_cache(maxsize=1)
def _shop() -> tuple[Catalog, SearchEngine]:
    catalog = shipped_catalog()
    return catalog, SearchEngine(catalog)


def content_key(row: Mapping[str, Any]) -> str:
    return json.dumps([row["instruction_text"], row["asin"]])


def excluded_targets() -> set[str]:
    """The products that dev and test goals ask for."""
    return {
        str(row["asin"])
        for split in ("dev", "test")
        for row in read_json_or_jsonl(shipped_goals_path(split))
    }


def fresh_tasks(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` goals, each for a product no dev or test goal targets."""
    catalog, engine = _shop()
    banned = excluded_targets()
    goals: list[dict[str, Any]] = []
    round_ = 0
    while len(goals) < count:
        drawn = generate_goals(catalog, engine, {"fresh": len(catalog)}, seed=seed * 1_000 + round_)
        goals.extend(g for g in drawn["fresh"] if g["asin"] not in banned)
        round_ += 1
    return goals[:count]
