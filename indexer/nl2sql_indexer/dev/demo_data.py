"""A small, deterministic demo "concert" database for trying nl2sql out.

:func:`demo_sql` returns PostgreSQL text (DDL, ``COMMENT ON`` and ``INSERT``
statements) that builds four tables -- ``stadium``, ``singer``, ``concert`` and
``singer_in_concert`` -- filled with a few hundred rows of invented but
realistic data. All randomness comes from ``random.Random(42)``, so every call
returns exactly the same text, and the gold answers of :data:`DEMO_QUESTIONS`
are stable.

The data is meant to exercise the interesting parts of the pipeline: string
columns (``country``, ``location``, ``theme``) repeat, so they make useful cell
values for the value index; there are foreign keys to join over; one stadium
never hosted a concert, so ``NOT IN`` questions have an answer.

Nothing here needs a database or a third-party package.
"""

from __future__ import annotations

import random

__all__ = ["demo_sql", "DEMO_QUESTIONS", "DEMO_TABLES", "SEED"]

#: Seed of the generator; changing it changes every row (and maybe the gold answers).
SEED = 42

#: The tables :func:`demo_sql` creates, in creation order.
DEMO_TABLES: tuple[str, ...] = ("stadium", "singer", "concert", "singer_in_concert")

# --------------------------------------------------------------------------- #
# Hand-written vocabulary (invented names; real cities and countries).
# --------------------------------------------------------------------------- #

# (name, city, capacity). Invented venue names in real cities; cities repeat.
_STADIUMS: list[tuple[str, str, int]] = [
    ("Riverside Arena", "London", 21000),
    ("Kingsgate Park", "London", 42500),
    ("Northbank Stadium", "Manchester", 55000),
    ("Meadowlands Bowl", "Manchester", 18000),
    ("Harbour Point Arena", "Glasgow", 14300),
    ("Caledonia Field", "Glasgow", 51800),
    ("Lakeshore Dome", "Chicago", 38000),
    ("Windy Ridge Amphitheatre", "Chicago", 27500),
    ("Sunset Coliseum", "Los Angeles", 68000),
    ("Pacific Crest Arena", "Los Angeles", 19500),
    ("Maple Leaf Gardens East", "Toronto", 33000),
    ("Rheinufer Halle", "Berlin", 17200),
    ("Spreepark Stadion", "Berlin", 74400),
    ("Parc des Lumières", "Paris", 48000),
    ("Ciudad Jardín Arena", "Madrid", 24600),
    ("Harbourview Pavilion", "Sydney", 12800),
]

# Index (into _STADIUMS) of the newest venue: it never hosted a concert.
_UNUSED_STADIUM = len(_STADIUMS) - 1

# country -> (first names, last names); all people are invented combinations.
_PEOPLE: dict[str, tuple[list[str], list[str]]] = {
    "United States": (
        ["Jake", "Madison", "Tyler", "Brooke", "Caleb", "Savannah", "Logan", "Harper"],
        ["Whitfield", "Calloway", "Brennan", "Hollis", "Mercer", "Dawson", "Pryor"],
    ),
    "United Kingdom": (
        ["Oliver", "Imogen", "Harry", "Freya", "Alfie", "Poppy", "Rhys", "Isla"],
        ["Ashworth", "Pemberton", "Hargreaves", "Thornbury", "Blakemore", "Fenwick"],
    ),
    "France": (
        ["Camille", "Théo", "Manon", "Hugo", "Léa", "Julien", "Chloé"],
        ["Delacroix", "Marchand", "Rousseau", "Lefèvre", "Garnier", "Beaumont"],
    ),
    "Netherlands": (
        ["Daan", "Sanne", "Jesse", "Fleur", "Bram", "Lotte"],
        ["van Dijkstra", "de Vries", "Kuipers", "Verhoeven", "Brouwer"],
    ),
    "Canada": (
        ["Liam", "Chloe", "Owen", "Avery", "Nolan", "Maëlle"],
        ["Tremblay", "MacLeod", "Gagnon", "Fraser", "Bouchard"],
    ),
    "Japan": (
        ["Haruto", "Yui", "Sota", "Aoi", "Ren", "Hina"],
        ["Takahashi", "Morimoto", "Fujiwara", "Kawaguchi", "Nakamura"],
    ),
    "Brazil": (
        ["Gabriel", "Larissa", "Thiago", "Beatriz", "Rafael", "Luana"],
        ["Carvalho", "Nogueira", "Albuquerque", "Teixeira", "Moreira"],
    ),
    "Spain": (
        ["Pablo", "Lucía", "Álvaro", "Carmen", "Diego", "Nerea"],
        ["Ortega", "Navarro", "Castillo", "Iglesias", "Vidal"],
    ),
    "Australia": (
        ["Cooper", "Matilda", "Lachlan", "Ruby", "Harrison"],
        ["Kingsley", "Whitlam", "Bancroft", "Ellery"],
    ),
}

