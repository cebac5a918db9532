"""``AgentBench-DB-v0``: AgentBench's DBBench as a Gymnasium text environment.

The agent answers a question about one table (or changes the table) with two tools:
``execute_sql(query)`` runs one statement and returns AgentBench's rendering of the
result (``str`` of the row tuples, cut at 800 characters with ``[TRUNCATED]``), and
``commit_final_answer(answers)`` ends the episode with reward 1 if the answer is right
(query tasks) or the tables hash to the expected ``answer_md5`` (INSERT/UPDATE/DELETE),
else 0. 15 turns; every statement stops after ``statement_timeout`` seconds (60).

Backends: SQLite in memory (default) or any server behind ``db_url`` (MariaDB/MySQL,
PostgreSQL); see :mod:`agentgym_eppo.environments.db.backends` for isolation, timeouts
and cleanup. On SQLite and PostgreSQL the agent's MySQL is translated by ``sqlglot``.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Sequence
from typing import Any

from agentgym_eppo.core import (
    AgentBenchEnv,
    AgentInvalidAction,
    FunctionCall,
    TaskSet,
    ToolResult,
    ToolSpec,
    string_tool,
)

from .backends import (
    DEFAULT_STATEMENT_TIMEOUT,
    DBBackend,
    EpisodeDatabase,
    StorageLimitExceeded,
    make_backend,
)
from .evaluation import MYSQL_GROUP_CONCAT_MAX_LEN, answers_match, tables_hash
from .expert import expert_action
from .tasks import DBTaskRecord, load_db_tasks

# AgentBench's DBBench system prompt (function-calling version), kept word for word so
# that models evaluated here see what they see there.
SYSTEM_PROMPT = """I will ask you a question, then you should help me operate a MySQL database with SQL to answer the question.
You have to explain the problem and your solution to me and write down your thoughts.
After thinking and explaining thoroughly, every round you can choose to operate or to answer with the two specific tools provided.
If you should execute a SQL query, use the `execute_sql` function, Your SQL should be in one line.
Every time you can only execute one SQL statement. I will only execute the statement in the first SQL code block. Every time you write a SQL, I will execute it for you and give you the output.
If you are done operating, and you want to commit your final answer, then use the `commit_final_answer` function.
DO NOT use this tool unless you are sure about your answer. I expect an accurate and correct answer.
Your answer should be accurate. Your answer must be exactly the same as the correct answer.
If the question is about modifying the database, then after done operation, your answer field can be anything.
If your response cannot match any pattern I mentioned earlier, you will be judged as FAIL immediately.
You should always use the tools provided to submit your answer. Be careful not to write it in the content field.
Your input will be raw MySQL response, you have to deal with it by yourself."""

EXECUTE_SQL = string_tool(
    "execute_sql",
    "Executes a given SQL statement on the database and returns the result.",
    query="The SQL query to be executed.",
)
COMMIT_FINAL_ANSWER = ToolSpec(
    name="commit_final_answer",
    description="Commits the final answer after all operations are completed.",
    parameters={
        "type": "object",
        "properties": {
            "answers": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The list of final answers to commit.",
            }
        },
        "required": ["answers"],
    },
)


def _drop_quietly(database: EpisodeDatabase) -> None:
    with contextlib.suppress(Exception):
        database.drop()


class DBEnv(AgentBenchEnv[DBTaskRecord]):
    """DBBench episodes on SQLite, MariaDB/MySQL or PostgreSQL (see the module docstring).

    ``gym.make("AgentBench-DB-v0", tasks=None, split="train", db_url=None,
    statement_timeout=60.0)``: ``tasks`` is a path to AgentBench's ``dbbench/*.jsonl``
    (or our format) or a list of records; ``db_url`` a SQLAlchemy URL such as
    ``mysql+pymysql://root@127.0.0.1:3306/test``.
    """

    task_id = "db"
    tools = (EXECUTE_SQL, COMMIT_FINAL_ANSWER)
    default_max_turns = 15

    def __init__(
        self,
        tasks: str | Sequence[Any] | None = None,
        split: str = "train",
        *,
        db_url: str | None = None,
        statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
        group_concat_max_len: int = MYSQL_GROUP_CONCAT_MAX_LEN,
        **kwargs: Any,
    ) -> None:
        super().__init__(tasks, split, **kwargs)
        self.backend: DBBackend = make_backend(db_url, statement_timeout)
        self.group_concat_max_len = group_concat_max_len
        self._database: EpisodeDatabase | None = None
        self._finalizer: weakref.finalize | None = None
        self._gold_done = 0
        self._gold_rows: tuple[tuple[Any, ...], ...] = ()

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    @property
    def database(self) -> EpisodeDatabase:
        """The running episode's database."""
        if self._database is None:
            raise RuntimeError("no running episode: call reset() first")
        return self._database

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[DBTaskRecord]:
        return load_db_tasks(tasks, split)

    def _begin_episode(self, record: DBTaskRecord) -> str:
        database = self.backend.create_episode(record.tables)
        self._database = database
        # Drops the database if the env is garbage-collected mid-episode or at exit.
        self._finalizer = weakref.finalize(self, _drop_quietly, database)
        self._gold_done = 0
        self._gold_rows = ()
        return record.prompt()

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        if call.name == "execute_sql":
            query = call.arguments["query"]
            try:
                result = self.database.execute(query, self.output_limit)
            except StorageLimitExceeded as error:  # what the agent wrote, not our failure
                raise AgentInvalidAction(f"Error: {error}") from None
            gold = self.record.gold_sql
            if not result.error and self._gold_done < len(gold) and query == gold[self._gold_done]:
                self._gold_done += 1
                self._gold_rows = result.rows
            return ToolResult(result.text, info={"sql_error": result.error})
        return self._score(list(call.arguments["answers"]))

    def _score(self, answers: list[str]) -> ToolResult:
        record = self.record
        if record.is_mutation:
            self.database.end_session()  # the agent's locks and open transaction go with it
            try:
                rows = [self.database.table_rows(table) for table in record.tables]
                found = tables_hash(rows, self.group_concat_max_len)
            except Exception as error:  # the agent dropped or broke the table
                found = f"unreadable: {type(error).__name__}"
            correct = found == record.expected_hash
            info: dict[str, Any] = {"table_hash": found}
        else:
            correct = answers_match(answers, list(record.label))
            info = {"answers": answers}
        return ToolResult("Final answer committed.", done=True, reward=float(correct), info=info)

    def _end_episode(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        database, self._database = self._database, None
        if database is not None:
            database.drop()

    def _close_backend(self) -> None:
        self.backend.close()

    def expert_action(self) -> dict[str, Any]:
        """The expert's next call (see :mod:`agentgym_eppo.environments.db.expert`)."""
        return expert_action(self.record, self._gold_done, self._gold_rows)
