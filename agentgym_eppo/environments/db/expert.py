"""The DB expert: replays a task's gold SQL and commits what it returned (or the label).

* mutation task: execute each gold statement, then commit an empty answer list;
* query task with gold SQL (our shipped tasks): execute the query, then commit the
  values of the rows it returned, so solving a task proves that its gold SQL gives
  its label on the backend at hand;
* AgentBench query task (its ``sql`` field is often not valid SQL): commit the label.

The plan is indexed by turn: it is the expert's next action in an episode that has
followed the expert so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .evaluation import sql_text
from .tasks import DBTaskRecord


def answers_from_rows(rows: Sequence[Sequence[Any]]) -> list[str]:
    """Every value of ``rows``, row by row, as text (``None`` as ``"None"``)."""
    return [str(sql_text(value)) for row in rows for value in row]


def expert_action(record: DBTaskRecord, turn: int, last_rows: Sequence[Sequence[Any]]) -> dict:
    """The expert's call at ``turn`` (0-based), given the rows of the last ``execute_sql``."""
    if turn < len(record.gold_sql):
        return {"name": "execute_sql", "arguments": {"query": record.gold_sql[turn]}}
    if record.is_mutation:
        answers: list[str] = []
    elif record.gold_sql:
        answers = answers_from_rows(last_rows)
    else:
        answers = list(record.label)
    return {"name": "commit_final_answer", "arguments": {"answers": answers}}
