"""MariaDB/MySQL: a database and a user of the same name per episode."""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL

from agentgym_eppo.core import AgentInvalidAction

from ..tasks import TableSpec
from .base import (
    _FETCH_BATCH,
    _MYSQL_CONNECTION_LOST,
    _TIMEOUT_MESSAGE,
    EPISODE_PREFIX,
    LEFTOVER_GRACE_SECONDS,
    QueryResult,
    RowRenderer,
    episode_name,
    quote_mysql,
)
from .server import (
    ServerBackend,
    ServerEpisode,
    SessionLost,
    _insert_rows,
    _run,
)

logger = logging.getLogger(__name__)

_DROP_LOCK_WAIT = 5
"""Seconds a ``DROP DATABASE``/``DROP USER`` waits for a lock, metadata or InnoDB's (the
server's defaults: ``lock_wait_timeout`` a day, ``innodb_lock_wait_timeout`` 50 s): a
drop that something still holds up fails, is logged, and is retried by the next
start-up clean-up, instead of holding up ``close()`` and every drop queued behind it."""
_MAY_PREPARE_XA = re.compile(r"\b(XA|EXECUTE)\b", re.IGNORECASE)
"""Only a statement that names ``XA`` or runs dynamic SQL (``EXECUTE``, ``EXECUTE
IMMEDIATE``, also inside ``BEGIN NOT ATOMIC ... END``) can prepare an XA transaction:
the episode's user may not define procedures, triggers or events."""
_XA_MESSAGE = (
    "Error: the statement left an XA transaction prepared, which would outlive the episode's "
    "session and hold its tables; it was rolled back and the episode ends"
)
_XAER_NOTA = 1397  # unknown XID, or one a live session still holds

