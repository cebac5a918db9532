"""What the MariaDB and PostgreSQL backends share: one engine per environment, episode
databases created and dropped by an admin connection, a watchdog that cancels a statement
from outside, reading tables back, and dropping leftovers of killed processes."""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL

from ..tasks import TableSpec
from .base import (
    _FETCH_BATCH,
    _STORAGE_CHECK_SECONDS,
    _STORAGE_MESSAGE,
    EPISODE_STORAGE_LIMIT,
    LEFTOVER_GRACE_SECONDS,
    DBBackend,
    EpisodeDatabase,
    QueryResult,
    StorageLimitExceeded,
    quote_ansi,
)

logger = logging.getLogger(__name__)


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


def _batches(cursor: Any) -> Iterator[Sequence[Any]]:
    while True:
        batch = cursor.fetchmany(_FETCH_BATCH)
        if not batch:
            return
        yield from batch
