"""MariaDB/MySQL: a database and a user of the same name per episode."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import URL

from ..tasks import TableSpec
from .base import (
    _FETCH_BATCH,
    _MYSQL_CONNECTION_LOST,
    _TIMEOUT_MESSAGE,
    _WATCHDOG_GRACE,
    EPISODE_PREFIX,
    LEFTOVER_GRACE_SECONDS,
    QueryResult,
    RowRenderer,
    _is_leftover,
    episode_name,
    quote_mysql,
)
from .server import (
    ServerBackend,
    ServerEpisode,
    SessionLost,
    _insert_rows,
    _run,
    _Watchdog,
)


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

    def server_started(self) -> float:
        with self.admin.connect() as admin:
            uptime = _run(admin, "SHOW GLOBAL STATUS LIKE 'Uptime'")[0][1]
        return time.time() - float(uptime)

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
                raise SessionLost(f"{code} {message}") from error
            return QueryResult(self._stable(f"Error: {code} {message}"), error=True)
        except (UnicodeError, ValueError) as error:  # text the driver cannot send
            return QueryResult(f"Error: {error}", error=True)
        finally:
            with contextlib.suppress(Exception):  # a killed query ends its stream with an error
                cursor.close()

    def _storage_used(self) -> int:
        return self.backend.storage_used(self.name)

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
