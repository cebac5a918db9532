"""One episode of the KG tools: AgentBench's semantics and observation wording.

A :class:`KGSession` holds the variables ``#0, #1, ...`` the agent has made and answers
each tool call with the text AgentBench's knowledge-graph task sends back:

* ``get_relations`` / ``get_attributes``: ``Observation: [r1, r2, ...]`` (sorted, so the
  same graph always gives the same text);
* ``get_neighbors`` / ``intersection`` / ``argmax`` / ``argmin``:
  ``Observation: variable #k, which are instances of <type>``;
* ``count``: ``Observation: variable #k, which is a number``.

An argument is a variable ``#k``, an entity name from the question, or an entity id.
``get_neighbors`` accepts only a relation that ``get_relations`` lists for that variable,
and ``argmax``/``argmin`` only an attribute that ``get_attributes`` lists; as in
AgentBench, the list is fetched on the spot if the agent has not asked for it.
``intersection`` needs two variables of one type. The agent's mistakes come back as
``Error processing tool call: ...`` observations; a reference to a variable that does
not exist ends the episode (:class:`~agentgym_eppo.core.AgentValidationFailed`).

Every tool call is bounded whatever the variables hold. A new variable's set is
evaluated when it is made and kept (:class:`~.variables.Members`), so each query is
one join over at most ``max_variable_size`` entities instead of the nested program
of every call before it; a result larger than that is refused with a message, as is
a query that runs past ``query_timeout`` seconds on an embedded store.
``intersection`` and ``count`` need no query at all.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Literal

from ...core import AgentValidationFailed, FunctionCall
from . import queries
from .actions import entity_id_for, variable_index
from .store import GraphStore, QueryTooCostly, Term
from .variables import (
    NUMBER_TYPE,
    And,
    Count,
    Entity,
    Join,
    Members,
    SetProgram,
    Superlative,
    Variable,
)

ERROR_PREFIX = "Error processing tool call: "
SHOWN_ANSWERS = 10
"""How many members the final answer's observation names before summarising the rest."""
MAX_VARIABLE_SIZE = 100_000
"""The most entities a variable may hold: bounds every later query's size and time
(the shipped graph's largest gold set has a few hundred)."""
QUERY_TIMEOUT = 20.0
"""Seconds one query on an embedded store may run (checked between result rows)."""


class ToolError(Exception):
    """An agent mistake that comes back as an observation; the episode goes on."""


@dataclass(frozen=True)
class Answer:
    """A submitted variable's value: entity ids (or the count) and the observation text."""

    values: tuple[str, ...]
    observation: str


