"""Run AgentBench's MySQL-dialect SQL on SQLite and PostgreSQL.

AgentBench tells the agent that it operates a MySQL database, so agents write MySQL:
backquoted identifiers (some starting with a digit), backslash escapes in string
literals, ``CONCAT``, ``SHOW TABLES``, ``DESCRIBE t``. :func:`translate` rewrites one
statement for the target with ``sqlglot`` (read ``mysql``), and maps the introspection
statements sqlglot does not translate. A statement sqlglot cannot parse is passed on
unchanged, so that the database itself answers with its own error message (or runs a
statement in its native dialect). On PostgreSQL every identifier is quoted, so names
keep the table's spelling as on MySQL; column names stay case-sensitive there.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot.errors import SqlglotError

_SHOW_TABLES = re.compile(r"^\s*SHOW\s+(?:FULL\s+)?TABLES\s*;?\s*$", re.IGNORECASE)
_DESCRIBE = re.compile(
    r"^\s*(?:DESCRIBE|DESC|EXPLAIN|SHOW\s+(?:FULL\s+)?(?:COLUMNS|FIELDS)\s+(?:FROM|IN))\s+"
    r"(?P<name>`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|[\w$.]+)\s*;?\s*$",
    re.IGNORECASE,
)


class MultipleStatementsError(ValueError):
    """The agent sent more than one statement in one ``execute_sql`` call."""


def _unquote(name: str) -> str:
    if name[:1] == "`" and name[-1:] == "`":
        return name[1:-1].replace("``", "`")
    if name[:1] == '"' and name[-1:] == '"':
        return name[1:-1].replace('""', '"')
    return name


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def translate(sql: str, target: str) -> str:
    """``sql`` (MySQL dialect) as one statement for ``target`` (``sqlite`` or ``postgres``).

    Raises :class:`MultipleStatementsError` when ``sql`` holds several statements.
    """
    if _SHOW_TABLES.match(sql):
        if target == "sqlite":
            return "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        return (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() ORDER BY table_name"
        )
    described = _DESCRIBE.match(sql)
    if described:
        table = _literal(_unquote(described.group("name")))
        if target == "sqlite":
            return f"SELECT name, type FROM pragma_table_info({table})"
        return (
            "SELECT column_name, data_type FROM information_schema.columns "
            f"WHERE table_schema = current_schema() AND table_name = {table} "
            "ORDER BY ordinal_position"
        )
    try:
        # PostgreSQL folds unquoted names to lower case while MySQL keeps the table's
        # spelling, so every identifier is quoted there.
        statements = [
            s
            for s in sqlglot.transpile(
                sql, read="mysql", write=target, identify=target == "postgres"
            )
            if s.strip()
        ]
    except (SqlglotError, RecursionError, ValueError):
        return sql.strip().rstrip(";")
    if len(statements) > 1:
        raise MultipleStatementsError(
            f"found {len(statements)} SQL statements; execute exactly one statement per call"
        )
    return statements[0] if statements else sql.strip().rstrip(";")
