"""DB task records and their loader: AgentBench's ``dbbench/*.jsonl`` as it is, and ours.

An AgentBench record holds ``description``, ``label``, ``type`` (a one-element list),
``table{table_name, table_info{columns, rows}}`` (or a list of such tables),
``add_description``, optionally ``sql{query}`` and, for INSERT/UPDATE/DELETE,
``answer_md5``. Our shipped records are the same JSON with two extra keys:
``sample_id`` and ``gold_sql`` (the statements that solve the task), so one parser
reads both. Every column is created as TEXT, as AgentBench does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_eppo.core import TaskFormatError, TaskRecord, TaskSet, asset_path, read_json_or_jsonl

from .evaluation import MUTATION_TYPES, expected_md5

SHIPPED_FILES = {split: f"{split}.jsonl.gz" for split in ("train", "dev", "test")}


@dataclass(frozen=True)
class TableSpec:
    """One table of a task: its name, its column names and its rows (every value text)."""

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]


@dataclass(frozen=True)
class DBTaskRecord(TaskRecord):
    """A DBBench task instance.

    ``task_type`` is AgentBench's type (``INSERT``, ``counting``, ...). ``label`` is the
    gold answer list of a query task (for a mutation task AgentBench keeps the gold SQL
    there). ``answer_md5`` is the expected table hash of a mutation task. ``gold_sql``
    holds statements that solve the task on every backend: for a query task the query
    whose result is the answer, for a mutation task the statements to run; for an
    AgentBench query record it is empty (its ``sql`` field is often not valid SQL), and
    the label is the expert's answer.
    """

    description: str
    task_type: str
    tables: tuple[TableSpec, ...]
    label: tuple[str, ...]
    answer_md5: str | None
    add_description: str
    evidence: str
    gold_sql: tuple[str, ...]

    @property
    def is_mutation(self) -> bool:
        """True for INSERT/UPDATE/DELETE tasks, which are scored by the table hash."""
        return self.task_type in MUTATION_TYPES

    @property
    def expected_hash(self) -> str:
        if self.answer_md5 is None:
            raise TaskFormatError(f"{self.sample_id}: a {self.task_type} task needs answer_md5")
        return expected_md5(self.answer_md5)

    def prompt(self) -> str:
        """The user message, built as AgentBench builds it."""
        text = ""
        if self.evidence:
            text += f"Evidence about the question: {self.evidence}\n"
        if self.add_description:
            text += f"Additional table information about the question: {self.add_description}\n"
        return text + f"Question: {self.description}\n"


def parse_record(raw: Mapping[str, Any], default_id: str, source: str = "tasks") -> DBTaskRecord:
    """Build a record from AgentBench's (or our) JSON; errors name the record and field."""
    where = f"{source}: record {default_id}"
    try:
        description = _require(raw, "description", str, where)
        types = raw.get("type")
        task_type = types[0] if isinstance(types, list) and types else types
        if not isinstance(task_type, str):
            raise TaskFormatError(f"{where}: 'type' must be a list holding one string")
        raw_tables = _require(raw, "table", (dict, list), where)
        tables = tuple(
            _parse_table(table, where)
            for table in (raw_tables if isinstance(raw_tables, list) else [raw_tables])
        )
        label = raw.get("label", [])
        if not isinstance(label, list):
            label = [label]
        label_text = tuple("" if item is None else str(item) for item in label)
        answer_md5 = raw.get("answer_md5")
        is_mutation = task_type in MUTATION_TYPES
        if is_mutation and not isinstance(answer_md5, str):
            raise TaskFormatError(
                f"{where}: a task of type {task_type} needs an 'answer_md5' string"
            )
        gold_sql = raw.get("gold_sql")
        if gold_sql is None:
            gold_sql = list(label_text) if is_mutation else []
        if not isinstance(gold_sql, list) or not all(isinstance(s, str) for s in gold_sql):
            raise TaskFormatError(f"{where}: 'gold_sql' must be a list of SQL strings")
    except (KeyError, TypeError, IndexError) as error:
        raise TaskFormatError(f"{where}: malformed ({error})") from error
    return DBTaskRecord(
        sample_id=str(raw.get("sample_id", default_id)),
        description=description,
        task_type=task_type,
        tables=tables,
        label=label_text,
        answer_md5=answer_md5 if is_mutation else None,
        add_description=str(raw.get("add_description") or ""),
        evidence=str(raw.get("evidence") or ""),
        gold_sql=tuple(gold_sql),
    )


def _require(raw: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    if key not in raw:
        raise TaskFormatError(f"{where}: missing field {key!r}")
    value = raw[key]
    if not isinstance(value, kind):
        raise TaskFormatError(f"{where}: field {key!r} has the wrong type")
    return value


def _parse_table(raw: Mapping[str, Any], where: str) -> TableSpec:
    name = _require(raw, "table_name", str, where)
    info = _require(raw, "table_info", dict, where)
    columns = _column_names([str(c["name"]) for c in _require(info, "columns", list, where)])
    if not columns:
        raise TaskFormatError(f"{where}: table {name!r} has no columns")
    rows = []
    for row in _require(info, "rows", list, where):
        if not isinstance(row, list) or len(row) != len(columns):
            raise TaskFormatError(
                f"{where}: a row of table {name!r} does not have {len(columns)} values: {row!r}"
            )
        rows.append(tuple(None if value is None else str(value) for value in row))
    return TableSpec(name=name, columns=columns, rows=tuple(rows))


def _column_names(names: Sequence[str]) -> tuple[str, ...]:
    """Names every server accepts: MySQL and PostgreSQL refuse an empty column name and
    MySQL one that ends with a space, so those become ``column_<n>`` / lose the spaces
    (values, and hence table hashes, are unaffected); duplicates get a ``_<n>`` suffix."""
    result: list[str] = []
    for position, raw in enumerate(names, start=1):
        name = raw.rstrip() or f"column_{position}"
        while name in result:
            name = f"{name}_{position}"
        result.append(name)
    return tuple(result)


def load_db_tasks(
    tasks: str | Path | Sequence[Any] | None, split: str = "train"
) -> TaskSet[DBTaskRecord]:
    """Load a task set: ``None`` is the shipped ``split``; else a ``.jsonl``/``.json``
    (optionally gzipped) file in AgentBench's format or ours, or a list of records/dicts.

    AgentBench records get the sample id ``<file stem>-<line index>`` (they carry none).
    """
    if tasks is None:
        path = asset_path("db", SHIPPED_FILES[split])
        return _from_rows(read_json_or_jsonl(path), f"db/{split}", path.name.split(".")[0])
    if isinstance(tasks, (str, Path)):
        path = Path(tasks)
        return _from_rows(read_json_or_jsonl(path), str(path), path.name.split(".")[0])
    records = [
        item if isinstance(item, DBTaskRecord) else parse_record(item, f"tasks-{i}")
        for i, item in enumerate(tasks)
    ]
    return TaskSet(records, name="db tasks")


def _from_rows(rows: Sequence[Any], name: str, stem: str) -> TaskSet[DBTaskRecord]:
    records = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TaskFormatError(f"{name}: record {index} is not a JSON object")
        records.append(parse_record(row, f"{stem}-{index}", name))
    return TaskSet(records, name=name)
