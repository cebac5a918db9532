"""Questions over the generated graph, each with its gold tool sequence and answer.

A :class:`Template` is a question pattern: one or two *chains* (an anchor entity of a
given type followed along a relation path), joined by ``intersection`` when there are
two, and optionally finished by ``count`` or ``argmax``/``argmin`` on an attribute. The
generator draws anchors, computes the answer on the in-memory graph, keeps only
well-posed questions (non-empty, at most :data:`MAX_ANSWERS` answers, a superlative
without a tie), and writes each with AgentBench's
record fields and the gold actions AgentBench's format uses::

    get_relations(m.0abc)  get_neighbors(m.0abc,film.director.film)  count(#0)

The shipped sets' answers are checked again through the real store by
``tests/test_kg_shipped.py``, which replays every gold sequence.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import schema as s
from .graph import MiniFreebase
from .variables import And, Count, Entity, Join, SetProgram, Superlative

MAX_ANSWERS = 15
Kind = Literal["one_hop", "two_hop", "intersection", "count", "argmax", "argmin"]


@dataclass(frozen=True)
class Chain:
    """Start at an entity of ``anchor`` type and follow ``path``."""

    anchor: str
    path: tuple[str, ...]


@dataclass(frozen=True)
class Template:
    """A question pattern; ``text`` names chain anchors ``{a}`` and ``{b}``."""

    kind: Kind
    text: str
    chains: tuple[Chain, ...]
    post: tuple[Literal["count", "argmax", "argmin"], str] | None = None


def _t(
    kind: Kind, text: str, *chains: tuple[str, str | tuple[str, ...]], post: Any = None
) -> Template:
    return Template(
        kind,
        text,
        tuple(Chain(anchor, (path,) if isinstance(path, str) else path) for anchor, path in chains),
        post,
    )


TEMPLATES: tuple[Template, ...] = (
    _t("one_hop", "who directed {a}?", (s.FILM, "film.film.directed_by")),
    _t("one_hop", "which films did {a} direct?", (s.DIRECTOR, "film.director.film")),
    _t("one_hop", "who starred in {a}?", (s.FILM, "film.film.starring")),
    _t("one_hop", "which films has {a} acted in?", (s.ACTOR, "film.actor.film")),
    _t("one_hop", "what genres does the film {a} belong to?", (s.FILM, "film.film.genre")),
    _t("one_hop", "where was {a} born?", (s.PERSON, "people.person.place_of_birth")),
    _t("one_hop", "which albums were recorded by {a}?", (s.ARTIST, "music.artist.album")),
    _t("one_hop", "which record label released {a}?", (s.ALBUM, "music.album.label")),
    _t("one_hop", "what is the home venue of {a}?", (s.TEAM, "sports.sports_team.arena_stadium")),
    _t("one_hop", "who founded {a}?", (s.ORGANIZATION, "organization.organization.founders")),
    _t(
        "one_hop",
        "in which city is {a} headquartered?",
        (s.ORGANIZATION, "organization.organization.headquarters"),
    ),
    _t(
        "one_hop",
        "which teams play their home games at {a}?",
        (s.FACILITY, "sports.sports_facility.teams"),
    ),
    _t("one_hop", "which country is {a} located in?", (s.CITY, "location.location.containedby")),
    _t("one_hop", "which players are on the roster of {a}?", (s.TEAM, "sports.sports_team.roster")),
    _t("one_hop", "what is the nationality of {a}?", (s.PERSON, "people.person.nationality")),
    _t(
        "one_hop",
        "which companies did {a} found?",
        (s.FOUNDER, "organization.organization_founder.organizations_founded"),
    ),
    _t(
        "two_hop",
        "in which country was {a} born?",
        (s.PERSON, ("people.person.place_of_birth", "location.location.containedby")),
    ),
    _t(
        "two_hop",
        "who directed the films that {a} acted in?",
        (s.ACTOR, ("film.actor.film", "film.film.directed_by")),
    ),
    _t(
        "two_hop",
        "what genres are the films directed by {a}?",
        (s.DIRECTOR, ("film.director.film", "film.film.genre")),
    ),
    _t(
        "two_hop",
        "which record labels have released albums by {a}?",
        (s.ARTIST, ("music.artist.album", "music.album.label")),
    ),
    _t(
        "two_hop",
        "in which city is the home venue of {a}?",
        (s.TEAM, ("sports.sports_team.arena_stadium", "sports.sports_facility.city")),
    ),
    _t(
        "two_hop",
        "which industries are the companies founded by {a} in?",
        (
            s.FOUNDER,
            (
                "organization.organization_founder.organizations_founded",
                "organization.organization.industry",
            ),
        ),
    ),
    _t(
        "two_hop",
        "which sports are played by teams based in {a}?",
        (s.CITY, ("location.citytown.sports_teams", "sports.sports_team.sport")),
    ),
    _t(
        "two_hop",
        "which actors appeared in films directed by {a}?",
        (s.DIRECTOR, ("film.director.film", "film.film.starring")),
    ),
    _t(
        "two_hop",
        "in which countries were films starring {a} produced?",
        (s.ACTOR, ("film.actor.film", "film.film.country")),
    ),
    _t(
        "two_hop",
        "where were the founders of {a} born?",
        (s.ORGANIZATION, ("organization.organization.founders", "people.person.place_of_birth")),
    ),
    _t(
        "two_hop",
        "which music genres do artists from {a} play?",
        (s.CITY, ("location.citytown.musicians_from_here", "music.artist.genre")),
    ),
    _t(
        "intersection",
        "which films directed by {a} star {b}?",
        (s.DIRECTOR, "film.director.film"),
        (s.ACTOR, "film.actor.film"),
    ),
    _t(
        "intersection",
        "which {a} films star {b}?",
        (s.FILM_GENRE, "film.film_genre.films_in_this_genre"),
        (s.ACTOR, "film.actor.film"),
    ),
    _t(
        "intersection",
        "which people born in {a} have the profession {b}?",
        (s.CITY, "location.location.people_born_here"),
        (s.PROFESSION, "people.profession.people_with_this_profession"),
    ),
    _t(
        "intersection",
        "which {b} teams are based in {a}?",
        (s.CITY, "location.citytown.sports_teams"),
        (s.SPORT, "sports.sport.teams"),
    ),
    _t(
        "intersection",
        "which companies in the {b} industry are headquartered in {a}?",
        (s.CITY, "location.citytown.headquartered_organizations"),
        (s.INDUSTRY, "business.industry.companies"),
    ),
    _t(
        "intersection",
        "which {b} films were produced in {a}?",
        (s.COUNTRY, "location.country.films_produced_here"),
        (s.FILM_GENRE, "film.film_genre.films_in_this_genre"),
    ),
    _t(
        "intersection",
        "which albums by {a} were released by {b}?",
        (s.ARTIST, "music.artist.album"),
        (s.LABEL, "music.record_label.albums"),
    ),
    _t(
        "intersection",
        "in which films did both {a} and {b} appear?",
        (s.ACTOR, "film.actor.film"),
        (s.ACTOR, "film.actor.film"),
    ),
    _t(
        "count",
        "how many films did {a} direct?",
        (s.DIRECTOR, "film.director.film"),
        post=("count", ""),
    ),
    _t(
        "count",
        "how many albums has {a} released?",
        (s.ARTIST, "music.artist.album"),
        post=("count", ""),
    ),
    _t(
        "count",
        "how many players are on the roster of {a}?",
        (s.TEAM, "sports.sports_team.roster"),
        post=("count", ""),
    ),
    _t(
        "count",
        "how many people were born in {a}?",
        (s.CITY, "location.location.people_born_here"),
        post=("count", ""),
    ),
    _t(
        "count",
        "how many {b} films has {a} appeared in?",
        (s.ACTOR, "film.actor.film"),
        (s.FILM_GENRE, "film.film_genre.films_in_this_genre"),
        post=("count", ""),
    ),
    _t(
        "count",
        "how many companies are headquartered in {a}?",
        (s.CITY, "location.citytown.headquartered_organizations"),
        post=("count", ""),
    ),
    _t(
        "argmax",
        "which film directed by {a} has the longest runtime?",
        (s.DIRECTOR, "film.director.film"),
        post=("argmax", "film.film.runtime"),
    ),
    _t(
        "argmin",
        "what is the earliest released film starring {a}?",
        (s.ACTOR, "film.actor.film"),
        post=("argmin", "film.film.initial_release_date"),
    ),
    _t(
        "argmax",
        "which is the most populous city in {a}?",
        (s.COUNTRY, "location.location.contains"),
        post=("argmax", "location.statistical_region.population"),
    ),
    _t(
        "argmax",
        "what is the most recent album by {a}?",
        (s.ARTIST, "music.artist.album"),
        post=("argmax", "music.album.release_date"),
    ),
    _t(
        "argmax",
        "which company headquartered in {a} has the most employees?",
        (s.CITY, "location.citytown.headquartered_organizations"),
        post=("argmax", "business.employer.number_of_employees"),
    ),
    _t(
        "argmin",
        "which team based in {a} was founded first?",
        (s.CITY, "location.citytown.sports_teams"),
        post=("argmin", "sports.sports_team.founded"),
    ),
    _t(
        "argmax",
        "who is the tallest actor in {a}?",
        (s.FILM, "film.film.starring"),
        post=("argmax", "people.person.height_meters"),
    ),
    _t(
        "argmax",
        "which venue used by teams based in {a} has the largest capacity?",
        (s.CITY, ("location.citytown.sports_teams", "sports.sports_team.arena_stadium")),
        post=("argmax", "sports.sports_facility.capacity"),
    ),
    _t(
        "argmin",
        "who is the oldest player on the roster of {a}?",
        (s.TEAM, "sports.sports_team.roster"),
        post=("argmin", "people.person.date_of_birth"),
    ),
    _t(
        "argmax",
        "which film starring {a} had the largest estimated budget?",
        (s.ACTOR, "film.actor.film"),
        post=("argmax", "film.film.estimated_budget"),
    ),
    _t(
        "argmin",
        "what is the smallest city by area in {a}?",
        (s.COUNTRY, "location.location.contains"),
        post=("argmin", "location.location.area"),
    ),
    _t(
        "argmin",
        "which {b} film directed by {a} was released first?",
        (s.DIRECTOR, "film.director.film"),
        (s.FILM_GENRE, "film.film_genre.films_in_this_genre"),
        post=("argmin", "film.film.initial_release_date"),
    ),
)


def generate_questions(graph: MiniFreebase, rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` distinct well-posed questions, templates taken in turns (shuffled rounds)."""
    questions: list[dict[str, Any]] = []
    seen: set[str] = set()
    failures = 0
    while len(questions) < count:
        order = list(TEMPLATES)
        rng.shuffle(order)
        for template in order:
            record = _instantiate(template, graph, rng)
            if record is None or record["question"] in seen:
                failures += 1
                if failures > 200 * count:
                    raise RuntimeError("the graph is too small for the questions asked of it")
                continue
            seen.add(record["question"])
            record["qid"] = f"freebase-mini-{len(questions):05d}"
            questions.append(record)
            if len(questions) == count:
                break
    return questions


