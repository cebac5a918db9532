"""Programs over the graph (AgentBench's logical forms) and what a KG variable ``#k`` holds.

A program (:class:`Join`, :class:`And`, :class:`Superlative`, :class:`Count` over an
:class:`Entity`) names a set; :mod:`.queries` turns it into one SPARQL query, and the
question generator writes its gold answers that way. An episode's variables do not
nest programs, though: AgentBench's lazy evaluation lets ``intersection(#k, #k)``
double the query behind ``#k+1`` with every call, so a dozen calls build a query no
store answers in time. Each variable instead holds its evaluated set,
:class:`Members` (at most ``max_variable_size`` entities, see :mod:`.session`), and
every tool call is one query over that set, whatever came before.

``str(program)`` is the program as an S-expression in AgentBench's notation
(``(JOIN (R film.film.directed_by) m.0abc)``), handy in logs and task files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NUMBER_TYPE = "type.int"
"""The type of a ``count`` result; such a variable holds a number, not entities."""


@dataclass(frozen=True)
class Entity:
    """One entity named by its id (``m.0abc``)."""

    entity_id: str

    def __str__(self) -> str:
        return self.entity_id


@dataclass(frozen=True)
class Members:
    """An evaluated set: the entity ids (and literal values) a tool call returned, sorted.

    Only Freebase-shaped ids take part in later queries; literal values cannot be the
    subject of a relation anyway.
    """

    entity_ids: tuple[str, ...]

    def __str__(self) -> str:
        shown = " ".join(self.entity_ids[:3])
        more = f" ...{len(self.entity_ids) - 3} more" if len(self.entity_ids) > 3 else ""
        return f"(VALUES {shown}{more})"


@dataclass(frozen=True)
class Join:
    """The objects reached from every member of ``source`` through ``relation``."""

    relation: str
    source: SetProgram

    def __str__(self) -> str:
        return f"(JOIN (R {self.relation}) {self.source})"


@dataclass(frozen=True)
class And:
    """The members common to two programs."""

    left: SetProgram
    right: SetProgram

    def __str__(self) -> str:
        return f"(AND {self.left} {self.right})"


@dataclass(frozen=True)
class Superlative:
    """The member of ``source`` with the largest (``argmax``) or smallest value of ``attribute``.

    Ties go to the smallest IRI, so every store returns the same single entity.
    """

    kind: Literal["ARGMAX", "ARGMIN"]
    source: SetProgram
    attribute: str

    def __str__(self) -> str:
        return f"({self.kind} {self.source} {self.attribute})"


@dataclass(frozen=True)
class Count:
    """How many distinct members ``source`` has."""

    source: SetProgram

    def __str__(self) -> str:
        return f"(COUNT {self.source})"


Program = Entity | Members | Join | And | Superlative | Count
SetProgram = Entity | Members | Join | And | Superlative
"""Programs that denote a set of entities (everything but :class:`Count`)."""


@dataclass(frozen=True)
class Variable:
    """A result the agent refers to as ``#k``: its type and its evaluated value.

    ``program`` is :class:`Members` (or :class:`Count` of members for a number);
    ``logical_form`` is the AgentBench program that led to it, kept for ``str`` and
    logs only: it may share sub-programs exponentially (``intersection(#k, #k)``), so it
    is never hashed, compared or queried, and ``str`` renders at most
    :data:`LOGICAL_FORM_LIMIT` characters of it.
    """

    type: str
    program: Program
    logical_form: Program | None = field(default=None, compare=False, repr=False)

    @property
    def is_number(self) -> bool:
        return isinstance(self.program, Count)

    @property
    def set_program(self) -> SetProgram:
        """The program of a variable that holds entities; a count holds a number instead."""
        if isinstance(self.program, Count):
            raise TypeError("a count variable holds a number, not a set of entities")
        return self.program

    def __str__(self) -> str:
        return render(self.logical_form if self.logical_form is not None else self.program)


LOGICAL_FORM_LIMIT = 2_000


def render(program: Program, limit: int = LOGICAL_FORM_LIMIT) -> str:
    """``str(program)``, cut after ``limit`` characters; its cost is bounded by ``limit``
    however large the shared program tree unfolds."""
    parts: list[str] = []
    length = 0
    stack: list[Program | str] = [program]
    while stack and length <= limit:
        item = stack.pop()
        if isinstance(item, str):
            piece = item
        elif isinstance(item, Join):
            piece = f"(JOIN (R {item.relation}) "
            stack.extend([")", item.source])
        elif isinstance(item, And):
            piece = "(AND "
            stack.extend([")", item.right, " ", item.left])
        elif isinstance(item, Superlative):
            piece = f"({item.kind} "
            stack.extend([f" {item.attribute})", item.source])
        elif isinstance(item, Count):
            piece = "(COUNT "
            stack.extend([")", item.source])
        else:
            piece = str(item)
        parts.append(piece)
        length += len(piece)
    text = "".join(parts)
    return text if not stack and length <= limit else text[:limit] + "..."
