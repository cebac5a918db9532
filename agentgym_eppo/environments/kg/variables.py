"""What a KG variable ``#k`` holds: a typed, lazily evaluated program over the graph.

As in AgentBench, ``get_neighbors``/``intersection``/``argmax``/``count`` do not fetch
their result: they build a program (a small logical form) that names the set, and the
store evaluates it only when a later tool (or the final answer) needs it. A variable
with 100k members therefore costs nothing until asked for, and the same program runs
unchanged on the embedded store and on a remote endpoint.

``str(program)`` is the program as an S-expression in AgentBench's notation
(``(JOIN (R film.film.directed_by) m.0abc)``), handy in logs and task files.
"""

from __future__ import annotations

from dataclasses import dataclass
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


Program = Entity | Join | And | Superlative | Count
SetProgram = Entity | Join | And | Superlative
"""Programs that denote a set of entities (everything but :class:`Count`)."""


@dataclass(frozen=True)
class Variable:
    """A result the agent refers to as ``#k``: its type and the program that computes it."""

    type: str
    program: Program

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
        return str(self.program)
