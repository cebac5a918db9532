"""The generated tables' schemas: sixteen domains, each a table with typed value pools.

A :class:`Domain` names its table (one of a few titles), its rows' entity, a key column
and the other columns; each :class:`Column` says how questions phrase it and how to draw
a value. Every value is text, as in AgentBench; numeric columns hold numbers as text.

>>> import random
>>> rows = DOMAINS[0].draw_rows(random.Random(0))
>>> len(rows[0]) == 1 + len(DOMAINS[0].columns), 8 <= len(rows) <= 18
(True, True)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from .naming import coined, person


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

    def draw_rows(self, rng: random.Random) -> list[list[str]]:
        """A fresh table's rows, key first; keys are distinct ignoring case."""
        keys: list[str] = []
        while len(keys) < rng.randint(8, 18):
            key = self.key.draw(rng)
            if key.casefold() not in {k.casefold() for k in keys}:
                keys.append(key)
        return [[key, *(column.draw(rng) for column in self.columns)] for key in keys]


def pick(values: str) -> Callable[[random.Random], str]:
    """A draw of one of the ``|``-separated ``values``."""
    pool = values.split("|")
    return lambda rng: rng.choice(pool)


def integer(low: int, high: int) -> Callable[[random.Random], str]:
    """A draw of an integer in ``[low, high]``."""
    return lambda rng: str(rng.randint(low, high))


def decimal(low: float, high: float, places: int = 1) -> Callable[[random.Random], str]:
    """A draw of a number in ``[low, high]`` with ``places`` decimals."""
    return lambda rng: f"{rng.uniform(low, high):.{places}f}"


def numeric(name: str, phrase: str, draw: Callable[[random.Random], str]) -> Column:
    """A column whose values questions compare as numbers."""
    return Column(name, phrase, draw, numeric=True)


