"""PostgreSQL: a schema and a login role of the same name per episode."""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from psycopg.pq import TransactionStatus

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
    _is_leftover,
    episode_name,
)
from .server import (
    ServerBackend,
    ServerEpisode,
    SessionLost,
    _batches,
    _insert_rows,
    _run,
)

logger = logging.getLogger(__name__)


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

    def server_started(self) -> float:
        with self.admin.connect() as admin:
            rows = _run(admin, "SELECT extract(epoch FROM pg_postmaster_start_time())::float8")
        return float(rows[0][0])

    def _read_session_memory(self, admin: sa.Connection, session: int) -> int | None:
        """The backend process's private memory (``RssAnon`` of ``/proc/<pid>/status``,
        read by the server: needs a superuser or ``pg_read_server_files``, and Linux).
        PostgreSQL 15 keeps ``set_config`` values outside its memory contexts, so
        ``pg_backend_memory_contexts`` would not see them."""
        status = _run(admin, "SELECT pg_read_file('/proc/' || %s::text || '/status')", (session,))
        found = _RSS_ANON.search(status[0][0]) if status and status[0][0] else None
        return int(found.group(1)) * 1024 if found else None

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
    "SELECT COALESCE(pg_catalog.sum(pg_catalog.pg_total_relation_size(c.oid)), 0)::pg_catalog.int8 "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    f"ON n.oid {_EQ} c.relnamespace "
    f"WHERE c.relkind {_EQ} ANY (ARRAY['r', 'm', 'p']::pg_catalog.\"char\"[]) "
    f"AND (n.nspname {_EQ} %s::pg_catalog.name "
    f"OR pg_catalog.pg_get_userbyid(c.relowner) {_EQ} %s::pg_catalog.name)"
)
"""Bytes of the tables (with TOAST and indexes) in the episode's schema or owned by its
role (temporary tables live in a ``pg_temp_N`` schema)."""

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

    def __init__(self, backend: PostgresBackend, name: str, password: str) -> None:
        self.backend = backend
        self.name = name
        self.connection = backend.connect_as(name, password)
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

    def _storage_used(self) -> int | None:
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
        return int(row[0]) if row else None

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
