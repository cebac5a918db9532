"""What the MariaDB and PostgreSQL backends share: one engine per environment, episode
databases created and dropped by an admin connection, a watchdog that cancels a statement
from outside, telling who ended a lost session, reading tables back, and dropping
leftovers of killed processes."""

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
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL

from agentgym_eppo.core import AgentInvalidAction, EpisodeEnd, TaskFailure

from ..tasks import TableSpec
from .base import (
    _FETCH_BATCH,
    _MEMORY_MESSAGE,
    _MEMORY_POLL_SECONDS,
    _RELATIONS_MESSAGE,
    _STORAGE_CHECK_SECONDS,
    _STORAGE_MESSAGE,
    _WATCHDOG_GRACE,
    EPISODE_RELATION_LIMIT,
    EPISODE_SESSION_MEMORY,
    EPISODE_STORAGE_LIMIT,
    LEFTOVER_GRACE_SECONDS,
    STATEMENT_SESSION_MEMORY,
    DBBackend,
    EpisodeDatabase,
    QueryResult,
    StorageLimitExceeded,
    _is_leftover,
    quote_ansi,
)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_RESTART_TOLERANCE = 2.0
"""Seconds two readings of the server's start time may differ by and still name the same
run of the server (MariaDB reports its uptime in whole seconds)."""


class SessionLost(Exception):
    """The episode's own connection to the server is gone; the message says how."""


_TERMINATE_GRACE = 10.0
"""Seconds a statement may go on after its first cancel before its session is ended.
PostgreSQL honours a cancel only where it checks for one: planning a 20-way join on
this loaded machine went on for ~6 s after it."""
_PROBE_WAIT = 1.0
"""Seconds a reading of a session's memory waits for the connection it is read on (held
by the watchdog's last reading) before it gives up on this reading."""


