"""The project's own ALFWorld games: rooms, placements and tasks drawn from a seed.

A game is what ALFWorld stores as ``game.tw-pddl`` plus ``traj_data.json``: a PDDL
problem over ALFRED's domain, the ALFRED grammar with the task sentence in place of
``UNKNOWN GOAL``, and the task's ``task_type``/``pddl_params``. Object, receptacle and
location names use ALFRED's mangled form (``Mug|+00.32|+00.90|-01.23`` written
``Mug_bar__plus_00_dot_32_bar__plus_00_dot_90_bar__minus_01_dot_23``) so that alfworld's
demangler turns them into "mug 1", exactly as on the original games.

Every generated game is played by alfworld's handcoded expert on the real engine
(:mod:`.expert`), and kept only if the expert wins within ``max_expert_steps``; its
actions become the game's walkthrough. All games share one domain and one grammar,
so the shipped files store only what differs (the problem, the task sentence and the
parameters) and :func:`game_data` rebuilds the ``game.tw-pddl`` JSON at load.

Regenerate the shipped files with ``python -m agentgym_eppo.environments.alfworld.games``
(same seeds, same bytes).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...core.tasks import asset_path, write_jsonl_gz
from .rooms import (
    CAN_CONTAIN,
    CLEANABLE,
    COOLABLE,
    HEATABLE,
    LAMP_CLASS,
    LAMP_HOLDERS,
    MAX_RECEPTACLES,
    MIN_RECEPTACLES,
    OPENABLE,
    ROOM_KINDS,
    RoomKind,
)

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""ALFWorld's six task types (``traj_data["task_type"]``)."""

SPLIT_SIZES = {"train": 300, "dev": 60, "test": 60}
SPLIT_SEEDS = {"train": 1_000, "dev": 2_000, "test": 3_000}
DEFAULT_MAX_EXPERT_STEPS = 20
"""A shipped game is one the handcoded expert wins within AgentBench's turn limit."""

_TASK_SENTENCES = {
    "pick_and_place_simple": ("put a {obj} in {recep}", "put some {obj} on {recep}"),
    "look_at_obj_in_light": (
        "look at {obj} under the {toggle}",
        "examine the {obj} with the {toggle}",
    ),
    "pick_clean_then_place_in_recep": (
        "put a clean {obj} in {recep}",
        "clean some {obj} and put it in {recep}",
    ),
    "pick_heat_then_place_in_recep": (
        "put a hot {obj} in {recep}",
        "heat some {obj} and put it in {recep}",
    ),
    "pick_cool_then_place_in_recep": (
        "put a cool {obj} in {recep}",
        "cool some {obj} and put it in {recep}",
    ),
    "pick_two_obj_and_place": (
        "put two {obj} in {recep}",
        "find two {obj} and put them in {recep}",
    ),
}

_ROOMS_FOR_TASK = {
    "pick_and_place_simple": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "look_at_obj_in_light": ("livingroom", "bedroom"),
    "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
    "pick_heat_then_place_in_recep": ("kitchen",),
    "pick_cool_then_place_in_recep": ("kitchen",),
    "pick_two_obj_and_place": ("kitchen", "livingroom", "bedroom", "bathroom"),
}

_MANGLING = {"|": "_bar_", "+": "_plus_", "-": "_minus_", ".": "_dot_", ",": "_comma_"}


def mangle(name: str) -> str:
    """ALFRED's PDDL-safe spelling of an id: ``Mug|+00.32`` -> ``Mug_bar__plus_00_dot_32``."""
    return "".join(_MANGLING.get(char, char) for char in name)


@dataclass(frozen=True)
class Placed:
    """A receptacle or object of the room: its class, ALFRED id and location."""

    cls: str
    id: str
    location: str


@dataclass
class Room:
    kind: RoomKind
    receptacles: list[Placed] = field(default_factory=list)
    objects: list[Placed] = field(default_factory=list)
    contents: dict[str, str] = field(default_factory=dict)
    """object id -> receptacle id."""
    agent_location: str = ""


