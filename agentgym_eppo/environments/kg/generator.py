"""Generate the project's own Freebase-shaped knowledge graph and its question sets.

``python -m agentgym_eppo.environments.kg.generator [--seed 0] [--out DIR]`` writes

* ``freebase_mini.nt.gz``: the graph as sorted, gzipped N-Triples in Freebase's namespace
  (load it into any SPARQL server: ``oxigraph load``, Virtuoso's ``ld_dir``, Fuseki);
* ``train.jsonl.gz``, ``dev.jsonl.gz``, ``test.jsonl.gz``: questions in AgentBench's
  record format with gold actions and answers (:mod:`.questions`).

Same seed, same bytes. The graph covers places, people, film, music, sports and
organisations: typed entities with English names, relations in both directions,
numeric and date attributes (measures carry units in the schema), and the schema
triples of every property (:mod:`.schema`). Each domain is drawn by its own function,
in a fixed order, from one seeded RNG.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from ...core import asset_path, write_jsonl_gz
from . import naming
from . import schema as s
from .graph import MiniFreebase, graph_triples, write_graph
from .questions import generate_questions, split_questions
from .tasks import GRAPH_FILE


@dataclass(frozen=True)
class GraphConfig:
    """How many entities of each kind the graph holds (the defaults give ~97k triples)."""

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


class _Builder:
    """Adds entities and facts to a :class:`MiniFreebase`, drawing from one seeded RNG."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.names = naming.Namer(rng)
        self.graph = MiniFreebase()
        self._ids: set[str] = set()

    def entity(self, name: str, *types: str) -> str:
        while (entity_id := self.names.entity_id()) in self._ids:
            pass
        self._ids.add(entity_id)
        self.graph.names[entity_id] = name
        for type_name in types:
            self.add_type(entity_id, type_name)
        return entity_id

    def entities(self, count: int, draw: Callable[[], str], *types: str) -> list[str]:
        """``count`` new entities of ``types``, with names from ``draw`` that are still free."""
        return [self.entity(name, *types) for name in self.unique_names(count, draw)]

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

    def day(self, first_year: int, last_year: int) -> date:
        start = date(first_year, 1, 1)
        return start + timedelta(days=self.rng.randrange((date(last_year, 12, 31) - start).days))

    def sample(self, population: list[str], low: int, high: int) -> list[str]:
        return self.rng.sample(population, min(len(population), self.rng.randint(low, high)))


def build_graph(config: GraphConfig = GraphConfig(), seed: int = 0) -> MiniFreebase:
    """Generate the graph; the same ``config`` and ``seed`` give the same graph."""
    builder = _Builder(random.Random(seed))
    countries, cities = _places(builder, config)
    people = _people(builder, config, countries, cities)
    roles = _roles(builder, config, people)
    _films(builder, config, roles, countries)
    _music(builder, config, roles[s.ARTIST], cities)
    _sports(builder, config, roles[s.ATHLETE], cities)
    _organizations(builder, config, roles[s.FOUNDER], cities)
    return builder.graph


def _places(b: _Builder, config: GraphConfig) -> tuple[list[str], list[str]]:
    g, rng = b.graph, b.rng
    countries = b.entities(config.countries, b.names.country, s.COUNTRY)
    cities: list[str] = []
    for country in countries:
        for city in b.entities(config.cities_per_country, b.names.city, s.CITY):
            cities.append(city)
            g.link(city, "location.location.containedby", country)
            population = rng.randint(2_000, 4_000_000)
            g.values[(city, "location.statistical_region.population")] = population
            g.values[(city, "location.location.area")] = round(rng.uniform(5, 900), 1)
    return countries, cities


def _people(b: _Builder, config: GraphConfig, countries: list[str], cities: list[str]) -> list[str]:
    g, rng = b.graph, b.rng
    professions = [b.entity(name, s.PROFESSION) for name in naming.PROFESSIONS]
    people = b.entities(config.people, b.names.person, s.PERSON)
    for person in people:
        birthplace = rng.choice(cities)
        g.link(person, "people.person.place_of_birth", birthplace)
        home = g.neighbors(birthplace, "location.location.containedby")[0]
        nationality = home if rng.random() < 0.85 else rng.choice(countries)
        g.link(person, "people.person.nationality", nationality)
        for profession in b.sample(professions, 1, 2):
            g.link(person, "people.person.profession", profession)
        g.values[(person, "people.person.date_of_birth")] = b.day(1920, 2002)
        g.values[(person, "people.person.height_meters")] = round(rng.uniform(1.5, 2.05), 2)
    return people


