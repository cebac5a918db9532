"""Concurrent episodes cannot reach each other or the host.

OS: two sandboxes run side by side; each tries to see, change or kill the other's
files and processes and to break out to the host (mounts, cgroups, ``/proc``, writes
to system paths, symlinks). DB: two episodes on one server (MariaDB, PostgreSQL) or in
SQLite; the first runs a battery of attacks against the second's database, which must
end with its tables exactly as they were and its connection alive. A backend that cannot
run here (bubblewrap, a server that is not up) skips with the reason; under CI that fails
the run (``tests/conftest.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.db_servers import MARIADB_URL, POSTGRES_URL, server_url
from support.os_backends import skip_unless
from support.os_calls import bash

from agentgym_eppo.environments.db.env import DBEnv
from agentgym_eppo.environments.os.env import OSEnv

# ---------------------------------------------------------------------- OS


@pytest.fixture
def two_sandboxes() -> Iterator[tuple[Any, Any]]:
    skip_unless("bwrap")
    first = OSEnv(split="dev", prestart=False, command_timeout=10.0)
    second = OSEnv(split="dev", prestart=False, command_timeout=10.0)
    first.reset(options={"index": 0})
    second.reset(options={"index": 0})
    yield first, second
    first.close()
    second.close()


def _run(env: Any, script: str) -> str:
    observation, _, terminated, _, info = env.step(bash(script))
    assert not terminated and info["status"] == "running", observation
    return str(observation)


def test_a_sandbox_sees_none_of_another_episodes_files_or_processes(
    two_sandboxes: tuple[Any, Any],
) -> None:
    first, second = two_sandboxes
    marker = f"agentgym-secret-{uuid.uuid4().hex[:10]}"
    _run(first, f"echo {marker} > /root/{marker}; echo {marker} > /tmp/{marker}")
    _run(first, f"(exec -a {marker} sleep 300) &")
    count = (
        f"ls -A /root /tmp | grep -c {marker}; ps -eo args | grep -v grep | grep -c {marker}; "
        f"grep -rl {marker} /root /tmp /run 2>/dev/null | wc -l; "
        # argv[0] of every process it can see (the marked sleep's is the marker)
        f"for f in /proc/[0-9]*/cmdline; do head -zn1 $f 2>/dev/null; done "
        f"| tr '\\0' '\\n' | grep -cx {marker}"
    )
    # files in /root and /tmp, its process, files holding it, the process's argv[0]
    assert _run(first, count) == "The output of the OS:\n\n2\n1\n2\n1\n"
    assert _run(second, count) == "The output of the OS:\n\n0\n0\n0\n0\n"
    host = Path("/tmp") / marker
    assert not host.exists(), "a sandbox file reached the host's /tmp"


def test_a_sandbox_cannot_kill_another_episodes_processes(
    two_sandboxes: tuple[Any, Any],
) -> None:
    first, second = two_sandboxes
    _run(first, "echo alive > /root/state")
    observation, _, terminated, _, info = second.step(bash("kill -9 -1; pkill -9 -f bash"))
    if not terminated:  # the shell may notice its own death one command later
        observation, _, terminated, _, info = second.step(bash("echo still here"))
    # it killed its own machine: an agent status (docs/os.md), never the other's
    assert info["status"] in ("running", "agent_invalid_action"), observation
    assert _run(first, "cat /root/state") == "The output of the OS:\n\nalive\n"


@pytest.mark.parametrize(
    "attempt",
    [
        "mount -t proc proc /mnt",
        "mount --bind / /mnt",
        "umount -l /usr",
        "echo $$ > /sys/fs/cgroup/cgroup.procs",
        "nsenter -t 1 -m -u -n -i -p true",
        "chroot /proc/1/root true",
        "touch /usr/bin/{marker}",
        "touch /etc/{marker}",
        "ln -s /proc/1/root /root/hostroot && touch /root/hostroot/tmp/{marker}",
        "mknod /root/sda b 8 0 && dd if=/root/sda of=/dev/null bs=512 count=1",
        "echo 1 > /proc/sys/kernel/sysrq",
        "exec 3<>/dev/tcp/127.0.0.1/3306 && echo connected",
    ],
    ids=[
        "mount-proc",
        "bind-mount",
        "umount",
        "cgroup-move",
        "nsenter",
        "chroot-proc1",
        "write-usr",
        "write-etc",
        "symlink-proc1",
        "raw-disk",
        "sysctl",
        "network",
    ],
)
def test_escape_attempts_leave_the_host_untouched(
    two_sandboxes: tuple[Any, Any], attempt: str
) -> None:
    first, _ = two_sandboxes
    marker = f"agentgym-escape-{uuid.uuid4().hex[:10]}"
    sysrq_file = Path("/proc/sys/kernel/sysrq")
    sysrq = sysrq_file.read_text() if sysrq_file.exists() else None
    observation = _run(first, attempt.format(marker=marker))
    assert "connected" not in observation
    for path in (Path("/usr/bin") / marker, Path("/etc") / marker, Path("/tmp") / marker):
        assert not path.exists(), f"{attempt!r} wrote {path} on the host"
    assert (sysrq_file.read_text() if sysrq_file.exists() else None) == sysrq
    assert _run(first, "echo ok") == "The output of the OS:\n\nok\n"


# ---------------------------------------------------------------------- DB


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("mariadb", id="mariadb", marks=pytest.mark.mariadb),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def two_databases(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    url = {"sqlite": None, "mariadb": MARIADB_URL, "postgres": POSTGRES_URL}[request.param]
    kwargs: dict[str, Any] = {} if url is None else {"db_url": server_url(url)}
    kwargs["max_turns"] = 100  # room for every attack in one episode
    attacker, victim = DBEnv(split="dev", **kwargs), DBEnv(split="dev", **kwargs)
    attacker.reset(options={"index": 0})
    victim.reset(options={"index": 0})
    yield attacker, victim
    attacker.close()
    victim.close()


def _sql(env: Any, query: str) -> str:
    observation, _, terminated, _, info = env.step(
        {"name": "execute_sql", "arguments": {"query": query}}
    )
    assert not terminated and info["status"] == "running", observation
    return str(observation)


ATTACKS = {
    "mysql": [
        "SELECT * FROM {db}.{table}",
        "DELETE FROM {db}.{table}",
        "UPDATE {db}.{table} SET {column} = 'pwned'",
        "INSERT INTO {db}.{table} ({column}) VALUES ('pwned')",
        "DROP TABLE {db}.{table}",
        "ALTER TABLE {db}.{table} ADD COLUMN pwned TEXT",
        "CREATE TABLE {db}.pwned (a INT)",
        "RENAME TABLE {db}.{table} TO pwned_copy",
        "CREATE VIEW pwned_view AS SELECT * FROM {db}.{table}",
        "DROP DATABASE {db}",
        "USE {db}",
        "GRANT ALL PRIVILEGES ON *.* TO CURRENT_USER()",
        "SET PASSWORD FOR '{name}'@'%' = PASSWORD('pwned')",
        "KILL {connection}",
        "SELECT * FROM mysql.user",
    ],
    "postgres": [
        "SELECT * FROM {db}.{table}",
        "DELETE FROM {db}.{table}",
        "UPDATE {db}.{table} SET {column} = 'pwned'",
        "INSERT INTO {db}.{table} ({column}) VALUES ('pwned')",
        "DROP TABLE {db}.{table}",
        "ALTER TABLE {db}.{table} ADD COLUMN pwned TEXT",
        "CREATE TABLE {db}.pwned (a INT)",
        "DROP SCHEMA {db} CASCADE",
        "ALTER ROLE {name} PASSWORD 'pwned'",
        "SELECT pg_terminate_backend({connection})",
        "SELECT pg_cancel_backend({connection})",
        "CREATE ROLE pwned SUPERUSER",
    ],
    "sqlite": [
        "ATTACH DATABASE ':memory:' AS other",
        "ATTACH DATABASE '{scratch}/attach.db' AS other",
        "VACUUM INTO '{scratch}/vacuum.db'",
        "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0')",
        "PRAGMA writable_schema = ON",
    ],
}


def _identity(env: Any) -> dict[str, str]:
    """How the attacker would name the victim: its database/schema, user, connection."""
    dialect = env.backend.dialect
    table = env.record.tables[0]
    quote = env.backend.quote if dialect != "sqlite" else (lambda n: f'"{n}"')
    found = {"table": quote(table.name), "column": quote(table.columns[0])}
    if dialect == "mysql":
        found["connection"] = _sql(env, "SELECT CONNECTION_ID()").strip("[](),")
    elif dialect == "postgres":
        found["connection"] = _sql(env, "SELECT pg_backend_pid()").strip("[](),")
    if dialect != "sqlite":
        found["db"] = quote(env.database.name)
        found["name"] = env.database.name
    return found


def test_one_episode_can_neither_read_nor_change_another_episodes_tables(
    two_databases: tuple[Any, Any], tmp_path: Path
) -> None:
    attacker, victim = two_databases
    dialect = victim.backend.dialect
    table = victim.record.tables[0]
    before = victim.database.table_rows(table)
    victim_view = _sql(victim, f"SELECT * FROM {_identity(victim)['table']}")
    names = {**_identity(victim), "scratch": str(tmp_path)}
    for attack in ATTACKS[dialect]:
        observation = _sql(attacker, attack.format(**names))
        assert observation.startswith("Error") or observation in ("[(False,)]", "[(None,)]"), (
            f"{attack!r} gave {observation!r}"
        )
    if dialect == "mysql":
        listing = _sql(attacker, "SHOW DATABASES") + _sql(
            attacker, "SELECT schema_name FROM information_schema.schemata"
        )
        assert names["name"] not in listing
    assert victim.database.table_rows(table) == before
    assert _sql(victim, f"SELECT * FROM {names['table']}") == victim_view
    assert list(tmp_path.iterdir()) == []  # no file attached or written there


def test_what_one_episode_creates_does_not_appear_in_another(
    two_databases: tuple[Any, Any],
) -> None:
    attacker, victim = two_databases
    _sql(attacker, "CREATE TABLE planted (secret TEXT)")
    _sql(attacker, "INSERT INTO planted VALUES ('from the attacker')")
    assert _sql(attacker, "SELECT secret FROM planted") == "[('from the attacker',)]"
    assert _sql(victim, "SELECT secret FROM planted").startswith("Error")