DOMAINS: tuple[Domain, ...] = (
    Domain(
        ("Football League Standings", "League Table", "Club Season Records"),
        "club",
        "clubs",
        Column("Club", "club", coined("United|City|Rovers|Athletic|FC|Wanderers")),
        (
            Column("City", "city", pick("Leeds|Porto|Lyon|Turin|Ghent|Bremen|Malmo|Cork")),
            Column("Stadium", "stadium", coined("Park|Arena|Ground|Stadium")),
            numeric("Played", "games played", integer(30, 38)),
            numeric("Won", "wins", integer(3, 28)),
            numeric("Lost", "losses", integer(2, 25)),
            numeric("Points", "points", integer(15, 90)),
        ),
    ),
    Domain(
        ("Olympic Medal Table", "Medal Count", "Games Medal Standings"),
        "nation",
        "nations",
        Column("Nation", "nation", coined("Republic|Islands|Federation|")),
        (
            Column("Continent", "continent", pick("Europe|Asia|Africa|Oceania|Americas")),
            numeric("Gold", "gold medals", integer(0, 40)),
            numeric("Silver", "silver medals", integer(0, 40)),
            numeric("Bronze", "bronze medals", integer(0, 40)),
            numeric("Athletes", "athletes sent", integer(5, 600)),
        ),
    ),
    Domain(
        ("Employee Directory", "Staff Records", "Company Employees"),
        "employee",
        "employees",
        Column("Name", "name", person),
        (
            Column("Department", "department", pick("Sales|Finance|Legal|Research|Support")),
            Column("Title", "job title", pick("Analyst|Manager|Engineer|Clerk|Director")),
            Column("Office", "office", pick("Berlin|Austin|Osaka|Nairobi|Lima|Oslo")),
            numeric("Salary", "salary", integer(32000, 180000)),
            numeric("Hire Year", "hire year", integer(1995, 2023)),
        ),
    ),
    Domain(
        ("Film Releases", "Movie Box Office", "Cinema Catalogue"),
        "film",
        "films",
        Column("Title", "title", coined("Rising|Returns|Forever|Protocol|Legacy|")),
        (
            Column("Director", "director", person),
            Column("Genre", "genre", pick("Drama|Comedy|Thriller|Horror|Animation|Western")),
            numeric("Year", "release year", integer(1970, 2023)),
            numeric("Box Office (millions)", "box office in millions", decimal(0.5, 900.0)),
            numeric("Rating", "rating", decimal(1.0, 9.9)),
        ),
    ),
    Domain(
        ("Mountain Peaks", "Highest Summits", "Peak Register"),
        "peak",
        "peaks",
        Column("Peak", "peak", coined("Peak|Horn|Spitze|Mount|Dome")),
        (
            Column("Country", "country", pick("Nepal|Chile|Peru|Italy|Canada|Kenya|Norway")),
            Column("Range", "mountain range", pick("Andes|Alps|Rockies|Himalaya|Atlas")),
            numeric("Height (m)", "height in metres", integer(1200, 8800)),
            numeric("First Ascent", "year of the first ascent", integer(1786, 1990)),
            numeric("Prominence (m)", "prominence in metres", integer(300, 4000)),
        ),
    ),
    Domain(
        ("Book Catalogue", "Library Holdings", "Publisher Backlist"),
        "book",
        "books",
        Column("Title", "title", coined("Chronicles|Letters|Gardens|Tides|Notebook|")),
        (
            Column("Author", "author", person),
            Column("Genre", "genre", pick("Mystery|Poetry|History|Science|Fantasy|Memoir")),
            Column("Publisher", "publisher", pick("Harbor|Lantern|Quill|Meridian|Atlas")),
            numeric("Pages", "page count", integer(90, 1200)),
            numeric("Year", "publication year", integer(1900, 2023)),
        ),
    ),
    Domain(
        ("Airport Traffic", "Busiest Airports", "Airport Statistics"),
        "airport",
        "airports",
        Column("Airport", "airport", coined("International|Regional|Field|Airport")),
        (
            Column("Country", "country", pick("Brazil|Japan|Spain|Egypt|India|Mexico")),
            numeric("Passengers", "passenger count", integer(150000, 90000000)),
            numeric("Runways", "number of runways", integer(1, 6)),
            numeric("Rank", "rank", integer(1, 200)),
            numeric("Opened", "opening year", integer(1920, 2015)),
        ),
    ),
    Domain(
        ("Election Results", "District Vote Counts", "Constituency Results"),
        "candidate",
        "candidates",
        Column("Candidate", "candidate", person),
        (
            Column("Party", "party", pick("Green|Labour|Liberal|Conservative|Independent")),
            Column("District", "district", pick("North|South|East|West|Central|Harbour")),
            numeric("Votes", "votes", integer(150, 60000)),
            numeric("Share (%)", "vote share in percent", decimal(0.5, 70.0)),
        ),
    ),
    Domain(
        ("Car Models", "Vehicle Specifications", "Automobile Catalogue"),
        "model",
        "models",
        Column("Model", "model", coined("GT|Sport|Touring|Hybrid|S")),
        (
            Column("Maker", "maker", pick("Aurora|Belmont|Corsa|Draco|Everline|Falcon")),
            Column("Body", "body style", pick("Sedan|Coupe|Wagon|SUV|Hatchback")),
            numeric("Year", "model year", integer(1990, 2024)),
            numeric("Horsepower", "horsepower", integer(70, 700)),
            numeric("Price (USD)", "price in dollars", integer(9000, 250000)),
        ),
    ),
    Domain(
        ("University Rankings", "College Profiles", "Higher Education Table"),
        "university",
        "universities",
        Column("University", "university", coined("University|College|Institute")),
        (
            Column("Country", "country", pick("Germany|Korea|Ghana|Chile|Poland|Canada")),
            Column("Type", "type", pick("Public|Private")),
            numeric("Students", "student count", integer(1200, 80000)),
            numeric("Founded", "founding year", integer(1088, 2010)),
            numeric("Score", "ranking score", decimal(20.0, 99.9)),
        ),
    ),
    Domain(
        ("Music Albums", "Album Discography", "Record Sales"),
        "album",
        "albums",
        Column("Album", "album", coined("Nights|Echoes|Sessions|Blue|Live|")),
        (
            Column("Artist", "artist", person),
            Column("Label", "record label", pick("Sunset|Polar|Vinyl House|Ember|Northbeat")),
            numeric("Year", "release year", integer(1960, 2023)),
            numeric("Tracks", "number of tracks", integer(6, 24)),
            numeric("Sales", "copies sold", integer(5000, 9000000)),
        ),
    ),
    Domain(
        ("Weather Stations", "Climate Observations", "Station Climate Normals"),
        "station",
        "stations",
        Column("Station", "station", coined("Ridge|Point|Valley|Harbor|Observatory")),
        (
            Column("Region", "region", pick("Coastal|Highland|Desert|Plains|Arctic")),
            numeric("Elevation (m)", "elevation in metres", integer(0, 4200)),
            numeric("Mean Temp (C)", "mean temperature", decimal(-15.0, 30.0)),
            numeric("Rainfall (mm)", "annual rainfall in millimetres", integer(20, 3500)),
        ),
    ),
    Domain(
        ("Space Missions", "Launch Log", "Mission Archive"),
        "mission",
        "missions",
        Column("Mission", "mission", coined("I|II|III|Explorer|Pathfinder|Voyager")),
        (
            Column("Agency", "agency", pick("NASA|ESA|JAXA|ISRO|CNSA|Roscosmos")),
            Column("Outcome", "outcome", pick("Success|Partial|Failure")),
            numeric("Launch Year", "launch year", integer(1958, 2024)),
            numeric("Crew", "crew size", integer(0, 7)),
            numeric("Duration (days)", "duration in days", integer(1, 900)),
        ),
    ),
    Domain(
        ("Train Stations", "Rail Network Stations", "Metro Stops"),
        "station",
        "stations",
        Column("Station", "station", coined("Central|Junction|Square|Road|Gate")),
        (
            Column("Line", "line", pick("Red|Blue|Green|Yellow|Circle|Express")),
            numeric("Zone", "fare zone", integer(1, 6)),
            numeric("Opened", "opening year", integer(1863, 2022)),
            numeric("Platforms", "number of platforms", integer(1, 12)),
            numeric("Daily Riders", "daily riders", integer(300, 250000)),
        ),
    ),
    Domain(
        ("Restaurant Inspections", "Dining Guide", "Food Safety Scores"),
        "restaurant",
        "restaurants",
        Column("Restaurant", "restaurant", coined("Bistro|Kitchen|Grill|Diner|Cafe|House")),
        (
            Column("Cuisine", "cuisine", pick("Thai|Italian|Mexican|Ethiopian|Korean|French")),
            Column("Borough", "borough", pick("Riverside|Oldtown|Hillcrest|Docklands")),
            numeric("Score", "inspection score", integer(50, 100)),
            numeric("Seats", "number of seats", integer(10, 250)),
            numeric("Price Level", "price level", integer(1, 4)),
        ),
    ),
    Domain(
        ("Tennis Tournament Winners", "Tournament Finals", "Championship Results"),
        "final",
        "finals",
        Column("Tournament", "tournament", coined("Open|Masters|Classic|Cup|Championships")),
        (
            Column("Winner", "winner", person),
            Column("Surface", "surface", pick("Clay|Grass|Hard|Carpet")),
            numeric("Year", "year", integer(1968, 2024)),
            numeric("Prize Money", "prize money", integer(50000, 4000000)),
            numeric("Sets Played", "sets played", integer(2, 5)),
        ),
    ),
)
