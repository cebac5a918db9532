"""KG task records: AgentBench's ``knowledgegraph/*.json`` and the project's shipped sets.

Both use AgentBench's record fields, so one loader reads either:

``question``, ``qid``, ``entities`` {name: id}, ``actions`` (the gold tool sequence as
``"get_neighbors(m.0abc,film.director.film)"`` strings), ``s_expression``, and
``answer`` [{``answer_type`` "Entity" | "Value", ``answer_argument``, ``entity_name``}].
Some of AgentBench's training records omit ``answer_type`` or ``entity_name``; an
answer is then an entity named by its ``answer_argument``.

The shipped sets live in ``agentgym_eppo/assets/kg/{train,dev,test}.jsonl.gz`` over the
graph ``freebase_mini.nt.gz`` beside them (:mod:`.generator` rebuilds all four).
AgentBench's own files name real Freebase entities, so they need
``sparql_endpoint=`` pointing at a Freebase server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core import TaskFormatError, TaskRecord, TaskSet, asset_path, read_json_or_jsonl
from .actions import check_gold_actions

GRAPH_FILE = "freebase_mini.nt.gz"
"""The shipped graph, in ``assets/kg/``."""


@dataclass(frozen=True)
class KGRecord(TaskRecord):
    """One question: its text, entities, gold answer set and (optional) gold actions."""

    question: str
    entities: Mapping[str, str]
    answers: frozenset[str]
    actions: tuple[str, ...] = ()
    s_expression: str = ""
    answer_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        """The first observation, worded as AgentBench's user message."""
        return f"{self.question}\nEntities: [{', '.join(self.entities)}]"


def shipped_graph_path() -> Path:
    return asset_path("kg", GRAPH_FILE)


def load_kg_tasks(tasks: str | Path | Sequence[Any] | None, split: str) -> TaskSet[KGRecord]:
    """``None``: the shipped ``split``; a path: an AgentBench ``.json`` or our ``.jsonl(.gz)``
    (the same file whatever the split); a list: records or dicts in the same format."""
    if tasks is None:
        path = asset_path("kg", f"{split}.jsonl.gz")
        return TaskSet(_records(read_json_or_jsonl(path), str(path)), name=f"kg/{split}")
    if isinstance(tasks, (str, Path)):
        return TaskSet(_records(read_json_or_jsonl(tasks), str(tasks)), name=str(tasks))
    return TaskSet(_records(list(tasks), "records"), name="kg records")


def _records(rows: Sequence[Any], source: str) -> list[KGRecord]:
    return [
        row if isinstance(row, KGRecord) else record_from_dict(row, source, position)
        for position, row in enumerate(rows)
    ]


def record_from_dict(row: Any, source: str = "records", position: int = 0) -> KGRecord:
    """Build and check one record; :class:`TaskFormatError` names the source and field."""
    where = f"{source}[{position}]"
    if not isinstance(row, Mapping):
        raise TaskFormatError(
            f"{where}: a KG record must be a JSON object, got {type(row).__name__}"
        )
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise TaskFormatError(f"{where}: 'question' must be a non-empty string")
    entities = row.get("entities", {})
    if not isinstance(entities, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in entities.items()
    ):
        raise TaskFormatError(f"{where}: 'entities' must map entity names to ids")
    answers, names = _answers(row.get("answer"), where)
    actions = row.get("actions", [])
    if not isinstance(actions, list) or not all(isinstance(action, str) for action in actions):
        raise TaskFormatError(f"{where}: 'actions' must be a list of strings")
    try:
        check_gold_actions(actions, entities)
    except ValueError as error:
        raise TaskFormatError(f"{where}: gold {error}") from None
    return KGRecord(
        sample_id=str(row.get("qid", position)),
        question=question.strip(),
        entities=dict(entities),
        answers=answers,
        actions=tuple(actions),
        s_expression=str(row.get("s_expression", "")),
        answer_names=names,
    )


def _answers(raw: Any, where: str) -> tuple[frozenset[str], dict[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise TaskFormatError(f"{where}: 'answer' must be a non-empty list")
    values: set[str] = set()
    names: dict[str, str] = {}
    for item in raw:
        if not isinstance(item, Mapping) or "answer_argument" not in item:
            raise TaskFormatError(f"{where}: every answer needs an 'answer_argument'")
        value = str(item["answer_argument"])
        values.add(value)
        if isinstance(item.get("entity_name"), str):
            names[value] = item["entity_name"]
    return frozenset(values), names


def score_answer(predicted: Sequence[str], gold: frozenset[str]) -> tuple[float, float]:
    """(reward, F1) as AgentBench scores a final answer: exact set match (1/0), and F1."""
    answer = set(predicted)
    hits = len(answer & gold)
    reward = 1.0 if answer == gold else 0.0
    if hits == 0:
        return reward, 0.0
    precision, recall = hits / len(answer), hits / len(gold)
    return reward, 2 * precision * recall / (precision + recall)