class _Watchdog:
    """Stops a statement from outside. ``cancel`` once it has run ``delay`` seconds
    (``fired`` then says so) and every ``_WATCHDOG_GRACE`` after, then ``terminate`` (its
    session) where ``busy()`` says the server still runs it ``_TERMINATE_GRACE`` after
    the first cancel: a MariaDB compound statement
    (``BEGIN NOT ATOMIC``, ``WHILE``) goes on past both its ``max_statement_time`` and
    ``KILL QUERY``, which only stop the statement inside it that runs at the time. A
    session the server has idle is left alone: the client is still reading what the
    statement returned (PostgreSQL's cursor between two fetches, where a cancel finds
    nothing to stop), which ends on its own. Given ``over_bound``, it is called every
    ``_MEMORY_POLL_SECONDS`` while the statement runs; once true, the session is
    terminated at once. ``terminated`` says whether the session was."""

    def __init__(
        self,
        delay: float,
        cancel: Callable[[], None],
        terminate: Callable[[], None],
        busy: Callable[[], bool],
        over_bound: Callable[[], bool] | None = None,
    ) -> None:
        self.fired = False
        self.terminated = False
        self._delay = delay
        self._cancel = cancel
        self._terminate = terminate
        self._busy = busy
        self._over_bound = over_bound
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, name="agentgym-db-watchdog", daemon=True
        )

    def _watch(self) -> None:
        deadline = time.monotonic() + self._delay
        while True:
            wait = deadline - time.monotonic()
            if self._over_bound is not None:
                wait = min(wait, _MEMORY_POLL_SECONDS)
            if self._done.wait(max(wait, 0.0)):
                return
            if time.monotonic() >= deadline:
                self.fired = True
                give_up = time.monotonic() + _TERMINATE_GRACE
                while True:  # again every second: a cancel between two fetches is lost
                    self._call(self._cancel)
                    if self._done.wait(_WATCHDOG_GRACE):
                        return
                    if time.monotonic() >= give_up and self._busy():
                        break
                break
            if self._over_bound is not None and self._over_bound():
                break
        self.terminated = True
        self._call(self._terminate)

    @staticmethod
    def _call(stop: Callable[[], None]) -> None:
        try:
            stop()
        except Exception:  # the statement may have ended meanwhile
            logger.debug("watchdog cancel failed", exc_info=True)

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        # A reading of the session's memory under way ends within milliseconds; one held
        # up by a server in trouble is not waited for (the next reading gives up instead).
        self._thread.join(_PROBE_WAIT)


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
        self._probe: sa.Connection | None = None  # reads sessions' memory
        self._probe_lock = threading.Lock()
        self._memory_readable: bool | None = None
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

    def _drop_leftovers(self, names: Sequence[str], live: set[str], grace: float) -> list[str]:
        """Drop, in order, each of ``names`` that :func:`_is_leftover` calls a leftover; one
        a lock holds is logged and left for the next start-up. Returns those dropped."""
        dropped = []
        for name in names:
            if not _is_leftover(name, live, grace):
                continue
            try:
                self._drop(name)
            except self.dbapi.Error as error:  # held by a lock: left for the next start-up
                logger.warning("leftover episode database %s not dropped: %s", name, error)
                continue
            dropped.append(name)
        return dropped

    def driver_options(self, url: URL) -> dict[str, Any]:
        """Extra keyword arguments for the driver's ``connect``."""
        return {}

    @abc.abstractmethod
    def server_started(self) -> float:
        """When the server last started (Unix seconds), read over the admin connection."""

    @abc.abstractmethod
    def _read_session_busy(self, admin: sa.Connection, session: int) -> bool | None:
        """Whether session ``session`` runs a statement now, read on ``admin``; None
        where the session is not found."""

    def session_busy(self, session: int) -> bool | None:
        """Whether the session with id ``session`` runs a statement now, on the admin
        connection kept for such readings; None where it cannot be read."""
        return self._probe_read(self._read_session_busy, session)

    @abc.abstractmethod
    def _read_session_memory(self, admin: sa.Connection, session: int) -> int | None:
        """Bytes of the server's memory that session ``session`` holds, read on ``admin``
        (raises the driver's error where the server cannot say)."""

    def session_memory(self, session: int) -> int | None:
        """Bytes of the server's memory that the session with id ``session`` holds now,
        on the admin connection kept for such readings; None where it cannot be read
        (the session is gone, or the server or the admin's rights do not allow it: the
        first such failure turns the readings off for this backend, and says so)."""
        if self._memory_readable is False:
            return None
        used = self._probe_read(self._read_session_memory, session)
        if self._memory_readable is None:
            self._memory_readable = used is not None
            if used is None:
                logger.info(
                    "the server memory of episode sessions cannot be read; the bounds on it "
                    "(%d MiB between statements, %d MiB during one) are off for this backend",
                    EPISODE_SESSION_MEMORY >> 20,
                    STATEMENT_SESSION_MEMORY >> 20,
                )
        return used

    def _probe_read(self, read: Callable[[sa.Connection, int], _T], session: int) -> _T | None:
        """``read(admin, session)`` on the admin connection kept for readings of
        sessions; None where it fails (the connection is made again next time) or is
        held by another reading for more than ``_PROBE_WAIT``."""
        if not self._probe_lock.acquire(timeout=_PROBE_WAIT):
            return None
        try:
            if self._probe is None:
                self._probe = self.admin.connect()
            return read(self._probe, session)
        except Exception:
            logger.debug("reading session %s failed", session, exc_info=True)
            self._close_probe()
            return None
        finally:
            self._probe_lock.release()

    def _close_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            with contextlib.suppress(Exception):
                probe.invalidate()
                probe.close()

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
        with self._probe_lock:
            self._close_probe()
        self.admin.dispose()


