"""The generated graph in memory, and its N-Triples form (Freebase's namespace and schema).

:class:`MiniFreebase` is what the generator builds and the question generator walks;
:func:`graph_triples` turns it into sorted N-Triples lines that carry, besides the facts,
every entity's ``type.object.name``/``type.object.type`` and every property's schema
triples (:mod:`.schema`); :func:`write_graph` writes them gzipped, reproducibly.
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from . import schema as s
from .queries import EXPECTED_TYPE, FREEBASE_NS, NAME, OBJECT_TYPE

Value = int | float | date
"""An attribute value: ``type.int``, ``type.float`` or ``type.datetime`` (a day)."""

_XSD = "http://www.w3.org/2001/XMLSchema#"


@dataclass
class MiniFreebase:
    """The generated graph in memory: names, types, edges (both ways) and attribute values."""

    names: dict[str, str] = field(default_factory=dict)
    types: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    edges: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    values: dict[tuple[str, str], Value] = field(default_factory=dict)
    by_type: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def neighbors(self, entity: str, relation: str) -> list[str]:
        return self.edges.get((entity, relation), [])

    def link(self, subject: str, relation: str, obj: str) -> None:
        """Add ``subject relation obj`` and its reverse, once."""
        if obj in self.edges[(subject, relation)]:
            return
        self.edges[(subject, relation)].append(obj)
        self.edges[(obj, s.REVERSE_OF[relation])].append(subject)


def graph_triples(graph: MiniFreebase, namespace: str = FREEBASE_NS) -> list[str]:
    """The graph and its schema as N-Triples lines, sorted (so the file is reproducible)."""

    def node(name: str) -> str:
        return f"<{namespace}{name}>"

    lines: set[str] = set()
    type_names = {type_name for types in graph.types.values() for type_name in types}
    for type_name in type_names:
        lines.add(f"{node(type_name)} {node(OBJECT_TYPE)} {node('type.type')} .")
    for entity, name in graph.names.items():
        lines.add(f"{node(entity)} {node(NAME)} {_literal(name)}@en .")
        for type_name in graph.types[entity]:
            lines.add(f"{node(entity)} {node(OBJECT_TYPE)} {node(type_name)} .")
    for (subject, relation), objects in graph.edges.items():
        for obj in objects:
            lines.add(f"{node(subject)} {node(relation)} {node(obj)} .")
    for (subject, attribute), value in graph.values.items():
        lines.add(f"{node(subject)} {node(attribute)} {_typed(value)} .")
    lines.update(_schema_lines(node))
    return sorted(lines)


def _schema_lines(node: Callable[[str], str]) -> Iterator[str]:
    def prop(name: str, domain: str, expected: str) -> Iterator[str]:
        yield f"{node(name)} {node(OBJECT_TYPE)} {node('type.property')} ."
        yield f"{node(name)} {node('type.property.schema')} {node(domain)} ."
        yield f"{node(name)} {node(EXPECTED_TYPE)} {node(expected)} ."

    for spec in s.RELATIONS:
        yield from prop(spec.name, spec.domain, spec.range)
        yield from prop(spec.reverse, spec.range, spec.domain)
        yield f"{node(spec.name)} {node('type.property.reverse_property')} {node(spec.reverse)} ."
        yield f"{node(spec.reverse)} {node('type.property.reverse_property')} {node(spec.name)} ."
    for attribute in s.ATTRIBUTES:
        yield from prop(attribute.name, attribute.domain, attribute.expected_type)
        if attribute.unit is not None:
            unit = "m.0unit_" + attribute.unit.lower().replace(" ", "_")
            yield f"{node(attribute.name)} {node('type.property.unit')} {node(unit)} ."
            yield f"{node(unit)} {node(NAME)} {_literal(attribute.unit)}@en ."
            yield f"{node(unit)} {node(OBJECT_TYPE)} {node(s.UNIT)} ."


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _typed(value: Value) -> str:
    if isinstance(value, date):
        return f'"{value.isoformat()}"^^<{_XSD}date>'
    if isinstance(value, int):
        return f'"{value}"^^<{_XSD}integer>'
    return f'"{value!r}"^^<{_XSD}decimal>'


def write_graph(path: str | Path, lines: Iterable[str]) -> None:
    """Write N-Triples lines gzipped, byte-for-byte reproducible (mtime 0)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        for line in lines:
            handle.write(line.encode("utf-8") + b"\n")
