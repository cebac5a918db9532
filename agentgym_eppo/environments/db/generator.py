"""The shipped DB task set, generated Self-Instruct-style from table schemas and templates.

Each task draws a domain (a table schema with typed value pools), fills a fresh table
with random rows, picks a question template (lookup, counting, multi-condition
comparison, SUM/AVG/MAX/MIN, ranking, group-by, INSERT, UPDATE, DELETE) with one of
several phrasings, and writes the gold SQL in MySQL's dialect. The gold SQL is then run
on SQLite through the environment's own backend: a query's result becomes its label, a
mutation's table hash its ``answer_md5``. Tasks whose answer is empty, tied, too long,
or whose mutation changes nothing are dropped and redrawn, so every shipped task is
solvable and unambiguous.

Numbers are stored as text (every column is TEXT, as in AgentBench), so the gold SQL
compares them through ``CAST(... AS DECIMAL(20, 4))``, which SQLite, MariaDB and
PostgreSQL all evaluate numerically.

``python -m agentgym_eppo.environments.db.generator`` rewrites
``agentgym_eppo/assets/db/{train,dev,test}.jsonl.gz``; the same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_eppo.core import asset_path, write_jsonl_gz

from .backends import SQLiteBackend
from .evaluation import tables_hash
from .expert import answers_from_rows
from .tasks import SHIPPED_FILES, TableSpec

SPLIT_SIZES = {"train": 1000, "dev": 200, "test": 200}
DEFAULT_SEED = 20240611
MAX_ANSWERS = 8

_SYLLABLES = [
    "ar",
    "ben",
    "cor",
    "dal",
    "el",
    "fen",
    "gar",
    "hal",
    "in",
    "jor",
    "kel",
    "lan",
    "mor",
    "nor",
    "or",
    "pel",
    "quin",
    "ros",
    "sal",
    "tor",
    "ul",
    "ven",
    "wil",
    "yar",
    "zen",
]
_FIRST_NAMES = [
    "Ada",
    "Bruno",
    "Chen",
    "Dara",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Mateo",
    "Nora",
    "Omar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tara",
    "Umar",
    "Vera",
    "Wei",
    "Yusuf",
    "Zoe",
]
_LAST_NAMES = [
    "Abbott",
    "Barros",
    "Castillo",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Larsen",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinn",
    "Rossi",
    "Silva",
    "Tanaka",
    "Urban",
    "Volkov",
    "Weber",
    "Young",
]


@dataclass(frozen=True)
class Column:
    """A column: its header, how questions name it, and how to draw a value."""

    name: str
    phrase: str
    draw: Callable[[random.Random], str]
    numeric: bool = False


@dataclass(frozen=True)
class Domain:
    """A table schema: names it may carry, what a row is, its key and other columns."""

    table_names: tuple[str, ...]
    entity: str
    entities: str
    key: Column
    columns: tuple[Column, ...]


def _pick(values: str) -> Callable[[random.Random], str]:
    pool = values.split("|")
    return lambda rng: rng.choice(pool)


def _integer(low: int, high: int) -> Callable[[random.Random], str]:
    return lambda rng: str(rng.randint(low, high))


def _decimal(low: float, high: float, places: int = 1) -> Callable[[random.Random], str]:
    return lambda rng: f"{rng.uniform(low, high):.{places}f}"


def _person(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}"


def _coined(suffixes: str) -> Callable[[random.Random], str]:
    pool = suffixes.split("|")

    def draw(rng: random.Random) -> str:
        stem = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        return f"{stem} {rng.choice(pool)}".strip()

    return draw


def _num(name: str, phrase: str, draw: Callable[[random.Random], str]) -> Column:
    return Column(name, phrase, draw, numeric=True)


DOMAINS: tuple[Domain, ...] = (
    Domain(
        ("Football League Standings", "League Table", "Club Season Records"),
        "club",
        "clubs",
        Column("Club", "club", _coined("United|City|Rovers|Athletic|FC|Wanderers")),
        (
            Column("City", "city", _pick("Leeds|Porto|Lyon|Turin|Ghent|Bremen|Malmo|Cork")),
            Column("Stadium", "stadium", _coined("Park|Arena|Ground|Stadium")),
            _num("Played", "games played", _integer(30, 38)),
            _num("Won", "wins", _integer(3, 28)),
            _num("Lost", "losses", _integer(2, 25)),
            _num("Points", "points", _integer(15, 90)),
        ),
    ),
    Domain(
        ("Olympic Medal Table", "Medal Count", "Games Medal Standings"),
        "nation",
        "nations",
        Column("Nation", "nation", _coined("Republic|Islands|Federation|")),
        (
            Column("Continent", "continent", _pick("Europe|Asia|Africa|Oceania|Americas")),
            _num("Gold", "gold medals", _integer(0, 40)),
            _num("Silver", "silver medals", _integer(0, 40)),
            _num("Bronze", "bronze medals", _integer(0, 40)),
            _num("Athletes", "athletes sent", _integer(5, 600)),
        ),
    ),
    Domain(
        ("Employee Directory", "Staff Records", "Company Employees"),
        "employee",
        "employees",
        Column("Name", "name", _person),
        (
            Column("Department", "department", _pick("Sales|Finance|Legal|Research|Support")),
            Column("Title", "job title", _pick("Analyst|Manager|Engineer|Clerk|Director")),
            Column("Office", "office", _pick("Berlin|Austin|Osaka|Nairobi|Lima|Oslo")),
            _num("Salary", "salary", _integer(32000, 180000)),
            _num("Hire Year", "hire year", _integer(1995, 2023)),
        ),
    ),
    Domain(
        ("Film Releases", "Movie Box Office", "Cinema Catalogue"),
        "film",
        "films",
        Column("Title", "title", _coined("Rising|Returns|Forever|Protocol|Legacy|")),
        (
            Column("Director", "director", _person),
            Column("Genre", "genre", _pick("Drama|Comedy|Thriller|Horror|Animation|Western")),
            _num("Year", "release year", _integer(1970, 2023)),
            _num("Box Office (millions)", "box office in millions", _decimal(0.5, 900.0)),
            _num("Rating", "rating", _decimal(1.0, 9.9)),
        ),
    ),
    Domain(
        ("Mountain Peaks", "Highest Summits", "Peak Register"),
        "peak",
        "peaks",
        Column("Peak", "peak", _coined("Peak|Horn|Spitze|Mount|Dome")),
        (
            Column("Country", "country", _pick("Nepal|Chile|Peru|Italy|Canada|Kenya|Norway")),
            Column("Range", "mountain range", _pick("Andes|Alps|Rockies|Himalaya|Atlas")),
            _num("Height (m)", "height in metres", _integer(1200, 8800)),
            _num("First Ascent", "year of the first ascent", _integer(1786, 1990)),
            _num("Prominence (m)", "prominence in metres", _integer(300, 4000)),
        ),
    ),
    Domain(
        ("Book Catalogue", "Library Holdings", "Publisher Backlist"),
        "book",
        "books",
        Column("Title", "title", _coined("Chronicles|Letters|Gardens|Tides|Notebook|")),
        (
            Column("Author", "author", _person),
            Column("Genre", "genre", _pick("Mystery|Poetry|History|Science|Fantasy|Memoir")),
            Column("Publisher", "publisher", _pick("Harbor|Lantern|Quill|Meridian|Atlas")),
            _num("Pages", "page count", _integer(90, 1200)),
            _num("Year", "publication year", _integer(1900, 2023)),
        ),
    ),
    Domain(
        ("Airport Traffic", "Busiest Airports", "Airport Statistics"),
        "airport",
        "airports",
        Column("Airport", "airport", _coined("International|Regional|Field|Airport")),
        (
            Column("Country", "country", _pick("Brazil|Japan|Spain|Egypt|India|Mexico")),
            _num("Passengers", "passenger count", _integer(150000, 90000000)),
            _num("Runways", "number of runways", _integer(1, 6)),
            _num("Rank", "rank", _integer(1, 200)),
            _num("Opened", "opening year", _integer(1920, 2015)),
        ),
    ),
    Domain(
        ("Election Results", "District Vote Counts", "Constituency Results"),
        "candidate",
        "candidates",
        Column("Candidate", "candidate", _person),
        (
            Column("Party", "party", _pick("Green|Labour|Liberal|Conservative|Independent")),
            Column("District", "district", _pick("North|South|East|West|Central|Harbour")),
            _num("Votes", "votes", _integer(150, 60000)),
            _num("Share (%)", "vote share in percent", _decimal(0.5, 70.0)),
        ),
    ),
    Domain(
        ("Car Models", "Vehicle Specifications", "Automobile Catalogue"),
        "model",
        "models",
        Column("Model", "model", _coined("GT|Sport|Touring|Hybrid|S")),
        (
            Column("Maker", "maker", _pick("Aurora|Belmont|Corsa|Draco|Everline|Falcon")),
            Column("Body", "body style", _pick("Sedan|Coupe|Wagon|SUV|Hatchback")),
            _num("Year", "model year", _integer(1990, 2024)),
            _num("Horsepower", "horsepower", _integer(70, 700)),
            _num("Price (USD)", "price in dollars", _integer(9000, 250000)),
        ),
    ),
    Domain(
        ("University Rankings", "College Profiles", "Higher Education Table"),
        "university",
        "universities",
        Column("University", "university", _coined("University|College|Institute")),
        (
            Column("Country", "country", _pick("Germany|Korea|Ghana|Chile|Poland|Canada")),
            Column("Type", "type", _pick("Public|Private")),
            _num("Students", "student count", _integer(1200, 80000)),
            _num("Founded", "founding year", _integer(1088, 2010)),
            _num("Score", "ranking score", _decimal(20.0, 99.9)),
        ),
    ),
    Domain(
        ("Music Albums", "Album Discography", "Record Sales"),
        "album",
        "albums",
        Column("Album", "album", _coined("Nights|Echoes|Sessions|Blue|Live|")),
        (
            Column("Artist", "artist", _person),
            Column("Label", "record label", _pick("Sunset|Polar|Vinyl House|Ember|Northbeat")),
            _num("Year", "release year", _integer(1960, 2023)),
            _num("Tracks", "number of tracks", _integer(6, 24)),
            _num("Sales", "copies sold", _integer(5000, 9000000)),
        ),
    ),
    Domain(
        ("Weather Stations", "Climate Observations", "Station Climate Normals"),
        "station",
        "stations",
        Column("Station", "station", _coined("Ridge|Point|Valley|Harbor|Observatory")),
        (
            Column("Region", "region", _pick("Coastal|Highland|Desert|Plains|Arctic")),
            _num("Elevation (m)", "elevation in metres", _integer(0, 4200)),
            _num("Mean Temp (C)", "mean temperature", _decimal(-15.0, 30.0)),
            _num("Rainfall (mm)", "annual rainfall in millimetres", _integer(20, 3500)),
        ),
    ),
    Domain(
        ("Space Missions", "Launch Log", "Mission Archive"),
        "mission",
        "missions",
        Column("Mission", "mission", _coined("I|II|III|Explorer|Pathfinder|Voyager")),
        (
            Column("Agency", "agency", _pick("NASA|ESA|JAXA|ISRO|CNSA|Roscosmos")),
            Column("Outcome", "outcome", _pick("Success|Partial|Failure")),
            _num("Launch Year", "launch year", _integer(1958, 2024)),
            _num("Crew", "crew size", _integer(0, 7)),
            _num("Duration (days)", "duration in days", _integer(1, 900)),
        ),
    ),
    Domain(
        ("Train Stations", "Rail Network Stations", "Metro Stops"),
        "station",
        "stations",
        Column("Station", "station", _coined("Central|Junction|Square|Road|Gate")),
        (
            Column("Line", "line", _pick("Red|Blue|Green|Yellow|Circle|Express")),
            _num("Zone", "fare zone", _integer(1, 6)),
            _num("Opened", "opening year", _integer(1863, 2022)),
            _num("Platforms", "number of platforms", _integer(1, 12)),
            _num("Daily Riders", "daily riders", _integer(300, 250000)),
        ),
    ),
    Domain(
        ("Restaurant Inspections", "Dining Guide", "Food Safety Scores"),
        "restaurant",
        "restaurants",
        Column("Restaurant", "restaurant", _coined("Bistro|Kitchen|Grill|Diner|Cafe|House")),
        (
            Column("Cuisine", "cuisine", _pick("Thai|Italian|Mexican|Ethiopian|Korean|French")),
            Column("Borough", "borough", _pick("Riverside|Oldtown|Hillcrest|Docklands")),
            _num("Score", "inspection score", _integer(50, 100)),
            _num("Seats", "number of seats", _integer(10, 250)),
            _num("Price Level", "price level", _integer(1, 4)),
        ),
    ),
    Domain(
        ("Tennis Tournament Winners", "Tournament Finals", "Championship Results"),
        "final",
        "finals",
        Column("Tournament", "tournament", _coined("Open|Masters|Classic|Cup|Championships")),
        (
            Column("Winner", "winner", _person),
            Column("Surface", "surface", _pick("Clay|Grass|Hard|Carpet")),
            _num("Year", "year", _integer(1968, 2024)),
            _num("Prize Money", "prize money", _integer(50000, 4000000)),
            _num("Sets Played", "sets played", _integer(2, 5)),
        ),
    ),
)


def q(name: str) -> str:
    """A MySQL identifier: backquoted, as AgentBench's gold SQL writes it."""
    return "`" + name.replace("`", "``") + "`"


