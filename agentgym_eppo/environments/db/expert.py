"""The DB expert: replays a task's gold SQL and commits what it returned (or the label).

* mutation task: execute each gold statement, then commit an empty answer list;
* query task with gold SQL (our shipped tasks): execute the query, then commit the
  values of the rows it returned, so solving a task proves that its gold SQL gives
  its label on the backend at hand;
* AgentBench query task (its ``sql`` field is often not valid SQL): commit the label.

The environment counts how many gold statements the episode has run, in order and
without error, and keeps the rows of the last of them; other statements in between
(the agent's or the expert's exploration) do not disturb the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .evaluation import sql_text
from .tasks import DBTaskRecord


def answers_from_rows(rows: Sequence[Sequence[Any]]) -> list[str]:
    """Every value of ``rows``, row by row, as text (``None`` as ``"None"``)."""
    return [str(sql_text(value)) for row in rows for value in row]


def expert_action(record: DBTaskRecord, gold_done: int, gold_rows: Sequence[Sequence[Any]]) -> dict:
    """The expert's next call once ``gold_done`` gold statements have run, the last of
    them returning ``gold_rows``."""
    if gold_done < len(record.gold_sql):
        return {"name": "execute_sql", "arguments": {"query": record.gold_sql[gold_done]}}
    if record.is_mutation:
        answers: list[str] = []
    elif record.gold_sql:
        answers = answers_from_rows(gold_rows)
    else:
        answers = list(record.label)
    return {"name": "commit_final_answer", "arguments": {"answers": answers}}