# How many singers come from each country (sums to 60); the repeats make
# ``country`` a good cell-value column.
_SINGERS_PER_COUNTRY: dict[str, int] = {
    "United States": 12,
    "United Kingdom": 10,
    "France": 7,
    "Netherlands": 5,
    "Canada": 6,
    "Japan": 6,
    "Brazil": 5,
    "Spain": 5,
    "Australia": 4,
}

_SONG_WORDS_A = [
    "Midnight",
    "Golden",
    "Electric",
    "Silent",
    "Paper",
    "Neon",
    "Velvet",
    "Broken",
    "Crystal",
    "Summer",
    "Wild",
    "Hollow",
    "Burning",
    "Distant",
    "Silver",
    "Lonely",
    "Crimson",
    "Endless",
]
_SONG_WORDS_B = [
    "Heart",
    "Skyline",
    "River",
    "Highway",
    "Dreams",
    "Rain",
    "Fire",
    "Horizon",
    "Echoes",
    "Lights",
    "Road",
    "Tides",
    "Shadows",
    "Garden",
    "Satellite",
    "Parade",
]

_THEMES = [
    "Summer Nights",
    "Acoustic Evening",
    "Rock Revival",
    "Jazz Under the Stars",
    "Pop Explosion",
    "Winter Gala",
    "Charity Live",
    "Folk Roots",
    "Electronic Waves",
    "Festival Opening",
]

_CONCERT_PREFIXES = [
    "Live at",
    "Night at",
    "Sounds of",
    "Encore at",
    "Gala at",
    "Echoes of",
]

_FIRST_YEAR, _LAST_YEAR = 2014, 2024

_N_CONCERTS = 120
_N_SINGER_IN_CONCERT = 300


# --------------------------------------------------------------------------- #
# SQL text helpers.
# --------------------------------------------------------------------------- #


def _lit(value: object) -> str:
    """Render one Python value as a PostgreSQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _ident(name: str) -> str:
    """Quote an identifier (schema name) only when it needs quoting."""
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'


def _insert(table: str, columns: list[str], rows: list[tuple]) -> str:
    """A multi-row INSERT statement (one row per line)."""
    values = ",\n".join("  (" + ", ".join(_lit(v) for v in row) + ")" for row in rows)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES\n{values};"


# --------------------------------------------------------------------------- #
# Row generation.
# --------------------------------------------------------------------------- #


def _generate(rng: random.Random) -> dict[str, list[tuple]]:
    """Generate every table's rows from ``rng``; returns table -> list of row tuples."""
    stadiums = _stadium_rows(rng)
    singers = _singer_rows(rng)
    concerts = _concert_rows(rng, stadiums)
    return {
        "stadium": stadiums,
        "singer": singers,
        "concert": concerts,
        "singer_in_concert": _singer_in_concert_rows(rng, concerts, singers),
    }


def _stadium_rows(rng: random.Random) -> list[tuple]:
    """stadium: (stadium_id, name, location, capacity, highest, lowest, average)."""
    stadiums = []
    for i, (name, city, capacity) in enumerate(_STADIUMS, start=1):
        if i - 1 == _UNUSED_STADIUM:
            highest = lowest = average = None  # opened recently: no attendance yet
        else:
            highest = rng.randint(int(capacity * 0.85), capacity)
            lowest = rng.randint(int(capacity * 0.25), int(capacity * 0.55))
            average = rng.randint(
                lowest + (highest - lowest) // 4, highest - (highest - lowest) // 4
            )
        stadiums.append((i, name, city, capacity, highest, lowest, average))
    return stadiums


# First names of _PEOPLE that are women's (the singer's is_male is False).
_FEMALE_FIRST = {
    "Madison",
    "Brooke",
    "Savannah",
    "Harper",
    "Imogen",
    "Freya",
    "Poppy",
    "Isla",
    "Camille",
    "Manon",
    "Léa",
    "Chloé",
    "Sanne",
    "Fleur",
    "Lotte",
    "Chloe",
    "Avery",
    "Maëlle",
    "Yui",
    "Aoi",
    "Hina",
    "Larissa",
    "Beatriz",
    "Luana",
    "Lucía",
    "Carmen",
    "Nerea",
    "Matilda",
    "Ruby",
}