@dataclass(frozen=True)
class Task:
    task_type: str
    object_target: str
    parent_target: str = ""
    toggle_target: str = ""

    @property
    def pddl_params(self) -> dict[str, Any]:
        return {
            "object_target": self.object_target,
            "parent_target": self.parent_target,
            "toggle_target": self.toggle_target,
            "mrecep_target": "",
            "object_sliced": False,
        }


def _coordinate(rng: random.Random, low: float, high: float) -> str:
    return f"{rng.uniform(low, high):+06.2f}"


def _location(rng: random.Random, used: set[str]) -> str:
    while True:
        x, z = rng.randint(-12, 12), rng.randint(-12, 12)
        rotation, horizon = rng.choice((0, 90, 180, 270)), rng.choice((-30, 0, 30, 60))
        location = f"loc|{x}|{z}|{rotation}|{horizon}"
        if location not in used:
            used.add(location)
            return location


def _object_id(rng: random.Random, cls: str, used: set[str]) -> str:
    while True:
        ident = "|".join(
            (cls, _coordinate(rng, -4, 4), _coordinate(rng, 0, 2.5), _coordinate(rng, -4, 4))
        )
        if ident not in used:
            used.add(ident)
            return ident


def build_room(rng: random.Random, kind: RoomKind) -> Room:
    """Draw receptacle counts and positions, then put 1-3 of each object class somewhere
    that can hold it (ALFRED's ``canContain``)."""
    room = Room(kind)
    ids: set[str] = set()
    locations: set[str] = set()
    counts = {cls: rng.randint(low, high) for cls, low, high in kind.receptacles}
    while sum(counts.values()) < MIN_RECEPTACLES:
        counts[rng.choice(kind.padding)] += 1
    while sum(counts.values()) > MAX_RECEPTACLES:
        counts[rng.choice(kind.padding)] -= 1
    for cls, count in counts.items():
        for _ in range(count):
            ident = _object_id(rng, cls, ids)
            if cls in ("SinkBasin", "BathtubBasin"):
                ident = ident.replace(cls, cls.removesuffix("Basin"), 1) + "|" + cls
            room.receptacles.append(Placed(cls, ident, _location(rng, locations)))
    room.agent_location = _location(rng, locations)
    for cls in kind.objects:
        holders = [r for r in room.receptacles if cls in CAN_CONTAIN.get(r.cls, ())]
        if not holders:
            continue
        for _ in range(rng.randint(1, 3)):
            _put(room, rng, cls, rng.choice(holders), ids)
    if kind.name in ("livingroom", "bedroom"):
        holders = [r for r in room.receptacles if r.cls in LAMP_HOLDERS]
        if holders:
            _put(room, rng, LAMP_CLASS, rng.choice(holders), ids)
    return room


def _put(room: Room, rng: random.Random, cls: str, holder: Placed, ids: set[str]) -> None:
    obj = Placed(cls, _object_id(rng, cls, ids), holder.location)
    room.objects.append(obj)
    room.contents[obj.id] = holder.id


def choose_task(rng: random.Random, room: Room, task_type: str) -> Task | None:
    """A task of ``task_type`` that the room allows and that is not already done; or None."""
    present = sorted({o.cls for o in room.objects if o.cls != LAMP_CLASS})
    recep_classes = sorted({r.cls for r in room.receptacles})
    if task_type == "look_at_obj_in_light":
        if not any(o.cls == LAMP_CLASS for o in room.objects) or not present:
            return None
        return Task(task_type, rng.choice(present), toggle_target=LAMP_CLASS)
    trait = {
        "pick_clean_then_place_in_recep": CLEANABLE,
        "pick_heat_then_place_in_recep": HEATABLE,
        "pick_cool_then_place_in_recep": COOLABLE,
    }.get(task_type)
    needed = {
        "pick_clean_then_place_in_recep": "SinkBasin",
        "pick_heat_then_place_in_recep": "Microwave",
        "pick_cool_then_place_in_recep": "Fridge",
    }.get(task_type)
    if needed is not None and needed not in recep_classes:
        return None
    minimum = 2 if task_type == "pick_two_obj_and_place" else 1
    candidates = []
    for obj_cls in present:
        if trait is not None and obj_cls not in trait:
            continue
        instances = [o for o in room.objects if o.cls == obj_cls]
        if len(instances) < minimum:
            continue
        holder_classes = {_class_of(room, room.contents[o.id]) for o in instances}
        for recep_cls in recep_classes:
            if recep_cls == needed or recep_cls in holder_classes:
                continue  # a goal already met at the start, or one that needs no errand
            if obj_cls in CAN_CONTAIN.get(recep_cls, ()):
                candidates.append((obj_cls, recep_cls))
    if not candidates:
        return None
    obj_cls, recep_cls = rng.choice(candidates)
    return Task(task_type, obj_cls, parent_target=recep_cls)


