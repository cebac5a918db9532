"""DB episodes under hostile SQL, on SQLite, MariaDB and PostgreSQL.

* SQLite's episode database lives in the caller's process: it may not grow past
  ``EPISODE_STORAGE_LIMIT`` (the statement fails with a message naming the bound);
* a step reads one result row at a time and clips long values before rendering, so the
  Python memory it allocates does not grow with the result (tracemalloc's peak);
* on a server an episode whose tables grow past the bound ends as
  ``agent_invalid_action`` (the bound is lowered here so the test writes megabytes);
* ``mysql://`` names the driver to use; MariaDB's messages and results name the
  episode's user the same way.
"""

from __future__ import annotations

import contextlib
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.db_servers import MARIADB_URL, POSTGRES_URL, server_url

from agentgym_eppo.environments.db.backends import EPISODE_STORAGE_LIMIT, make_backend
from agentgym_eppo.environments.db.backends import postgres as postgres_backend
from agentgym_eppo.environments.db.backends import server as server_backend
from agentgym_eppo.environments.db.env import DBEnv

BACKENDS = [
    pytest.param(None, id="sqlite"),
    pytest.param(MARIADB_URL, marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param(POSTGRES_URL, marks=pytest.mark.postgres, id="postgres"),
]
SERVERS = BACKENDS[1:]


def execute(query: str) -> dict[str, Any]:
    return {"name": "execute_sql", "arguments": {"query": query}}


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str | None:
    return None if request.param is None else server_url(request.param)


@pytest.fixture
def env(db_url: str | None) -> Iterator[DBEnv]:
    environment = DBEnv(split="dev", db_url=db_url, statement_timeout=30)
    environment.reset(seed=0)
    yield environment
    environment.close()


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_sqlite_episode_database_cannot_grow_the_process_past_its_bound() -> None:
    env = DBEnv(split="dev", statement_timeout=60)
    env.reset(seed=0)
    try:
        before = _rss_bytes()
        env.step(execute("CREATE TABLE ballast (x BLOB)"))
        fill = (
            "INSERT INTO ballast WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
            "FROM n WHERE i < 400) SELECT zeroblob(900000) FROM n"
        )  # 360 MB a statement: three would be a gigabyte
        for _ in range(3):
            observation, _, terminated, _, info = env.step(execute(fill))
            assert observation == (
                "Error: database or disk is full: an episode's database may hold at most 256 MiB"
            )
            assert (terminated, info["status"]) == (False, "running")
        grown = _rss_bytes() - before
        assert grown < EPISODE_STORAGE_LIMIT + 128 * 1024 * 1024, f"grew {grown >> 20} MiB"
        # The issue's own attack: values of 9 MB are refused outright.
        observation, *_ = env.step(execute("INSERT INTO ballast VALUES (zeroblob(9000000))"))
        assert observation == "Error: string or blob too big"
    finally:
        env.close()


def _sqlite_temp_files() -> int:
    """Bytes in SQLite's temporary files open in this process (unlinked at once, so
    seen only through /proc/self/fd)."""
    total = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if "etilqs_" in str(fd.readlink()):
                total += fd.stat().st_size
        except OSError:  # closed meanwhile
            pass
    return total


def test_sqlite_sorts_and_unions_write_no_temp_files_and_their_memory_is_bounded() -> None:
    """One UNION used to write 2.5 GB of unlinked temp files to /var/tmp in 20 s; now
    temporary results stay in memory, and a statement that grows SQLite's memory past
    the bound fails with a message naming it (the episode goes on)."""
    env = DBEnv(split="dev", statement_timeout=20)
    env.reset(seed=0)
    seen = {"temp": 0, "rss": 0}
    running = threading.Event()
    running.set()

    def watch() -> None:
        while running.is_set():
            seen["temp"] = max(seen["temp"], _sqlite_temp_files())
            seen["rss"] = max(seen["rss"], _rss_bytes())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    try:
        before = _rss_bytes()
        watcher.start()
        started = time.monotonic()
        observation, _, terminated, _, info = env.step(
            execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                "WHERE i < 100000000) SELECT COUNT(*) FROM (SELECT CONCAT(HEX(ZEROBLOB(400)), i) "
                "FROM n UNION SELECT 'x') AS s"
            )
        )
        seconds = time.monotonic() - started
        running.clear()
        watcher.join()
        assert seen["temp"] == 0, f"{seen['temp'] >> 20} MiB of temp files"
        assert observation.startswith("Error: the statement needed more than 512 MiB of memory"), (
            observation
        )
        assert (terminated, info["status"]) == (False, "running")
        assert seconds < 20, "stopped by the timeout, not by the memory bound"
        grown = seen["rss"] - before
        assert grown < 512 * 1024 * 1024 + 128 * 1024 * 1024, f"grew {grown >> 20} MiB"
        # The memory is freed with the statement; the episode's tables are intact.
        observation, *_ = env.step(execute("SELECT 1"))
        assert observation == "[(1,)]"
    finally:
        running.clear()
        env.close()


