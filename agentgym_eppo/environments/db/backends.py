"""Where DB episodes run: SQLite in memory, or a MariaDB/MySQL or PostgreSQL server.

One :class:`DBBackend` per environment creates one :class:`EpisodeDatabase` per episode
and drops it when the episode ends. Every backend keeps the same promises:

* **Fresh and isolated.** SQLite: a new in-memory database per episode; an authorizer
  refuses ``ATTACH`` (which ``VACUUM INTO`` uses too) and pragmas other than table
  introspection, and (Python >= 3.11) the attached-database limit is 0; extensions off.
  MariaDB: a database ``agentgym_ep_<unix time>_<random>`` and a user of the same name
  that may only read and write tables of that database (no ``DROP``, no ``FILE``, no
  grants), so ``DROP DATABASE``, other episodes' databases, ``LOAD DATA``,
  ``LOAD_FILE`` and ``INTO OUTFILE`` fail with the server's own error. PostgreSQL: a
  schema and a login role of that name; the role owns nothing it did not create,
  cannot read server files, and sees no other episode's schema.
* **Statement timeout** (``statement_timeout`` seconds, AgentBench's 60 by default).
  SQLite: a progress handler aborts the statement. MariaDB: ``max_statement_time`` for
  the user and the session; PostgreSQL: the role's ``statement_timeout``. Since an
  agent may ``SET`` its session's limit away, a watchdog also cancels the statement
  from outside (``KILL QUERY`` on MariaDB, a cancel request on PostgreSQL) shortly
  after the limit.
* **Bounded results.** Rows are fetched a batch at a time and rendering stops once
  the observation is longer than ``char_limit``; the rest is never fetched (MariaDB:
  an unbuffered cursor and ``KILL QUERY``; PostgreSQL: a server-side cursor).
* **Cleanup.** Dropping happens when the episode ends, when the environment is closed
  or garbage-collected (on a server, in a background thread once the episode's own
  connection is closed; ``close`` waits for it), and, for databases left by a killed
  process, when a server backend starts: :func:`cleanup_leftovers` drops every ``agentgym_ep_`` database,
  schema, user and role that has no open session and is older than a grace period.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import logging
import re
import secrets
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.pool import NullPool

from agentgym_eppo.core import TaskFailure

from .dialect import MultipleStatementsError, translate
from .evaluation import display_value
from .tasks import TableSpec

logger = logging.getLogger(__name__)

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
_STORAGE_CHECK_SECONDS = 0.05
"""Servers: the episode's size is read once its writing statements have run this long
since the last reading (the catalogue query costs 3-15 ms on MariaDB)."""
_STORAGE_MESSAGE = (
    "the episode's database grew past {:,} MiB, more than an episode may write; the episode ends"
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
    """The episode's database grew past :data:`EPISODE_STORAGE_LIMIT` (servers)."""


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
        database larger than :data:`EPISODE_STORAGE_LIMIT` (servers only)."""

    @abc.abstractmethod
    def table_rows(self, table: TableSpec) -> list[tuple[Any, ...]]:
        """All rows of ``table``'s original columns, read with the backend's own rights."""

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


def make_backend(
    db_url: str | URL | None = None, statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT
) -> DBBackend:
    """The backend for a SQLAlchemy URL; ``None`` (or ``sqlite://``) is SQLite in memory.

    ``mysql+pymysql://user@host:3306/db`` and ``postgresql+psycopg://user@host/db`` need
    an account that may create databases/schemas, users/roles and grant rights.
    """
    if db_url is None:
        return SQLiteBackend(statement_timeout)
    url = make_url(db_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        if url.database not in (None, "", ":memory:"):
            raise ValueError(
                f"the SQLite backend keeps one in-memory database per episode; "
                f"got a file URL {url.render_as_string(hide_password=True)!r} (use 'sqlite://')"
            )
        return SQLiteBackend(statement_timeout)
    if backend in ("mysql", "mariadb"):
        _check_mysql_driver(url)
        return MySQLBackend(url, statement_timeout)
    if backend == "postgresql":
        return PostgresBackend(url, statement_timeout)
    raise ValueError(
        f"unsupported database {backend!r}; use sqlite://, mysql+pymysql:// (MariaDB/MySQL) "
        "or postgresql+psycopg://"
    )


def _check_mysql_driver(url: URL) -> None:
    """``mysql://`` means SQLAlchemy's default driver, mysqlclient (``MySQLdb``), which
    this package does not install; say which URL works instead."""
    try:
        url.get_dialect().import_dbapi()
    except ImportError as error:
        fixed = url.set(drivername=f"{url.get_backend_name()}+pymysql")
        raise ValueError(
            f"db_url {url.render_as_string(hide_password=True)!r} needs a driver that is not "
            f"installed ({error}); use PyMySQL, which is: "
            f"{fixed.render_as_string(hide_password=True)!r}"
        ) from None


# ---------------------------------------------------------------------------- SQLite


_SQLITE_ALLOWED_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info"}
_SQLITE_PROGRESS_STEPS = 10_000
_SQLITE_MAX_VALUE_BYTES = 1_000_000
"""No value (string, blob, stored row) over 1 MB: no 1 GB randomblob()/zeroblob()."""
_SQLITE_MAX_COLUMNS = 100
"""With the value limit, at most 100 MB in one result row (AgentBench's tables have a
handful of columns)."""
_SQLITE_FULL = "database or disk is full"


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
        connection.set_progress_handler(self._past_deadline, _SQLITE_PROGRESS_STEPS)

    def _past_deadline(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def execute(self, sql: str, char_limit: int) -> QueryResult:
        connection = self._live()
        try:
            statement = translate(sql, "sqlite")
        except MultipleStatementsError as error:
            return QueryResult(f"Error: {error}", error=True)
        self._deadline = time.monotonic() + self.timeout
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
        self._deadline = time.monotonic() + self.timeout
        return connection.execute(f"SELECT {columns} FROM {self._quote(table.name)}").fetchall()

    def _live(self) -> sqlite3.Connection:
        if self.connection is None:
            raise RuntimeError("the episode database was dropped")
        return self.connection

    def drop(self) -> None:
        if self.connection is not None:
            self.connection = None
            self._proxy.close()


# ---------------------------------------------------------------------------- servers


class _Watchdog:
    """Calls ``cancel`` if a statement is still running ``delay`` seconds after it began."""

    def __init__(self, delay: float, cancel: Callable[[], None]) -> None:
        self.fired = False
        self._cancel = cancel
        self._timer = threading.Timer(delay, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        try:
            self._cancel()
        except Exception:  # the statement may have ended meanwhile
            logger.debug("watchdog cancel failed", exc_info=True)

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


_READ_ONLY = re.compile(
    r"^[\s(]*(SELECT|WITH|SHOW|DESCRIBE|DESC|EXPLAIN|VALUES|TABLE)\b", re.IGNORECASE
)
_WRITE_WORD = re.compile(
    r"\b(INTO|INSERT|UPDATE|DELETE|MERGE|COPY|CREATE|ALTER|LO_\w+|NEXTVAL|SETVAL)\b",
    re.IGNORECASE,
)
"""A statement that starts like a query but holds one of these may write (``SELECT ...
INTO t``, PostgreSQL's writable ``WITH``, large objects, sequences)."""
_DEFINES_CODE = re.compile(
    r"\bCREATE\b.*\b(FUNCTION|PROCEDURE|TRIGGER|RULE|EVENT)\b", re.IGNORECASE | re.DOTALL
)


def _run(connection: sa.Connection, sql: str, params: Sequence[Any] | None = None) -> list[Any]:
    """Run ``sql`` on the driver's own cursor: with no ``params`` the driver does no
    ``%``-formatting, so names holding ``%`` stay intact. Returns the rows, if any."""
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, params) if params is not None else cursor.execute(sql)
        return list(cursor.fetchall()) if cursor.description is not None else []
    finally:
        cursor.close()


def _insert_rows(connection: sa.Connection, target: str, table: TableSpec) -> None:
    if table.rows:
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            marks = ", ".join(["%s"] * len(table.columns))
            escaped = target.replace("%", "%%")  # the drivers %-format a statement with params
            cursor.executemany(f"INSERT INTO {escaped} VALUES ({marks})", table.rows)
        finally:
            cursor.close()


class ServerBackend(DBBackend):
    """Shared by MariaDB and PostgreSQL: an admin engine and the start-up cleanup."""

    _cleaned: set[str] = set()  # noqa: RUF012 - one start-up cleanup per server and process

    def __init__(self, url: URL, statement_timeout: float) -> None:
        super().__init__(statement_timeout)
        self.url = url
        self.admin = sa.create_engine(
            url,
            isolation_level="AUTOCOMMIT",
            pool_pre_ping=True,
            connect_args=self.driver_options(url),
        )
        self.dbapi: Any = self.admin.dialect.dbapi
        # Dropping a database costs the server tens of milliseconds of file work; it
        # runs behind the next episode's start. The episode's own connection is closed
        # first, so nothing runs in a database once its episode is over.
        self._dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentgym-db-drop")
        self._pending: list[Future[None]] = []
        key = url.render_as_string(hide_password=True)
        if key not in ServerBackend._cleaned:
            ServerBackend._cleaned.add(key)
            dropped = self.cleanup_leftovers()
            if dropped:
                logger.info("dropped %d leftover episode database(s): %s", len(dropped), dropped)

    quote = staticmethod(quote_ansi)

    @abc.abstractmethod
    def cleanup_leftovers(self, grace: float = LEFTOVER_GRACE_SECONDS) -> list[str]:
        """Drop episode databases/schemas and users/roles with no open session that are
        older than ``grace`` seconds; return their names."""

    def driver_options(self, url: URL) -> dict[str, Any]:
        """Extra keyword arguments for the driver's ``connect``."""
        return {}

    @abc.abstractmethod
    def storage_used(self, name: str) -> int:
        """Bytes the episode ``name``'s tables (with their indexes) occupy on the server."""

    def connect_as(self, name: str, password: str, **changes: Any) -> Any:
        """A new DBAPI connection as the episode's user/role, made by the admin engine's
        dialect (a new engine per episode would rerun SQLAlchemy's first-connect probes,
        tens of milliseconds)."""
        url = self.url.set(username=name, password=password, **changes)
        cargs, cparams = self.admin.dialect.create_connect_args(url)
        cparams.update(self.driver_options(url))
        return self.admin.dialect.connect(*cargs, **cparams)

    @abc.abstractmethod
    def _drop(self, name: str) -> None:
        """Drop the database/schema and user/role ``name`` now."""

    def drop_later(self, name: str) -> None:
        """Drop ``name`` in the background (:meth:`wait_for_drops` waits for it)."""
        self._pending = [future for future in self._pending if not future.done()]
        try:
            self._pending.append(self._dropper.submit(self._drop_logged, name))
        except RuntimeError:  # interpreter exit has stopped the worker: drop right here
            self._drop_logged(name)

    def _drop_logged(self, name: str) -> None:
        try:
            self._drop(name)
        except Exception:  # start-up cleanup will retry it
            logger.warning("dropping episode database %s failed", name, exc_info=True)

    def wait_for_drops(self) -> None:
        """Block until every episode database handed to :meth:`drop_later` is gone."""
        for future in self._pending:
            future.result()
        self._pending = []

    def close(self) -> None:
        self.wait_for_drops()
        self._dropper.shutdown(wait=True)
        self.admin.dispose()


class MySQLBackend(ServerBackend):
    """MariaDB/MySQL: a database and a least-privilege user per episode."""

    dialect = "mysql"

    quote = staticmethod(quote_mysql)

    def driver_options(self, url: URL) -> dict[str, Any]:
        """No ``LOAD DATA LOCAL``; and no TLS on loopback unless the URL asks for it:
        PyMySQL otherwise builds a TLS context per connection (~60 ms here)."""
        options: dict[str, Any] = {"local_infile": False}
        loopback = url.host in (None, "", "localhost", "127.0.0.1", "::1")
        if loopback and not any(key.startswith("ssl") for key in url.query):
            options["ssl_disabled"] = True
        return options

    EPISODE_GRANTS = (
        "SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, CREATE TEMPORARY TABLES, "
        "CREATE VIEW, SHOW VIEW"
    )

    def create_episode(self, tables: Sequence[TableSpec]) -> MySQLEpisode:
        name, password = episode_name(), secrets.token_hex(16)
        db = self.quote(name)
        timeout = self.statement_timeout
        with self.admin.connect() as admin:

            def run(sql: str) -> list[Any]:
                return _run(admin, sql)

            run(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
            try:
                run(f"CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'")
                with contextlib.suppress(Exception):  # MariaDB only; MySQL lacks it
                    run(f"ALTER USER '{name}'@'%' WITH MAX_STATEMENT_TIME {timeout:g}")
                run(f"GRANT {self.EPISODE_GRANTS} ON {db}.* TO '{name}'@'%'")
                for table in tables:
                    target = f"{db}.{self.quote(table.name)}"
                    columns = ", ".join(f"{self.quote(c)} TEXT" for c in table.columns)
                    run(f"CREATE TABLE {target} ({columns})")
                    _insert_rows(admin, target, table)
            except BaseException:
                self._drop(name)
                raise
        try:
            return MySQLEpisode(self, name, password)
        except BaseException:
            self._drop(name)
            raise

    def _drop(self, name: str) -> None:
        with self.admin.connect() as admin:
            _run(admin, f"DROP DATABASE IF EXISTS {self.quote(name)}")
            _run(admin, f"DROP USER IF EXISTS '{name}'@'%'")

    def storage_used(self, name: str) -> int:
        """InnoDB's tablespace files (exact; the tables' ``data_length`` lags behind)
        plus the other engines' data and index lengths."""
        pattern = name.replace("_", "\\_") + "/%"
        with self.admin.connect() as admin:
            try:
                innodb = _run(
                    admin,
                    "SELECT COALESCE(SUM(ALLOCATED_SIZE), 0) FROM "
                    "information_schema.INNODB_SYS_TABLESPACES WHERE NAME LIKE %s",
                    (pattern,),
                )[0][0]
                engines = "AND engine <> 'InnoDB'"
            except self.dbapi.Error:  # MySQL names that view differently: lengths only
                innodb, engines = 0, ""
            other = _run(
                admin,
                "SELECT COALESCE(SUM(data_length + index_length), 0) FROM "
                f"information_schema.tables WHERE table_schema = %s {engines}",
                (name,),
            )[0][0]
        return int(innodb) + int(other)

    def kill_query(self, thread_id: int) -> None:
        with self.admin.connect() as admin:
            _run(admin, f"KILL QUERY {int(thread_id)}")

    def cleanup_leftovers(self, grace: float = LEFTOVER_GRACE_SECONDS) -> list[str]:
        pattern = EPISODE_PREFIX.replace("_", "\\_") + "%"
        with self.admin.connect() as admin:
            schemas = _run(
                admin,
                "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %s",
                (pattern,),
            )
            users = _run(admin, "SELECT user FROM mysql.user WHERE user LIKE %s", (pattern,))
            live = {
                row[0] for row in _run(admin, "SELECT user FROM information_schema.processlist")
            }
            names = sorted({row[0] for row in [*schemas, *users]})
        stale = [name for name in names if _is_leftover(name, live, grace)]
        for name in stale:
            self._drop(name)
        return stale


class ServerEpisode(EpisodeDatabase):
    """An episode's database on a server: read back as the admin, dropped in the background.

    Once the statements that may write have run for ``_STORAGE_CHECK_SECONDS`` since the
    last check, the episode's size is read from the catalogue: a server has no
    per-database quota, so this is how :data:`EPISODE_STORAGE_LIMIT` holds there. A
    plain query never counts, unless the episode has defined code that a query could
    run. Between checks an episode writes what the server manages in that time; one
    statement, what it manages within ``statement_timeout``.
    """

    backend: ServerBackend
    connection: Any
    dropped: bool
    _defines_code = False

    _unchecked_seconds = 0.0

    def execute(self, sql: str, char_limit: int) -> QueryResult:
        started = time.monotonic()
        result = self._execute(sql, char_limit)
        if self._may_write(sql):
            # What a statement writes grows with how long it runs: check once the
            # writes since the last check have run for _STORAGE_CHECK_SECONDS, so the
            # few-millisecond INSERTs of ordinary tasks do not pay for a check each.
            self._unchecked_seconds += time.monotonic() - started
            if self._unchecked_seconds >= _STORAGE_CHECK_SECONDS:
                self._unchecked_seconds = 0.0
                used = self.backend.storage_used(self.name)
                if used > EPISODE_STORAGE_LIMIT:
                    raise StorageLimitExceeded(_STORAGE_MESSAGE.format(EPISODE_STORAGE_LIMIT >> 20))
        # The rows may name the episode's database or user (SELECT DATABASE(), USER());
        # they read "dbbench" there as in error messages.
        return dataclasses.replace(result, text=self._stable(result.text))

    @abc.abstractmethod
    def _execute(self, sql: str, char_limit: int) -> QueryResult:
        """Run one statement as the episode's user (see :meth:`execute`)."""

    def _may_write(self, sql: str) -> bool:
        if _DEFINES_CODE.search(sql):
            self._defines_code = True  # a function or trigger may write from a SELECT
        if self._defines_code:
            return True
        return not _READ_ONLY.match(sql) or _WRITE_WORD.search(sql) is not None

    def table_rows(self, table: TableSpec) -> list[tuple[Any, ...]]:
        quote = self.backend.quote
        columns = ", ".join(map(quote, table.columns))
        with self.backend.admin.connect() as admin:
            return [
                tuple(row)
                for row in _run(
                    admin, f"SELECT {columns} FROM {quote(self.name)}.{quote(table.name)}"
                )
            ]

    def drop(self) -> None:
        if self.dropped:
            return
        self.dropped = True
        with contextlib.suppress(Exception):
            self.connection.close()
        self.backend.drop_later(self.name)


class MySQLEpisode(ServerEpisode):
    dialect = "mysql"
    backend: MySQLBackend

    def _stable(self, message: str) -> str:
        # MariaDB names the user 'name'@'<client host>' in some errors and 'name'@'%' in
        # others; one spelling, whatever the client's address.
        return re.sub(r"'dbbench'@'[^']*'", "'dbbench'@'%'", super()._stable(message))

    def __init__(self, backend: MySQLBackend, name: str, password: str) -> None:
        self.backend = backend
        self.name = name
        self.connection = backend.connect_as(name, password, database=name)
        self._unbuffered = backend.dbapi.cursors.SSCursor
        self.connection.autocommit(True)
        limit = backend.statement_timeout
        with self.connection.cursor() as cursor:
            try:  # MariaDB's limit, in seconds
                cursor.execute(f"SET SESSION max_statement_time = {limit:g}")
            except backend.dbapi.Error:
                # MySQL's counterpart covers SELECT only (milliseconds); the watchdog
                # stops every other statement.
                cursor.execute(f"SET SESSION max_execution_time = {int(limit * 1000)}")
        self.dropped = False

    def _execute(self, sql: str, char_limit: int) -> QueryResult:
        timeout = self.backend.statement_timeout
        thread_id = self.connection.thread_id()
        renderer = RowRenderer(char_limit)
        cursor = self.connection.cursor(self._unbuffered)
        watchdog = _Watchdog(timeout + _WATCHDOG_GRACE, lambda: self.backend.kill_query(thread_id))
        try:
            with watchdog:
                cursor.execute(sql)
                while cursor.description is not None and not renderer.full:
                    batch = cursor.fetchmany(_FETCH_BATCH)
                    if not batch:
                        return renderer.result(truncated=False)
                    for row in batch:
                        renderer.add(row)
            if not renderer.full:
                return renderer.result(truncated=False)
            self.backend.kill_query(thread_id)  # stop the server producing unread rows
            return renderer.result(truncated=True)
        except self.backend.dbapi.Error as error:
            code = error.args[0] if error.args else None
            if watchdog.fired or code in (1969, 3024):
                return QueryResult(_TIMEOUT_MESSAGE.format(timeout), error=True)
            message = error.args[1] if len(error.args) > 1 else str(error)
            if code in _MYSQL_CONNECTION_LOST or not self.connection.open:
                raise TaskFailure(f"the database connection was lost: {code} {message}") from error
            return QueryResult(self._stable(f"Error: {code} {message}"), error=True)
        except (UnicodeError, ValueError) as error:  # text the driver cannot send
            return QueryResult(f"Error: {error}", error=True)
        finally:
            with contextlib.suppress(Exception):  # a killed query ends its stream with an error
                cursor.close()


class PostgresBackend(ServerBackend):
    """PostgreSQL: a schema and a least-privilege login role per episode."""

    dialect = "postgres"

    def create_episode(self, tables: Sequence[TableSpec]) -> PostgresEpisode:
        """Role, schema, tables and rows in one transaction: one commit (one WAL flush)
        instead of one per statement, and nothing half-made if a step fails."""
        name, password = episode_name(), secrets.token_hex(16)
        schema = self.quote(name)
        timeout_ms = int(self.statement_timeout * 1000)
        statements = [
            f"CREATE ROLE {schema} LOGIN PASSWORD '{password}' NOSUPERUSER NOCREATEDB "
            "NOCREATEROLE NOREPLICATION CONNECTION LIMIT 4",
            f"CREATE SCHEMA {schema}",
            f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {schema}",
            f"ALTER ROLE {schema} SET search_path = {schema}",
            f"ALTER ROLE {schema} SET statement_timeout = {timeout_ms}",
        ]
        # Sorts and hashes spill to temp files outside any table: bound them too
        # (superuser only; an admin without it leaves the server's own limit).
        optional = [f"ALTER ROLE {schema} SET temp_file_limit = '{EPISODE_STORAGE_LIMIT >> 10}kB'"]
        with self.admin.connect() as admin:
            driver: Any = admin.connection.driver_connection
            with driver.transaction():
                for statement in statements:
                    _run(admin, statement)
                for table in tables:
                    target = f"{schema}.{self.quote(table.name)}"
                    columns = ", ".join(f"{self.quote(c)} TEXT" for c in table.columns)
                    _run(admin, f"CREATE TABLE {target} ({columns})")
                    _insert_rows(admin, target, table)
                _run(
                    admin,
                    f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {schema}",
                )
            for statement in optional:
                try:
                    with driver.transaction():
                        _run(admin, statement)
                except self.dbapi.Error:
                    logger.debug("%s failed", statement, exc_info=True)
        try:
            return PostgresEpisode(self, name, password)
        except BaseException:
            self._drop(name)
            raise

    def _drop(self, name: str) -> None:
        quoted = self.quote(name)
        with self.admin.connect() as admin:
            _run(
                admin,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (name,),
            )
            driver: Any = admin.connection.driver_connection
            with driver.transaction():
                _run(admin, f"DROP SCHEMA IF EXISTS {quoted} CASCADE")
                if _run(admin, "SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)):
                    _run(admin, f"DROP OWNED BY {quoted} CASCADE")
                    _run(admin, f"DROP ROLE {quoted}")

    def storage_used(self, name: str) -> int:
        """Tables (with TOAST and indexes) in the episode's schema or owned by its role
        (temporary tables live in a ``pg_temp_N`` schema)."""
        with self.admin.connect() as admin:
            rows = _run(
                admin,
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "LEFT JOIN pg_roles r ON r.oid = c.relowner "
                "WHERE c.relkind IN ('r', 'm', 'p') AND (n.nspname = %s OR r.rolname = %s)",
                (name, name),
            )
        return int(rows[0][0])

    def cleanup_leftovers(self, grace: float = LEFTOVER_GRACE_SECONDS) -> list[str]:
        pattern = EPISODE_PREFIX.replace("_", "\\_") + "%"
        with self.admin.connect() as admin:
            schemas = _run(
                admin, "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (pattern,)
            )
            roles = _run(admin, "SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (pattern,))
            live = {row[0] for row in _run(admin, "SELECT usename FROM pg_stat_activity") if row[0]}
            names = sorted({row[0] for row in [*schemas, *roles]})
        stale = [name for name in names if _is_leftover(name, live, grace)]
        for name in stale:
            self._drop(name)
        return stale


_PG_QUERY = re.compile(r"^[\s(]*(SELECT|VALUES|TABLE|WITH)\b", re.IGNORECASE)


class PostgresEpisode(ServerEpisode):
    dialect = "postgres"

    def __init__(self, backend: PostgresBackend, name: str, password: str) -> None:
        self.backend = backend
        self.name = name
        self.connection = backend.connect_as(name, password)
        self.connection.autocommit = True
        self.dropped = False
        self._cursors = 0

    def _execute(self, sql: str, char_limit: int) -> QueryResult:
        try:
            statement = translate(sql, "postgres")
        except MultipleStatementsError as error:
            return QueryResult(f"Error: {error}", error=True)
        timeout = self.backend.statement_timeout
        dbapi = self.backend.dbapi
        watchdog = _Watchdog(timeout + _WATCHDOG_GRACE, self.connection.cancel)
        try:
            with watchdog:
                if _PG_QUERY.match(statement):
                    return self._run_query(statement, char_limit)
                return self._run_command(statement, char_limit)
        except dbapi.Error as error:
            if watchdog.fired or getattr(error, "sqlstate", None) == "57014":
                return QueryResult(_TIMEOUT_MESSAGE.format(timeout), error=True)
            message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            if self.connection.closed:
                raise TaskFailure(f"the database connection was lost: {message}") from error
            return QueryResult(self._stable(f"Error: {message}"), error=True)
        except (UnicodeError, ValueError) as error:  # text the driver cannot send
            return QueryResult(f"Error: {error}", error=True)

    def _run_query(self, statement: str, char_limit: int) -> QueryResult:
        """A query through a server-side cursor, so unread rows are never produced."""
        self._cursors += 1
        renderer = RowRenderer(char_limit)
        name = f"agentgym_cursor_{self._cursors}"
        with self.connection.transaction(), self.connection.cursor(name=name) as cursor:
            cursor.execute(statement)
            while not renderer.full:
                batch = cursor.fetchmany(_FETCH_BATCH)
                if not batch:
                    return renderer.result(truncated=False)
                for row in batch:
                    renderer.add(row)
        return renderer.result(truncated=True)

    def _run_command(self, statement: str, char_limit: int) -> QueryResult:
        renderer = RowRenderer(char_limit)
        with self.connection.cursor() as cursor:
            cursor.execute(statement)
            if cursor.description is None:
                return renderer.result(truncated=False)
            for row in _batches(cursor):
                renderer.add(row)
                if renderer.full:
                    return renderer.result(truncated=True)
        return renderer.result(truncated=False)


def _batches(cursor: Any) -> Iterator[Sequence[Any]]:
    while True:
        batch = cursor.fetchmany(_FETCH_BATCH)
        if not batch:
            return
        yield from batch
