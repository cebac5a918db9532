"""Generate the project's own Freebase-shaped knowledge graph and its question sets.

``python -m agentgym_eppo.environments.kg.generator [--seed 0] [--out DIR]`` writes

* ``freebase_mini.nt.gz``: the graph as sorted, gzipped N-Triples in Freebase's namespace
  (load it into any SPARQL server: ``oxigraph load``, Virtuoso's ``ld_dir``, Fuseki);
* ``train.jsonl.gz``, ``dev.jsonl.gz``, ``test.jsonl.gz``: questions in AgentBench's
  record format with gold actions and answers (:mod:`.questions`).

Same seed, same bytes. The graph covers places, people, film, music, sports and
organisations: typed entities with English names, relations in both directions,
numeric and date attributes (measures carry units in the schema), and the schema
triples of every property (:mod:`.schema`).
"""

from __future__ import annotations

import argparse
import gzip
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from ...core import asset_path, write_jsonl_gz
from . import schema as s
from .queries import EXPECTED_TYPE, FREEBASE_NS, NAME, OBJECT_TYPE
from .questions import generate_questions, split_questions
from .tasks import GRAPH_FILE

Value = int | float | date

_XSD = "http://www.w3.org/2001/XMLSchema#"
_ID_ALPHABET = "0123456789bcdfghjklmnpqrstvwxyz_"
_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ra",
    "ven",
    "dor",
    "sel",
    "tha",
    "bri",
    "mo",
    "na",
    "el",
    "ar",
    "is",
    "un",
    "fe",
    "gal",
    "tor",
    "lin",
    "sa",
    "qu",
    "ber",
    "cal",
    "den",
    "fi",
    "go",
    "har",
    "jo",
    "kel",
    "mar",
    "nor",
    "pel",
    "ros",
    "sten",
    "tri",
    "val",
    "wen",
    "yor",
    "zan",
)
_CITY_SUFFIXES = (
    "ford",
    "holm",
    "ville",
    "burg",
    "port",
    "stad",
    "mouth",
    "field",
    "haven",
    "dale",
)
_COUNTRY_SUFFIXES = ("ia", "land", "stan", "mark", "ora", "via", "onia", "esh")
_ADJECTIVES = (
    "Silent",
    "Crimson",
    "Hidden",
    "Broken",
    "Golden",
    "Last",
    "Frozen",
    "Distant",
    "Burning",
    "Quiet",
    "Wild",
    "Hollow",
    "Electric",
    "Bitter",
    "Endless",
    "Lonely",
    "Scarlet",
    "Velvet",
    "Iron",
    "Paper",
    "Midnight",
    "Savage",
    "Gentle",
    "Fading",
)
_NOUNS = (
    "River",
    "Empire",
    "Garden",
    "Harbor",
    "Mirror",
    "Storm",
    "Tide",
    "Crown",
    "Shadow",
    "Orchard",
    "Lantern",
    "Frontier",
    "Summer",
    "Winter",
    "Signal",
    "Island",
    "Kingdom",
    "Machine",
    "Letter",
    "Promise",
    "Horizon",
    "Canyon",
    "Voyage",
    "Engine",
    "Cathedral",
    "Meadow",
    "Echo",
    "Compass",
    "Desert",
    "Ember",
)
_MASCOTS = (
    "Falcons",
    "Wolves",
    "Comets",
    "Titans",
    "Rangers",
    "Pilots",
    "Herons",
    "Bears",
    "Mariners",
    "Foxes",
    "Stallions",
    "Hornets",
    "Royals",
    "Giants",
    "Rovers",
    "Owls",
    "Sharks",
    "Miners",
    "Knights",
    "Storm",
)
_VENUES = ("Arena", "Stadium", "Park", "Field", "Dome", "Grounds")
_COMPANY_WORDS = (
    "Kestrel",
    "Northwind",
    "Bluestone",
    "Ironleaf",
    "Brightwater",
    "Silverline",
    "Redfern",
    "Oakridge",
    "Summit",
    "Harbor",
    "Pinecrest",
    "Stonegate",
    "Clearview",
    "Evergreen",
    "Granite",
    "Copperfield",
    "Westbrook",
    "Lakeside",
)
_COMPANY_SUFFIXES = (
    "Dynamics",
    "Systems",
    "Holdings",
    "Works",
    "Labs",
    "Group",
    "Partners",
    "Industries",
)
_FILM_GENRES = (
    "Drama",
    "Comedy",
    "Thriller",
    "Horror",
    "Romance",
    "Documentary",
    "Western",
    "Musical",
    "Animation",
    "Adventure",
    "Mystery",
    "Fantasy",
    "War",
    "Crime",
    "Biography",
    "Satire",
)
_MUSIC_GENRES = (
    "Jazz",
    "Blues",
    "Folk",
    "Techno",
    "Soul",
    "Reggae",
    "Punk",
    "Opera",
    "Ambient",
    "Gospel",
    "Funk",
    "Grunge",
    "Bluegrass",
    "Disco",
)
_PROFESSIONS = (
    "Actor",
    "Film director",
    "Singer",
    "Composer",
    "Athlete",
    "Coach",
    "Engineer",
    "Physician",
    "Lawyer",
    "Architect",
    "Journalist",
    "Painter",
    "Novelist",
    "Entrepreneur",
    "Chemist",
    "Teacher",
    "Economist",
    "Photographer",
)
_SPORTS = ("Football", "Basketball", "Ice hockey", "Baseball", "Rugby", "Volleyball")
_INDUSTRIES = (
    "Software",
    "Banking",
    "Aerospace",
    "Retail",
    "Biotechnology",
    "Shipping",
    "Mining",
    "Telecommunications",
    "Publishing",
    "Energy",
    "Insurance",
    "Automotive",
    "Agriculture",
)


