"""SQLite in memory: one fresh database per episode, in this process (the default backend)."""

from __future__ import annotations

import _sqlite3
import ctypes
import math
import sqlite3
import time
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from ..dialect import MultipleStatementsError, translate
from ..tasks import TableSpec
from .base import (
    _FETCH_BATCH,
    _TIMEOUT_MESSAGE,
    DEFAULT_STATEMENT_TIMEOUT,
    EPISODE_STORAGE_LIMIT,
    DBBackend,
    EpisodeDatabase,
    QueryResult,
    RowRenderer,
    quote_ansi,
)

_SQLITE_ALLOWED_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info"}
_SQLITE_PROGRESS_STEPS = 1_000
"""Virtual-machine steps between two calls of the progress handler, which checks the
deadline and the memory ceiling: at 1,000 a statement building 1 MB rows passes the
ceiling by ~30 MiB (~230 MiB at 10,000); the calls cost a few percent of a CPU-bound
statement."""
_SQLITE_MAX_VALUE_BYTES = 1_000_000
"""No value (string, blob, stored row) over 1 MB: no 1 GB randomblob()/zeroblob()."""
_SQLITE_MAX_COLUMNS = 100
"""With the value limit, at most 100 MB in one result row (AgentBench's tables have a
handful of columns)."""
_SQLITE_FULL = "database or disk is full"
_SQLITE_STATEMENT_MEMORY = 2 * EPISODE_STORAGE_LIMIT
"""What SQLite's memory in this process may grow by while one agent statement runs: the
episode's own pages (capped at ``EPISODE_STORAGE_LIMIT`` by ``max_page_count``) and as
much again of working memory for sorts, UNION, GROUP BY, DISTINCT and temporary results,
which ``temp_store = MEMORY`` keeps in memory rather than in unlinked files in the
host's /var/tmp."""
_SQLITE_MEMORY_MESSAGE = (
    "Error: the statement needed more than {:,} MiB of memory (its sorts, UNION, GROUP BY, "
    "DISTINCT and temporary results, with the rows it wrote); an episode's statement may "
    "use at most that"
)


def _sqlite_memory_used() -> Callable[[], int] | None:
    """``sqlite3_memory_used()`` of the SQLite library Python's ``sqlite3`` runs on (the
    bytes SQLite has allocated in this process), or None where it cannot be reached
    (a build that links SQLite in without exporting it)."""
    try:
        function = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int64
    function.argtypes = []
    return function


_MEMORY_USED = _sqlite_memory_used()


def mysql_collation_key(text: str) -> str:
    """Approximates MySQL's ``utf8mb4_general_ci``: case and accents ignored, trailing
    spaces ignored (PAD SPACE)."""
    decomposed = unicodedata.normalize("NFKD", text.rstrip(" "))
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()


def _mysql_collation(left: str, right: str) -> int:
    a, b = mysql_collation_key(left), mysql_collation_key(right)
    return (a > b) - (a < b)


def _sqlite_authorizer(action: int, arg1: str | None, *_: Any) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in _SQLITE_ALLOWED_PRAGMAS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class SQLiteBackend(DBBackend):
    """SQLite in memory through SQLAlchemy: each episode opens a new ``sqlite://``
    connection, which is a new empty database, and closing it frees everything."""

    dialect = "sqlite"

    def __init__(self, statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT) -> None:
        super().__init__(statement_timeout)
        self.engine = sa.create_engine("sqlite://", poolclass=NullPool)

    def create_episode(self, tables: Sequence[TableSpec]) -> SQLiteEpisode:
        return SQLiteEpisode(self.engine, tables, self.statement_timeout)

    def close(self) -> None:
        self.engine.dispose()