def lit(value: str) -> str:
    """A SQL string literal valid in MySQL, SQLite and PostgreSQL (no backslashes)."""
    return "'" + value.replace("'", "''") + "'"


def num(column: Column) -> str:
    return f"CAST({q(column.name)} AS DECIMAL(20, 4))"


@dataclass
class Draft:
    """A task before verification: its text, type and gold SQL."""

    task_type: str
    description: str
    sql: str


class TaskWriter:
    """Draws one task from a domain and a table; returns None when the draw is unusable."""

    def __init__(self, rng: random.Random, domain: Domain, table: str, rows: list[list[str]]):
        self.rng = rng
        self.domain = domain
        self.table = table
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

    # ------------------------------------------------------------------ queries

    def lookup(self) -> Draft:
        key, column = self.domain.key, self.rng.choice(self.domain.columns)
        row = self.rng.choice(self.rows)
        k = self.value(key, row)
        text = self.say(
            f"What is the {column.phrase} of the {self.domain.entity} {k}?",
            f"Find the {column.phrase} listed for {k} in the {self.table} table.",
            f"Which {column.phrase} does {k} have?",
        )
        sql = f"SELECT {q(column.name)} FROM {q(self.table)} WHERE {q(key.name)} = {lit(k)}"
        return Draft("other", text, sql)

    def counting(self) -> Draft:
        cat = self.rng.choice(self.categorical)
        v = self.value(cat)
        if self.numeric and self.rng.random() < 0.5:
            n = self.rng.choice(self.numeric)
            x = self.threshold(n)
            op, word = self.rng.choice(((">", "more than"), ("<", "less than")))
            text = self.say(
                f"How many {self.domain.entities} with {cat.phrase} {v} have {word} {x} {n.phrase}?",
                f"Count the {self.domain.entities} whose {cat.phrase} is {v} and whose "
                f"{n.phrase} is {word} {x}.",
            )
            where = f"{q(cat.name)} = {lit(v)} AND {num(n)} {op} {x}"
        else:
            text = self.say(
                f"How many {self.domain.entities} have {v} as their {cat.phrase}?",
                f"Count the {self.domain.entities} in the {self.table} table whose {cat.phrase} "
                f"is {v}.",
            )
            where = f"{q(cat.name)} = {lit(v)}"
        return Draft("counting", text, f"SELECT COUNT(*) FROM {q(self.table)} WHERE {where}")

    def comparison(self) -> Draft:
        n = self.rng.choice(self.numeric)
        x = self.threshold(n)
        op, word = self.rng.choice(((">", "greater than"), ("<", "less than")))
        key = self.domain.key
        where = f"{num(n)} {op} {x}"
        condition = f"a {n.phrase} {word} {x}"
        if self.categorical and self.rng.random() < 0.6:
            cat = self.rng.choice(self.categorical)
            v = self.value(cat)
            where += f" AND {q(cat.name)} = {lit(v)}"
            condition += f" and {v} as {cat.phrase}"
        text = self.say(
            f"Which {self.domain.entities} have {condition}?",
            f"List every {self.domain.entity} with {condition}.",
        )
        return Draft("comparison", text, f"SELECT {q(key.name)} FROM {q(self.table)} WHERE {where}")

    def aggregation(self) -> Draft:
        n = self.rng.choice(self.numeric)
        function, words = self.rng.choice(
            (("SUM", "total"), ("AVG", "average"), ("MAX", "highest"), ("MIN", "lowest"))
        )
        where, scope = "", f"all {self.domain.entities}"
        if self.categorical and self.rng.random() < 0.7:
            cat = self.rng.choice(self.categorical)
            v = self.value(cat)
            where = f" WHERE {q(cat.name)} = {lit(v)}"
            scope = f"the {self.domain.entities} whose {cat.phrase} is {v}"
        text = self.say(
            f"What is the {words} {n.phrase} of {scope}?",
            f"Compute the {words} {n.phrase} over {scope} in the {self.table} table.",
        )
        sql = f"SELECT {function}({num(n)}) FROM {q(self.table)}{where}"
        return Draft(f"aggregation-{function}", text, sql)

    def ranking(self) -> Draft:
        n = self.rng.choice(self.numeric)
        key = self.domain.key
        if self.categorical and self.rng.random() < 0.35:
            cat = self.rng.choice(self.categorical)
            text = self.say(
                f"Which {cat.phrase} appears most often among the {self.domain.entities}?",
                f"Group the {self.domain.entities} by {cat.phrase}: which {cat.phrase} has the "
                "most rows?",
            )
            sql = (
                f"SELECT {q(cat.name)} FROM {q(self.table)} GROUP BY {q(cat.name)} "
                f"ORDER BY COUNT(*) DESC LIMIT 1"
            )
            return Draft("ranking", text, sql)
        order, word = self.rng.choice((("DESC", "highest"), ("ASC", "lowest")))
        limit = self.rng.choice((1, 1, 2, 3))
        if limit == 1:
            text = self.say(
                f"Which {self.domain.entity} has the {word} {n.phrase}?",
                f"Name the {self.domain.entity} with the {word} {n.phrase}.",
            )
        else:
            text = f"List the {limit} {self.domain.entities} with the {word} {n.phrase}."
        sql = f"SELECT {q(key.name)} FROM {q(self.table)} ORDER BY {num(n)} {order} LIMIT {limit}"
        return Draft("ranking", text, sql)

    # ------------------------------------------------------------------ mutations

    def insert(self) -> Draft:
        existing = {row[0] for row in self.rows}
        new = [column.draw(self.rng) for column in self.columns]
        if new[0] in existing:
            new[0] = f"{new[0]} {self.rng.choice(_SYLLABLES).capitalize()}"
        details = ", ".join(
            f"{c.phrase} {v}" for c, v in zip(self.columns[1:], new[1:], strict=True)
        )
        text = self.say(
            f"Add the {self.domain.entity} {new[0]} to the {self.table} table with {details}.",
            f"Record a new {self.domain.entity}, {new[0]}: {details}.",
        )
        columns = ", ".join(q(c.name) for c in self.columns)
        values = ", ".join(lit(v) for v in new)
        return Draft("INSERT", text, f"INSERT INTO {q(self.table)} ({columns}) VALUES ({values})")

    def update(self) -> Draft:
        column = self.rng.choice(self.domain.columns)
        new = column.draw(self.rng)
        if self.rng.random() < 0.6:
            k = self.value(self.domain.key)
            where = f"{q(self.domain.key.name)} = {lit(k)}"
            scope = f"the {self.domain.entity} {k}"
        else:
            cat = self.rng.choice(self.categorical)
            v = self.value(cat)
            where = f"{q(cat.name)} = {lit(v)}"
            scope = f"every {self.domain.entity} whose {cat.phrase} is {v}"
        text = self.say(
            f"Change the {column.phrase} of {scope} to {new}.",
            f"Set {column.phrase} to {new} for {scope} in the {self.table} table.",
        )
        sql = f"UPDATE {q(self.table)} SET {q(column.name)} = {lit(new)} WHERE {where}"
        return Draft("UPDATE", text, sql)

    def delete(self) -> Draft:
        if self.rng.random() < 0.5:
            k = self.value(self.domain.key)
            where = f"{q(self.domain.key.name)} = {lit(k)}"
            scope = f"the {self.domain.entity} {k}"
        else:
            n = self.rng.choice(self.numeric)
            x = self.threshold(n)
            op, word = self.rng.choice(((">", "above"), ("<", "below")))
            where = f"{num(n)} {op} {x}"
            scope = f"every {self.domain.entity} with a {n.phrase} {word} {x}"
        text = self.say(
            f"Delete {scope} from the {self.table} table.",
            f"Remove {scope}.",
        )
        return Draft("DELETE", text, f"DELETE FROM {q(self.table)} WHERE {where}")


