"""PostgreSQL: a database per environment; a schema and a login role of one name per episode."""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from psycopg.pq import TransactionStatus
from sqlalchemy.engine import URL

from ..dialect import MultipleStatementsError, translate
from ..tasks import TableSpec
from .base import (
    _FETCH_BATCH,
    _TIMEOUT_MESSAGE,
    EPISODE_PREFIX,
    EPISODE_STORAGE_LIMIT,
    LEFTOVER_GRACE_SECONDS,
    QueryResult,
    RowRenderer,
    episode_name,
    quote_ansi,
)
from .server import (
    ServerBackend,
    ServerEpisode,
    SessionLost,
    _batches,
    _run,
)

logger = logging.getLogger(__name__)


_DROP_LOCK_WAIT = 5
"""Seconds a drop waits for a lock (PostgreSQL's ``lock_timeout`` is unlimited): a drop
that something holds up fails, is logged and is left to the next start-up clean-up."""
_DROP_BATCH = 200
"""Relations dropped per transaction: each takes a few locks, and one transaction
dropping a schema of 10,000 tables ran out of the server's lock table ("out of shared
memory"), leaving the schema, the role and 10,001 catalogue rows behind."""
_DROP_KIND = {
    "r": "TABLE",
    "p": "TABLE",
    "f": "FOREIGN TABLE",
    "v": "VIEW",
    "m": "MATERIALIZED VIEW",
    "S": "SEQUENCE",
}


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _drop_database(admin: sa.Connection, name: str, quote: Any) -> None:
    """``DROP DATABASE`` that ends the sessions in it (``WITH (FORCE)`` from 13 on)."""
    if admin.connection.driver_connection.info.server_version >= 130000:  # type: ignore[union-attr]
        _run(admin, f"DROP DATABASE IF EXISTS {quote(name)} WITH (FORCE)")
        return
    _run(
        admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
    )
    _run(admin, f"DROP DATABASE IF EXISTS {quote(name)}")