def _singer_rows(rng: random.Random) -> list[tuple]:
    """singer: (singer_id, name, country, song_name, song_release_year, age, is_male)."""
    people = []
    for country, count in _SINGERS_PER_COUNTRY.items():
        firsts, lasts = _PEOPLE[country]
        combos = [(f, s) for f in firsts for s in lasts]
        for first, last in rng.sample(combos, count):
            people.append((f"{first} {last}", country, first))
    rng.shuffle(people)
    song_titles = [f"{a} {b}" for a in _SONG_WORDS_A for b in _SONG_WORDS_B]
    songs = rng.sample(song_titles, len(people))
    singers = []
    for i, ((name, country, first), song) in enumerate(zip(people, songs), start=1):
        age = rng.randint(19, 68)
        # a song released when the singer was at least 17 and not after 2024
        earliest = max(1975, 2024 - age + 17)
        release = rng.randint(earliest, 2024)
        singers.append((i, name, country, song, release, age, first not in _FEMALE_FIRST))
    return singers


def _concert_rows(rng: random.Random, stadiums: list[tuple]) -> list[tuple]:
    """concert: (concert_id, concert_name, theme, stadium_id, year); every stadium but the
    unused one hosts at least one, bigger venues a little more often."""
    used_stadiums = [s[0] for s in stadiums if s[0] - 1 != _UNUSED_STADIUM]
    weights = [stadiums[sid - 1][3] ** 0.5 for sid in used_stadiums]
    concerts = []
    seen_names: set[str] = set()
    for i in range(1, _N_CONCERTS + 1):
        if i <= len(used_stadiums):
            sid = used_stadiums[i - 1]
        else:
            sid = rng.choices(used_stadiums, weights=weights)[0]
        theme = rng.choice(_THEMES)
        year = rng.randint(_FIRST_YEAR, _LAST_YEAR)
        name = _concert_name(
            f"{rng.choice(_CONCERT_PREFIXES)} {stadiums[sid - 1][1]}", year, seen_names
        )
        concerts.append((i, name, theme, sid, year))
    return concerts


def _concert_name(base: str, year: int, seen_names: set[str]) -> str:
    """``base year``, numbered ``(2)``, ``(3)``... when taken; added to ``seen_names``."""
    name = f"{base} {year}"
    n = 2
    while name in seen_names:
        name = f"{base} {year} ({n})"
        n += 1
    seen_names.add(name)
    return name


def _singer_in_concert_rows(
    rng: random.Random, concerts: list[tuple], singers: list[tuple]
) -> list[tuple]:
    """singer_in_concert: (concert_id, singer_id), sorted; every concert has >= 1 singer."""
    pairs: set[tuple[int, int]] = set()
    singer_ids = [s[0] for s in singers]
    for c in concerts:
        pairs.add((c[0], rng.choice(singer_ids)))
    while len(pairs) < _N_SINGER_IN_CONCERT:
        pairs.add((rng.choice(concerts)[0], rng.choice(singer_ids)))
    return sorted(pairs)


# --------------------------------------------------------------------------- #
# DDL and comments.
# --------------------------------------------------------------------------- #

_DDL = """\
CREATE TABLE stadium (
  stadium_id integer PRIMARY KEY,
  name text NOT NULL,
  location text NOT NULL,
  capacity integer NOT NULL,
  highest integer,
  lowest integer,
  average integer
);

CREATE TABLE singer (
  singer_id integer PRIMARY KEY,
  name text NOT NULL,
  country text NOT NULL,
  song_name text,
  song_release_year integer,
  age integer,
  is_male boolean
);

CREATE TABLE concert (
  concert_id integer PRIMARY KEY,
  concert_name text NOT NULL,
  theme text,
  stadium_id integer NOT NULL REFERENCES stadium (stadium_id),
  year integer NOT NULL
);

CREATE TABLE singer_in_concert (
  concert_id integer NOT NULL REFERENCES concert (concert_id),
  singer_id integer NOT NULL REFERENCES singer (singer_id),
  PRIMARY KEY (concert_id, singer_id)
);
"""

_TABLE_COMMENTS: dict[str, str] = {
    "stadium": "Concert venues (stadiums and arenas) with their capacity and attendance figures.",
    "singer": "Singers who perform at concerts, with their best-known song.",
    "concert": "Concerts, each held at one stadium in a given year.",
    "singer_in_concert": "Which singers performed at which concert (many-to-many).",
}

_COLUMN_COMMENTS: dict[str, dict[str, str]] = {
    "stadium": {
        "stadium_id": "Unique id of the stadium.",
        "name": "Name of the stadium.",
        "location": "City where the stadium is.",
        "capacity": "Maximum number of spectators.",
        "highest": "Highest attendance ever recorded at the stadium.",
        "lowest": "Lowest attendance recorded at the stadium.",
        "average": "Average attendance per concert.",
    },
    "singer": {
        "singer_id": "Unique id of the singer.",
        "name": "Full name of the singer.",
        "country": "Country the singer comes from.",
        "song_name": "Title of the singer's best-known song.",
        "song_release_year": "Year that song was released.",
        "age": "Age of the singer in years.",
        "is_male": "True if the singer is male, false if female.",
    },
    "concert": {
        "concert_id": "Unique id of the concert.",
        "concert_name": "Name of the concert.",
        "theme": "Theme of the concert, e.g. Summer Nights or Rock Revival.",
        "stadium_id": "Stadium where the concert was held.",
        "year": "Year the concert took place.",
    },
    "singer_in_concert": {
        "concert_id": "The concert.",
        "singer_id": "A singer who performed at that concert.",
    },
}