def split_questions(
    questions: Sequence[dict[str, Any]], sizes: tuple[int, int, int]
) -> dict[str, list[dict[str, Any]]]:
    """Cut generated questions (already in random order) into train, dev and test."""
    train, dev, test = sizes
    if len(questions) < train + dev + test:
        raise ValueError(f"need {train + dev + test} questions, got {len(questions)}")
    return {
        "dev": list(questions[:dev]),
        "test": list(questions[dev : dev + test]),
        "train": list(questions[dev + test : dev + test + train]),
    }


def _follow(graph: MiniFreebase, start: set[str], path: Sequence[str]) -> set[str]:
    current = start
    for relation in path:
        current = {obj for entity in current for obj in graph.neighbors(entity, relation)}
    return current


def _instantiate(
    template: Template, graph: MiniFreebase, rng: random.Random
) -> dict[str, Any] | None:
    first = template.chains[0]
    anchor_a = rng.choice(graph.by_type[first.anchor])
    result = _follow(graph, {anchor_a}, first.path)
    anchors = [anchor_a]
    if len(template.chains) == 2:
        second = template.chains[1]
        if not result:
            return None
        # Answer first: walk back from a member so that the intersection is not empty.
        member = rng.choice(sorted(result))
        back = [s.REVERSE_OF[relation] for relation in reversed(second.path)]
        candidates = sorted(_follow(graph, {member}, back) - {anchor_a})
        candidates = [c for c in candidates if second.anchor in graph.types[c]]
        if not candidates:
            return None
        anchor_b = rng.choice(candidates)
        result = result & _follow(graph, {anchor_b}, second.path)
        anchors.append(anchor_b)
    if not result:
        return None
    names = {"a": graph.names[anchors[0]], "b": graph.names[anchors[-1]]}
    post = template.post
    if post is not None and post[0] in ("argmax", "argmin"):
        scored = sorted((graph.values[(entity, post[1])], entity) for entity in result)
        if len(scored) < 2:
            return None
        best, runner_up = (
            (scored[-1], scored[-2]) if post[0] == "argmax" else (scored[0], scored[1])
        )
        if best[0] == runner_up[0]:
            return None
        answers: list[tuple[str, str, str]] = [("Entity", best[1], graph.names[best[1]])]
    elif post is not None:
        answers = [("Value", str(len(result)), "")]
    else:
        if len(result) > MAX_ANSWERS:
            return None
        answers = [("Entity", entity, graph.names[entity]) for entity in sorted(result)]
    actions, program = _gold(template, anchors)
    return {
        "question": template.text.format(**names),
        "entities": {graph.names[anchor]: anchor for anchor in anchors},
        "actions": actions,
        "s_expression": str(program),
        "answer": [
            {
                "answer_type": kind,
                "answer_argument": value,
                **({"entity_name": name} if name else {}),
            }
            for kind, value, name in answers
        ],
        "source": "agentgym-eppo",
        "kind": template.kind,
    }


def _gold(template: Template, anchors: Sequence[str]) -> tuple[list[str], object]:
    """The gold action strings and the program they build."""
    actions: list[str] = []
    made = 0
    ends: list[tuple[str, SetProgram]] = []
    for chain, anchor in zip(template.chains, anchors, strict=True):
        reference: str = anchor
        program: SetProgram = Entity(anchor)
        for relation in chain.path:
            actions.append(f"get_relations({reference})")
            actions.append(f"get_neighbors({reference},{relation})")
            program = Join(relation, program)
            reference, made = f"#{made}", made + 1
        ends.append((reference, program))
    reference, program = ends[0]
    if len(ends) == 2:
        actions.append(f"intersection({ends[0][0]},{ends[1][0]})")
        program = And(ends[0][1], ends[1][1])
        reference, made = f"#{made}", made + 1
    post = template.post
    if post is None:
        return actions, program
    if post[0] == "count":
        actions.append(f"count({reference})")
        return actions, Count(program)
    actions.append(f"get_attributes({reference})")
    actions.append(f"{post[0]}({reference},{post[1]})")
    kind: Literal["ARGMAX", "ARGMIN"] = "ARGMAX" if post[0] == "argmax" else "ARGMIN"
    return actions, Superlative(kind, program, post[1])