class PostgresBackend(ServerBackend):
    """PostgreSQL: a database per backend (one environment), made for its first episode
    and dropped when it closes; a schema and a least-privilege login role per episode in
    it, dropped when the episode ends, before the next one begins.

    A database rather than schemas of the admin's database: the catalogue
    (``pg_attribute``, ``pg_attrdef``, ``pg_constraint``, ``pg_description``,
    ``pg_proc``) and the table statistics (``pg_stat_*_tables``) are per database and
    readable by every role, so schemas of one database showed each other's episodes their
    column names, row counts, write counters and the text of their defaults, checks,
    comments and functions. Episodes of two environments never share a database; those
    of one run one after another, and nothing of an episode is left when the next
    begins. One ``CREATE DATABASE`` per environment (from ``template0``, 0.1-0.4 s
    here), not per episode, and an admin session kept in it, so a start-up clean-up in
    another process sees the database in use.
    """

    dialect = "postgres"
    _database_options: str | None = None

    def __init__(self, url: URL, statement_timeout: float) -> None:
        super().__init__(url, statement_timeout)
        self.database_name = episode_name()  # made with the first episode
        self._home: Any = None  # the admin's session in it
        self._home_lock = threading.RLock()
        self._finalizer: weakref.finalize | None = None

    def connect_admin_to(self, database: str) -> Any:
        """A new DBAPI connection as the admin to ``database``."""
        url = self.url.set(database=database)
        cargs, cparams = self.admin.dialect.create_connect_args(url)
        return self.admin.dialect.connect(*cargs, **cparams)

    def _home_session(self) -> Any:
        """The admin's session in the backend's database, making the database first."""
        if self._home is None or self._home.closed or self._home.broken:
            if self._finalizer is None:
                with self.admin.connect() as admin:
                    _run(
                        admin,
                        f"CREATE DATABASE {self.quote(self.database_name)} {self._options(admin)}",
                    )
                    _run(
                        admin,
                        f"REVOKE ALL ON DATABASE {self.quote(self.database_name)} FROM PUBLIC",
                    )
                # Dropped at interpreter exit too, after the episode (finalizers run newest first).
                self._finalizer = weakref.finalize(
                    self, _drop_home_quietly, self.admin, self.database_name
                )
            self._home = self.connect_admin_to(self.database_name)
            self._home.autocommit = True
            self._home.execute(f"SET lock_timeout = '{_DROP_LOCK_WAIT}s'")
            # Episodes are made and dropped by the thousand and do not outlive a crash:
            # their commits need not wait for the WAL to reach the disk.
            self._home.execute("SET synchronous_commit = off")
            with contextlib.suppress(self.dbapi.Error):  # superuser only (see create_episode)
                self._home.execute("SET track_counts = off")
            self._home.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")  # before 15
        return self._home

    def _options(self, admin: sa.Connection) -> str:
        """``CREATE DATABASE`` options giving the backend's database the encoding and
        collation of the admin's, so text sorts and compares as it does there."""
        if self._database_options is None:
            encoding, collate, ctype = _run(
                admin,
                "SELECT pg_encoding_to_char(encoding), datcollate, datctype FROM pg_database "
                "WHERE datname = current_database()",
            )[0]
            self._database_options = (
                f"TEMPLATE template0 ENCODING {_literal(encoding)} "
                f"LC_COLLATE {_literal(collate)} LC_CTYPE {_literal(ctype)}"
            )
        return self._database_options

    def create_episode(self, tables: Sequence[TableSpec]) -> PostgresEpisode:
        """Role, schema, tables and rows in one transaction on the admin's session in the
        backend's database: one commit, and nothing half-made if a step fails."""
        name, password = episode_name(), secrets.token_hex(16)
        quoted, database = self.quote(name), self.quote(self.database_name)
        timeout_ms = int(self.statement_timeout * 1000)
        with self._home_lock:
            home = self._home_session()
            try:
                with home.transaction():
                    for statement in (
                        f"CREATE ROLE {quoted} LOGIN PASSWORD '{password}' NOSUPERUSER "
                        "NOCREATEDB NOCREATEROLE NOREPLICATION CONNECTION LIMIT 4",
                        f"GRANT CONNECT, TEMPORARY ON DATABASE {database} TO {quoted}",
                        f"ALTER ROLE {quoted} SET search_path = {quoted}",
                        f"ALTER ROLE {quoted} SET statement_timeout = {timeout_ms}",
                        f"CREATE SCHEMA {quoted}",
                        f"GRANT USAGE, CREATE ON SCHEMA {quoted} TO {quoted}",
                    ):
                        home.execute(statement)
                    self._superuser_settings(home, quoted)
                    for table in tables:
                        target = f"{quoted}.{self.quote(table.name)}"
                        columns = ", ".join(f"{self.quote(c)} TEXT" for c in table.columns)
                        home.execute(f"CREATE TABLE {target} ({columns})")
                        if table.rows:
                            marks = ", ".join(["%s"] * len(table.columns))
                            escaped = target.replace("%", "%%")  # %-formatted with params
                            with home.cursor() as cursor:
                                cursor.executemany(
                                    f"INSERT INTO {escaped} VALUES ({marks})", table.rows
                                )
                    home.execute(
                        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {quoted} "
                        f"TO {quoted}"
                    )
                return PostgresEpisode(self, name, password)
            except BaseException:
                self.drop_later(name)
                raise

    _superuser: bool | None = None  # whether the admin may make the settings below

    def _superuser_settings(self, home: Any, role: str) -> None:
        """Settings only a superuser makes (an admin without the right leaves the
        server's own; tried once per backend): sorts and hashes spill to temp files
        outside any table, bound them too; and keep row counts and write counters out
        of ``pg_stat_database``, which every role reads for every database."""
        if self._superuser is False:
            return
        try:
            with home.transaction():  # a savepoint
                home.execute(
                    f"ALTER ROLE {role} SET temp_file_limit = '{EPISODE_STORAGE_LIMIT >> 10}kB'"
                )
                home.execute(f"ALTER ROLE {role} SET track_counts = off")
        except self.dbapi.Error:
            logger.info("the admin may not bound temp files or turn off table statistics per role")
            self._superuser = False
            return
        self._superuser = True

    def drop_later(self, name: str) -> None:
        """Drop episode ``name`` now: the next episode runs in the same database, and
        must find nothing of this one there (a schema drops in milliseconds)."""
        try:
            self._drop_episode(name)
        except Exception:  # start-up clean-up will retry it
            logger.warning("dropping episode %s failed", name, exc_info=True)

    def _drop_episode(self, name: str) -> None:
        """Episode ``name`` in the backend's database: its prepared transactions, its
        schema, what its role owns, and the role, in one transaction (after dropping
        the relations of a schema that holds many in batches)."""
        quoted = self.quote(name)
        with self._home_lock:
            home = self._home_session()
            home.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,)
            )
            for (gid,) in home.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE owner = %s AND database = current_database()",
                (name,),
            ).fetchall():
                # Where the server allows two-phase commit (max_prepared_transactions > 0),
                # a prepared transaction outlives its session and keeps its locks.
                home.execute(f"ROLLBACK PREPARED {_literal(gid)}")
            _drop_schema(home, name, self.quote)
            with home.transaction():
                home.execute(f"DROP SCHEMA IF EXISTS {quoted} CASCADE")
                if home.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                    home.execute(f"DROP OWNED BY {quoted} CASCADE")
                    home.execute(f"DROP ROLE {quoted}")

    def _drop(self, name: str) -> None:
        """A leftover of a killed process: a backend's database (with every episode in
        it), a schema in the admin's database (the earlier one-database layout), a role."""
        quoted = self.quote(name)
        with self.admin.connect() as admin:
            _run(admin, f"SET lock_timeout = '{_DROP_LOCK_WAIT}s'")
            _drop_database(admin, name, self.quote)
            driver: Any = admin.connection.driver_connection
            _drop_schema(driver, name, self.quote)
            _run(
                admin,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (name,),
            )
            with driver.transaction():
                _run(admin, f"DROP SCHEMA IF EXISTS {quoted} CASCADE")
                if _run(admin, "SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)):
                    _run(admin, f"DROP OWNED BY {quoted} CASCADE")
                    _run(admin, f"DROP ROLE {quoted}")

    def close(self) -> None:
        with self._home_lock:
            if self._home is not None:
                with contextlib.suppress(Exception):
                    self._home.close()
                self._home = None
            if self._finalizer is not None:
                self._finalizer()  # drops the database
                self._finalizer = None
        super().close()

    def server_started(self) -> float:
        with self.admin.connect() as admin:
            rows = _run(admin, "SELECT extract(epoch FROM pg_postmaster_start_time())::float8")
        return float(rows[0][0])

    def _read_session_busy(self, admin: sa.Connection, session: int) -> bool | None:
        rows = _run(admin, "SELECT state FROM pg_stat_activity WHERE pid = %s", (session,))
        return rows[0][0] == "active" if rows else None

    def _read_session_memory(self, admin: sa.Connection, session: int) -> int | None:
        """The backend process's private memory (``RssAnon`` of ``/proc/<pid>/status``,
        read by the server: needs a superuser or ``pg_read_server_files``, and Linux).
        PostgreSQL 15 keeps ``set_config`` values outside its memory contexts, so
        ``pg_backend_memory_contexts`` would not see them."""
        status = _run(admin, "SELECT pg_read_file('/proc/' || %s::text || '/status')", (session,))
        found = _RSS_ANON.search(status[0][0]) if status and status[0][0] else None
        return int(found.group(1)) * 1024 if found else None

    def cleanup_leftovers(self, grace: float = LEFTOVER_GRACE_SECONDS) -> list[str]:
        """Databases first: dropping one drops the episodes in it, and frees their roles."""
        pattern = EPISODE_PREFIX.replace("_", "\\_") + "%"
        with self.admin.connect() as admin:
            databases = _run(
                admin, "SELECT datname FROM pg_database WHERE datname LIKE %s", (pattern,)
            )
            schemas = _run(
                admin, "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (pattern,)
            )
            roles = _run(admin, "SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (pattern,))
            live = {
                name
                for row in _run(admin, "SELECT usename, datname FROM pg_stat_activity")
                for name in row
                if name
            }
        first = sorted(row[0] for row in databases)
        names = first + sorted({row[0] for row in [*schemas, *roles]} - set(first))
        return self._drop_leftovers(names, live, grace)


def _drop_home_quietly(admin: sa.Engine, name: str) -> None:
    try:
        with admin.connect() as connection:
            _run(connection, f"SET lock_timeout = '{_DROP_LOCK_WAIT}s'")
            _drop_database(connection, name, quote_ansi)
    except Exception:  # start-up clean-up will retry it
        logger.warning("dropping the episodes' database %s failed", name, exc_info=True)


def _drop_schema(session: Any, name: str, quote: Any) -> None:
    """The relations of schema ``name``, ``_DROP_BATCH`` to a transaction, while there
    are more than that (the caller drops the schema and the rest in one transaction),
    on the DBAPI ``session`` (autocommit)."""
    quoted = quote(name)
    while True:
        with session.cursor() as cursor:
            cursor.execute(
                "SELECT c.relkind, c.relname FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = ANY(%s) LIMIT %s",
                (name, list(_DROP_KIND), _DROP_BATCH + 1),
            )
            relations = cursor.fetchall()
        if len(relations) <= _DROP_BATCH:
            return
        with session.transaction(), session.cursor() as cursor:
            for kind, relation in relations:
                cursor.execute(
                    f"DROP {_DROP_KIND[kind]} IF EXISTS {quoted}.{quote(relation)} CASCADE"
                )


_RSS_ANON = re.compile(r"^RssAnon:\s*(\d+)\s*kB", re.MULTILINE)

_IDLE_TIMEOUTS = (
    (140000, "idle_session_timeout"),
    (90600, "idle_in_transaction_session_timeout"),
    (170000, "transaction_timeout"),
)
"""(first server version, setting): the settings with which PostgreSQL ends a session
that waits between statements, each settable by any role in its own session."""


def _pin_statement(server_version: int) -> str:
    """``RESET`` of every idle timeout the server has: back to the value the session
    started with (the server's and the role's, which the agent had no chance to change)."""
    return "; ".join(f"RESET {name}" for since, name in _IDLE_TIMEOUTS if server_version >= since)


_EQ = "OPERATOR(pg_catalog.=)"
_STORAGE_QUERY = (
    "SELECT COALESCE(pg_catalog.sum(pg_catalog.pg_total_relation_size(c.oid)) "
    f"FILTER (WHERE c.relkind {_EQ} ANY (ARRAY['r', 'm', 'p']::pg_catalog.\"char\"[])), 0)"
    "::pg_catalog.int8, pg_catalog.count(*) "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    f"ON n.oid {_EQ} c.relnamespace "
    f"WHERE n.nspname {_EQ} %s::pg_catalog.name "
    f"OR pg_catalog.pg_get_userbyid(c.relowner) {_EQ} %s::pg_catalog.name"
)
"""Bytes of the tables (with TOAST and indexes) in the episode's schema or owned by its
role (temporary tables live in a ``pg_temp_N`` schema), and the number of relations of
every kind there."""

_PG_QUERY = re.compile(r"^[\s(]*(SELECT|VALUES|TABLE|WITH)\b", re.IGNORECASE)


_TEXT_TYPES = frozenset({25, 1043})
"""text, varchar: read as ``str``, so cutting them with ``left()`` changes no short value."""
_SMALL_TYPES = frozenset({16, 18, 19, 20, 21, 23, 26, 700, 701, 1082, 1083, 1114, 1184, 1266, 2950})
"""bool, "char", name, integers, oid, floats, date and time types, uuid: a few dozen
characters at most, never cut."""


@dataclass(frozen=True)
class _Cut:
    """How a result's columns are cut on the server so that no value longer than the
    observation can show (``char_limit + 1`` characters) is sent.

    Text columns become ``left(c, n)``. Any other column that can be long (``bytea``,
    ``char(n)``, ``numeric``, ``json``, arrays, records, ...) becomes two: the value itself where its
    text is short, and ``left(c::text, n)`` where it is long, so a short value keeps its
    type and a long one arrives as its cut text; :meth:`row` joins them again.
    """

    select: str  # the select list over the columns c0 .. c{k-1}
    names: tuple[str, ...]  # c0 .. c{k-1}
    split: tuple[bool, ...]  # per column: sent as (short value, long text)

    @classmethod
    def of(cls, type_codes: Sequence[int], char_limit: int) -> _Cut | None:
        """None where nothing needs cutting (no limit, or only small types)."""
        if char_limit <= 0 or all(code in _SMALL_TYPES for code in type_codes):
            return None
        names = tuple(f"c{k}" for k in range(len(type_codes)))
        columns = [
            _cut_column(n, c, char_limit + 1) for n, c in zip(names, type_codes, strict=True)
        ]
        select = ", ".join(part for parts in columns for part in parts)
        return cls(select, names, tuple(len(parts) == 2 for parts in columns))

    def row(self, values: Sequence[Any]) -> tuple[Any, ...]:
        """A row of the cut query as the original query's row."""
        out, k = [], 0
        for split in self.split:
            if split:
                short, long = values[k], values[k + 1]
                out.append(short if long is None else long)
                k += 2
            else:
                out.append(values[k])
                k += 1
        return tuple(out)

    def query(self, statement: str) -> str:
        """``statement`` (a query) as a subquery under the cut select list."""
        inner = _without_final_semicolon(statement)
        return f"SELECT {self.select} FROM ({inner}\n) AS agentgym_cut({', '.join(self.names)})"

    def command(self, statement: str, rows: int) -> str:
        """``statement`` (an ``INSERT``/``UPDATE``/``DELETE ... RETURNING``) in a ``WITH``
        whose query reads at most ``rows`` of its rows, cut. The command itself still
        runs to completion (PostgreSQL runs data-modifying ``WITH`` parts whole)."""
        inner = _without_final_semicolon(statement)
        return (
            f"WITH agentgym_cut({', '.join(self.names)}) AS ({inner}\n) "
            f"SELECT {self.select} FROM agentgym_cut LIMIT {rows}"
        )


def _cut_column(name: str, type_code: int, n: int) -> tuple[str, ...]:
    """A column's select-list entries: itself (a small type), ``left(c, n)`` (text), or
    (short value, long text) for any other type, whose text may be long."""
    if type_code in _SMALL_TYPES:
        return (name,)
    if type_code in _TEXT_TYPES:
        return (f"left({name}, {n})",)
    long = f"length({name}::text) > {n}"
    return (
        f"CASE WHEN {long} THEN NULL ELSE {name} END",
        f"CASE WHEN {long} THEN left({name}::text, {n}) END",
    )


def _without_final_semicolon(statement: str) -> str:
    """``statement`` to nest in another; the caller closes it on a new line, so that a
    trailing ``--`` comment ends there."""
    return statement.rstrip().rstrip(";")


_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)
_COMMAND_OK = 1  # libpq's PGRES_COMMAND_OK: what a successful prepare or describe returns


class PostgresEpisode(ServerEpisode):
    dialect = "postgres"
    backend: PostgresBackend

    def __init__(self, backend: PostgresBackend, name: str, password: str) -> None:
        self.backend = backend
        self.name = name
        self.connection = backend.connect_as(name, password, database=backend.database_name)
        self.connection.autocommit = True
        self.dropped = False
        self._cursors = 0
        self._pin = _pin_statement(self.connection.info.server_version)
        self.server_started = backend.server_started()
        self.session_id = self.connection.info.backend_pid
        self._open_memory_bound()

    def _execute(self, sql: str, char_limit: int) -> QueryResult:
        try:
            statement = translate(sql, "postgres")
        except MultipleStatementsError as error:
            return QueryResult(f"Error: {error}", error=True)
        timeout = self.backend.statement_timeout
        dbapi = self.backend.dbapi
        watchdog = self._watchdog(self.connection.cancel)
        try:
            with watchdog:
                if _PG_QUERY.match(statement):
                    return self._run_query(statement, char_limit)
                return self._run_command(statement, char_limit)
        except dbapi.Error as error:
            message = _first_line(error)
            if watchdog.terminated:
                raise SessionLost(message) from error
            if watchdog.fired or getattr(error, "sqlstate", None) == "57014":
                return QueryResult(_TIMEOUT_MESSAGE.format(timeout), error=True)
            if self.connection.closed:
                raise SessionLost(message) from error
            return QueryResult(self._stable(f"Error: {message}"), error=True)
        except (UnicodeError, ValueError) as error:  # text the driver cannot send
            return QueryResult(f"Error: {error}", error=True)

    def _storage_used(self) -> tuple[int, int] | None:
        """Measured on the episode's own session: its own locks (``LOCK TABLE``,
        ``TRUNCATE`` in an open transaction) cannot block it there as they would block
        the admin, and it sees the tables the episode's open transaction has created.
        Every name is schema-qualified, so objects the agent defined cannot stand in;
        a savepoint keeps a failure from touching the agent's transaction."""
        if self.connection.info.transaction_status == TransactionStatus.INERROR:
            return None  # nothing more can be written until the transaction ends
        watchdog = self._watchdog(self.connection.cancel, memory=False)
        try:
            with watchdog, self.connection.transaction():
                row = self.connection.execute(_STORAGE_QUERY, (self.name, self.name)).fetchone()
        except self.backend.dbapi.Error as error:
            if self.connection.closed:
                raise SessionLost(_first_line(error)) from error
            return None  # refused (the agent's own statement timeout, say)
        return (int(row[0]), int(row[1])) if row else None

    def table_rows(self, table: TableSpec) -> list[tuple[Any, ...]]:
        """Read as the admin, on its session in the backend's database."""
        quote = self.backend.quote
        columns = ", ".join(map(quote, table.columns))
        with self.backend._home_lock:
            rows = self.backend._home_session().execute(
                f"SELECT {columns} FROM {quote(self.name)}.{quote(table.name)}"
            )
            return [tuple(row) for row in rows.fetchall()]

    def _terminate(self) -> None:
        with self.backend.admin.connect() as admin:
            _run(admin, "SELECT pg_terminate_backend(%s)", (self.session_id,))

    def _ping(self) -> None:
        self._run_own("SELECT 1")

    def _pin_session(self) -> bool:
        if self.connection.info.transaction_status == TransactionStatus.INERROR:
            # A failed transaction has already undone every SET made in it, ours
            # before it hold; and it refuses RESET until it ends.
            return True
        return self._run_own(self._pin)

    def _run_own(self, sql: str) -> bool:
        """Run ``sql`` (ours, not the agent's) on the episode's session: True if it ran,
        False if the session refused it (an aborted transaction, a cancel the agent
        asked for), :class:`SessionLost` if the session is gone."""
        try:
            self.connection.execute(sql)
        except self.backend.dbapi.Error as error:
            if self.connection.closed:
                raise SessionLost(_first_line(error)) from error
            return False
        return True

    def _run_query(self, statement: str, char_limit: int) -> QueryResult:
        """A query through a server-side cursor, so unread rows are never produced, and
        with its long values cut on the server (:class:`_Cut`), so no value
        longer than the observation can show is sent."""
        self._cursors += 1
        renderer = RowRenderer(char_limit)
        name = f"agentgym_cursor_{self._cursors}"
        with self.connection.transaction(), self.connection.cursor(name=name) as cursor:
            cursor.execute(statement)  # declared, not run: the description, no row
            cut = _Cut.of([c.type_code for c in cursor.description or ()], char_limit)
            if cut is not None:
                cursor.execute(cut.query(statement))
            while not renderer.full:
                batch = cursor.fetchmany(_FETCH_BATCH)
                if not batch:
                    return renderer.result(truncated=False)
                for row in batch:
                    renderer.add(row if cut is None else cut.row(row))
        return renderer.result(truncated=True)

    def _run_command(self, statement: str, char_limit: int) -> QueryResult:
        """A statement that is not a query. One with ``RETURNING`` rows is first
        described (parsed, not run) and then run under :meth:`_Cut.command`: a driver
        cursor reads a command's rows whole, so they are cut and counted on the server."""
        renderer = RowRenderer(char_limit)
        cut = None
        if char_limit > 0 and _RETURNING.search(statement):
            types = self._result_types(statement)
            cut = _Cut.of(types, char_limit) if types else None
        if cut is not None:
            # every value renders as at least one character: this many rows fill the view
            statement = cut.command(statement, char_limit // len(cut.split) + 2)
        with self.connection.cursor() as cursor:
            cursor.execute(statement)
            if cursor.description is None:
                return renderer.result(truncated=False)
            for row in _batches(cursor):
                renderer.add(row if cut is None else cut.row(row))
                if renderer.full:
                    return renderer.result(truncated=True)
        return renderer.result(truncated=False)

    def _result_types(self, statement: str) -> list[int]:
        """The type of each column ``statement`` returns, from the server's description of
        it as an unnamed prepared statement (nothing runs); [] where it returns none or
        does not parse (it then runs as it is and reports its own error)."""
        pgconn = self.connection.pgconn
        prepared = pgconn.prepare(b"", statement.encode())
        if prepared.status != _COMMAND_OK:
            return []
        described = pgconn.describe_prepared(b"")
        if described.status != _COMMAND_OK:
            return []
        return [described.ftype(k) for k in range(described.nfields)]


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)