BIG_RESULT = {
    None: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64) "
    "SELECT hex(zeroblob(450000)) FROM n",  # 64 values of 900 kB
    MARIADB_URL: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64) "
    "SELECT REPEAT('x', 4000000) FROM n",  # 64 values of 4 MB
    POSTGRES_URL: "SELECT repeat('x', 4000000) FROM generate_series(1, 64)",
}


def _python_peak(env: DBEnv, query: str) -> tuple[str, str, int]:
    tracemalloc.start()
    try:
        observation, _, _, _, info = env.step(execute(query))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return observation, info["status"], peak


def test_a_huge_result_costs_a_step_one_row_of_memory(env: DBEnv, db_url: str | None) -> None:
    query = BIG_RESULT[None if db_url is None else db_url]
    observation, status, peak = _python_peak(env, query)
    assert status == "running"
    assert observation.endswith("[TRUNCATED]") and len(observation) < 1_000
    # One value of at most 4 MB is read and decoded (a few copies); 64 would be 256 MB+.
    assert peak < 32 * 1024 * 1024, f"peak {peak >> 20} MiB"


@pytest.mark.postgres
def test_postgres_cuts_text_values_on_the_server() -> None:
    """One 100 MB value used to cost the step ~100 MiB (the cursor reads a row whole)."""
    env = DBEnv(split="dev", db_url=server_url(POSTGRES_URL), statement_timeout=30)
    env.reset(seed=0)
    try:
        observation, status, peak = _python_peak(
            env, "SELECT repeat('x', 100000000), 7, repeat('y', 3) -- a comment"
        )
        assert status == "running"
        assert observation == ("[('" + "x" * 800)[:789] + "[TRUNCATED]"  # 800 in all
        assert peak < 4 * 1024 * 1024, f"peak {peak >> 20} MiB"
        # Cut columns keep their order, types and row order; short values are unchanged.
        observation, *_ = env.step(
            execute(
                "SELECT name, n, 'ab' FROM (VALUES ('b', 2), ('a', 1), (NULL, 3)) AS v(name, n) "
                "ORDER BY n DESC;"
            )
        )
        assert observation == "[(None, 3, 'ab'), ('b', 2, 'ab'), ('a', 1, 'ab')]"
    finally:
        env.close()


LONG_VALUES = {
    "bytea": "SELECT convert_to(repeat('x', 30000000), 'UTF8')",
    "json": "SELECT to_json(repeat('x', 30000000))",
    "array": "SELECT array_fill(7, ARRAY[3000000])",
    "char(n)": "SELECT CAST(repeat('x', 10000000) AS CHAR(10000000))",
    "numeric": "SELECT power(7::numeric, 100000), 1",
    "record": "SELECT ROW(repeat('x', 30000000), 1)",
    "returning": "INSERT INTO ballast SELECT repeat('x', 10000000) FROM generate_series(1, 3) "
    "RETURNING x, x::bytea, to_json(x)",
    "returning many rows": "INSERT INTO ballast SELECT i::text FROM generate_series(1, 400000) AS "
    "s(i) RETURNING *, ARRAY[x]",
}


@pytest.mark.postgres
def test_postgres_bounds_values_of_every_type_and_returning_rows() -> None:
    """bytea, json, arrays, char(n), numeric, records and RETURNING rows used to be read
    whole (a 30 MB bytea cost the step ~90 MiB); short values keep their types."""
    env = DBEnv(split="dev", db_url=server_url(POSTGRES_URL), statement_timeout=30)
    env.reset(seed=0)
    try:
        env.step(execute("CREATE TABLE ballast (x TEXT)"))
        for name, query in LONG_VALUES.items():
            observation, status, peak = _python_peak(env, query)
            assert status == "running", (name, observation)
            assert observation.startswith("[(") and observation.endswith("[TRUNCATED]"), (
                name,
                observation[:200],
            )
            assert len(observation) <= 800, name
            assert peak < 4 * 1024 * 1024, f"{name}: peak {peak >> 20} MiB"
        # every row of the RETURNING commands was written, whatever the cut read
        observation, *_ = env.step(execute("SELECT COUNT(*), MAX(LENGTH(x)) FROM ballast"))
        assert observation == "[(400003, 10000000)]"
        # short values of every type are as before, in their own types, NULLs too
        observation, *_ = env.step(
            execute(
                "SELECT convert_to('ab', 'UTF8'), to_json('ab'::text), ARRAY[1, 2], "
                "CAST('ab' AS CHAR(4)), 2.50::numeric, NULL::json, 7, 'x' -- comment"
            )
        )
        assert observation == "[('ab', 'ab', [1, 2], 'ab  ', 2.5, None, 7, 'x')]"
        observation, *_ = env.step(
            execute("UPDATE ballast SET x = 'y' WHERE x = '1' RETURNING x, ARRAY[x], 3;")
        )
        assert observation == "[('y', ['y'], 3)]"
        observation, _, _, _, info = env.step(execute("DELETE FROM ballast WHERE x = 'none'"))
        assert (observation, info["status"]) == ("[]", "running")
        observation, *_ = env.step(execute("INSERT INTO ballast VALUES (1) RETURNING nope"))
        assert observation.startswith('Error: column "nope" does not exist'), observation
    finally:
        env.close()


