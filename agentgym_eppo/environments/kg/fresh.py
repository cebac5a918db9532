"""Fresh KG questions for pretraining: new questions over the shipped graph.

The graph is the shipped one (rebuilt from its seed, the same triples); only the
questions are new. :func:`content_key` is the question's text, what
:mod:`agentgym_eppo.environments.fresh` compares with the dev and test questions.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .generator import GraphConfig, build_graph
from .graph import MiniFreebase
from .questions import generate_questions

SHIPPED_GRAPH_SEED = 0  # generator.main's default, which wrote assets/kg


@lru_cache(maxsize=1)
def _shipped_graph() -> MiniFreebase:
    return build_graph(GraphConfig(), SHIPPED_GRAPH_SEED)


ID_FIELD = "qid"  # where a row keeps its sample id


def content_key(row: Mapping[str, Any]) -> str:
    return str(row["question"]).strip().lower()


def fresh_tasks(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` distinct well-posed questions drawn with ``seed``."""
    return generate_questions(_shipped_graph(), random.Random(f"kg-fresh-{seed}"), count)
