"""What every DB backend shares: the episode and backend interfaces, results and their
rendering, names and quoting, the storage limit, and recognising leftovers of killed
processes. The promises each backend keeps are in the package docstring."""

from __future__ import annotations

import abc
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..evaluation import display_value
from ..tasks import TableSpec

EPISODE_PREFIX = "agentgym_ep_"
DEFAULT_STATEMENT_TIMEOUT = 60.0
LEFTOVER_GRACE_SECONDS = 120.0
_FETCH_BATCH = 1
"""Rows are read one at a time: the rendering stops at ``char_limit`` anyway, and a
step then never holds more than one result row however large the rows are."""
EPISODE_STORAGE_LIMIT = 256 * 1024 * 1024
"""What one episode's tables may occupy: SQLite refuses to grow past it; on a server the
size is checked after every statement that is not a query, and an episode past it
ends as ``agent_invalid_action``."""
EPISODE_RELATION_LIMIT = 1_000
"""Relations an episode's database may hold on a server (PostgreSQL: tables with their
TOAST tables, indexes, views, sequences, in its schema or owned by its role; MariaDB:
tables and views), counted with the size. Empty tables occupy no bytes on PostgreSQL:
10,000 of them, made in 5 statements, never reached the size bound."""
_RELATIONS_MESSAGE = (
    "the episode's database holds more than {:,} tables, indexes, views and sequences, "
    "more than an episode may; the episode ends"
)
_STORAGE_CHECK_SECONDS = 0.05
"""Servers: the episode's size is read once its writing statements have run this long
since the last reading (the catalogue query costs 3-15 ms on MariaDB)."""
_STORAGE_MESSAGE = (
    "the episode's database grew past {:,} MiB, more than an episode may write; the episode ends"
)
EPISODE_SESSION_MEMORY = 64 * 1024 * 1024
"""Server memory an episode's session may hold between statements beyond what it held
when it opened (MariaDB: the session's ``MEMORY_USED``, user variables included;
PostgreSQL: the private memory of its backend process, ``RssAnon``, settings made with
``set_config`` included), read after every statement; past it the episode ends as
``agent_invalid_action``."""
STATEMENT_SESSION_MEMORY = 16 * EPISODE_SESSION_MEMORY
"""The same while a statement runs, read every ``_MEMORY_POLL_SECONDS``: past it the
session is ended at once, and the episode. A statement's values, sorts and hashes come
on top of what the session holds: on PostgreSQL, cutting one 30 MB ``bytea`` value for
the observation peaks at ~530 MiB."""
_MEMORY_POLL_SECONDS = 0.1
_MEMORY_MESSAGE = (
    "Error: the episode's database session held more than {:,} MiB of the server's memory "
    "(user variables, settings, sorts), more than an episode may; the episode ends"
)
_WATCHDOG_GRACE = 1.0
_MYSQL_CONNECTION_LOST = (2006, 2013)  # "server has gone away", "lost connection during query"
_TIMEOUT_MESSAGE = "Error: SQL execution timed out after {:g} s."
_NAME_PATTERN = re.compile(rf"^{EPISODE_PREFIX}(\d+)_[0-9a-f]+$")


@dataclass(frozen=True)
class QueryResult:
    """What one statement gave: the observation text and the rows it shows.

    ``text`` is AgentBench's rendering, ``str(list_of_row_tuples)`` (``[]`` for a
    statement without rows), or ``Error: ...``; ``rows`` are the rows rendered (all of
    them unless ``truncated``).
    """

    text: str
    rows: tuple[tuple[Any, ...], ...] = ()
    truncated: bool = False
    error: bool = False


