"""Questions over a generated table, each with its gold SQL in MySQL's dialect.

:data:`KINDS` is the table of question kinds: each kind's builder draws one question
(lookup, counting, multi-condition comparison, SUM/AVG/MAX/MIN, ranking, group-by,
INSERT, UPDATE, DELETE) in one of several phrasings, and its weight is how often the
generator picks it. :func:`draw_question` picks a kind by weight and builds its
question; here one kind's builder on a drawn table:

>>> import random
>>> from agentgym_eppo.environments.db.schema import DOMAINS
>>> rng = random.Random(0)
>>> domain = DOMAINS[0]
>>> table = DrawnTable(rng, domain, domain.table_names[0], domain.draw_rows(rng))
>>> draft = KINDS["lookup"].build(table)
>>> (draft.task_type, draft.sql.startswith("SELECT "))
('other', True)

Numbers are stored as text (every column is TEXT, as in AgentBench), so the gold SQL
compares them through ``CAST(... AS DECIMAL(20, 4))``, which SQLite, MariaDB and
PostgreSQL all evaluate numerically.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from .naming import SYLLABLES
from .schema import Column, Domain


def q(name: str) -> str:
    """A MySQL identifier: backquoted, as AgentBench's gold SQL writes it."""
    return "`" + name.replace("`", "``") + "`"


def lit(value: str) -> str:
    """A SQL string literal valid in MySQL, SQLite and PostgreSQL (no backslashes)."""
    return "'" + value.replace("'", "''") + "'"


def num(column: Column) -> str:
    """The column's text compared as a number."""
    return f"CAST({q(column.name)} AS DECIMAL(20, 4))"


@dataclass
class Draft:
    """A task before verification: its text, type and gold SQL."""

    task_type: str
    description: str
    sql: str


