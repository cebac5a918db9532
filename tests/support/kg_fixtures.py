"""Shared pieces of the KG tests: a tiny hand-made graph and tool-call helpers.

The tiny graph (three films by one director, two actors) is small enough that every
expected observation in the tests can be checked by eye; it is written with the
generator's own serialiser, so it carries the real schema triples.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from agentgym_eppo.environments.kg.graph import MiniFreebase, graph_triples, write_graph
from agentgym_eppo.environments.kg.schema import ACTOR, DIRECTOR, FILM, PERSON

DIRECTOR_ID, ACTOR_BO, ACTOR_CY = "m.0dir1", "m.0act1", "m.0act2"
FIRST, SECOND, THIRD = "m.0f1", "m.0f2", "m.0f3"


def tiny_graph() -> MiniFreebase:
    graph = MiniFreebase()
    for entity, name, types in (
        (DIRECTOR_ID, "Ada Lane", (PERSON, DIRECTOR)),
        (ACTOR_BO, "Bo Reed", (PERSON, ACTOR)),
        (ACTOR_CY, "Cy Moss", (PERSON, ACTOR)),
        (FIRST, "First Light", (FILM,)),
        (SECOND, "Second Wind", (FILM,)),
        (THIRD, "Third Act", (FILM,)),
    ):
        graph.names[entity] = name
        graph.types[entity].extend(types)
    for film, runtime, released, cast in (
        (FIRST, 100.0, date(2001, 1, 1), (ACTOR_BO, ACTOR_CY)),
        (SECOND, 120.0, date(1999, 5, 5), (ACTOR_BO,)),
        (THIRD, 120.0, date(2010, 3, 3), (ACTOR_CY,)),
    ):
        graph.link(film, "film.film.directed_by", DIRECTOR_ID)
        for actor in cast:
            graph.link(film, "film.film.starring", actor)
        graph.values[(film, "film.film.runtime")] = runtime
        graph.values[(film, "film.film.initial_release_date")] = released
    return graph


def write_tiny_graph(path: Path) -> Path:
    write_graph(path, graph_triples(tiny_graph()))
    return path


def tiny_task(**overrides: Any) -> dict[str, Any]:
    """'which films did Ada Lane direct that star Bo Reed?' in AgentBench's record format."""
    record: dict[str, Any] = {
        "qid": "tiny-0",
        "question": "which films directed by Ada Lane star Bo Reed?",
        "entities": {"Ada Lane": DIRECTOR_ID, "Bo Reed": ACTOR_BO},
        "actions": [
            f"get_relations({DIRECTOR_ID})",
            f"get_neighbors({DIRECTOR_ID},film.director.film)",
            f"get_relations({ACTOR_BO})",
            f"get_neighbors({ACTOR_BO},film.actor.film)",
            "intersection(#0,#1)",
        ],
        "answer": [
            {"answer_type": "Entity", "answer_argument": FIRST, "entity_name": "First Light"},
            {"answer_type": "Entity", "answer_argument": SECOND, "entity_name": "Second Wind"},
        ],
    }
    record.update(overrides)
    return record


def call(name: str, **arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}