def _class_of(room: Room, receptacle_id: str) -> str:
    return next(r.cls for r in room.receptacles if r.id == receptacle_id)


def task_sentence(rng: random.Random, task: Task) -> str:
    template = rng.choice(_TASK_SENTENCES[task.task_type])
    return template.format(
        obj=task.object_target.lower(),
        recep=task.parent_target.lower(),
        toggle=task.toggle_target.lower(),
    )


def _goal(task: Task) -> str:
    obj, recep, toggle = task.object_target, task.parent_target, task.toggle_target
    if task.task_type == "look_at_obj_in_light":
        return (
            "(and (exists (?ot - object ?r - receptacle ?a - agent ?l - location)"
            f" (and (objectType ?ot {toggle}Type) (toggleable ?ot) (isToggled ?ot)"
            " (receptacleAtLocation ?r ?l) (atLocation ?a ?l) (inReceptacle ?ot ?r)))"
            f" (exists (?o - object ?a - agent) (and (objectType ?o {obj}Type) (holds ?a ?o))))"
        )
    if task.task_type == "pick_two_obj_and_place":
        return (
            "(exists (?r - receptacle ?o1 - object ?o2 - object)"
            f" (and (receptacleType ?r {recep}Type) (objectType ?o1 {obj}Type)"
            f" (objectType ?o2 {obj}Type) (not (= ?o1 ?o2))"
            " (inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r)))"
        )
    state = {
        "pick_clean_then_place_in_recep": " (cleanable ?o) (isClean ?o)",
        "pick_heat_then_place_in_recep": " (heatable ?o) (isHot ?o)",
        "pick_cool_then_place_in_recep": " (coolable ?o) (isCool ?o)",
    }.get(task.task_type, "")
    return (
        "(exists (?r - receptacle ?o - object)"
        f" (and (receptacleType ?r {recep}Type) (objectType ?o {obj}Type){state}"
        " (inReceptacle ?o ?r)))"
    )


def pddl_problem(name: str, room: Room, task: Task) -> str:
    """The PDDL problem of a game, in the shape of ALFWorld's own (mangled ids, ALFRED facts)."""
    object_classes = sorted({o.cls for o in room.objects})
    recep_classes = sorted({r.cls for r in room.receptacles})
    locations = sorted({r.location for r in room.receptacles} | {room.agent_location})
    declarations = ["agent1 - agent"]
    declarations += [f"{cls}Type - otype" for cls in object_classes]
    declarations += [f"{cls}Type - rtype" for cls in recep_classes]
    declarations += [f"{mangle(o.id)} - object" for o in room.objects]
    declarations += [f"{mangle(r.id)} - receptacle" for r in room.receptacles]
    declarations += [f"{mangle(loc)} - location" for loc in locations]
    init = ["(= (total-cost) 0)", f"(atLocation agent1 {mangle(room.agent_location)})"]
    for r in room.receptacles:
        init.append(f"(receptacleType {mangle(r.id)} {r.cls}Type)")
        init.append(f"(receptacleAtLocation {mangle(r.id)} {mangle(r.location)})")
        if r.cls in OPENABLE:
            init.append(f"(openable {mangle(r.id)})")
    for o in room.objects:
        ident = mangle(o.id)
        init.append(f"(objectType {ident} {o.cls}Type)")
        init.append(f"(inReceptacle {ident} {mangle(room.contents[o.id])})")
        init.append(f"(objectAtLocation {ident} {mangle(o.location)})")
        if o.cls == LAMP_CLASS:
            init.append(f"(toggleable {ident})")
            continue
        init.append(f"(pickupable {ident})")
        for trait, members in (
            ("cleanable", CLEANABLE),
            ("heatable", HEATABLE),
            ("coolable", COOLABLE),
        ):
            if o.cls in members:
                init.append(f"({trait} {ident})")
    for recep_cls in recep_classes:
        for obj_cls in object_classes:
            if obj_cls in CAN_CONTAIN.get(recep_cls, ()):
                init.append(f"(canContain {recep_cls}Type {obj_cls}Type)")
    return (
        f"(define (problem plan_{name})\n(:domain alfred)\n(:objects\n"
        + "\n".join(declarations)
        + "\n)\n(:init\n"
        + "\n".join(init)
        + f"\n)\n(:goal {_goal(task)})\n(:metric minimize (total-cost))\n)\n"
    )


