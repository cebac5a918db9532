"""The Freebase-shaped schema of the project's own knowledge graph.

Types are ``domain.type`` and properties ``domain.type.property``, as in Freebase.
Every relation is stored in both directions (Freebase's reverse properties), so that
``get_relations`` lists the way back, and every property carries Freebase's schema
triples: ``type.property.schema`` (its domain type), ``type.property.expected_type``
(its range: an entity type, or ``type.int``/``type.float``/``type.datetime`` for
attributes), ``type.property.reverse_property`` and, for measures, ``type.property.unit``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RelationSpec:
    """A relation from ``domain`` entities to ``range`` entities, and its reverse's name."""

    name: str
    domain: str
    range: str
    reverse: str


@dataclass(frozen=True)
class AttributeSpec:
    """A literal-valued property; ``expected_type`` is ``type.int``, ``type.float`` or ``type.datetime``."""

    name: str
    domain: str
    expected_type: str
    unit: str | None = None


COUNTRY = "location.country"
CITY = "location.citytown"
PERSON = "people.person"
PROFESSION = "people.profession"
ACTOR = "film.actor"
DIRECTOR = "film.director"
FILM = "film.film"
FILM_GENRE = "film.film_genre"
ARTIST = "music.artist"
ALBUM = "music.album"
MUSIC_GENRE = "music.genre"
LABEL = "music.record_label"
ATHLETE = "sports.pro_athlete"
TEAM = "sports.sports_team"
SPORT = "sports.sport"
FACILITY = "sports.sports_facility"
ORGANIZATION = "organization.organization"
FOUNDER = "organization.organization_founder"
INDUSTRY = "business.industry"
UNIT = "measurement_unit.unit"

RELATIONS: tuple[RelationSpec, ...] = (
    RelationSpec("location.location.containedby", CITY, COUNTRY, "location.location.contains"),
    RelationSpec(
        "people.person.place_of_birth", PERSON, CITY, "location.location.people_born_here"
    ),
    RelationSpec("people.person.nationality", PERSON, COUNTRY, "location.country.nationals"),
    RelationSpec(
        "people.person.profession",
        PERSON,
        PROFESSION,
        "people.profession.people_with_this_profession",
    ),
    RelationSpec("film.film.directed_by", FILM, DIRECTOR, "film.director.film"),
    RelationSpec("film.film.starring", FILM, ACTOR, "film.actor.film"),
    RelationSpec("film.film.genre", FILM, FILM_GENRE, "film.film_genre.films_in_this_genre"),
    RelationSpec("film.film.country", FILM, COUNTRY, "location.country.films_produced_here"),
    RelationSpec("music.album.artist", ALBUM, ARTIST, "music.artist.album"),
    RelationSpec("music.artist.genre", ARTIST, MUSIC_GENRE, "music.genre.artists"),
    RelationSpec("music.album.label", ALBUM, LABEL, "music.record_label.albums"),
    RelationSpec("music.artist.origin", ARTIST, CITY, "location.citytown.musicians_from_here"),
    RelationSpec("sports.sports_team.sport", TEAM, SPORT, "sports.sport.teams"),
    RelationSpec("sports.sports_team.location", TEAM, CITY, "location.citytown.sports_teams"),
    RelationSpec(
        "sports.sports_team.arena_stadium", TEAM, FACILITY, "sports.sports_facility.teams"
    ),
    RelationSpec("sports.sports_team.roster", TEAM, ATHLETE, "sports.pro_athlete.teams"),
    RelationSpec(
        "sports.sports_facility.city", FACILITY, CITY, "location.citytown.sports_facilities"
    ),
    RelationSpec(
        "organization.organization.headquarters",
        ORGANIZATION,
        CITY,
        "location.citytown.headquartered_organizations",
    ),
    RelationSpec(
        "organization.organization.founders",
        ORGANIZATION,
        FOUNDER,
        "organization.organization_founder.organizations_founded",
    ),
    RelationSpec(
        "organization.organization.industry", ORGANIZATION, INDUSTRY, "business.industry.companies"
    ),
)

ATTRIBUTES: tuple[AttributeSpec, ...] = (
    AttributeSpec("location.statistical_region.population", CITY, "type.int"),
    AttributeSpec("location.location.area", CITY, "type.float", "Square kilometre"),
    AttributeSpec("people.person.date_of_birth", PERSON, "type.datetime"),
    AttributeSpec("people.person.height_meters", PERSON, "type.float", "Metre"),
    AttributeSpec("film.film.initial_release_date", FILM, "type.datetime"),
    AttributeSpec("film.film.runtime", FILM, "type.float", "Minute"),
    AttributeSpec("film.film.estimated_budget", FILM, "type.float", "United States Dollar"),
    AttributeSpec("music.album.release_date", ALBUM, "type.datetime"),
    AttributeSpec("music.album.length", ALBUM, "type.float", "Minute"),
    AttributeSpec("sports.sports_team.founded", TEAM, "type.datetime"),
    AttributeSpec("sports.sports_facility.capacity", FACILITY, "type.int"),
    AttributeSpec("architecture.structure.opened", FACILITY, "type.datetime"),
    AttributeSpec("organization.organization.date_founded", ORGANIZATION, "type.datetime"),
    AttributeSpec("business.employer.number_of_employees", ORGANIZATION, "type.int"),
)

RELATION_BY_NAME: dict[str, RelationSpec] = {spec.name: spec for spec in RELATIONS}
REVERSE_OF: dict[str, str] = {
    **{spec.name: spec.reverse for spec in RELATIONS},
    **{spec.reverse: spec.name for spec in RELATIONS},
}
RANGE_OF: dict[str, str] = {
    **{spec.name: spec.range for spec in RELATIONS},
    **{spec.reverse: spec.domain for spec in RELATIONS},
}
DOMAIN_OF: dict[str, str] = {
    **{spec.name: spec.domain for spec in RELATIONS},
    **{spec.reverse: spec.range for spec in RELATIONS},
}
