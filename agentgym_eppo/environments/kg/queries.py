"""Every SPARQL query the KG tools issue, built in one place for every store.

The queries are standard SPARQL 1.1 with full IRIs (``<http://rdf.freebase.com/ns/...>``)
and no prefixes, because the stores disagree on the rest (each measured on pyoxigraph, rdflib and
Virtuoso): pyoxigraph rejects
prefixed names with two dots (``ns:film.actor.film``), ``SELECT COUNT DISTINCT`` is
Virtuoso-only, ``regex`` on an IRI matches nothing, and rdflib ignores a ``MAX``
subquery used as a filter. So: ``COUNT(DISTINCT ?x)``, ``STRSTARTS(STR(?r), ...)``,
and superlatives as ``ORDER BY ... LIMIT 1`` subqueries with the IRI as tie-breaker.

Names reach a query only through :func:`iri`, which accepts nothing but Freebase-shaped
names (letters, digits, ``_`` and ``.``), so no argument can inject SPARQL.

The schema follows Freebase: a property ``p`` has ``p type.property.expected_type T``.
Properties whose expected type is a literal type are *attributes* (``get_attributes``);
those whose expected type is an entity type are *relations* (``get_relations``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

from .variables import And, Count, Entity, Join, Members, SetProgram, Superlative

FREEBASE_NS = "http://rdf.freebase.com/ns/"
EXPECTED_TYPE = "type.property.expected_type"
NAME = "type.object.name"
OBJECT_TYPE = "type.object.type"
NUMERIC_TYPES = ("type.int", "type.float", "type.datetime")
"""Expected types of the attributes that ``argmax``/``argmin`` can order by."""
LITERAL_TYPES = (*NUMERIC_TYPES, "type.text", "type.boolean", "type.rawstring", "type.uri")
"""Expected types whose values are literals: such properties are never relations."""

_NAME = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*", re.ASCII)
FREEBASE_ID = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)+", re.ASCII)
"""A Freebase id: a mid such as ``m.0abc``, or a dotted schema name such as ``common.topic``
or ``film.film.genre``. Entity arguments (besides ``#k`` and names from the question)
and relation/attribute names must have this shape; AgentBench's gold data passes
schema nodes like ``common.topic`` as entities, and Freebase has two-part properties
such as ``topic_server.population_number``."""


def is_safe_name(name: str) -> bool:
    """True if ``name`` can be turned into an IRI (Freebase-shaped, nothing to escape)."""
    return _NAME.fullmatch(name) is not None


def iri(namespace: str, name: str) -> str:
    """``<namespace + name>``; raises ``ValueError`` for anything but a Freebase-shaped name."""
    if not is_safe_name(name):
        raise ValueError(f"not a valid entity or property name: {name!r}")
    return f"<{namespace}{name}>"


class _Fresh:
    """Hands out query variable names ``?v0, ?v1, ...`` unique within one query."""

    def __init__(self) -> None:
        self._counter: Iterator[int] = itertools.count()

    def __call__(self) -> str:
        return f"?v{next(self._counter)}"


def _pattern(program: SetProgram, target: str, namespace: str, fresh: _Fresh) -> str:
    """A group-graph-pattern body binding ``target`` to every member of ``program``."""
    if isinstance(program, Entity):
        return f"VALUES {target} {{ {iri(namespace, program.entity_id)} }}"
    if isinstance(program, Members):
        ids = " ".join(iri(namespace, name) for name in program.entity_ids if is_safe_name(name))
        return f"VALUES {target} {{ {ids} }}"
    if isinstance(program, Join):
        source = fresh()
        inner = _pattern(program.source, source, namespace, fresh)
        return f"{inner} {source} {iri(namespace, program.relation)} {target} ."
    if isinstance(program, And):
        left = _pattern(program.left, target, namespace, fresh)
        right = _pattern(program.right, target, namespace, fresh)
        return f"{left} {right}"
    if isinstance(program, Superlative):
        value = fresh()
        inner = _pattern(program.source, target, namespace, fresh)
        direction = "DESC" if program.kind == "ARGMAX" else "ASC"
        attribute = iri(namespace, program.attribute)
        return (
            f"{{ SELECT {target} WHERE {{ {inner} {target} {attribute} {value} . }} "
            f"ORDER BY {direction}({value}) ASC(STR({target})) LIMIT 1 }}"
        )
    raise TypeError(f"a {type(program).__name__} program does not denote a set of entities")


def members(program: SetProgram, namespace: str, limit: int | None = None) -> str:
    """The distinct members of ``program`` as ``?x``: in a stable order, or with
    ``limit`` unordered and at most that many (a store can stop early: sort yourself)."""
    body = _pattern(program, "?x", namespace, _Fresh())
    if limit is not None:
        return f"SELECT DISTINCT ?x WHERE {{ {body} }} LIMIT {int(limit)}"
    return f"SELECT DISTINCT ?x WHERE {{ {body} }} ORDER BY ASC(STR(?x))"


def count(program: Count, namespace: str) -> str:
    """The number of distinct members of the counted program as ``?n``."""
    body = _pattern(program.source, "?x", namespace, _Fresh())
    return f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {body} }}"


def _properties(program: SetProgram, namespace: str, type_filter: str) -> str:
    body = _pattern(program, "?x", namespace, _Fresh())
    return (
        f"SELECT DISTINCT ?r WHERE {{ {body} ?x ?r ?o . "
        f"?r {iri(namespace, EXPECTED_TYPE)} ?t . "
        f'FILTER(STRSTARTS(STR(?r), "{namespace}") && !STRSTARTS(STR(?r), "{namespace}type.")) '
        f"FILTER({type_filter}) }} ORDER BY ASC(STR(?r))"
    )


def relations(program: SetProgram, namespace: str) -> str:
    """The relations (entity-valued properties) leaving any member of ``program``, as ``?r``."""
    literal_types = ", ".join(iri(namespace, name) for name in LITERAL_TYPES)
    return _properties(program, namespace, f"?t NOT IN ({literal_types})")


def attributes(program: SetProgram, namespace: str) -> str:
    """The numeric attributes (int, float, datetime) of any member of ``program``, as ``?r``."""
    numeric_types = ", ".join(iri(namespace, name) for name in NUMERIC_TYPES)
    return _properties(program, namespace, f"?t IN ({numeric_types})")


def expected_type(relation: str, namespace: str) -> str:
    """The expected type(s) of a property as ``?t`` (Freebase's ``type.property.expected_type``)."""
    return (
        f"SELECT ?t WHERE {{ {iri(namespace, relation)} {iri(namespace, EXPECTED_TYPE)} ?t }} "
        "ORDER BY ASC(STR(?t))"
    )


def names(entity_ids: Iterable[str], namespace: str) -> str:
    """``?e``'s ``type.object.name`` as ``?name`` for each of ``entity_ids``."""
    values = " ".join(iri(namespace, entity_id) for entity_id in entity_ids)
    return (
        f"SELECT ?e ?name WHERE {{ VALUES ?e {{ {values} }} ?e {iri(namespace, NAME)} ?name . "
        "FILTER(LANG(?name) = '' || LANGMATCHES(LANG(?name), 'en')) }"
    )