_COLUMNS: dict[str, list[str]] = {
    "stadium": ["stadium_id", "name", "location", "capacity", "highest", "lowest", "average"],
    "singer": ["singer_id", "name", "country", "song_name", "song_release_year", "age", "is_male"],
    "concert": ["concert_id", "concert_name", "theme", "stadium_id", "year"],
    "singer_in_concert": ["concert_id", "singer_id"],
}


def demo_sql(schema: str = "public") -> str:
    """DDL + COMMENT ON + INSERTs for the demo concert database.

    Returns PostgreSQL text that creates and fills the tables ``stadium``,
    ``singer``, ``concert`` and ``singer_in_concert`` (with primary and
    foreign keys, and a comment on every table and column) in ``schema``.
    The text starts with ``CREATE SCHEMA IF NOT EXISTS`` (unless ``schema``
    is ``public``) and ``SET search_path``, so the unqualified table names
    of :data:`DEMO_QUESTIONS` work right after loading it. It is meant for
    one ``psql -v ON_ERROR_STOP=1`` run on an empty database; running it
    twice fails because the tables already exist.

    The rows are generated with ``random.Random(SEED)``: the result is the
    same on every call.
    """
    rng = random.Random(SEED)
    rows = _generate(rng)
    sch = _ident(schema)
    parts: list[str] = [
        f"-- nl2sql demo database: concerts, singers and stadiums (generated, seed {SEED}).",
    ]
    if schema != "public":
        parts.append(f"CREATE SCHEMA IF NOT EXISTS {sch};")
    if schema == "public":
        parts.append("SET search_path = public;")
    else:
        parts.append(f"SET search_path = {sch}, public;")
    parts.append(_DDL.rstrip())
    for table in DEMO_TABLES:
        parts.append(f"COMMENT ON TABLE {table} IS {_lit(_TABLE_COMMENTS[table])};")
        for column, text in _COLUMN_COMMENTS[table].items():
            parts.append(f"COMMENT ON COLUMN {table}.{column} IS {_lit(text)};")
    for table in DEMO_TABLES:
        parts.append(_insert(table, _COLUMNS[table], rows[table]))
    return "\n\n".join(parts) + "\n"


#: (question, gold PostgreSQL SQL) pairs over the demo database; every gold
#: query returns at least one row on the data :func:`demo_sql` generates.
DEMO_QUESTIONS: list[tuple[str, str]] = [
    ("How many singers do we have?", "SELECT count(*) FROM singer"),
    (
        "What are the names and ages of all singers from France?",
        "SELECT name, age FROM singer WHERE country = 'France'",
    ),
    (
        "How many concerts with the theme 'Summer Nights' were held?",
        "SELECT count(*) FROM concert WHERE theme = 'Summer Nights'",
    ),
    (
        "What is the name and capacity of the stadium with the largest capacity?",
        "SELECT name, capacity FROM stadium ORDER BY capacity DESC LIMIT 1",
    ),
    (
        "What is the average age of singers from each country?",
        "SELECT country, avg(age) FROM singer GROUP BY country",
    ),
    (
        "Show each stadium's name and the number of concerts held there.",
        "SELECT s.name, count(*) FROM concert AS c JOIN stadium AS s "
        "ON c.stadium_id = s.stadium_id GROUP BY s.name",
    ),
    (
        "Which concerts were held at stadiums in London? Give the concert names and years.",
        "SELECT c.concert_name, c.year FROM concert AS c JOIN stadium AS s "
        "ON c.stadium_id = s.stadium_id WHERE s.location = 'London'",
    ),
    (
        "What are the names of the singers who performed in a concert in 2019?",
        "SELECT DISTINCT si.name FROM singer AS si "
        "JOIN singer_in_concert AS sic ON si.singer_id = sic.singer_id "
        "JOIN concert AS c ON sic.concert_id = c.concert_id WHERE c.year = 2019",
    ),
    (
        "Who is the oldest singer? Give the name and age.",
        "SELECT name, age FROM singer ORDER BY age DESC LIMIT 1",
    ),
    (
        "What are the names of the stadiums that never hosted a concert?",
        "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)",
    ),
]
