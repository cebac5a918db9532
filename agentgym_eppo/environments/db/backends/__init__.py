"""Where DB episodes run: SQLite in memory, or a MariaDB/MySQL or PostgreSQL server.

One :class:`DBBackend` per environment creates one :class:`EpisodeDatabase` per episode
and drops it when the episode ends. Every backend keeps the same promises:

* **Fresh and isolated.** SQLite: a new in-memory database per episode; an authorizer
  refuses ``ATTACH`` (which ``VACUUM INTO`` uses too) and pragmas other than table
  introspection, and (Python >= 3.11) the attached-database limit is 0; extensions off.
  MariaDB: a database ``agentgym_ep_<unix time>_<random>`` and a user of the same name
  that may only read and write tables of that database (no ``DROP``, no ``FILE``, no
  grants, no temporary tables), so ``DROP DATABASE``, other episodes' databases,
  ``LOAD DATA``, ``LOAD_FILE`` and ``INTO OUTFILE`` fail with the server's own error.
  PostgreSQL: a database per backend, and in it a schema and a login role of such a
  name per episode, one episode after another; the role owns nothing it did not
  create, cannot read server files, and sees nothing of other backends' episodes in
  the catalogue or the table statistics.
* **Statement timeout** (``statement_timeout`` seconds, AgentBench's 60 by default).
  SQLite: a progress handler aborts the statement. MariaDB: ``max_statement_time`` for
  the user and the session; PostgreSQL: the role's ``statement_timeout``. Since an
  agent may ``SET`` its session's limit away, a watchdog also cancels the statement
  from outside (``KILL QUERY`` on MariaDB, a cancel request on PostgreSQL) shortly
  after the limit, and ends the session of one that goes on regardless.
* **Bounded footprint.** Servers: the episode's tables (``EPISODE_STORAGE_LIMIT``),
  its relations (``EPISODE_RELATION_LIMIT``) and the memory its session holds
  (``EPISODE_SESSION_MEMORY`` between statements, ``STATEMENT_SESSION_MEMORY`` while
  one runs); past a bound the episode ends as ``agent_invalid_action``. A MariaDB XA
  transaction the agent prepares, which would outlive its session, is rolled back and
  ends the episode too. SQLite: the page cap, and what one statement may add to
  SQLite's memory (temporary results stay in memory, not in temp files).
* **Bounded results.** Rows are fetched a batch at a time and rendering stops once
  the observation is longer than ``char_limit``; the rest is never fetched (MariaDB:
  an unbuffered cursor and ``KILL QUERY``; PostgreSQL: a server-side cursor).
* **Honest ends.** A server session that the agent's statement ended (killing its own
  connection or backend) ends the episode as ``agent_invalid_action``; idle timeouts
  the agent sets are reset after every statement, so a session lost between
  statements, or with the server down or restarted, is ``task_error``
  (:class:`ServerEpisode`). The judge reads after the agent's session is closed.
* **Cleanup.** Dropping happens when the episode ends, when the environment is closed
  or garbage-collected (MariaDB: in a background thread once the episode's own
  connection is closed, ``close`` waits for it; PostgreSQL: at once, and ``close``
  drops the backend's database), and, for databases left by a killed process, when a
  server backend starts: :func:`cleanup_leftovers` drops every ``agentgym_ep_``
  database, schema, user and role that has no open session and is older than a grace
  period. No drop waits more than a few seconds for a lock.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import URL, make_url

from .base import (
    DEFAULT_STATEMENT_TIMEOUT,
    EPISODE_PREFIX,
    EPISODE_RELATION_LIMIT,
    EPISODE_SESSION_MEMORY,
    EPISODE_STORAGE_LIMIT,
    LEFTOVER_GRACE_SECONDS,
    STATEMENT_SESSION_MEMORY,
    DBBackend,
    EpisodeDatabase,
    QueryResult,
    RowRenderer,
    StorageLimitExceeded,
    episode_name,
    quote_ansi,
    quote_mysql,
)
from .mysql import MySQLBackend, MySQLEpisode
from .postgres import PostgresBackend, PostgresEpisode
from .server import ServerBackend, ServerEpisode
from .sqlite import SQLiteBackend, SQLiteEpisode, mysql_collation_key


def _sqlite(url: URL, statement_timeout: float) -> DBBackend:
    if url.database not in (None, "", ":memory:"):
        raise ValueError(
            f"the SQLite backend keeps one in-memory database per episode; "
            f"got a file URL {url.render_as_string(hide_password=True)!r} (use 'sqlite://')"
        )
    return SQLiteBackend(statement_timeout)


def _mysql(url: URL, statement_timeout: float) -> DBBackend:
    _check_mysql_driver(url)
    return MySQLBackend(url, statement_timeout)


BACKENDS: dict[str, Callable[[URL, float], DBBackend]] = {
    "sqlite": _sqlite,
    "mysql": _mysql,
    "mariadb": _mysql,
    "postgresql": PostgresBackend,
}
"""SQLAlchemy backend name (the URL's scheme before ``+``) -> the backend it builds."""


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
    build = BACKENDS.get(url.get_backend_name())
    if build is None:
        raise ValueError(
            f"unsupported database {url.get_backend_name()!r}; use sqlite://, "
            "mysql+pymysql:// (MariaDB/MySQL) or postgresql+psycopg://"
        )
    return build(url, statement_timeout)


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


__all__ = [
    "BACKENDS",
    "DEFAULT_STATEMENT_TIMEOUT",
    "EPISODE_PREFIX",
    "EPISODE_RELATION_LIMIT",
    "EPISODE_SESSION_MEMORY",
    "EPISODE_STORAGE_LIMIT",
    "LEFTOVER_GRACE_SECONDS",
    "STATEMENT_SESSION_MEMORY",
    "DBBackend",
    "EpisodeDatabase",
    "MySQLBackend",
    "MySQLEpisode",
    "PostgresBackend",
    "PostgresEpisode",
    "QueryResult",
    "RowRenderer",
    "SQLiteBackend",
    "SQLiteEpisode",
    "ServerBackend",
    "ServerEpisode",
    "StorageLimitExceeded",
    "episode_name",
    "make_backend",
    "mysql_collation_key",
    "quote_ansi",
    "quote_mysql",
]