class SQLiteEpisode(EpisodeDatabase):
    dialect = "sqlite"

    def __init__(self, engine: Engine, tables: Sequence[TableSpec], timeout: float) -> None:
        self._proxy = engine.raw_connection()
        connection = self._proxy.driver_connection
        assert isinstance(connection, sqlite3.Connection)
        self.connection: sqlite3.Connection | None = connection
        self.timeout = timeout
        self._deadline = 0.0
        connection.isolation_level = None  # autocommit: each statement stands alone
        connection.create_collation("MYSQL_CI", _mysql_collation)
        quote = quote_ansi
        for table in tables:
            columns = ", ".join(
                f"{quote(column)} TEXT COLLATE MYSQL_CI" for column in table.columns
            )
            connection.execute(f"CREATE TABLE {quote(table.name)} ({columns})")
            marks = ", ".join("?" * len(table.columns))
            connection.executemany(f"INSERT INTO {quote(table.name)} VALUES ({marks})", table.rows)
        self._quote = quote
        # Sorts, UNION, GROUP BY and DISTINCT spill to unlinked files in the host's
        # /var/tmp, outside every cap (2.5 GB in 20 s): keep them in memory, where the
        # progress handler bounds them.
        connection.execute("PRAGMA temp_store = MEMORY")
        # The episode's pages, main and temp, live in this process: cap their number.
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        self.max_pages = max(1, EPISODE_STORAGE_LIMIT // page_size)
        for schema in ("main", "temp"):
            connection.execute(f"PRAGMA {schema}.max_page_count = {self.max_pages}")
        if hasattr(connection, "setlimit"):  # Python >= 3.11; the authorizer guards alone before
            connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _SQLITE_MAX_VALUE_BYTES)
            connection.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, _SQLITE_MAX_COLUMNS)
        connection.set_authorizer(_sqlite_authorizer)
        self._memory_ceiling: float = math.inf
        self._over_memory = False
        connection.set_progress_handler(self._progress, _SQLITE_PROGRESS_STEPS)

    def _start(self, memory_bound: bool) -> None:
        """Arm the progress handler for one statement: its deadline and, for the agent's
        statements, the most SQLite's memory in this process may grow while it runs."""
        self._deadline = time.monotonic() + self.timeout
        self._over_memory = False
        self._memory_ceiling = math.inf
        if memory_bound and _MEMORY_USED is not None:
            self._memory_ceiling = _MEMORY_USED() + _SQLITE_STATEMENT_MEMORY

    def _progress(self) -> int:
        """Nonzero stops the statement: past its deadline, or past its memory ceiling."""
        if time.monotonic() > self._deadline:
            return 1
        if _MEMORY_USED is not None and _MEMORY_USED() > self._memory_ceiling:
            self._over_memory = True
            return 1
        return 0

    def execute(self, sql: str, char_limit: int) -> QueryResult:
        connection = self._live()
        try:
            statement = translate(sql, "sqlite")
        except MultipleStatementsError as error:
            return QueryResult(f"Error: {error}", error=True)
        self._start(memory_bound=True)
        renderer = RowRenderer(char_limit)
        cursor = connection.cursor()
        try:
            cursor.execute(statement)
            while not renderer.full:
                batch = cursor.fetchmany(_FETCH_BATCH)
                if not batch:
                    return renderer.result(truncated=False)
                for row in batch:
                    renderer.add(row)
            return renderer.result(truncated=True)
        except sqlite3.Error as error:
            if str(error) == "interrupted" and self._over_memory:
                return QueryResult(
                    _SQLITE_MEMORY_MESSAGE.format(_SQLITE_STATEMENT_MEMORY >> 20), error=True
                )
            if str(error) == "interrupted":
                return QueryResult(_TIMEOUT_MESSAGE.format(self.timeout), error=True)
            if str(error) == _SQLITE_FULL:
                return QueryResult(
                    f"Error: {error}: an episode's database may hold at most "
                    f"{EPISODE_STORAGE_LIMIT >> 20} MiB",
                    error=True,
                )
            return QueryResult(f"Error: {error}", error=True)
        except (sqlite3.Warning, OverflowError, ValueError) as error:
            return QueryResult(f"Error: {error}", error=True)
        finally:
            cursor.close()
            if connection.in_transaction:
                connection.rollback()

    def table_rows(self, table: TableSpec) -> list[tuple[Any, ...]]:
        connection = self._live()
        columns = ", ".join(map(self._quote, table.columns))
        self._start(memory_bound=False)
        return connection.execute(f"SELECT {columns} FROM {self._quote(table.name)}").fetchall()

    def end_session(self) -> None:
        """Nothing to end: every statement's transaction is rolled back when it returns,
        and the judge reads on this same connection."""

    def _live(self) -> sqlite3.Connection:
        if self.connection is None:
            raise RuntimeError("the episode database was dropped")
        return self.connection

    def drop(self) -> None:
        if self.connection is not None:
            self.connection = None
            self._proxy.close()
