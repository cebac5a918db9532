"""The KG tools' schemas, and AgentBench's text form of their calls (``get_neighbors(m.0x,r)``).

AgentBench's task files carry each question's gold tool sequence as strings such as
``"get_neighbors(m.09rl290,media_common.quotation.author)"`` and ``"intersection(#1,#2)"``.
:func:`parse_action` turns one into a validated :class:`FunctionCall`; and
:func:`check_gold_actions` checks a whole sequence statically, without a graph: every
call is a tool with the right arguments, every ``#k`` names a variable an earlier call
created, entity arguments are names from the question or entity ids, relations are
Freebase-shaped, and the tools that need a variable get one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ...core import FunctionCall, ToolSpec, string_tool, validate_call
from .queries import FREEBASE_ID

VARIABLE_TOOLS = ("get_neighbors", "intersection", "argmax", "argmin", "count")
"""The tools whose result becomes the next variable ``#k``."""

KG_TOOLS: tuple[ToolSpec, ...] = (
    string_tool(
        "get_relations",
        "List the relations leaving an entity or a variable. Call it before get_neighbors "
        "to learn which relations can be followed.",
        variable="An entity of the question, an entity id, or a variable such as #0.",
    ),
    string_tool(
        "get_neighbors",
        "Follow a relation from an entity or variable; the entities reached become a new "
        "variable. Only relations that get_relations lists for that variable are accepted.",
        variable="The entity or variable to start from.",
        relation="A relation listed by get_relations for this variable.",
    ),
    string_tool(
        "intersection",
        "The entities two variables of the same type have in common, as a new variable.",
        variable1="The first variable, e.g. #0.",
        variable2="The second variable, e.g. #1.",
    ),
    string_tool(
        "get_attributes",
        "List the numerical attributes (numbers, dates) of a variable's entities, for argmax "
        "and argmin.",
        variable="The variable whose attributes are listed.",
    ),
    string_tool(
        "argmax",
        "The entity of a variable with the largest value of an attribute, as a new variable.",
        variable="The variable to choose from.",
        attribute="An attribute listed by get_attributes for this variable.",
    ),
    string_tool(
        "argmin",
        "The entity of a variable with the smallest value of an attribute, as a new variable.",
        variable="The variable to choose from.",
        attribute="An attribute listed by get_attributes for this variable.",
    ),
    string_tool(
        "count",
        "The number of entities in a variable, as a new variable.",
        variable="The variable to count.",
    ),
    string_tool(
        "final_answer",
        "Submit a variable as the answer to the question; this ends the episode. Replying "
        "'Final Answer: #k' does the same.",
        variable="The variable holding the answer, e.g. #3.",
    ),
)

_ACTION = re.compile(r"\s*([A-Za-z_]+)\s*\((.*)\)\s*", re.DOTALL)
_VARIABLE = re.compile(r"#(\d+)")
_MAX_VARIABLE_DIGITS = 9
"""No episode makes a billion variables; longer indices are refused before ``int``,
which raises past Python's int-string limit (``#`` and 5,000 digits)."""
_FINAL_ANSWER = re.compile(r"(?:Find|Final) Answer: #(\d+)")


def variable_index(value: str) -> int | None:
    """``"#3"`` -> 3; None for anything that is not a well-formed variable reference."""
    match = _VARIABLE.fullmatch(value.strip())
    digits = match.group(1).lstrip("0") if match else ""
    if match is None or len(digits) > _MAX_VARIABLE_DIGITS:
        return None
    return int(digits or "0")


def entity_id_for(value: str, entities: Mapping[str, str]) -> str | None:
    """The entity id an argument names (a name from the question or an id), else None."""
    if value in entities:
        return entities[value]
    return value if FREEBASE_ID.fullmatch(value) else None


def final_answer_in(text: str) -> str | None:
    """The ``#k`` of a plain-text ``Final Answer: #k`` (AgentBench's form), else None.

    As AgentBench does, only the text before any ``Observation:`` counts (a model may
    hallucinate the environment's reply) and escaped underscores are unescaped.
    """
    head = text.split("Observation:")[0].replace("\\_", "_")
    match = _FINAL_ANSWER.search(head)
    return f"#{match.group(1)}" if match else None


def parse_action(text: str) -> FunctionCall:
    """Parse one AgentBench action string into a validated call of :data:`KG_TOOLS`.

    Raises :class:`~agentgym_eppo.core.ToolCallError` for an unknown tool or wrong
    arguments, and ``ValueError`` if ``text`` is not of the form ``name(arg, ...)``.
    """
    match = _ACTION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a tool call of the form name(arguments): {text!r}")
    name, inside = match.group(1), match.group(2)
    spec = {tool.name: tool for tool in KG_TOOLS}.get(name)
    names = spec.argument_names if spec is not None else []
    # Entity names may hold commas; relations, attributes and variables never do.
    values = inside.rsplit(",", len(names) - 1) if len(names) > 1 else [inside]
    arguments = {key: value.strip() for key, value in zip(names, values, strict=False)}
    return validate_call({"name": name, "arguments": arguments}, KG_TOOLS)


def check_gold_actions(actions: Sequence[str], entities: Mapping[str, str]) -> list[FunctionCall]:
    """Parse and statically check a gold action sequence; raise ``ValueError`` naming the step."""
    calls: list[FunctionCall] = []
    created = 0
    for step, text in enumerate(actions):
        try:
            call = parse_action(text)
            _check_arguments(call, created, entities)
        except ValueError as error:
            raise ValueError(f"action {step} {text!r}: {error}") from None
        calls.append(call)
        created += call.name in VARIABLE_TOOLS
    return calls


def _check_arguments(call: FunctionCall, created: int, entities: Mapping[str, str]) -> None:
    for key, value in call.arguments.items():
        if key in ("relation", "attribute"):
            if not FREEBASE_ID.fullmatch(value):
                raise ValueError(
                    f"{key} {value!r} is not a property name like domain.type.property"
                )
            continue
        index = variable_index(value)
        if index is not None:
            if index >= created:
                raise ValueError(f"{value} is used before it exists ({created} variables so far)")
        elif call.name in ("get_relations", "get_neighbors"):
            if entity_id_for(value, entities) is None:
                raise ValueError(
                    f"{value!r} is neither a variable, an entity of the question nor an id"
                )
        else:
            raise ValueError(f"{call.name} needs a variable such as #0, got {value!r}")
