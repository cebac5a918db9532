"""AgentBench-DB-v0 on the real MariaDB and PostgreSQL servers: fresh isolated databases,
least privilege, timeouts that an agent cannot switch off, bounded results, cleanup."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.db_servers import MARIADB_URL, POSTGRES_URL, server_url

from agentgym_eppo.environments.db import DBEnv
from agentgym_eppo.environments.db.backends import EPISODE_PREFIX, make_backend

PEOPLE = {
    "sample_id": "people-1",
    "description": "How old is Ann?",
    "type": ["other"],
    "label": ["31"],
    "table": {
        "table_name": "People Table",
        "table_info": {
            "columns": [{"name": "Name", "type": "TEXT"}, {"name": "Share (%)", "type": "TEXT"}],
            "rows": [["Ann", "31"], ["Bob", "9"], ["O'Neil", "44"]],
        },
    },
}
SERVERS = [
    pytest.param(MARIADB_URL, marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param(POSTGRES_URL, marks=pytest.mark.postgres, id="postgres"),
]


def execute(query: str) -> dict[str, Any]:
    return {"name": "execute_sql", "arguments": {"query": query}}


def episode_objects(url: str) -> set[str]:
    """Names of episode databases (PostgreSQL: and schemas of the admin's database) and
    users/roles on the server."""
    engine = sa.create_engine(url)
    like = EPISODE_PREFIX.replace("_", "\\_") + "%"
    with engine.connect() as connection:
        queries: tuple[str, ...]
        if engine.dialect.name == "postgresql":
            queries = (
                "SELECT datname FROM pg_database WHERE datname LIKE %(p)s",
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE %(p)s",
                "SELECT rolname FROM pg_roles WHERE rolname LIKE %(p)s",
            )
        else:
            queries = (
                "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %(p)s",
                "SELECT user FROM mysql.user WHERE user LIKE %(p)s",
            )
        names = {
            row[0] for query in queries for row in connection.exec_driver_sql(query, {"p": like})
        }
    engine.dispose()
    return names


@pytest.fixture(params=SERVERS)
def url(request: pytest.FixtureRequest) -> str:
    return server_url(request.param)


@pytest.fixture
def env(url: str) -> Iterator[DBEnv]:
    environment = DBEnv([PEOPLE], db_url=url, statement_timeout=2)
    environment.reset(options={"index": 0})
    yield environment
    environment.close()


def test_episode_runs_agentbench_sql_and_scores(env: DBEnv) -> None:
    obs, *_ = env.step(execute("SELECT `Share (%)` FROM `People Table` WHERE `Name` = 'O''Neil'"))
    assert obs == "[('44',)]"
    obs, *_ = env.step(execute("SELECT COUNT(*) FROM `People Table`"))
    assert obs == "[(3,)]"
    _, reward, terminated, _, _ = env.step(
        {"name": "commit_final_answer", "arguments": {"answers": ["31"]}}
    )
    assert (reward, terminated) == (1.0, True)


def _homes(env: Any) -> set[str]:
    """The database a PostgreSQL backend keeps for its episodes (MariaDB: none)."""
    return {env.backend.database_name} if env.backend.dialect == "postgres" else set()


def test_each_episode_gets_a_fresh_database_dropped_at_the_end(url: str) -> None:
    before = episode_objects(url)
    env = DBEnv([PEOPLE], db_url=url)
    env.reset(options={"index": 0})
    env.step(execute("DELETE FROM `People Table`"))
    first = episode_objects(url) - before - _homes(env)
    # MariaDB: one database and one user of the same name; PostgreSQL: a schema and a
    # role of the same name, in the backend's database
    assert len(first) == 1
    env.reset(options={"index": 0})
    assert env.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(3,)]"
    env.backend.wait_for_drops()  # type: ignore[attr-defined]
    assert not first & episode_objects(url)
    env.close()
    assert episode_objects(url) == before


def test_abandoned_env_drops_its_database_when_collected(url: str) -> None:
    before = episode_objects(url)
    env = DBEnv([PEOPLE], db_url=url)
    env.reset(options={"index": 0})
    homes = _homes(env)
    assert len(episode_objects(url) - before - homes) == 1
    backend = env.backend
    del env
    gc.collect()
    backend.wait_for_drops()  # type: ignore[attr-defined]
    assert episode_objects(url) - homes == before
    backend.close()
    assert episode_objects(url) == before


@pytest.mark.parametrize(
    ("mariadb", "postgres"),
    [
        ("DROP DATABASE test", "DROP DATABASE test"),
        ("DROP TABLE `People Table`", "DROP TABLE `People Table`"),
        ("SELECT * FROM mysql.user", "SELECT * FROM pg_authid"),
        ("SELECT LOAD_FILE('/etc/passwd') IS NULL", "SELECT pg_read_file('/etc/passwd')"),
        ("LOAD DATA INFILE '/etc/passwd' INTO TABLE `People Table`", "COPY pg_class TO '/tmp/x'"),
        (
            "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE `People Table`",
            "COPY \"People Table\" FROM '/etc/passwd'",
        ),
        ("SELECT 1 INTO OUTFILE '/tmp/agentgym_out'", "COPY \"People Table\" FROM PROGRAM 'id'"),
        ("CREATE USER 'intruder'@'%'", "CREATE ROLE intruder"),
        ("GRANT ALL ON *.* TO CURRENT_USER", "ALTER ROLE CURRENT_USER SUPERUSER"),
    ],
)
def test_server_and_file_access_fails_harmlessly(env: DBEnv, mariadb: str, postgres: str) -> None:
    statement = postgres if env.backend.dialect == "postgres" else mariadb
    obs, _, terminated, _, info = env.step(execute(statement))
    # LOAD_FILE without the FILE privilege yields NULL rather than an error.
    assert obs.startswith("Error: ") or obs == "[(1,)]", obs
    assert not terminated and info["status"] == "running"
    assert env.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(3,)]"
    assert not Path("/tmp/agentgym_out").exists()


def test_another_episodes_database_is_out_of_reach(url: str) -> None:
    first, second = DBEnv([PEOPLE], db_url=url), DBEnv([PEOPLE], db_url=url)
    first.reset(options={"index": 0})
    second.reset(options={"index": 0})
    other = second.database.name  # type: ignore[attr-defined]
    table = f"`{other}`.`People Table`"
    obs, *_ = first.step(execute(f"SELECT COUNT(*) FROM {table}"))
    assert obs.startswith("Error: "), obs
    obs, *_ = first.step(execute(f"DELETE FROM {table}"))
    assert obs.startswith("Error: "), obs
    assert second.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(3,)]"
    first.close()
    second.close()


@pytest.mark.slow
def test_timeout_holds_even_if_the_agent_lifts_its_session_limit(env: DBEnv) -> None:
    if env.backend.dialect == "postgres":
        lift, sleep = "SET statement_timeout = 0", "SELECT pg_sleep(30)"
    else:
        lift, sleep = "SET SESSION max_statement_time = 0", "SELECT SLEEP(30)"
    assert not env.step(execute(lift))[0].startswith("Error")
    obs, reward, terminated, _, _ = env.step(execute(sleep))
    assert obs == "Error: SQL execution timed out after 2 s."
    assert (reward, terminated) == (0.0, False)
    assert env.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(3,)]"


@pytest.mark.slow
def test_statement_timeout_stops_a_huge_cross_join(env: DBEnv) -> None:
    joins = ", ".join(f"`People Table` t{i}" for i in range(20))  # 3**20 rows
    obs, *_ = env.step(execute(f"SELECT COUNT(*) FROM {joins}"))
    assert obs == "Error: SQL execution timed out after 2 s."


def test_runaway_result_is_truncated_without_reading_it_all(env: DBEnv) -> None:
    """Reading 3**20 rows would run into the 2 s timeout; the cut comes long before."""
    joins = ", ".join(f"`People Table` t{i}" for i in range(20))
    obs, _, terminated, _, info = env.step(execute(f"SELECT * FROM {joins}"))
    assert len(obs) == 800 and obs.endswith("[TRUNCATED]") and obs.startswith("[('Ann', '31'")
    assert info["sql_error"] is False and not terminated
    assert env.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(3,)]"


def test_startup_cleanup_drops_stale_leftovers_and_spares_live_episodes(url: str) -> None:
    backend = make_backend(url)
    live = backend.create_episode([])
    stale = f"{EPISODE_PREFIX}1000000000_deadbeef"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection.exec_driver_sql(f'CREATE ROLE "{stale}" LOGIN')
            connection.exec_driver_sql(f'CREATE SCHEMA "{stale}"')
        else:
            connection.exec_driver_sql(f"CREATE DATABASE `{stale}`")
            connection.exec_driver_sql(f"CREATE USER '{stale}'@'%%'")  # %-formatted
    engine.dispose()
    assert stale in episode_objects(url)
    dropped = backend.cleanup_leftovers(grace=0)  # type: ignore[attr-defined]
    assert stale in dropped and live.name not in dropped  # type: ignore[attr-defined]
    assert stale not in episode_objects(url) and live.name in episode_objects(url)  # type: ignore[attr-defined]
    live.drop()
    backend.close()
    assert live.name not in episode_objects(url)  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.mariadb
def test_agentbench_dev_set_expert_scores_one_on_mariadb_and_wrong_answers_zero(
    agentbench_data: Path,
) -> None:
    env = DBEnv(str(agentbench_data / "dbbench" / "dev.jsonl"), db_url=server_url(MARIADB_URL))
    for index in range(env.num_tasks):
        env.reset(options={"index": index})
        while True:
            _, reward, terminated, truncated, info = env.step(env.expert_action())
            if terminated or truncated:
                break
        assert reward == 1.0, (index, info)
        # A query's wrong answer needs no server (test_db_env checks all of them); a
        # mutation's needs the table hash: one in four is checked here.
        if env.record.is_mutation and index % 4 == 0:
            env.reset(options={"index": index})
            assert env.step({"name": "commit_final_answer", "arguments": {"answers": []}})[1] == 0.0
    env.close()


@pytest.mark.parametrize("split", ["dev", "test"])
def test_shipped_tasks_are_portable_to_the_servers(url: str, split: str) -> None:
    """Labels come from SQLite; a spread of 10 tasks per split scores 1 on each server
    (all 400 pass on both servers; see docs/db.md)."""
    env = DBEnv(split=split, db_url=url)
    for index in range(0, env.num_tasks, 20):
        env.reset(options={"index": index})
        while True:
            _, reward, terminated, truncated, info = env.step(env.expert_action())
            if terminated or truncated:
                break
        assert reward == 1.0, (split, index, env.record.gold_sql, info)
    env.close()


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    repo = Path(__file__).resolve().parents[1]
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_process_exiting_mid_episode_without_close_drops_its_database(url: str) -> None:
    done = run_python(
        "from agentgym_eppo.environments.db import DBEnv\n"
        f"env = DBEnv(split='dev', db_url={url!r})\n"
        "env.reset(options={'index': 0})\n"
        "print(env.database.name)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() not in episode_objects(url)


def test_leftovers_of_a_killed_process_are_dropped_at_start_up(url: str) -> None:
    """A process dies mid-episode (no cleanup runs); the next backend for the server finds
    its database with no open session and drops it."""
    code = (
        "import os, sys\n"
        "from agentgym_eppo.environments.db import DBEnv\n"
        f"env = DBEnv(split='dev', db_url={url!r})\n"
        "env.reset(options={'index': 0})\n"
        "print(env.database.name, flush=True)\n"
        "os._exit(9)\n"
    )
    done = run_python(code)
    assert done.returncode == 9, done.stderr
    orphan = done.stdout.strip().splitlines()[-1]
    assert orphan in episode_objects(url)
    backend = make_backend(url)
    deadline = time.monotonic() + 10  # the server notices the dead client's socket
    while orphan not in backend.cleanup_leftovers(grace=0) and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.2)
    backend.close()
    assert orphan not in episode_objects(url)


def test_same_actions_give_the_same_observations_in_every_episode(url: str) -> None:
    """Error messages name the episode's random database; the env shows it as dbbench."""
    actions = [
        execute("SELECT * FROM nope"),
        execute("SELECT `Name` FROM `People Table` ORDER BY `Name`"),
        execute("DROP DATABASE test"),
    ]
    transcripts = []
    for _ in range(2):
        env = DBEnv([PEOPLE], db_url=url)
        env.reset(options={"index": 0})
        transcripts.append([env.step(action)[0] for action in actions])
        name = env.database.name  # type: ignore[attr-defined]
        env.close()
        assert not any(name in observation for observation in transcripts[-1])
    assert transcripts[0] == transcripts[1]
    assert transcripts[0][1] == "[('Ann',), ('Bob',), (\"O'Neil\",)]"


@pytest.mark.postgres
def test_postgres_special_numbers_render_as_floats() -> None:
    env = DBEnv([PEOPLE], db_url=server_url(POSTGRES_URL))
    env.reset(options={"index": 0})
    obs, *_ = env.step(execute("SELECT 'Infinity'::numeric, 'NaN'::numeric, 2.50::numeric"))
    assert obs == "[(inf, nan, 2.5)]"
    env.close()


@pytest.mark.postgres
def test_mysql_introspection_and_quoting_work_on_postgres() -> None:
    env = DBEnv([PEOPLE], db_url=server_url(POSTGRES_URL))
    env.reset(options={"index": 0})
    step = env.step
    assert step(execute("SHOW TABLES"))[0] == "[('People Table',)]"
    assert (
        step(execute("DESCRIBE `People Table`"))[0] == "[('Name', 'text'), ('Share (%)', 'text')]"
    )
    obs, *_ = step(execute("SELECT CONCAT(Name, '!') FROM `People Table` WHERE Name = 'O\\'Neil'"))
    assert obs == '[("O\'Neil!",)]'
    env.close()
