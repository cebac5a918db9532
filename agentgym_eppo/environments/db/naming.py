"""Made-up names for the generated tables' key columns: people, clubs, films, peaks.

Every name comes from the generator's seeded RNG, so the same seed gives the same
names. Coined names join two or three syllables and a suffix the domain chooses:

>>> import random
>>> draw = coined("Park|Arena")
>>> draw(random.Random(0)) == draw(random.Random(0))
True
"""

from __future__ import annotations

import random
from collections.abc import Callable

SYLLABLES = [
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
FIRST_NAMES = [
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
LAST_NAMES = [
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


def person(rng: random.Random) -> str:
    """A first and a last name."""
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def coined(suffixes: str) -> Callable[[random.Random], str]:
    """A draw of a coined stem and one of the ``|``-separated ``suffixes`` (which may be
    empty: ``"Rising|"`` sometimes gives the bare stem)."""
    pool = suffixes.split("|")

    def draw(rng: random.Random) -> str:
        stem = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        return f"{stem} {rng.choice(pool)}".strip()

    return draw