class KGSession:
    """The tool state of one episode over ``store``.

    ``entities`` maps the question's entity names to ids. ``ranges`` caches each
    relation's expected type; it may be shared across episodes over the same graph.
    """

    def __init__(
        self,
        store: GraphStore,
        entities: Mapping[str, str],
        *,
        namespace: str = queries.FREEBASE_NS,
        ranges: MutableMapping[str, str] | None = None,
        max_variable_size: int = MAX_VARIABLE_SIZE,
        query_timeout: float = QUERY_TIMEOUT,
    ) -> None:
        if max_variable_size < 1 or query_timeout <= 0:
            raise ValueError(
                "max_variable_size and query_timeout must be positive, got "
                f"{max_variable_size} and {query_timeout}"
            )
        self.max_variable_size = int(max_variable_size)
        self.query_timeout = float(query_timeout)
        self.store = store
        self.entities = dict(entities)
        self.namespace = namespace
        self.variables: list[Variable] = []
        self._ranges = ranges if ranges is not None else {}
        self._relations: dict[SetProgram, list[str]] = {}
        self._attributes: dict[SetProgram, list[str]] = {}

    def call(self, call: FunctionCall) -> str:
        """Run one tool (not ``final_answer``) and return its observation."""
        try:
            return self._dispatch(call)
        except ToolError as error:
            return ERROR_PREFIX + str(error)
        except QueryTooCostly as error:
            return f"{ERROR_PREFIX}{call.name}: {error}; ask about fewer entities"

    def answer(self, reference: str) -> Answer:
        """Evaluate the variable ``reference`` (``#k``) submitted as the final answer."""
        index = self._index(reference)
        variable = self.variables[index]
        if isinstance(variable.program, Count):
            number = str(len(_members_of(variable.program.source)))
            return Answer((number,), f"Observation: variable #{index} is the number {number}")
        values = list(_members_of(variable.set_program))
        try:
            observation = self._describe_answer(index, values)
        except QueryTooCostly:  # the labels are a courtesy; the answer stands without them
            observation = self._describe_answer(index, values, labelled=False)
        return Answer(tuple(values), observation)

    # ------------------------------------------------------------------ tools

    def _dispatch(self, call: FunctionCall) -> str:
        arguments = call.arguments
        name = call.name
        if name == "get_relations":
            program = self._source(name, arguments["variable"])
            return _listing(self._relations_of(program))
        if name == "get_neighbors":
            program = self._source(name, arguments["variable"])
            relation = arguments["relation"]
            if relation not in self._relations_of(program):
                raise ToolError(
                    f"get_neighbors: relation must be a relation of the variable, got {relation!r}"
                )
            logical: SetProgram = Join(relation, self._logical(name, arguments["variable"]))
            return self._new_set(name, self._range(relation), Join(relation, program), logical)
        if name == "intersection":
            first = self._set_variable(name, arguments["variable1"])
            second = self._set_variable(name, arguments["variable2"])
            if first.type != second.type:
                raise ToolError(
                    "intersection: two variables must have the same type, got "
                    f"{first.type} and {second.type}"
                )
            common = set(_members_of(first.set_program)) & set(_members_of(second.set_program))
            logical = And(_logical_of(first), _logical_of(second))
            return self._new(Variable(first.type, Members(tuple(sorted(common))), logical))
        if name == "get_attributes":
            program = self._set_variable(name, arguments["variable"]).set_program
            return _listing(self._attributes_of(program))
        if name in ("argmax", "argmin"):
            variable = self._set_variable(name, arguments["variable"])
            attribute = arguments["attribute"]
            if attribute not in self._attributes_of(variable.set_program):
                raise ToolError(
                    f"{name}: attribute must be an attribute of the variable, got {attribute!r}"
                )
            kind: Literal["ARGMAX", "ARGMIN"] = "ARGMAX" if name == "argmax" else "ARGMIN"
            program = Superlative(kind, variable.set_program, attribute)
            logical = Superlative(kind, _logical_of(variable), attribute)
            return self._new_set(name, variable.type, program, logical)
        if name == "count":
            variable = self._set_variable(name, arguments["variable"])
            counted = Count(variable.set_program)
            return self._new(Variable(NUMBER_TYPE, counted, Count(_logical_of(variable))))
        raise ToolError(f"{name} is not a knowledge-graph tool")

    def _new_set(self, tool: str, type_: str, program: SetProgram, logical: SetProgram) -> str:
        """Evaluate ``program`` now and keep its members as the new variable."""
        limit = self.max_variable_size
        found = self._names(self._select(queries.members(program, self.namespace, limit + 1)))
        if len(found) > limit:
            raise ToolError(
                f"{tool}: the result has more than {limit:,} entities, more than a variable "
                "may hold; follow a more specific relation"
            )
        return self._new(Variable(type_, Members(tuple(sorted(set(found)))), logical))

    def _new(self, variable: Variable) -> str:
        self.variables.append(variable)
        what = "is a number" if variable.is_number else f"are instances of {variable.type}"
        return f"Observation: variable #{len(self.variables) - 1}, which {what}"

    # ------------------------------------------------------------------ arguments

    def _index(self, reference: str) -> int:
        """The index of an existing variable; anything else ends the episode."""
        index = variable_index(reference)
        if index is None:
            raise AgentValidationFailed(
                f"Invalid variable {_shorten(reference)!r}: variables are written #0, #1, ..."
            )
        if index >= len(self.variables):
            known = f"#0 to #{len(self.variables) - 1}" if self.variables else "none yet"
            raise AgentValidationFailed(
                f"Invalid variable #{index}: it does not exist (variables so far: {known})"
            )
        return index

    def _source(self, tool: str, value: str) -> SetProgram:
        """A variable's program, or the entity an argument names (question name or id)."""
        if value.strip().startswith("#"):
            return self._set_variable(tool, value).set_program
        entity_id = entity_id_for(value, self.entities)
        if entity_id is None:
            raise ToolError(
                f"{tool}: variable must be a variable or an entity, got {_shorten(value)!r}"
            )
        return Entity(entity_id)

    def _logical(self, tool: str, value: str) -> SetProgram:
        """The logical form an argument stands for (a variable's, or the entity)."""
        if value.strip().startswith("#"):
            return _logical_of(self._set_variable(tool, value))
        return self._source(tool, value)

    def _set_variable(self, tool: str, value: str) -> Variable:
        if not value.strip().startswith("#"):
            raise ToolError(
                f"{tool}: variable must be a variable such as #0, got {_shorten(value)!r}"
            )
        index = self._index(value)
        variable = self.variables[index]
        if variable.is_number:
            raise ToolError(f"{tool}: variable #{index} is a number, not a set of entities")
        return variable

    # ------------------------------------------------------------------ queries

    def _select(self, query: str) -> list[tuple[Term | None, ...]]:
        return self.store.select(query, timeout=self.query_timeout)

    def _relations_of(self, program: SetProgram) -> list[str]:
        if program not in self._relations:
            rows = self._select(queries.relations(program, self.namespace))
            self._relations[program] = self._names(rows)
        return self._relations[program]

    def _attributes_of(self, program: SetProgram) -> list[str]:
        if program not in self._attributes:
            rows = self._select(queries.attributes(program, self.namespace))
            self._attributes[program] = self._names(rows)
        return self._attributes[program]

    def _range(self, relation: str) -> str:
        if relation not in self._ranges:
            names = self._names(self._select(queries.expected_type(relation, self.namespace)))
            self._ranges[relation] = names[0] if names else "type.object"
        return self._ranges[relation]

    def _names(self, rows: list[tuple[Term | None, ...]]) -> list[str]:
        """The first column as Freebase names: IRIs lose the namespace, literals stay."""
        return [
            _local(term, self.namespace) for row in rows if row and (term := row[0]) is not None
        ]

    def _describe_answer(self, index: int, values: list[str], *, labelled: bool = True) -> str:
        if not values:
            return f"Observation: variable #{index} is empty"
        shown = values[:SHOWN_ANSWERS]
        safe = [value for value in shown if queries.is_safe_name(value)]
        labels = self._labels(safe) if labelled else {}
        items = [f"{value} ({labels[value]})" if value in labels else value for value in shown]
        rest = f", and {len(values) - len(shown)} more" if len(values) > len(shown) else ""
        noun = "entity" if len(values) == 1 else "entities"
        return (
            f"Observation: variable #{index} holds {len(values)} {noun}: {', '.join(items)}{rest}"
        )

    def _labels(self, entity_ids: list[str]) -> dict[str, str]:
        if not entity_ids:
            return {}
        labels: dict[str, str] = {}
        for entity, name in self._select(queries.names(entity_ids, self.namespace)):
            if entity is not None and name is not None:
                labels.setdefault(_local(entity, self.namespace), name.value)
        return labels


def _members_of(program: SetProgram) -> tuple[str, ...]:
    """The members of a variable's program: every set variable holds :class:`Members`,
    except an argument naming an entity directly."""
    if isinstance(program, Members):
        return program.entity_ids
    if isinstance(program, Entity):
        return (program.entity_id,)
    raise TypeError(f"a variable holds evaluated members, not a {type(program).__name__}")


def _logical_of(variable: Variable) -> SetProgram:
    logical = variable.logical_form if variable.logical_form is not None else variable.program
    if isinstance(logical, Count):
        raise TypeError("a count variable holds a number, not a set of entities")
    return logical


def _local(term: Term, namespace: str) -> str:
    if term.is_iri and term.value.startswith(namespace):
        return term.value[len(namespace) :]
    return term.value


def _listing(names: list[str]) -> str:
    return f"Observation: [{', '.join(names)}]"


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