_KINDS: tuple[tuple[str, float], ...] = (
    ("lookup", 0.14),
    ("counting", 0.12),
    ("comparison", 0.12),
    ("aggregation", 0.14),
    ("ranking", 0.12),
    ("insert", 0.12),
    ("update", 0.12),
    ("delete", 0.12),
)


def _table_rows(rng: random.Random, domain: Domain) -> list[list[str]]:
    keys: list[str] = []
    while len(keys) < rng.randint(8, 18):
        key = domain.key.draw(rng)
        if key.casefold() not in {k.casefold() for k in keys}:
            keys.append(key)
    return [[key, *(column.draw(rng) for column in domain.columns)] for key in keys]


class Verifier:
    """Runs gold SQL on SQLite through the environment's backend to label a draft."""

    def __init__(self) -> None:
        self.backend = SQLiteBackend(statement_timeout=10)

    def label(self, table: TableSpec, draft: Draft) -> dict[str, Any] | None:
        episode = self.backend.create_episode([table])
        try:
            before = tables_hash([episode.table_rows(table)])
            result = episode.execute(draft.sql, char_limit=0)
            if result.error:
                raise ValueError(f"gold SQL failed: {draft.sql}: {result.text}")
            if draft.task_type in ("INSERT", "UPDATE", "DELETE"):
                after = tables_hash([episode.table_rows(table)])
                return None if after == before else {"answer_md5": f"[('{after}',)]"}
            answers = answers_from_rows(result.rows)
            if not answers or len(answers) > MAX_ANSWERS or "None" in answers:
                return None
            if "ORDER BY" in draft.sql and not self._unique_order(episode, draft.sql):
                return None
            return {"label": answers}
        finally:
            episode.drop()

    @staticmethod
    def _unique_order(episode: Any, sql: str) -> bool:
        """A ``LIMIT k`` answer is unambiguous only if row k+1 ranks strictly lower."""
        head, limit = sql.rsplit("LIMIT", 1)
        k = int(limit)
        if "GROUP BY" in head:
            probe = head.replace("SELECT ", "SELECT COUNT(*), ", 1)
        else:
            order = head.split("ORDER BY", 1)[1].rsplit(" ", 2)[0].strip()
            probe = head.replace("SELECT ", f"SELECT {order}, ", 1)
        rows = episode.execute(f"{probe} LIMIT {k + 1}", char_limit=0).rows
        return len(rows) <= k or rows[k - 1][0] != rows[k][0]