@pytest.mark.parametrize("url", SERVERS)
def test_an_episode_that_writes_past_the_bound_ends_as_agent_invalid_action(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (server_backend, postgres_backend):  # the size check, PostgreSQL's temp limit
        monkeypatch.setattr(module, "EPISODE_STORAGE_LIMIT", 4 * 1024 * 1024)
    env = DBEnv(split="dev", db_url=server_url(url), statement_timeout=30)
    env.reset(seed=0)
    try:
        observation, _, terminated, _, info = env.step(execute("CREATE TABLE ballast (x TEXT)"))
        assert (terminated, info["status"]) == (False, "running"), observation
        fill = (
            "INSERT INTO ballast WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
            "FROM n WHERE i < 64) SELECT MD5(CAST(RAND() AS CHAR)) FROM n"
        )
        big = "INSERT INTO ballast SELECT MD5(CAST(RAND() AS CHAR)) FROM ballast"  # doubles
        observation, _, terminated, _, info = env.step(execute(fill))
        statuses = [info["status"]]
        while info["status"] == "running" and len(statuses) < 16:
            observation, _, terminated, _, info = env.step(execute(big))
            statuses.append(info["status"])
        assert info["status"] == "agent_invalid_action", (statuses, observation)
        assert terminated
        assert observation == (
            "Error: the episode's database grew past 4 MiB, more than an episode may write; "
            "the episode ends"
        )
    finally:
        env.close()


def test_mysql_url_without_a_driver_names_the_url_that_works() -> None:
    with pytest.raises(ValueError, match=r"'mysql\+pymysql://root@127\.0\.0\.1:3306/test'"):
        make_backend("mysql://root@127.0.0.1:3306/test")


@pytest.mark.mariadb
def test_mariadb_names_the_episode_user_alike_in_results_and_errors() -> None:
    env = DBEnv(split="dev", db_url=server_url(MARIADB_URL))
    env.reset(seed=0)
    try:
        user = env.step(execute("SELECT CURRENT_USER()"))[0]
        denied = env.step(execute("DROP DATABASE test"))[0]
    finally:
        env.close()
    assert user == "[('dbbench@%',)]"
    assert denied == "Error: 1044 Access denied for user 'dbbench'@'%' to database 'test'"


# ------------------------------------------------ who ended a lost session

SELF_KILL = {
    "mariadb": ("KILL CONNECTION_ID()",),
    "postgres": ("SELECT pg_terminate_backend(pg_backend_pid())",),
}


def _admin_run(url: str, sql: str) -> list[Any]:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            result = connection.exec_driver_sql(sql)
            return list(result) if result.returns_rows else []
    finally:
        engine.dispose()


@pytest.mark.parametrize("url", SERVERS)
def test_a_statement_that_ends_its_own_session_is_an_agent_abort(url: str) -> None:
    env = DBEnv(split="dev", db_url=server_url(url), statement_timeout=30)
    kinds = [*SELF_KILL["mariadb" if "mysql" in url else "postgres"], "kill by id"]
    try:
        for kind in kinds:
            env.reset(seed=0)
            if kind == "kill by id":  # the id read first, then killed by number
                own = "SELECT CONNECTION_ID()" if "mysql" in url else "SELECT pg_backend_pid()"
                pid = int(env.step(execute(own))[0].strip("[(,)]"))
                kind = f"KILL {pid}" if "mysql" in url else f"SELECT pg_terminate_backend({pid})"
            observation, reward, terminated, truncated, info = env.step(execute(kind))
            assert info["status"] == "agent_invalid_action", (kind, observation)
            assert (reward, terminated, truncated) == (-0.2, True, False)
            assert observation.startswith(
                "Error: the statement ended the episode's own database session"
            ), observation
    finally:
        env.close()


IDLE_TIMEOUTS = {
    "mariadb": (("SET SESSION wait_timeout = 1",), 2.2),
    "postgres": (
        ("SET idle_session_timeout = 100",),
        0.6,
    ),
    "postgres in a transaction": (
        ("BEGIN", "SET idle_in_transaction_session_timeout = 100"),
        0.6,
    ),
    "postgres in a failed transaction": (
        ("BEGIN", "SET idle_in_transaction_session_timeout = 100", "SELECT nope FROM nowhere"),
        0.6,
    ),
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.mariadb if case == "mariadb" else pytest.mark.postgres)
        for case in IDLE_TIMEOUTS
    ],
)
def test_an_idle_timeout_the_agent_sets_cannot_end_its_session(case: str) -> None:
    """The policy thinks for seconds between statements: an idle timeout the agent set
    would end its session then, when no statement of its runs."""
    statements, pause = IDLE_TIMEOUTS[case]
    env = DBEnv(split="dev", db_url=server_url(MARIADB_URL if case == "mariadb" else POSTGRES_URL))
    env.reset(seed=0)
    try:
        for statement in statements:
            observation, _, _, _, info = env.step(execute(statement))
            assert info["status"] == "running", observation
        time.sleep(pause)
        observation, _, _, _, info = env.step(execute("SELECT 1"))
        assert info["status"] == "running", observation
    finally:
        env.close()