class ServerEpisode(EpisodeDatabase):
    """An episode's database on a server: read back as the admin, dropped in the background.

    Once the statements that may write have run for ``_STORAGE_CHECK_SECONDS`` since the
    last check, the episode's size is read from the catalogue: a server has no
    per-database quota, so this is how :data:`EPISODE_STORAGE_LIMIT` holds there. A
    plain query never counts, unless the episode has defined code that a query could
    run. Between checks an episode writes what the server manages in that time; one
    statement, what it manages within ``statement_timeout``.

    **Who ended a lost session.** The agent can end its own session: by killing it
    (``KILL CONNECTION_ID()``, ``pg_terminate_backend(pg_backend_pid())``), or by
    setting an idle timeout that the server enforces while the policy thinks. So after
    every statement the session's idle timeouts are put back to the server's own
    (:meth:`_pin_session`), which also proves the session survived the statement, and
    before every statement the session is pinged. Then:

    * lost during the statement or at the pin right after it, with the server still
      up since the episode began: the statement ended it, ``agent_invalid_action``;
    * found lost before a statement although the last pin held: not the agent's
      doing, ``task_error``; if the last pin failed (the statement left the session
      unable to run it), the agent's, ``agent_invalid_action``;
    * the server down or restarted: ``task_error`` either way.
    """

    backend: ServerBackend
    connection: Any
    dropped: bool
    server_started: float
    session_id: int  # the server's id of the episode's session (thread id, backend pid)
    _defines_code = False
    _pinned = True  # the last pin held: the session's idle timeouts are the server's

    _unchecked_seconds = 0.0
    _memory_start: int | None = None  # the session's memory when it opened; None: unread
    _memory_exceeded = False
    _memory_bound = EPISODE_SESSION_MEMORY  # the bound it exceeded
    _last_watchdog: _Watchdog | None = None

    def execute(self, sql: str, char_limit: int) -> QueryResult:
        try:
            self._ping()
        except SessionLost as lost:
            raise self._lost_between_statements(str(lost)) from None
        started = time.monotonic()
        try:
            result = self._execute(sql, char_limit)
            self._check_storage(sql, time.monotonic() - started)
            self._check_memory()
            self._pinned = self._pin_session()  # the last thing the session runs before it waits
        except SessionLost as lost:
            raise self._lost_by_statement(str(lost)) from None
        # The rows may name the episode's database or user (SELECT DATABASE(), USER());
        # they read "dbbench" there as in error messages.
        return dataclasses.replace(result, text=self._stable(result.text))

    def _check_storage(self, sql: str, seconds: float) -> None:
        if not self._may_write(sql):
            return
        # What a statement writes grows with how long it runs: check once the writes
        # since the last check have run for _STORAGE_CHECK_SECONDS, so the
        # few-millisecond INSERTs of ordinary tasks do not pay for a check each.
        self._unchecked_seconds += seconds
        if self._unchecked_seconds < _STORAGE_CHECK_SECONDS:
            return
        footprint = self._storage_used()
        if footprint is None:
            return
        self._unchecked_seconds = 0.0
        used, relations = footprint
        if used > EPISODE_STORAGE_LIMIT:
            raise StorageLimitExceeded(_STORAGE_MESSAGE.format(EPISODE_STORAGE_LIMIT >> 20))
        if relations > EPISODE_RELATION_LIMIT:
            raise StorageLimitExceeded(_RELATIONS_MESSAGE.format(EPISODE_RELATION_LIMIT))

    def _open_memory_bound(self) -> None:
        """Read the session's memory as it opens (after connecting): the bound counts
        from there."""
        self._memory_start = self.backend.session_memory(self.session_id)

    def _over_memory_bound(self, bound: int = EPISODE_SESSION_MEMORY) -> bool:
        """Whether the session holds more than ``bound`` beyond its start; once true,
        true for the rest of the episode."""
        if self._memory_start is not None and not self._memory_exceeded:
            used = self.backend.session_memory(self.session_id)
            if used is not None and used - self._memory_start > bound:
                self._memory_exceeded = True
                self._memory_bound = bound
        return self._memory_exceeded

    def _over_statement_memory_bound(self) -> bool:
        return self._over_memory_bound(STATEMENT_SESSION_MEMORY)

    def _memory_message(self) -> str:
        return _MEMORY_MESSAGE.format(self._memory_bound >> 20)

    def _check_memory(self) -> None:
        if self._over_memory_bound():
            raise AgentInvalidAction(self._memory_message())

    def _watchdog(self, cancel: Callable[[], None], *, memory: bool = True) -> _Watchdog:
        """The watchdog of one statement on the episode's session: cancels it past the
        statement timeout (ends the session if that does not stop it), and, where
        ``memory``, ends the session once it holds more memory than the bound allows."""
        poll = memory and self._memory_start is not None
        bound = self._over_statement_memory_bound if poll else None
        watchdog = _Watchdog(
            self.backend.statement_timeout + _WATCHDOG_GRACE,
            cancel,
            self._terminate,
            self._busy,
            bound,
        )
        self._last_watchdog = watchdog
        return watchdog

    @abc.abstractmethod
    def _terminate(self) -> None:
        """End the episode's session from outside, over an admin connection."""

    def _busy(self) -> bool:
        """Whether the server runs a statement on the episode's session now; True where
        it cannot say."""
        busy = self.backend.session_busy(self.session_id)
        return True if busy is None else busy

    @abc.abstractmethod
    def _execute(self, sql: str, char_limit: int) -> QueryResult:
        """Run one statement as the episode's user (see :meth:`execute`); raises
        :class:`SessionLost` when the session is gone."""

    @abc.abstractmethod
    def _storage_used(self) -> tuple[int, int] | None:
        """Bytes the episode's tables (with their indexes) occupy on the server, and the
        number of its relations; None where they cannot be read now (read again after
        the next writing statement)."""

    @abc.abstractmethod
    def _ping(self) -> None:
        """One round trip on the episode's session; :class:`SessionLost` if it is gone."""

    @abc.abstractmethod
    def _pin_session(self) -> bool:
        """Put the session's idle timeouts back to the server's own; False where the
        session refused (it is then in a state the agent's statement left),
        :class:`SessionLost` where it is gone."""

    def _server_unchanged(self) -> bool:
        """The server answers and has not restarted since the episode began."""
        try:
            now = self.backend.server_started()
        except Exception:  # unreachable: an outage, whatever the agent did
            logger.debug("reading the server's start time failed", exc_info=True)
            return False
        return abs(now - self.server_started) <= _RESTART_TOLERANCE

    def _lost_by_statement(self, why: str) -> EpisodeEnd:
        if self._memory_exceeded:  # the watchdog ended the session for its memory
            return AgentInvalidAction(self._memory_message())
        if self._last_watchdog is not None and self._last_watchdog.terminated:
            return AgentInvalidAction(
                f"Error: the statement ran past the {self.backend.statement_timeout:g} s timeout "
                "and went on when cancelled; its session was ended, and so is the episode"
            )
        if self._server_unchanged():
            return AgentInvalidAction(
                f"Error: the statement ended the episode's own database session ({why}); "
                "the episode ends"
            )
        return TaskFailure(f"the database server went away during the statement: {why}")

    def _lost_between_statements(self, why: str) -> EpisodeEnd:
        if not self._pinned and self._server_unchanged():
            return AgentInvalidAction(
                "Error: the episode's database session ended after a statement that kept its "
                f"idle timeouts from being reset ({why}); the episode ends"
            )
        return TaskFailure(f"the database connection was lost between statements: {why}")

    def end_session(self) -> None:
        # The judge reads as the admin: with the agent's session closed, no lock it
        # held and no transaction it left open can hold the judge up.
        with contextlib.suppress(Exception):
            self.connection.close()

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
        self.end_session()
        self.backend.drop_later(self.name)


def _batches(cursor: Any) -> Iterator[Sequence[Any]]:
    while True:
        batch = cursor.fetchmany(_FETCH_BATCH)
        if not batch:
            return
        yield from batch