@dataclass(frozen=True)
class GraphConfig:
    """How many entities of each kind the graph holds (the defaults give ~100k triples)."""

    countries: int = 50
    cities_per_country: int = 9
    people: int = 3400
    films: int = 1400
    artists: int = 450
    albums: int = 1500
    labels: int = 40
    teams: int = 180
    facilities: int = 150
    organizations: int = 450


@dataclass
class MiniFreebase:
    """The generated graph in memory: names, types, edges (both ways) and attribute values."""

    names: dict[str, str] = field(default_factory=dict)
    types: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    edges: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    values: dict[tuple[str, str], Value] = field(default_factory=dict)
    by_type: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def neighbors(self, entity: str, relation: str) -> list[str]:
        return self.edges.get((entity, relation), [])

    def link(self, subject: str, relation: str, obj: str) -> None:
        """Add ``subject relation obj`` and its reverse, once."""
        if obj in self.edges[(subject, relation)]:
            return
        self.edges[(subject, relation)].append(obj)
        self.edges[(obj, s.REVERSE_OF[relation])].append(subject)


class _Builder:
    """Draws entities, names and facts from one seeded RNG, in a fixed order."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.graph = MiniFreebase()
        self._ids: set[str] = set()

    def entity(self, name: str, *types: str) -> str:
        while True:
            entity_id = "m.0" + "".join(self.rng.choice(_ID_ALPHABET) for _ in range(5))
            if entity_id not in self._ids:
                break
        self._ids.add(entity_id)
        self.graph.names[entity_id] = name
        for type_name in types:
            self.add_type(entity_id, type_name)
        return entity_id

    def add_type(self, entity_id: str, type_name: str) -> None:
        if type_name not in self.graph.types[entity_id]:
            self.graph.types[entity_id].append(type_name)
            self.graph.by_type[type_name].append(entity_id)

    def unique_names(self, count: int, draw: Callable[[], str]) -> list[str]:
        """``count`` names from ``draw`` that no entity has yet."""
        names: list[str] = []
        seen = set(self.graph.names.values())
        while len(names) < count:
            name = draw()
            if name not in seen:
                seen.add(name)
                names.append(name)
        return names

    def word(self, low: int, high: int) -> str:
        return "".join(
            self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(low, high))
        ).capitalize()

    def day(self, first_year: int, last_year: int) -> date:
        start = date(first_year, 1, 1)
        return start + timedelta(days=self.rng.randrange((date(last_year, 12, 31) - start).days))

    def sample(self, population: list[str], low: int, high: int) -> list[str]:
        return self.rng.sample(population, min(len(population), self.rng.randint(low, high)))


def build_graph(config: GraphConfig = GraphConfig(), seed: int = 0) -> MiniFreebase:
    """Generate the graph; the same ``config`` and ``seed`` give the same graph."""
    b = _Builder(random.Random(seed))
    rng, g = b.rng, b.graph

    countries = [
        b.entity(name, s.COUNTRY)
        for name in b.unique_names(
            config.countries, draw=lambda: b.word(1, 2) + rng.choice(_COUNTRY_SUFFIXES)
        )
    ]
    cities: list[str] = []
    for country in countries:
        for name in b.unique_names(
            config.cities_per_country, draw=lambda: b.word(1, 2) + rng.choice(_CITY_SUFFIXES)
        ):
            city = b.entity(name, s.CITY)
            cities.append(city)
            g.link(city, "location.location.containedby", country)
            g.values[(city, "location.statistical_region.population")] = rng.randint(
                2_000, 4_000_000
            )
            g.values[(city, "location.location.area")] = round(rng.uniform(5, 900), 1)

    professions = [b.entity(name, s.PROFESSION) for name in _PROFESSIONS]
    people = [
        b.entity(name, s.PERSON)
        for name in b.unique_names(config.people, draw=lambda: f"{b.word(1, 2)} {b.word(2, 3)}")
    ]
    for person in people:
        birthplace = rng.choice(cities)
        g.link(person, "people.person.place_of_birth", birthplace)
        home = g.neighbors(birthplace, "location.location.containedby")[0]
        g.link(
            person,
            "people.person.nationality",
            home if rng.random() < 0.85 else rng.choice(countries),
        )
        for profession in b.sample(professions, 1, 2):
            g.link(person, "people.person.profession", profession)
        g.values[(person, "people.person.date_of_birth")] = b.day(1920, 2002)
        g.values[(person, "people.person.height_meters")] = round(rng.uniform(1.5, 2.05), 2)

    pool = people[:]
    rng.shuffle(pool)
    size = len(pool)

    def share(start: float, end: float) -> list[str]:
        return pool[int(start * size) : int(end * size)]

    directors, actors = share(0, 0.076), share(0.059, 0.41)  # a few people act and direct
    artists = pool[int(0.41 * size) : int(0.41 * size) + config.artists]
    athletes, founders = share(0.56, 0.78), share(0.78, 0.91)
    for group, type_name in (
        (directors, s.DIRECTOR),
        (actors, s.ACTOR),
        (artists, s.ARTIST),
        (athletes, s.ATHLETE),
        (founders, s.FOUNDER),
    ):
        for person in group:
            b.add_type(person, type_name)

    film_genres = [b.entity(name, s.FILM_GENRE) for name in _FILM_GENRES]
    film_names = b.unique_names(config.films, draw=lambda: _title(rng))
    for name in film_names:
        film = b.entity(name, s.FILM)
        for director in b.sample(directors, 1, 1 if rng.random() < 0.9 else 2):
            g.link(film, "film.film.directed_by", director)
        for actor in b.sample(actors, 3, 6):
            g.link(film, "film.film.starring", actor)
        for genre in b.sample(film_genres, 1, 2):
            g.link(film, "film.film.genre", genre)
        g.link(film, "film.film.country", rng.choice(countries))
        g.values[(film, "film.film.initial_release_date")] = b.day(1950, 2023)
        g.values[(film, "film.film.runtime")] = float(rng.randint(70, 200))
        g.values[(film, "film.film.estimated_budget")] = float(rng.randint(1, 300) * 500_000)

    music_genres = [b.entity(name, s.MUSIC_GENRE) for name in _MUSIC_GENRES]
    labels = [
        b.entity(name, s.LABEL)
        for name in b.unique_names(config.labels, draw=lambda: f"{b.word(1, 2)} Records")
    ]
    for artist in artists:
        for genre in b.sample(music_genres, 1, 2):
            g.link(artist, "music.artist.genre", genre)
        g.link(artist, "music.artist.origin", rng.choice(cities))
    for name in b.unique_names(config.albums, draw=lambda: _title(rng, album=True)):
        album = b.entity(name, s.ALBUM)
        g.link(album, "music.album.artist", rng.choice(artists))
        g.link(album, "music.album.label", rng.choice(labels))
        g.values[(album, "music.album.release_date")] = b.day(1955, 2023)
        g.values[(album, "music.album.length")] = round(rng.uniform(25, 80), 1)

    sports = [b.entity(name, s.SPORT) for name in _SPORTS]
    facilities = []
    for name in b.unique_names(
        config.facilities, draw=lambda: f"{b.word(2, 3)} {rng.choice(_VENUES)}"
    ):
        facility = b.entity(name, s.FACILITY)
        facilities.append(facility)
        g.link(facility, "sports.sports_facility.city", rng.choice(cities))
        g.values[(facility, "sports.sports_facility.capacity")] = rng.randint(2_000, 95_000)
        g.values[(facility, "architecture.structure.opened")] = b.day(1890, 2020)
    for _ in range(config.teams):
        facility = rng.choice(facilities)
        city = g.neighbors(facility, "sports.sports_facility.city")[0]
        place = g.names[city]
        [name] = b.unique_names(1, draw=lambda: f"{place} {rng.choice(_MASCOTS)}")  # noqa: B023
        team = b.entity(name, s.TEAM)
        g.link(team, "sports.sports_team.location", city)
        g.link(team, "sports.sports_team.arena_stadium", facility)
        g.link(team, "sports.sports_team.sport", rng.choice(sports))
        for athlete in b.sample(athletes, 4, 7):
            g.link(team, "sports.sports_team.roster", athlete)
        g.values[(team, "sports.sports_team.founded")] = b.day(1870, 2015)

    industries = [b.entity(name, s.INDUSTRY) for name in _INDUSTRIES]
    for name in b.unique_names(
        config.organizations,
        draw=lambda: f"{rng.choice(_COMPANY_WORDS)} {b.word(1, 2)} {rng.choice(_COMPANY_SUFFIXES)}",
    ):
        organization = b.entity(name, s.ORGANIZATION)
        g.link(organization, "organization.organization.headquarters", rng.choice(cities))
        for founder in b.sample(founders, 1, 2):
            g.link(organization, "organization.organization.founders", founder)
        g.link(organization, "organization.organization.industry", rng.choice(industries))
        g.values[(organization, "organization.organization.date_founded")] = b.day(1850, 2020)
        g.values[(organization, "business.employer.number_of_employees")] = rng.randint(5, 250_000)
    return g


def _title(rng: random.Random, album: bool = False) -> str:
    adjective, noun = rng.choice(_ADJECTIVES), rng.choice(_NOUNS)
    shape = rng.randrange(4)
    if shape == 0:
        return f"The {adjective} {noun}"
    if shape == 1:
        return f"{noun} of the {adjective} {rng.choice(_NOUNS)}"
    if shape == 2:
        return f"{adjective} {noun}s" if album else f"A {adjective} {noun}"
    return f"{noun} {rng.randint(2, 9)}" if not album else f"{adjective} {noun} Sessions"


def graph_triples(graph: MiniFreebase, namespace: str = FREEBASE_NS) -> list[str]:
    """The graph and its schema as N-Triples lines, sorted (so the file is reproducible)."""

    def node(name: str) -> str:
        return f"<{namespace}{name}>"

    lines: set[str] = set()
    type_names = {type_name for types in graph.types.values() for type_name in types}
    for type_name in type_names:
        lines.add(f"{node(type_name)} {node(OBJECT_TYPE)} {node('type.type')} .")
    for entity, name in graph.names.items():
        lines.add(f"{node(entity)} {node(NAME)} {_literal(name)}@en .")
        for type_name in graph.types[entity]:
            lines.add(f"{node(entity)} {node(OBJECT_TYPE)} {node(type_name)} .")
    for (subject, relation), objects in graph.edges.items():
        for obj in objects:
            lines.add(f"{node(subject)} {node(relation)} {node(obj)} .")
    for (subject, attribute), value in graph.values.items():
        lines.add(f"{node(subject)} {node(attribute)} {_typed(value)} .")
    lines.update(_schema_lines(node))
    return sorted(lines)


def _schema_lines(node: Callable[[str], str]) -> Iterator[str]:
    def prop(name: str, domain: str, expected: str) -> Iterator[str]:
        yield f"{node(name)} {node(OBJECT_TYPE)} {node('type.property')} ."
        yield f"{node(name)} {node('type.property.schema')} {node(domain)} ."
        yield f"{node(name)} {node(EXPECTED_TYPE)} {node(expected)} ."

    for spec in s.RELATIONS:
        yield from prop(spec.name, spec.domain, spec.range)
        yield from prop(spec.reverse, spec.range, spec.domain)
        yield f"{node(spec.name)} {node('type.property.reverse_property')} {node(spec.reverse)} ."
        yield f"{node(spec.reverse)} {node('type.property.reverse_property')} {node(spec.name)} ."
    for attribute in s.ATTRIBUTES:
        yield from prop(attribute.name, attribute.domain, attribute.expected_type)
        if attribute.unit is not None:
            unit = "m.0unit_" + attribute.unit.lower().replace(" ", "_")
            yield f"{node(attribute.name)} {node('type.property.unit')} {node(unit)} ."
            yield f"{node(unit)} {node(NAME)} {_literal(attribute.unit)}@en ."
            yield f"{node(unit)} {node(OBJECT_TYPE)} {node(s.UNIT)} ."


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _typed(value: Value) -> str:
    if isinstance(value, date):
        return f'"{value.isoformat()}"^^<{_XSD}date>'
    if isinstance(value, int):
        return f'"{value}"^^<{_XSD}integer>'
    return f'"{value!r}"^^<{_XSD}decimal>'


def write_graph(path: str | Path, lines: Iterable[str]) -> None:
    """Write N-Triples lines gzipped, byte-for-byte reproducible (mtime 0)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        for line in lines:
            handle.write(line.encode("utf-8") + b"\n")


def write_assets(
    out_dir: str | Path,
    *,
    seed: int = 0,
    config: GraphConfig = GraphConfig(),
    sizes: tuple[int, int, int] = (1200, 200, 200),
) -> dict[str, int]:
    """Generate the graph and the three question splits into ``out_dir``; return the counts."""
    out = Path(out_dir)
    graph = build_graph(config, seed)
    lines = graph_triples(graph)
    write_graph(out / GRAPH_FILE, lines)
    questions = generate_questions(graph, random.Random(seed + 1), sum(sizes))
    counts = {"triples": len(lines)}
    for split, rows in split_questions(questions, sizes).items():
        write_jsonl_gz(out / f"{split}.jsonl.gz", rows)
        counts[split] = len(rows)
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(asset_path("kg")))
    args = parser.parse_args(argv)
    print(write_assets(args.out, seed=args.seed))


if __name__ == "__main__":
    main()
