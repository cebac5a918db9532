"""Made-up but readable names for the generated graph's entities.

Every name comes from the generator's seeded RNG, so the same seed gives the same
names. They are invented on purpose: the graph must not pass for real-world facts.
"""

from __future__ import annotations

import random

ID_ALPHABET = "0123456789bcdfghjklmnpqrstvwxyz_"
SYLLABLES = (
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
CITY_SUFFIXES = (
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
COUNTRY_SUFFIXES = ("ia", "land", "stan", "mark", "ora", "via", "onia", "esh")
ADJECTIVES = (
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
NOUNS = (
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
MASCOTS = (
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
VENUES = ("Arena", "Stadium", "Park", "Field", "Dome", "Grounds")
COMPANY_WORDS = (
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
COMPANY_SUFFIXES = (
    "Dynamics",
    "Systems",
    "Holdings",
    "Works",
    "Labs",
    "Group",
    "Partners",
    "Industries",
)
FILM_GENRES = (
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
MUSIC_GENRES = (
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
PROFESSIONS = (
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
SPORTS = ("Football", "Basketball", "Ice hockey", "Baseball", "Rugby", "Volleyball")
INDUSTRIES = (
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


class Namer:
    """Draws names and Freebase-style ids from ``rng``; one method per kind of entity."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def entity_id(self) -> str:
        """A mid-like id, ``m.0`` and five characters (uniqueness is the caller's job)."""
        return "m.0" + "".join(self.rng.choice(ID_ALPHABET) for _ in range(5))

    def word(self, low: int, high: int) -> str:
        """A capitalised word of ``low`` to ``high`` syllables."""
        count = self.rng.randint(low, high)
        return "".join(self.rng.choice(SYLLABLES) for _ in range(count)).capitalize()

    def country(self) -> str:
        return self.word(1, 2) + self.rng.choice(COUNTRY_SUFFIXES)

    def city(self) -> str:
        return self.word(1, 2) + self.rng.choice(CITY_SUFFIXES)

    def person(self) -> str:
        given = self.word(1, 2)
        return f"{given} {self.word(2, 3)}"

    def record_label(self) -> str:
        return f"{self.word(1, 2)} Records"

    def venue(self) -> str:
        stem = self.word(2, 3)
        return f"{stem} {self.rng.choice(VENUES)}"

    def team(self, place: str) -> str:
        return f"{place} {self.rng.choice(MASCOTS)}"

    def company(self) -> str:
        first = self.rng.choice(COMPANY_WORDS)
        middle = self.word(1, 2)
        return f"{first} {middle} {self.rng.choice(COMPANY_SUFFIXES)}"

    def title(self, album: bool = False) -> str:
        """A film title, or an album title with ``album``."""
        adjective, noun = self.rng.choice(ADJECTIVES), self.rng.choice(NOUNS)
        shape = self.rng.randrange(4)
        if shape == 0:
            return f"The {adjective} {noun}"
        if shape == 1:
            return f"{noun} of the {adjective} {self.rng.choice(NOUNS)}"
        if shape == 2:
            return f"{adjective} {noun}s" if album else f"A {adjective} {noun}"
        return f"{adjective} {noun} Sessions" if album else f"{noun} {self.rng.randint(2, 9)}"
