"""DB environment episodes per second: ours (SQLite, MariaDB, PostgreSQL) against the
AgentBench way of running the same episode on MariaDB.

An episode is ``reset`` + 3 steps: ``SELECT COUNT(*)`` on the task's table, the task's
gold SQL, and the committed answer with its scoring (the table hash for
INSERT/UPDATE/DELETE). The tasks are the first 40 of the shipped dev split (every kind).

The AgentBench way, as the issue describes it: per episode a new client connection,
``CREATE DATABASE``, ``CREATE TABLE`` with every column TEXT, the rows inserted one by one,
the statements run with ``fetchall`` and rendered as ``str(rows)`` cut at 800 characters,
the table hash asked of MySQL with AgentBench's ``md5(group_concat(...))`` query, then
``DROP DATABASE``. It uses PyMySQL without TLS on loopback, as ours does on MariaDB
(AgentBench's mysql-connector is not installed here).

Run: ``python -m benchmarks.run db``; writes ``benchmarks/results/db.md``.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pymysql
import sqlalchemy as sa

from agentgym_eppo.environments.db import DBEnv, DBTaskRecord, load_db_tasks
from agentgym_eppo.environments.db.evaluation import answers_match, expected_md5
from agentgym_eppo.environments.db.expert import answers_from_rows
from benchmarks.machine import cpu_model
from benchmarks.report import write_generated

MARIADB_URL = os.environ.get("AGENTGYM_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
POSTGRES_URL = os.environ.get(
    "AGENTGYM_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
RESULTS = Path(__file__).resolve().parent / "results" / "db.md"
TASKS = 40
ROUNDS = 3


def count_query(record: DBTaskRecord) -> str:
    return f"SELECT COUNT(*) FROM `{record.tables[0].name}`"


def ours(db_url: str | None) -> Callable[[list[DBTaskRecord]], int]:
    env = DBEnv(db_url=db_url, split="dev")

    def run(records: list[DBTaskRecord]) -> int:
        solved = 0
        for record in records:
            env.reset(options={"sample_id": record.sample_id})
            env.step({"name": "execute_sql", "arguments": {"query": count_query(record)}})
            env.step(env.expert_action())
            reward = env.step(env.expert_action())[1]
            solved += reward == 1.0
        return solved

    run.close = env.close  # type: ignore[attr-defined]
    return run


def agentbench_way(records: list[DBTaskRecord]) -> int:
    url = sa.engine.make_url(MARIADB_URL)
    solved = 0
    for record in records:
        connection = pymysql.connect(  # no TLS on loopback, as ours
            host=url.host,
            port=url.port or 3306,
            user=url.username,
            password=url.password or "",
            ssl_disabled=True,
        )
        cursor = connection.cursor()
        database = f"dbbench_{uuid.uuid4().hex}"
        cursor.execute(f"CREATE DATABASE {database}")
        connection.select_db(database)
        table = record.tables[0]
        name = table.name.replace("`", "``")
        columns = ",".join(f"`{c.replace('`', '``')}` TEXT" for c in table.columns)
        cursor.execute(f"CREATE TABLE IF NOT EXISTS `{name}` ({columns})")
        marks = ",".join(["%s"] * len(table.columns))
        for row in table.rows:
            cursor.execute(f"INSERT INTO `{name.replace('%', '%%')}` VALUES ({marks})", row)
        connection.commit()
        rows: Any = ()
        for statement in (count_query(record), record.gold_sql[0]):
            cursor.execute(statement)
            rows = cursor.fetchall()
            str(list(rows))[:800]
            connection.commit()
        if record.is_mutation:
            quoted = ",".join(f"`{c.replace('`', '``')}`" for c in table.columns)
            cursor.execute(
                "select md5(group_concat(rowhash order by rowhash)) as hash from( SELECT "
                f"substring(MD5(CONCAT_WS(',', {quoted})), 1, 5) AS rowhash FROM `{name}`) as sub"
            )
            correct = cursor.fetchone()[0] == expected_md5(record.answer_md5 or "")
        else:
            correct = answers_match(answers_from_rows(rows), list(record.label))
        solved += correct
        cursor.execute(f"DROP DATABASE IF EXISTS {database}")
        connection.close()
    return solved


def measure(run: Callable[[list[DBTaskRecord]], int], records: list[DBTaskRecord]) -> dict:
    run(records[:3])  # warm-up: imports, pools, server caches
    rates = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        solved = run(records)
        rates.append(len(records) / (time.perf_counter() - start))
        if solved != len(records):
            raise RuntimeError(f"only {solved}/{len(records)} episodes solved")
    return {"median": statistics.median(rates), "rates": rates}


def server_version(url: str) -> str:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        version = connection.exec_driver_sql("SELECT version()").scalar()
    engine.dispose()
    return str(version).split(" on ")[0]


def main() -> None:
    records = list(load_db_tasks(None, "dev"))[:TASKS]
    kinds = sorted({record.task_type for record in records})
    results: dict[str, dict] = {}
    for label, url in (
        ("ours, SQLite in memory", None),
        ("ours, MariaDB (least-privilege user per episode)", MARIADB_URL),
        ("ours, PostgreSQL (schema + role per episode)", POSTGRES_URL),
    ):
        run = ours(url)
        results[label] = measure(run, records)
        run.close()  # type: ignore[attr-defined]
        print(f"{label}: {results[label]['median']:.1f} episodes/s", flush=True)
    peer = "AgentBench way, MariaDB (new DB + row-by-row inserts per episode)"
    results[peer] = measure(agentbench_way, records)
    print(f"{peer}: {results[peer]['median']:.1f} episodes/s", flush=True)

    baseline = results[peer]["median"]
    lines = [
        "# DB environment: episodes per second",
        "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {cpu_model()}, {os.cpu_count()} cores "
        "(shared with other jobs while measuring), "
        f"Python {platform.python_version()}, SQLite {__import__('sqlite3').sqlite_version}",
        f"- Servers on loopback: {server_version(MARIADB_URL)}; {server_version(POSTGRES_URL)}",
        f"- Episode: reset + `SELECT COUNT(*)` + gold SQL + commit with scoring; the first "
        f"{TASKS} tasks of the shipped dev split ({', '.join(kinds)}); all solved in every run.",
        f"- {ROUNDS} rounds of {TASKS} episodes after a warm-up; median of the rounds.",
        "",
        "| backend | episodes/s (median) | rounds | vs AgentBench way |",
        "|---|---:|---|---:|",
    ]
    for label, result in results.items():
        rounds = ", ".join(f"{rate:.1f}" for rate in result["rates"])
        lines.append(
            f"| {label} | {result['median']:.1f} | {rounds} | {result['median'] / baseline:.2f}x |"
        )
    lines += [
        "",
        "Ours on a server creates a least-privilege user/role per episode (the AgentBench "
        "way runs as root), loads the rows in one batch, reads only what the 800-character "
        "observation shows, and drops a finished episode's database in a background thread "
        "while the next episode starts. Most of a server episode is the server's own file "
        "work for `CREATE TABLE` and `DROP DATABASE` (tens of ms each here).",
        "",
        "Reproduce: `python -m benchmarks.run db` (servers from `AGENTGYM_MARIADB_URL`, "
        "`AGENTGYM_POSTGRES_URL`).",
        "",
    ]
    write_generated(RESULTS, "\n".join(lines))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
