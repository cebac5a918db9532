"""The one query builder: standard SPARQL 1.1 that every store accepts (the traps each store sets)."""

from __future__ import annotations

import re

import pyoxigraph
import rdflib

from agentgym_eppo.environments.kg import queries
from agentgym_eppo.environments.kg.store import OxigraphStore, RdflibStore, Term
from agentgym_eppo.environments.kg.variables import And, Count, Entity, Join, Superlative

NS = queries.FREEBASE_NS
PROGRAM = Superlative(
    "ARGMAX",
    And(
        Join("film.director.film", Entity("m.0dir1")),
        Join("film.actor.film", Entity("m.0act1")),
    ),
    "film.film.runtime",
)


def every_query() -> list[str]:
    return [
        queries.members(PROGRAM, NS),
        queries.count(Count(PROGRAM), NS),
        queries.relations(PROGRAM, NS),
        queries.attributes(PROGRAM, NS),
        queries.expected_type("film.film.genre", NS),
        queries.names(["m.0dir1", "m.0act1"], NS),
    ]


def test_queries_use_full_iris_and_the_portable_forms() -> None:
    for query in every_query():
        assert "PREFIX" not in query and "regex" not in query.lower()
        assert not re.search(r"\s[a-z]+:[A-Za-z_]", query), query  # no prefixed names
        for found in re.findall(r"<([^>]*)>", query):
            assert found.startswith(NS), found
    assert "COUNT(DISTINCT ?x)" in queries.count(Count(PROGRAM), NS)
    assert "ORDER BY DESC(?v" in queries.members(PROGRAM, NS) and "LIMIT 1" in queries.members(
        PROGRAM, NS
    )
    assert f'STRSTARTS(STR(?r), "{NS}")' in queries.relations(PROGRAM, NS)


def test_every_query_runs_alike_in_pyoxigraph_and_rdflib() -> None:
    oxigraph, pure_python = OxigraphStore(pyoxigraph.Store()), RdflibStore(rdflib.Graph())
    for query in every_query():
        assert oxigraph.select(query) == pure_python.select(query), query
    assert oxigraph.select(queries.count(Count(PROGRAM), NS)) == [(Term("0", is_iri=False),)]


def test_programs_print_as_agentbench_s_expressions() -> None:
    assert str(Count(PROGRAM)) == (
        "(COUNT (ARGMAX (AND (JOIN (R film.director.film) m.0dir1) "
        "(JOIN (R film.actor.film) m.0act1)) film.film.runtime))"
    )