@pytest.mark.parametrize("url", SERVERS)
def test_a_session_killed_from_outside_between_statements_is_a_task_error(url: str) -> None:
    """The other side: a session that an administrator (or a proxy) ends while no
    statement of the agent runs is the environment's fault, not the agent's."""
    env = DBEnv(split="dev", db_url=server_url(url), statement_timeout=30)
    env.reset(seed=0)
    try:
        env.step(execute("SELECT 1"))
        name = env.unwrapped.database.name
        if "mysql" in url:
            for (thread,) in _admin_run(
                url, f"SELECT id FROM information_schema.processlist WHERE user = '{name}'"
            ):
                _admin_run(url, f"KILL {int(thread)}")
        else:
            _admin_run(
                url,
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{name}'",
            )
        observation, reward, terminated, _, info = env.step(execute("SELECT 1"))
        assert (info["status"], reward, terminated) == ("task_error", -0.2, True), observation
    finally:
        env.close()


@pytest.mark.parametrize("url", SERVERS)
def test_a_session_lost_while_the_server_restarted_is_a_task_error(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that restarted during the statement took the session down whatever the
    statement was. The servers here are shared, so the restart is simulated: the
    server's start time, read after the loss, moves on by a minute."""
    env = DBEnv(split="dev", db_url=server_url(url), statement_timeout=30)
    env.reset(seed=0)
    try:
        started = env.unwrapped.database.server_started
        monkeypatch.setattr(type(env.unwrapped.backend), "server_started", lambda _: started + 60)
        kill = SELF_KILL["mariadb" if "mysql" in url else "postgres"][0]
        observation, _, terminated, _, info = env.step(execute(kill))
        assert (info["status"], terminated) == ("task_error", True), observation
        assert observation.startswith("the database server went away during the statement")
    finally:
        env.close()


def _mutation_index(env: DBEnv) -> int:
    tasks = env.unwrapped._tasks_for("dev")
    return next(k for k in range(len(tasks)) if tasks.by_index(k).is_mutation)


def _step_within(env: DBEnv, action: dict[str, Any], seconds: float) -> tuple[Any, ...]:
    """``env.step(action)``, failing the test (not hanging it) past ``seconds``; a step
    left blocked is released when the fixture closes the env."""
    done: list[tuple[Any, ...]] = []
    worker = threading.Thread(target=lambda: done.append(env.step(action)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"the step was still blocked after {seconds} s: {action}"
    return done[0]


@pytest.mark.postgres
def test_the_judge_is_not_held_up_by_a_lock_the_agent_keeps() -> None:
    env = DBEnv(split="dev", db_url=server_url(POSTGRES_URL), statement_timeout=30)
    env.reset(options={"index": _mutation_index(env)})
    table = env.unwrapped.record.tables[0].name
    try:
        env.step(execute("BEGIN"))
        observation, *_ = env.step(execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE'))
        assert observation == "[]", observation
        commit = {"name": "commit_final_answer", "arguments": {"answers": []}}
        _, reward, terminated, _, info = _step_within(env, commit, 20)
        assert (info["status"], reward, terminated) == ("completed", 0.0, True)
    finally:
        env.close()


@pytest.mark.postgres
def test_the_size_check_is_not_held_up_by_a_lock_the_agent_keeps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_backend, "EPISODE_STORAGE_LIMIT", 4 * 1024 * 1024)
    env = DBEnv(split="dev", db_url=server_url(POSTGRES_URL), statement_timeout=30)
    env.reset(seed=0)
    table = env.unwrapped.record.tables[0].name
    try:
        for statement in ("BEGIN", f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE'):
            assert env.step(execute(statement))[0] == "[]"
        # a writing statement that runs past the check interval: the size is read now
        sleep = execute("DO $$ BEGIN PERFORM pg_sleep(0.1); END $$")
        observation, _, _, _, info = _step_within(env, sleep, 20)
        assert info["status"] == "running", observation
        # what the open transaction writes counts too (1 kB values are stored as they are)
        fill = execute(
            "CREATE TABLE ballast AS SELECT repeat('x', 1000) AS x FROM generate_series(1, 10000)"
        )
        observation, _, _, _, info = _step_within(env, fill, 20)
        if info["status"] == "running":  # the fill ran under the check interval
            observation, _, _, _, info = _step_within(env, sleep, 20)
        assert info["status"] == "agent_invalid_action", observation
    finally:
        env.close()


# ------------------------------------------------ state that outlives an episode

XA_STATEMENTS = {
    "one statement each": (
        "XA START 'agentgym_test_xa'",
        "INSERT INTO `{table}` SELECT * FROM `{table}` LIMIT 1",
        "XA END 'agentgym_test_xa'",
        "XA PREPARE 'agentgym_test_xa'",
    ),
    "dynamic SQL": (
        "EXECUTE IMMEDIATE CONCAT('X', 'A START ''agentgym_test_xa''')",
        "INSERT INTO `{table}` SELECT * FROM `{table}` LIMIT 1",
        "EXECUTE IMMEDIATE 'XA END ''agentgym_test_xa'''",
        "EXECUTE IMMEDIATE 'XA PREPARE ''agentgym_test_xa'''",
    ),
    "prepared, then the session killed, in one statement": (
        "BEGIN NOT ATOMIC XA START 'agentgym_test_xa'; "
        "INSERT INTO `{table}` SELECT * FROM `{table}` LIMIT 1; XA END 'agentgym_test_xa'; "
        "XA PREPARE 'agentgym_test_xa'; KILL CONNECTION_ID(); END",
    ),
}


def _close_within(env: DBEnv, seconds: float) -> float:
    """``env.close()``, failing the test (not hanging it) past ``seconds``."""
    started = time.monotonic()
    closer = threading.Thread(target=env.close, daemon=True)
    closer.start()
    closer.join(seconds)
    assert not closer.is_alive(), f"env.close() still blocked after {seconds} s"
    return time.monotonic() - started


@pytest.mark.mariadb
@pytest.mark.parametrize("case", XA_STATEMENTS)
def test_an_xa_transaction_the_agent_prepares_cannot_outlive_the_episode(case: str) -> None:
    """A prepared XA transaction survives its session and locks the episode's table:
    DROP DATABASE used to wait for it (lock_wait_timeout, a day), so close() hung and
    the databases of later episodes queued behind it."""
    url = server_url(MARIADB_URL)
    env = DBEnv(split="dev", db_url=url, statement_timeout=30)
    env.reset(seed=0)
    name = env.unwrapped.database.name
    table = env.unwrapped.record.tables[0].name
    try:
        statuses = []
        for statement in XA_STATEMENTS[case]:
            observation, reward, terminated, _, info = env.step(
                execute(statement.format(table=table))
            )
            statuses.append(info["status"])
            if terminated:
                break
        assert statuses[-1] == "agent_invalid_action", (statuses, observation)
        assert reward == -0.2
        if case != "prepared, then the session killed, in one statement":
            assert observation == (
                "Error: the statement left an XA transaction prepared, which would outlive "
                "the episode's session and hold its tables; it was rolled back and the "
                "episode ends"
            )
        assert _admin_run(url, "XA RECOVER") == []
        assert _close_within(env, 20) < 10
        with sa.create_engine(url).connect() as connection:
            left = connection.exec_driver_sql(
                "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s", (name,)
            ).scalar()
        assert left == 0
    finally:
        with contextlib.suppress(Exception):  # unblocks a hung drop where the fix is absent
            _admin_run(url, "XA ROLLBACK 'agentgym_test_xa'")
        env.close()


@pytest.mark.mariadb
def test_a_drop_held_up_by_a_lock_fails_in_seconds_and_start_up_cleanup_goes_on() -> None:
    """Whatever holds an episode's table (here another client's prepared XA
    transaction), dropping waits at most a few seconds, not the server's day: close()
    returns, the database is left for a later clean-up, and that clean-up skips it
    without waiting long either."""
    url = server_url(MARIADB_URL)
    env = DBEnv(split="dev", db_url=url, statement_timeout=30)
    env.reset(seed=0)
    name = env.unwrapped.database.name
    table = env.unwrapped.record.tables[0].name
    stranger = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        connection: Any = stranger.raw_connection().driver_connection
        with connection.cursor() as cursor:
            for statement in (
                "XA START 'agentgym_test_stranger'",
                f"INSERT INTO `{name}`.`{table}` SELECT * FROM `{name}`.`{table}` LIMIT 1",
                "XA END 'agentgym_test_stranger'",
                "XA PREPARE 'agentgym_test_stranger'",
            ):
                cursor.execute(statement)
        connection.close()  # the prepared transaction outlives the connection
        assert _close_within(env, 30) < 20
        backend = make_backend(url)
        started = time.monotonic()
        dropped = backend.cleanup_leftovers(grace=0)  # type: ignore[attr-defined]
        assert name not in dropped and time.monotonic() - started < 20
        backend.close()
    finally:
        with contextlib.suppress(Exception):
            _admin_run(url, "XA ROLLBACK 'agentgym_test_stranger'")
        stranger.dispose()
        env.close()
    backend = make_backend(url)
    backend.cleanup_leftovers(grace=0)  # type: ignore[attr-defined]
    backend.close()
    assert not _admin_run(
        url, f"SELECT 1 FROM information_schema.schemata WHERE schema_name = '{name}'"
    )


SESSION_MEMORY = {  # what the agent runs to fill its session's server memory, per server
    "mariadb": {
        "statements": "SET @a{k} = REPEAT('x', 16000000), @b{k} = REPEAT('y', 16000000)",
        "one statement": "BEGIN NOT ATOMIC DECLARE i INT DEFAULT 0; WHILE i < 40 DO "
        "EXECUTE IMMEDIATE CONCAT('SET @v', i, ' = REPEAT(''x'', 16000000)'); "
        "SET i = i + 1; END WHILE; END",
    },
    "postgres": {
        "statements": "SELECT set_config('agentgym.a{k}', repeat('x', 16000000), false) IS NULL, "
        "set_config('agentgym.b{k}', repeat('y', 16000000), false) IS NULL",
        "one statement": "DO $$ BEGIN FOR i IN 1..40 LOOP PERFORM set_config('agentgym.v' || i, "
        "repeat('x', 16000000), false); END LOOP; END $$",
    },
}


def _session_memory_of(url: str, user: str) -> int:
    """Server memory of ``user``'s sessions, read as the tests' admin: MariaDB's
    ``MEMORY_USED``, PostgreSQL's ``RssAnon`` of the backend process (0 where none)."""
    if "mysql" in url:
        rows = _admin_run(
            url, f"SELECT MEMORY_USED FROM information_schema.PROCESSLIST WHERE USER = '{user}'"
        )
        return sum(int(row[0]) for row in rows)
    rows = _admin_run(
        url,
        "SELECT substring(pg_read_file('/proc/' || pid || '/status') FROM 'RssAnon:\\s*(\\d+)') "
        f"FROM pg_stat_activity WHERE usename = '{user}'",
    )
    return sum(int(row[0]) * 1024 for row in rows if row[0])


@pytest.mark.parametrize("url", SERVERS)
@pytest.mark.parametrize("how", ["statements", "one statement"])
def test_server_memory_an_episode_session_holds_is_bounded(
    url: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """User variables (MariaDB) and set_config (PostgreSQL) used to raise the session's
    server memory without bound (40 values of 16 MB: 640 MB held until the episode's
    end). Now the session is read after every statement (bound: 64 MiB) and every 0.1 s
    while one runs (1 GiB, lowered here to 256 MiB); past the bound the episode ends as
    agent_invalid_action and its session is closed."""
    monkeypatch.setattr(server_backend, "STATEMENT_SESSION_MEMORY", 256 * 1024 * 1024)
    url = server_url(url)
    statements = SESSION_MEMORY["mariadb" if "mysql" in url else "postgres"]
    env = DBEnv(split="dev", db_url=url, statement_timeout=30)
    env.reset(seed=0)
    name = env.unwrapped.database.name
    peak = [0]
    running = threading.Event()
    running.set()

    def watch() -> None:
        while running.is_set():
            with contextlib.suppress(Exception):
                peak[0] = max(peak[0], _session_memory_of(url, name))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        statuses = []
        for k in range(8 if how == "statements" else 1):
            observation, reward, terminated, _, info = env.step(
                execute(statements[how].replace("{k}", str(k)))
            )
            statuses.append(info["status"])
            if terminated:
                break
        assert statuses[-1] == "agent_invalid_action", (statuses, observation)
        assert reward == -0.2
        bound = 64 if how == "statements" else 256  # between statements, during one
        assert observation == (
            f"Error: the episode's database session held more than {bound} MiB of the server's "
            "memory (user variables, settings, sorts), more than an episode may; the episode ends"
        )
        assert len(statuses) <= 3
        assert peak[0] < (bound + 128) * 1024 * 1024, f"peak {peak[0] >> 20} MiB"
    finally:
        running.clear()
        watcher.join()
        env.close()
    deadline = time.monotonic() + 5  # the server frees an ended session's memory a moment later
    while _session_memory_of(url, name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _session_memory_of(url, name) == 0


@pytest.mark.mariadb
def test_mariadb_episode_user_cannot_create_temporary_tables() -> None:
    """A temporary table lives outside the episode's database: an ENGINE=MEMORY one,
    after raising max_heap_table_size, held 380 MiB of server memory that neither the
    size check nor the memory bound saw."""
    env = DBEnv(split="dev", db_url=server_url(MARIADB_URL), statement_timeout=30)
    env.reset(seed=0)
    try:
        env.step(execute("SET SESSION max_heap_table_size = 1073741824"))
        observation, _, _, _, info = env.step(
            execute("CREATE TEMPORARY TABLE ballast (x VARCHAR(1000)) ENGINE=MEMORY")
        )
        assert info["status"] == "running"
        assert observation.startswith("Error: 1044 Access denied for user 'dbbench'@'%'"), (
            observation
        )
    finally:
        env.close()


@pytest.mark.mariadb
def test_a_compound_statement_that_goes_on_when_cancelled_is_stopped() -> None:
    """MariaDB's max_statement_time and KILL QUERY stop only the statement inside a
    compound statement that runs at the time; the loop went on (a step that never
    returned). Now its session is ended 10 s after the first cancel."""
    url = server_url(MARIADB_URL)
    env = DBEnv(split="dev", db_url=url, statement_timeout=2)
    env.reset(seed=0)
    name = env.unwrapped.database.name
    loop = execute("BEGIN NOT ATOMIC WHILE 1 DO DO SLEEP(0.05); END WHILE; END")
    try:
        started = time.monotonic()
        observation, reward, terminated, _, info = _step_within(env, loop, 40)
        assert (info["status"], reward, terminated) == ("agent_invalid_action", -0.2, True)
        assert observation == (
            "Error: the statement ran past the 2 s timeout and went on when cancelled; its "
            "session was ended, and so is the episode"
        )
        assert time.monotonic() - started < 25
    finally:
        for (thread,) in _admin_run(
            url, f"SELECT id FROM information_schema.processlist WHERE user = '{name}'"
        ):  # releases a step left running where the fix is absent
            _admin_run(url, f"KILL {int(thread)}")
        env.close()


def _postgres_leftovers(url: str, name: str) -> list[Any]:
    """Every trace of episode ``name`` on the server: its database, schema, role, and
    catalogue rows of relations in its schema (in the admin's database)."""
    return _admin_run(
        url,
        f"SELECT 'database' FROM pg_database WHERE datname = '{name}' "
        f"UNION ALL SELECT 'schema' FROM pg_namespace WHERE nspname = '{name}' "
        f"UNION ALL SELECT 'role' FROM pg_roles WHERE rolname = '{name}' "
        "UNION ALL SELECT 'relations' FROM pg_class c JOIN pg_namespace n "
        f"ON n.oid = c.relnamespace WHERE n.nspname = '{name}'",
    )


@pytest.mark.postgres
@pytest.mark.parametrize("capped", [True, False], ids=["capped", "cap lifted"])
def test_postgres_thousands_of_empty_tables_end_the_episode_and_leave_nothing(
    capped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 empty tables made in 5 statements never tripped the size check (they
    occupy no bytes), and the episode's schema then could not be dropped in one
    transaction ("out of shared memory"): schema, role and 10,001 catalogue rows stayed.
    Now an episode past 1,000 relations ends as agent_invalid_action, and an episode
    is dropped whole (its own database) however many it made (the cap lifted here)."""
    if not capped:
        monkeypatch.setattr(server_backend, "EPISODE_RELATION_LIMIT", 10**9, raising=False)
    url = server_url(POSTGRES_URL)
    env = DBEnv(split="dev", db_url=url, statement_timeout=60)
    env.reset(seed=0)
    name = env.unwrapped.database.name
    make = (
        "DO $$ BEGIN FOR i IN {first}..{last} LOOP "
        "EXECUTE format('CREATE TABLE many_%s ()', i); END LOOP; END $$"
    )
    try:
        statuses = []
        for k in range(5):
            observation, reward, terminated, _, info = env.step(
                execute(make.format(first=2000 * k + 1, last=2000 * (k + 1)))
            )
            statuses.append(info["status"])
            if terminated:
                break
        if capped:
            assert statuses == ["agent_invalid_action"], (statuses, observation)
            assert reward == -0.2
            assert observation == (
                "Error: the episode's database holds more than 1,000 tables, indexes, views "
                "and sequences, more than an episode may; the episode ends"
            )
        else:
            assert statuses == ["running"] * 5, (statuses, observation)
    finally:
        env.close()
    assert _postgres_leftovers(url, name) == []


CROSS_EPISODE_READS = {  # what one episode asked the catalogue about another's objects
    "column names": "SELECT COUNT(*) FROM pg_attribute WHERE attname = 'planted_column'",
    "table names": "SELECT COUNT(*) FROM pg_class WHERE relname = 'planted_table'",
    "live row counts": "SELECT COUNT(*) FROM pg_stat_all_tables "
    "WHERE relname = 'planted_table' OR n_live_tup = 777",
    "write counters": "SELECT COUNT(*) FROM pg_stat_all_tables WHERE n_tup_ins = 777",
    "database write counters": "SELECT COUNT(*) FROM pg_stat_database "
    "WHERE datname LIKE 'agentgym\\_ep\\_%' AND tup_inserted >= 777",
    "defaults": "SELECT COUNT(*) FROM pg_attrdef WHERE pg_get_expr(adbin, adrelid) LIKE '%planted%'",
    "CHECKs": "SELECT COUNT(*) FROM pg_constraint WHERE pg_get_constraintdef(oid) LIKE '%planted%'",
    "COMMENTs": "SELECT COUNT(*) FROM pg_description WHERE description LIKE '%planted%'",
    "information_schema": "SELECT COUNT(*) FROM information_schema.columns "
    "WHERE column_name = 'planted_column'",
    "functions": "SELECT COUNT(*) FROM pg_proc WHERE prosrc LIKE '%planted%'",
}


@pytest.mark.postgres
def test_postgres_episodes_read_nothing_of_each_others_objects() -> None:
    """Episodes of two environments on PostgreSQL run in two databases: another
    episode's column names, row counts, write counters and the text of its defaults,
    CHECKs, COMMENTs and functions (all readable through pg_catalog and the pg_stat
    views while episodes were schemas of one database) are out of its sight; and an
    environment's next episode finds nothing of its last one."""
    url = server_url(POSTGRES_URL)
    writer = DBEnv(split="dev", db_url=url, statement_timeout=30)
    reader = DBEnv(split="dev", db_url=url, statement_timeout=30)
    try:
        writer.reset(seed=0)
        reader.reset(seed=1)
        for statement in (
            "CREATE TABLE planted_table (planted_column TEXT DEFAULT 'planted default' "
            "CHECK (planted_column <> 'planted check'))",
            "COMMENT ON TABLE planted_table IS 'planted comment'",
            "INSERT INTO planted_table SELECT i::text FROM generate_series(1, 777) AS s(i)",
            "CREATE FUNCTION planted_function() RETURNS TEXT LANGUAGE sql AS $$ SELECT 'planted' $$",
        ):
            observation, _, _, _, info = writer.step(execute(statement))
            assert info["status"] == "running" and not observation.startswith("Error"), observation
        time.sleep(1.0)  # statistics reach the shared views within a second
        seen = {what: reader.step(execute(query))[0] for what, query in CROSS_EPISODE_READS.items()}
        assert seen == dict.fromkeys(CROSS_EPISODE_READS, "[(0,)]")
        # the writer's own view is whole: the tables are there, only out of others' sight
        assert writer.step(execute(CROSS_EPISODE_READS["column names"]))[0] == "[(1,)]"
        # the writer's next episode runs in the same database and finds nothing either
        writer.reset(seed=2)
        seen = {what: writer.step(execute(query))[0] for what, query in CROSS_EPISODE_READS.items()}
        assert seen == dict.fromkeys(CROSS_EPISODE_READS, "[(0,)]")
    finally:
        writer.close()
        reader.close()