@lru_cache(maxsize=1)
def _shared_logic() -> tuple[str, str]:
    from .engine import alfred_domain, alfred_grammar

    return alfred_domain(), alfred_grammar()


def game_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``game.tw-pddl`` JSON of a shipped game row (domain and grammar filled in)."""
    domain, grammar = _shared_logic()
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", row["task"]),
        "pddl_problem": row["pddl_problem"],
        "solvable": bool(row["solvable"]),
        "walkthrough": list(row["walkthrough"]),
    }


def draft_games(split: str, seed: int) -> Iterator[dict[str, Any]]:
    """Unverified game rows, task types in turn, forever (the caller keeps ``count``)."""
    rng = random.Random(seed)
    number = 0
    while True:
        task_type = TASK_TYPES[number % len(TASK_TYPES)]
        kind = ROOM_KINDS[rng.choice(_ROOMS_FOR_TASK[task_type])]
        room = build_room(rng, kind)
        task = choose_task(rng, room, task_type)
        if task is None:
            continue
        name = f"{split}-{number:04d}"
        yield {
            "name": name,
            "room": kind.name,
            "task_type": task.task_type,
            "pddl_params": task.pddl_params,
            "task": task_sentence(rng, task),
            "pddl_problem": pddl_problem(name.replace("-", "_"), room, task),
            "solvable": False,
            "walkthrough": [],
        }
        number += 1


def generate_split(
    split: str,
    count: int | None = None,
    seed: int | None = None,
    max_expert_steps: int = DEFAULT_MAX_EXPERT_STEPS,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """``count`` games of ``split`` that the handcoded expert wins, their walkthroughs filled in."""
    from .engine import ALFWorldEngine
    from .expert import solve

    count = SPLIT_SIZES[split] if count is None else count
    seed = SPLIT_SEEDS[split] if seed is None else seed
    engine = ALFWorldEngine()
    kept: list[dict[str, Any]] = []
    per_type = {task_type: 0 for task_type in TASK_TYPES}
    quota = -(-count // len(TASK_TYPES))
    for row in draft_games(split, seed):
        if per_type[row["task_type"]] >= quota:
            continue
        walkthrough = solve(engine, game_data(row), row, max_steps=max_expert_steps)
        if walkthrough is None:
            continue
        row = {
            **row,
            "name": f"{split}-{len(kept):04d}",
            "solvable": True,
            "walkthrough": walkthrough,
        }
        kept.append(row)
        if progress:
            print(f"{split}: {len(kept)}/{count} ({row['task_type']})", flush=True)
        per_type[row["task_type"]] += 1
        if len(kept) == count:
            break
    engine.close()
    return kept


def shipped_path(split: str) -> Path:
    return asset_path("alfworld", f"{split}.jsonl.gz")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="folder (default: the assets)")
    parser.add_argument("--splits", nargs="*", default=list(SPLIT_SIZES))
    args = parser.parse_args(argv)
    for split in args.splits:
        rows = generate_split(split, progress=True)
        path = (args.out / f"{split}.jsonl.gz") if args.out else shipped_path(split)
        write_jsonl_gz(path, rows)
        print(f"{split}: {len(rows)} games -> {path}")


if __name__ == "__main__":
    main()