def _roles(b: _Builder, config: GraphConfig, people: list[str]) -> dict[str, list[str]]:
    """Give shares of the people their second types (a few both act and direct)."""
    pool = people[:]
    b.rng.shuffle(pool)
    size = len(pool)

    def share(start: float, end: float) -> list[str]:
        return pool[int(start * size) : int(end * size)]

    first_artist = int(0.41 * size)
    roles = {
        s.DIRECTOR: share(0, 0.076),
        s.ACTOR: share(0.059, 0.41),
        s.ARTIST: pool[first_artist : first_artist + config.artists],
        s.ATHLETE: share(0.56, 0.78),
        s.FOUNDER: share(0.78, 0.91),
    }
    for type_name, group in roles.items():
        for person in group:
            b.add_type(person, type_name)
    return roles


def _films(
    b: _Builder, config: GraphConfig, roles: dict[str, list[str]], countries: list[str]
) -> None:
    g, rng = b.graph, b.rng
    genres = [b.entity(name, s.FILM_GENRE) for name in naming.FILM_GENRES]
    for film in b.entities(config.films, b.names.title, s.FILM):
        for director in b.sample(roles[s.DIRECTOR], 1, 1 if rng.random() < 0.9 else 2):
            g.link(film, "film.film.directed_by", director)
        for actor in b.sample(roles[s.ACTOR], 3, 6):
            g.link(film, "film.film.starring", actor)
        for genre in b.sample(genres, 1, 2):
            g.link(film, "film.film.genre", genre)
        g.link(film, "film.film.country", rng.choice(countries))
        g.values[(film, "film.film.initial_release_date")] = b.day(1950, 2023)
        g.values[(film, "film.film.runtime")] = float(rng.randint(70, 200))
        g.values[(film, "film.film.estimated_budget")] = float(rng.randint(1, 300) * 500_000)


def _music(b: _Builder, config: GraphConfig, artists: list[str], cities: list[str]) -> None:
    g, rng = b.graph, b.rng
    genres = [b.entity(name, s.MUSIC_GENRE) for name in naming.MUSIC_GENRES]
    labels = b.entities(config.labels, b.names.record_label, s.LABEL)
    for artist in artists:
        for genre in b.sample(genres, 1, 2):
            g.link(artist, "music.artist.genre", genre)
        g.link(artist, "music.artist.origin", rng.choice(cities))
    for album in b.entities(config.albums, lambda: b.names.title(album=True), s.ALBUM):
        g.link(album, "music.album.artist", rng.choice(artists))
        g.link(album, "music.album.label", rng.choice(labels))
        g.values[(album, "music.album.release_date")] = b.day(1955, 2023)
        g.values[(album, "music.album.length")] = round(rng.uniform(25, 80), 1)


def _sports(b: _Builder, config: GraphConfig, athletes: list[str], cities: list[str]) -> None:
    g, rng = b.graph, b.rng
    sports = [b.entity(name, s.SPORT) for name in naming.SPORTS]
    facilities = b.entities(config.facilities, b.names.venue, s.FACILITY)
    for facility in facilities:
        g.link(facility, "sports.sports_facility.city", rng.choice(cities))
        g.values[(facility, "sports.sports_facility.capacity")] = rng.randint(2_000, 95_000)
        g.values[(facility, "architecture.structure.opened")] = b.day(1890, 2020)
    for _ in range(config.teams):
        facility = rng.choice(facilities)
        city = g.neighbors(facility, "sports.sports_facility.city")[0]
        place = g.names[city]
        [team] = b.entities(1, lambda: b.names.team(place), s.TEAM)  # noqa: B023 - used at once
        g.link(team, "sports.sports_team.location", city)
        g.link(team, "sports.sports_team.arena_stadium", facility)
        g.link(team, "sports.sports_team.sport", rng.choice(sports))
        for athlete in b.sample(athletes, 4, 7):
            g.link(team, "sports.sports_team.roster", athlete)
        g.values[(team, "sports.sports_team.founded")] = b.day(1870, 2015)


def _organizations(
    b: _Builder, config: GraphConfig, founders: list[str], cities: list[str]
) -> None:
    g, rng = b.graph, b.rng
    industries = [b.entity(name, s.INDUSTRY) for name in naming.INDUSTRIES]
    for organization in b.entities(config.organizations, b.names.company, s.ORGANIZATION):
        g.link(organization, "organization.organization.headquarters", rng.choice(cities))
        for founder in b.sample(founders, 1, 2):
            g.link(organization, "organization.organization.founders", founder)
        g.link(organization, "organization.organization.industry", rng.choice(industries))
        g.values[(organization, "organization.organization.date_founded")] = b.day(1850, 2020)
        employees = rng.randint(5, 250_000)
        g.values[(organization, "business.employer.number_of_employees")] = employees


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