class RowRenderer:
    """Renders rows as ``str(list)`` incrementally and says when the limit is passed."""

    def __init__(self, char_limit: int) -> None:
        self.char_limit = char_limit
        self.parts: list[str] = []
        self.length = 1
        self.rows: list[tuple[Any, ...]] = []

    @property
    def full(self) -> bool:
        return self.char_limit > 0 and self.length > self.char_limit

    def add(self, row: Sequence[Any]) -> None:
        values = tuple(self._clip(display_value(value)) for value in row)
        text = repr(values)
        self.length += len(text) + (2 if self.parts else 0)
        self.parts.append(text)
        self.rows.append(values)

    def _clip(self, value: Any) -> Any:
        """A text value cut just past what the observation can show, so ``repr`` of
        a 4 MB value costs no more than that of an 800-character one."""
        if self.char_limit > 0 and isinstance(value, str) and len(value) > self.char_limit:
            return value[: self.char_limit + 1]
        return value

    def result(self, truncated: bool) -> QueryResult:
        text = "[" + ", ".join(self.parts) + ("" if truncated else "]")
        return QueryResult(text, tuple(self.rows), truncated=truncated)


def quote_ansi(name: str) -> str:
    """``name`` as a double-quoted identifier (SQLite, PostgreSQL). SQLAlchemy's own
    quoting doubles a ``%`` for drivers that %-format, which would rename the column."""
    return '"' + name.replace('"', '""') + '"'


def quote_mysql(name: str) -> str:
    """``name`` as a backquoted MySQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def episode_name() -> str:
    """A fresh, recognisable name: ``agentgym_ep_<unix seconds>_<8 hex>`` (31 chars)."""
    return f"{EPISODE_PREFIX}{int(time.time())}_{secrets.token_hex(4)}"


def _is_leftover(name: str, live: set[str], grace: float) -> bool:
    match = _NAME_PATTERN.match(name)
    if match is None or name in live:
        return False
    return time.time() - int(match.group(1)) > grace


class StorageLimitExceeded(Exception):
    """The episode's database grew past :data:`EPISODE_STORAGE_LIMIT` or
    :data:`EPISODE_RELATION_LIMIT` (servers)."""


class EpisodeDatabase(abc.ABC):
    """One episode's database: run the agent's statements, read tables, drop it all."""

    dialect: str
    name: str = ""

    def _stable(self, message: str) -> str:
        """``message`` with the episode's random database/user name replaced by
        ``dbbench``, so the same actions give the same observations in every episode."""
        return message.replace(self.name, "dbbench") if self.name else message

    @abc.abstractmethod
    def execute(self, sql: str, char_limit: int) -> QueryResult:
        """Run one agent statement; every database error is returned as ``Error: ...``.

        Raises :class:`StorageLimitExceeded` when the statement left the episode's
        database larger than :data:`EPISODE_STORAGE_LIMIT` (servers only), and ends the
        episode (:class:`~agentgym_eppo.core.EpisodeEnd`) when the episode's session to
        the server is lost: ``agent_invalid_action`` where the agent's statement ended
        it, ``task_error`` where it did not (servers only; SQLite has no session to
        lose)."""

    @abc.abstractmethod
    def table_rows(self, table: TableSpec) -> list[tuple[Any, ...]]:
        """All rows of ``table``'s original columns, read with the backend's own rights."""

    @abc.abstractmethod
    def end_session(self) -> None:
        """No statement of the agent runs after this; the judge reads next and nothing
        the agent's session holds (locks, an open transaction) may block it."""

    @abc.abstractmethod
    def drop(self) -> None:
        """Delete the episode's database and everything made for it (idempotent)."""


class DBBackend(abc.ABC):
    """Creates episode databases; one per environment."""

    dialect: str

    def __init__(self, statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT) -> None:
        if statement_timeout <= 0:
            raise ValueError(f"statement_timeout must be positive, got {statement_timeout}")
        self.statement_timeout = float(statement_timeout)

    @abc.abstractmethod
    def create_episode(self, tables: Sequence[TableSpec]) -> EpisodeDatabase:
        """A fresh database holding ``tables`` (every column TEXT)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what outlives episodes (engines, pools)."""