Xid = tuple[int, bytes, bytes]
"""An XA transaction's id: (format id, global transaction id, branch qualifier)."""


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

    EPISODE_GRANTS = "SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, CREATE VIEW, SHOW VIEW"
    """No ``CREATE TEMPORARY TABLES``: a temporary table lives outside the episode's
    database, where neither the size check nor the memory bound sees it (an
    ``ENGINE=MEMORY`` one, after ``SET max_heap_table_size``, held 380 MiB of server
    memory)."""

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
            wait = _DROP_LOCK_WAIT
            _run(
                admin, f"SET SESSION lock_wait_timeout = {wait}, innodb_lock_wait_timeout = {wait}"
            )
            _run(admin, f"DROP DATABASE IF EXISTS {self.quote(name)}")
            _run(admin, f"DROP USER IF EXISTS '{name}'@'%'")

    def prepared_xids(self) -> set[Xid] | None:
        """Every XA transaction prepared on the server (``XA RECOVER``); None where the
        admin cannot read them now."""
        try:
            with self.admin.connect() as admin:
                rows = _run(admin, "XA RECOVER")
        except Exception:  # the server is out of reach: the statement's own fate says so
            logger.debug("XA RECOVER failed", exc_info=True)
            return None
        return {
            (int(form), bytes(data[:gtrid]), bytes(data[gtrid : gtrid + bqual]))
            for form, gtrid, bqual, data in rows
        }

    def roll_back_xids(self, xids: set[Xid], patience: float = 2.0) -> None:
        """``XA ROLLBACK`` each of ``xids`` that no session holds. A closed session's
        transaction is let go a moment after the close: an id still held is tried again
        for up to ``patience`` seconds, then left (a live session of someone else's)."""
        with self.admin.connect() as admin:
            for form, gtrid, bqual in sorted(xids):
                statement = f"XA ROLLBACK X'{gtrid.hex()}',X'{bqual.hex()}',{form}"
                deadline = time.monotonic() + patience
                while True:
                    try:
                        _run(admin, statement)
                        break
                    except self.dbapi.Error as error:
                        code = error.args[0] if error.args else None
                        if code != _XAER_NOTA or time.monotonic() > deadline:
                            logger.warning("%s failed: %s", statement, error)
                            break
                        time.sleep(0.05)

    def storage_used(self, name: str) -> tuple[int, int]:
        """Bytes: InnoDB's tablespace files (exact; the tables' ``data_length`` lags
        behind) plus the other engines' data and index lengths; and the number of
        tables and views."""
        pattern = name.replace("_", "\\_") + "/%"
        with self.admin.connect() as admin:
            try:
                innodb = _run(
                    admin,
                    "SELECT COALESCE(SUM(ALLOCATED_SIZE), 0) FROM "
                    "information_schema.INNODB_SYS_TABLESPACES WHERE NAME LIKE %s",
                    (pattern,),
                )[0][0]
                engines = "engine <> 'InnoDB'"
            except self.dbapi.Error:  # MySQL names that view differently: lengths only
                innodb, engines = 0, "TRUE"
            other, relations = _run(
                admin,
                f"SELECT COALESCE(SUM(CASE WHEN {engines} THEN data_length + index_length END), 0), "
                "COUNT(*) FROM information_schema.tables WHERE table_schema = %s",
                (name,),
            )[0]
        return int(innodb) + int(other), int(relations)

    def server_started(self) -> float:
        with self.admin.connect() as admin:
            uptime = _run(admin, "SHOW GLOBAL STATUS LIKE 'Uptime'")[0][1]
        return time.time() - float(uptime)

    def _read_session_busy(self, admin: sa.Connection, session: int) -> bool | None:
        rows = _run(
            admin, "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = %s", (session,)
        )
        return rows[0][0] != "Sleep" if rows else None

    def _read_session_memory(self, admin: sa.Connection, session: int) -> int | None:
        rows = _run(
            admin,
            "SELECT MEMORY_USED FROM information_schema.PROCESSLIST WHERE ID = %s",
            (session,),
        )
        return int(rows[0][0]) if rows else None

    def kill_query(self, thread_id: int) -> None:
        with self.admin.connect() as admin:
            _run(admin, f"KILL QUERY {int(thread_id)}")

    def kill_connection(self, thread_id: int) -> None:
        with self.admin.connect() as admin:
            _run(admin, f"KILL CONNECTION {int(thread_id)}")

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
        return self._drop_leftovers(names, live, grace)


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
        self.server_started = backend.server_started()
        self.session_id = self.connection.thread_id()
        self._open_memory_bound()

    def _execute(self, sql: str, char_limit: int) -> QueryResult:
        """The statement (:meth:`_run_statement`); one that may prepare an XA transaction
        is bracketed by two readings of the server's prepared transactions. A prepared
        XA transaction outlives its session (MariaDB >= 10.5) and keeps the episode's
        tables locked, so ``DROP DATABASE`` would wait on it; one the statement left
        prepared is rolled back and the episode ends (``agent_invalid_action``)."""
        if not _MAY_PREPARE_XA.search(sql):
            return self._run_statement(sql, char_limit)
        before = self.backend.prepared_xids()
        try:
            result = self._run_statement(sql, char_limit)
        except SessionLost:  # the statement may have prepared, then ended its session
            self._roll_back_new_xids(before)
            raise
        if self._roll_back_new_xids(before):
            raise AgentInvalidAction(_XA_MESSAGE)
        return result

    def _roll_back_new_xids(self, before: set[Xid] | None) -> bool:
        """Roll back the XA transactions prepared since ``before``, if this session may
        hold one (it is in a transaction, or cannot say); True if it did. The session
        is closed first: a live session's prepared transaction is out of others' reach."""
        after = self.backend.prepared_xids()
        if before is None or after is None or not after - before:
            return False
        if self.connection.open and not self._in_transaction():
            return False  # another client prepared them meanwhile
        self.end_session()
        self.backend.roll_back_xids(after - before)
        return True

    def _in_transaction(self) -> bool:
        """``@@in_transaction`` of the session; True where it cannot be read."""
        try:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT @@in_transaction")
                row = cursor.fetchone()
        except self.backend.dbapi.Error:
            return True
        return bool(row and row[0])

    def _run_statement(self, sql: str, char_limit: int) -> QueryResult:
        timeout = self.backend.statement_timeout
        thread_id = self.connection.thread_id()
        renderer = RowRenderer(char_limit)
        cursor = self.connection.cursor(self._unbuffered)
        watchdog = self._watchdog(lambda: self.backend.kill_query(thread_id))
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
            message = error.args[1] if len(error.args) > 1 else str(error)
            if watchdog.terminated:
                raise SessionLost(f"{code} {message}") from error
            if watchdog.fired or code in (1969, 3024):
                return QueryResult(_TIMEOUT_MESSAGE.format(timeout), error=True)
            if code in _MYSQL_CONNECTION_LOST or not self.connection.open:
                raise SessionLost(f"{code} {message}") from error
            return QueryResult(self._stable(f"Error: {code} {message}"), error=True)
        except (UnicodeError, ValueError) as error:  # text the driver cannot send
            return QueryResult(f"Error: {error}", error=True)
        finally:
            with contextlib.suppress(Exception):  # a killed query ends its stream with an error
                cursor.close()

    def _storage_used(self) -> tuple[int, int]:
        return self.backend.storage_used(self.name)

    def _terminate(self) -> None:
        self.backend.kill_connection(self.session_id)

    def _ping(self) -> None:
        try:
            self.connection.ping(reconnect=False)
        except self.backend.dbapi.Error as error:
            raise SessionLost(_mysql_message(error)) from error

    def _pin_session(self) -> bool:
        """``wait_timeout`` is the only timeout MariaDB applies to an idle session; the
        agent may have set it to a second."""
        try:
            with self.connection.cursor() as cursor:
                cursor.execute("SET SESSION wait_timeout = DEFAULT")
        except self.backend.dbapi.Error as error:
            code = error.args[0] if error.args else None
            if code in _MYSQL_CONNECTION_LOST or not self.connection.open:
                raise SessionLost(_mysql_message(error)) from error
            return False
        return True


def _mysql_message(error: Exception) -> str:
    return " ".join(str(part) for part in error.args) or type(error).__name__