def generate_split(split: str, count: int, seed: int, verifier: Verifier) -> list[dict]:
    """``count`` verified tasks for ``split``; deterministic in ``(split, seed)``."""
    rng = random.Random(f"{seed}-{split}")
    kinds, weights = zip(*_KINDS, strict=True)
    records: list[dict] = []
    while len(records) < count:
        domain = rng.choice(DOMAINS)
        table_name = rng.choice(domain.table_names)
        rows = _table_rows(rng, domain)
        writer = TaskWriter(rng, domain, table_name, rows)
        draft: Draft = getattr(writer, rng.choices(kinds, weights)[0])()
        headers = [domain.key.name, *(c.name for c in domain.columns)]
        table = TableSpec(table_name, tuple(headers), tuple(tuple(row) for row in rows))
        labelled = verifier.label(table, draft)
        if labelled is None:
            continue
        records.append(
            {
                "sample_id": f"db-{split}-{len(records):05d}",
                "description": draft.description,
                "type": [draft.task_type],
                "table": {
                    "table_name": table_name,
                    "table_info": {
                        "columns": [{"name": h, "type": "TEXT"} for h in headers],
                        "rows": rows,
                    },
                },
                "add_description": f"The name of this table is {table_name}, and the headers "
                f"of this table are {','.join(headers)}.",
                "gold_sql": [draft.sql],
                "label": labelled.get("label", [draft.sql]),
                **({"answer_md5": labelled["answer_md5"]} if "answer_md5" in labelled else {}),
                "source": "agentgym-eppo-generator",
            }
        )
    return records


def generate(
    out_dir: Path | None = None,
    seed: int = DEFAULT_SEED,
    sizes: dict[str, int] | None = None,
) -> dict[str, Path]:
    """Write the shipped splits (``train``/``dev``/``test``) and return their paths."""
    out_dir = out_dir or asset_path("db")
    verifier = Verifier()
    paths = {}
    for split, count in (sizes or SPLIT_SIZES).items():
        path = Path(out_dir) / SHIPPED_FILES[split]
        write_jsonl_gz(path, generate_split(split, count, seed, verifier))
        paths[split] = path
    verifier.backend.close()
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=None, help="folder (default: the assets)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    for split, path in generate(args.out, args.seed).items():
        print(f"{split}: {path}")


if __name__ == "__main__":
    main()