class DrawnTable:
    """A drawn table and the RNG its questions draw from: values, thresholds, phrasings."""

    def __init__(self, rng: random.Random, domain: Domain, name: str, rows: list[list[str]]):
        self.rng = rng
        self.domain = domain
        self.name = name
        self.rows = rows
        self.columns = (domain.key, *domain.columns)
        self.numeric = [c for c in domain.columns if c.numeric]
        self.categorical = [c for c in domain.columns if not c.numeric]

    def value(self, column: Column, row: list[str] | None = None) -> str:
        row = row if row is not None else self.rng.choice(self.rows)
        return row[self.columns.index(column)]

    def threshold(self, column: Column) -> str:
        values = sorted(float(self.value(column, row)) for row in self.rows)
        middle = values[len(values) // 4 : max(len(values) * 3 // 4, len(values) // 4 + 1)]
        return f"{self.rng.choice(middle):g}"

    def say(self, *phrasings: str) -> str:
        return self.rng.choice(phrasings)


# ---------------------------------------------------------------------- queries


def lookup(t: DrawnTable) -> Draft:
    key, column = t.domain.key, t.rng.choice(t.domain.columns)
    row = t.rng.choice(t.rows)
    k = t.value(key, row)
    text = t.say(
        f"What is the {column.phrase} of the {t.domain.entity} {k}?",
        f"Find the {column.phrase} listed for {k} in the {t.name} table.",
        f"Which {column.phrase} does {k} have?",
    )
    sql = f"SELECT {q(column.name)} FROM {q(t.name)} WHERE {q(key.name)} = {lit(k)}"
    return Draft("other", text, sql)


def counting(t: DrawnTable) -> Draft:
    cat = t.rng.choice(t.categorical)
    v = t.value(cat)
    if t.numeric and t.rng.random() < 0.5:
        n = t.rng.choice(t.numeric)
        x = t.threshold(n)
        op, word = t.rng.choice(((">", "more than"), ("<", "less than")))
        text = t.say(
            f"How many {t.domain.entities} with {cat.phrase} {v} have {word} {x} {n.phrase}?",
            f"Count the {t.domain.entities} whose {cat.phrase} is {v} and whose "
            f"{n.phrase} is {word} {x}.",
        )
        where = f"{q(cat.name)} = {lit(v)} AND {num(n)} {op} {x}"
    else:
        text = t.say(
            f"How many {t.domain.entities} have {v} as their {cat.phrase}?",
            f"Count the {t.domain.entities} in the {t.name} table whose {cat.phrase} is {v}.",
        )
        where = f"{q(cat.name)} = {lit(v)}"
    return Draft("counting", text, f"SELECT COUNT(*) FROM {q(t.name)} WHERE {where}")


def comparison(t: DrawnTable) -> Draft:
    n = t.rng.choice(t.numeric)
    x = t.threshold(n)
    op, word = t.rng.choice(((">", "greater than"), ("<", "less than")))
    key = t.domain.key
    where = f"{num(n)} {op} {x}"
    condition = f"a {n.phrase} {word} {x}"
    if t.categorical and t.rng.random() < 0.6:
        cat = t.rng.choice(t.categorical)
        v = t.value(cat)
        where += f" AND {q(cat.name)} = {lit(v)}"
        condition += f" and {v} as {cat.phrase}"
    text = t.say(
        f"Which {t.domain.entities} have {condition}?",
        f"List every {t.domain.entity} with {condition}.",
    )
    return Draft("comparison", text, f"SELECT {q(key.name)} FROM {q(t.name)} WHERE {where}")


def aggregation(t: DrawnTable) -> Draft:
    n = t.rng.choice(t.numeric)
    function, words = t.rng.choice(
        (("SUM", "total"), ("AVG", "average"), ("MAX", "highest"), ("MIN", "lowest"))
    )
    where, scope = "", f"all {t.domain.entities}"
    if t.categorical and t.rng.random() < 0.7:
        cat = t.rng.choice(t.categorical)
        v = t.value(cat)
        where = f" WHERE {q(cat.name)} = {lit(v)}"
        scope = f"the {t.domain.entities} whose {cat.phrase} is {v}"
    text = t.say(
        f"What is the {words} {n.phrase} of {scope}?",
        f"Compute the {words} {n.phrase} over {scope} in the {t.name} table.",
    )
    sql = f"SELECT {function}({num(n)}) FROM {q(t.name)}{where}"
    return Draft(f"aggregation-{function}", text, sql)


def ranking(t: DrawnTable) -> Draft:
    n = t.rng.choice(t.numeric)
    key = t.domain.key
    if t.categorical and t.rng.random() < 0.35:
        cat = t.rng.choice(t.categorical)
        text = t.say(
            f"Which {cat.phrase} appears most often among the {t.domain.entities}?",
            f"Group the {t.domain.entities} by {cat.phrase}: which {cat.phrase} has the most rows?",
        )
        sql = (
            f"SELECT {q(cat.name)} FROM {q(t.name)} GROUP BY {q(cat.name)} "
            f"ORDER BY COUNT(*) DESC LIMIT 1"
        )
        return Draft("ranking", text, sql)
    order, word = t.rng.choice((("DESC", "highest"), ("ASC", "lowest")))
    limit = t.rng.choice((1, 1, 2, 3))
    if limit == 1:
        text = t.say(
            f"Which {t.domain.entity} has the {word} {n.phrase}?",
            f"Name the {t.domain.entity} with the {word} {n.phrase}.",
        )
    else:
        text = f"List the {limit} {t.domain.entities} with the {word} {n.phrase}."
    sql = f"SELECT {q(key.name)} FROM {q(t.name)} ORDER BY {num(n)} {order} LIMIT {limit}"
    return Draft("ranking", text, sql)


# ---------------------------------------------------------------------- mutations


def insert(t: DrawnTable) -> Draft:
    existing = {row[0] for row in t.rows}
    new = [column.draw(t.rng) for column in t.columns]
    if new[0] in existing:
        new[0] = f"{new[0]} {t.rng.choice(SYLLABLES).capitalize()}"
    details = ", ".join(f"{c.phrase} {v}" for c, v in zip(t.columns[1:], new[1:], strict=True))
    text = t.say(
        f"Add the {t.domain.entity} {new[0]} to the {t.name} table with {details}.",
        f"Record a new {t.domain.entity}, {new[0]}: {details}.",
    )
    columns = ", ".join(q(c.name) for c in t.columns)
    values = ", ".join(lit(v) for v in new)
    return Draft("INSERT", text, f"INSERT INTO {q(t.name)} ({columns}) VALUES ({values})")


def update(t: DrawnTable) -> Draft:
    column = t.rng.choice(t.domain.columns)
    new = column.draw(t.rng)
    if t.rng.random() < 0.6:
        k = t.value(t.domain.key)
        where = f"{q(t.domain.key.name)} = {lit(k)}"
        scope = f"the {t.domain.entity} {k}"
    else:
        cat = t.rng.choice(t.categorical)
        v = t.value(cat)
        where = f"{q(cat.name)} = {lit(v)}"
        scope = f"every {t.domain.entity} whose {cat.phrase} is {v}"
    text = t.say(
        f"Change the {column.phrase} of {scope} to {new}.",
        f"Set {column.phrase} to {new} for {scope} in the {t.name} table.",
    )
    sql = f"UPDATE {q(t.name)} SET {q(column.name)} = {lit(new)} WHERE {where}"
    return Draft("UPDATE", text, sql)


def delete(t: DrawnTable) -> Draft:
    if t.rng.random() < 0.5:
        k = t.value(t.domain.key)
        where = f"{q(t.domain.key.name)} = {lit(k)}"
        scope = f"the {t.domain.entity} {k}"
    else:
        n = t.rng.choice(t.numeric)
        x = t.threshold(n)
        op, word = t.rng.choice(((">", "above"), ("<", "below")))
        where = f"{num(n)} {op} {x}"
        scope = f"every {t.domain.entity} with a {n.phrase} {word} {x}"
    text = t.say(
        f"Delete {scope} from the {t.name} table.",
        f"Remove {scope}.",
    )
    return Draft("DELETE", text, f"DELETE FROM {q(t.name)} WHERE {where}")


@dataclass(frozen=True)
class Kind:
    """A question kind: how to build one, and how often the generator picks it."""

    build: Callable[[DrawnTable], Draft]
    weight: float


KINDS: dict[str, Kind] = {
    "lookup": Kind(lookup, 0.14),
    "counting": Kind(counting, 0.12),
    "comparison": Kind(comparison, 0.12),
    "aggregation": Kind(aggregation, 0.14),
    "ranking": Kind(ranking, 0.12),
    "insert": Kind(insert, 0.12),
    "update": Kind(update, 0.12),
    "delete": Kind(delete, 0.12),
}
"""Every question kind, in the order the weighted draw sees them (the order is part of
what a seed gives)."""


def draw_question(table: DrawnTable) -> Draft:
    """Pick a kind by weight with the table's RNG and build its question."""
    [kind] = table.rng.choices(list(KINDS.values()), [kind.weight for kind in KINDS.values()])
    return kind.build(table)
