"""``linking.names.snap_names`` as the rule of ``rules.RULES`` (round 0 of a failed candidate):
each unknown name snapped to the one real name it must have meant, or a column of another table
joined in on its foreign key; and the names left alone."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Column, ForeignKey, Schema, Table

from ._apply import apply


def snap_names(sql, schema):
    """The rule's outcome as ``(SQL, [changes])`` (``linking.names.snap_names``'s shape)."""
    got = apply("snap_names", sql, schema, state="failed")
    return (got.sql, list(got.changes)) if got else None


HINT_SCHEMA = Schema(
    [
        Table("semesters", "public", "semesters", [Column("semester_id", "integer")]),
        Table("battle", "public", "battle", [Column("id", "integer"), Column("name", "text")]),
        Table(
            "ship",
            "public",
            "ship",
            [Column("id", "integer"), Column("lost_in_battle", "integer"), Column("name", "text")],
        ),
    ]
)


SNAP_SCHEMA = Schema(
    [
        *HINT_SCHEMA.tables,
        Table(
            "pets",
            "public",
            "pets",
            [Column("petid", "integer"), Column("pet_age", "integer"), Column("weight", "real")],
        ),
        Table(
            "has_pet", "public", "has_pet", [Column("stuid", "integer"), Column("petid", "integer")]
        ),
        Table(
            "city",
            "public",
            "city",
            [Column("id", "integer", is_primary_key=True), Column("name", "text")],
        ),
    ]
)


@pytest.mark.parametrize(
    "sql, snapped",
    [
        # the only table alike: renamed, the old name kept as its alias
        (
            "SELECT count(*) FROM semester",
            ("SELECT COUNT(*) FROM semesters AS semester", ["semester → semesters"]),
        ),
        # a column shortened to a word of the real one
        (
            "SELECT weight FROM pets ORDER BY age LIMIT 1",
            ("SELECT weight FROM pets ORDER BY pet_age LIMIT 1", ["age → pet_age"]),
        ),
        # a column through the wrong alias: the one table of the query that has it
        (
            "SELECT T2.weight FROM pets AS T1 JOIN has_pet AS T2 ON T1.petid = T2.petid",
            (
                "SELECT t1.weight FROM pets AS T1 JOIN has_pet AS T2 ON T1.petid = T2.petid",
                ["t2.weight → t1.weight"],
            ),
        ),
        # the real column a word of the name written; never a key (``country_id`` is not the
        # city's own ``id``)
        (
            "SELECT first_name FROM battle",
            ("SELECT name FROM battle", ["first_name → name"]),
        ),
        ("SELECT country_id FROM city", None),
        ("SELECT city_name FROM city", ("SELECT name FROM city", ["city_name → name"])),
        # nothing alike, or a name alike in two tables of the query (battle.name, ship.name)
        ("SELECT zzz FROM pets", None),
        ("SELECT nme FROM battle JOIN ship ON ship.id = battle.id", None),
        # every name real: nothing to snap; a CTE's columns are not ours to judge
        ("SELECT weight FROM pets", None),
        ("WITH x AS (SELECT petid AS p FROM pets) SELECT x.q FROM x", None),
        ("not a query", None),
    ],
)
def test_unknown_names_are_snapped_only_to_the_one_real_name_meant(sql, snapped):
    assert snap_names(sql, SNAP_SCHEMA) == snapped


def _t(name: str, *cols: str) -> Table:
    return Table(name, "public", name, [Column(c, "integer") for c in cols])


JOIN_SCHEMA = Schema(
    [
        _t("cars_data", "id", "horsepower"),
        _t("car_names", "makeid", "model"),
        _t("singer", "singer_id", "song_name", "age", "name"),
        _t("singer_in_concert", "concert_id", "singer_id"),
        _t("concert", "concert_id", "name"),
        _t("car_makers", "id", "maker"),
        _t("model_list", "modelid", "maker", "model"),
    ],
    [
        ForeignKey("cars_data", ["id"], "car_names", ["makeid"]),
        ForeignKey("singer_in_concert", ["singer_id"], "singer", ["singer_id"]),
        ForeignKey("singer_in_concert", ["concert_id"], "concert", ["concert_id"]),
        ForeignKey("model_list", ["maker"], "car_makers", ["id"]),
    ],
)


@pytest.mark.parametrize(
    "sql, snapped",
    [
        # the one table one key away that has the column (model_list has it too, further
        # away), joined on that foreign key
        (
            "SELECT model FROM cars_data ORDER BY horsepower LIMIT 1",
            "SELECT car_names.model FROM cars_data JOIN car_names ON cars_data.id = "
            "car_names.makeid ORDER BY cars_data.horsepower LIMIT 1",
        ),
        # the SELECT's bare columns qualified first (singer_id would be ambiguous); the
        # subquery's own table is left alone
        (
            "SELECT song_name, concert_id FROM singer_in_concert WHERE singer_id = "
            "(SELECT singer_id FROM singer ORDER BY age LIMIT 1)",
            "SELECT singer.song_name, singer_in_concert.concert_id FROM singer_in_concert JOIN "
            "singer ON singer_in_concert.singer_id = singer.singer_id WHERE "
            "singer_in_concert.singer_id = (SELECT singer_id FROM singer ORDER BY age LIMIT 1)",
        ),
        # the SELECT's one table has some of its columns, another has all: read that one
        # (singer has song_name, age and singer_id; maker beside model is model_list's), the
        # columns qualified by the old name qualified by the new
        (
            "SELECT song_name, age FROM singer_in_concert WHERE singer_id = "
            "(SELECT singer_id FROM singer ORDER BY age LIMIT 1)",
            "SELECT song_name, age FROM singer WHERE singer_id = "
            "(SELECT singer_id FROM singer ORDER BY age LIMIT 1)",
        ),
        ("SELECT maker, model FROM car_names", "SELECT maker, model FROM model_list"),
        (
            "SELECT car_names.maker FROM car_names WHERE car_names.model = 'x'",
            "SELECT model_list.maker FROM model_list WHERE model_list.model = 'x'",
        ),
        ("SELECT T.maker, model FROM car_names AS T", "SELECT T.maker, model FROM model_list AS T"),
        ("SELECT maker, id FROM cars_data", "SELECT maker, id FROM car_makers"),
        # none of the names its own: snapped or joined instead, never swapped
        ("SELECT horsepower FROM concert", None),
        # a name is never snapped to one ending in id; one ending in id only to a column of
        # keys (model_list.maker is a key to car_makers.id; car_makers.maker a name)
        ("SELECT maker FROM car_names", None),
        ("SELECT makerid FROM model_list", "SELECT maker FROM model_list"),
        ("SELECT makeid FROM car_makers WHERE id = 1", None),
        ("SELECT makers FROM model_list", "SELECT maker FROM model_list"),
        # a join condition's column its table lacks: its side of the declared key to the other
        # side's column (makeid is no near name of cars_data's id)
        (
            "SELECT T1.horsepower FROM cars_data AS T1 JOIN car_names AS T2 ON T1.makeid = "
            "T2.makeid",
            "SELECT T1.horsepower FROM cars_data AS T1 JOIN car_names AS T2 ON T1.id = T2.makeid",
        ),
        # two tables have it, neither a key away (car_makers.maker, model_list.maker); two a
        # key away (singer.name, concert.name): not ours to choose
        ("SELECT maker FROM cars_data", None),
        ("SELECT name FROM singer_in_concert", None),
        # no foreign key between the query's table and the holder; another relation's alias
        ("SELECT model FROM singer", None),
        ("SELECT x.model FROM cars_data AS t1", None),
    ],
)
def test_a_column_of_another_table_is_joined_in_on_its_foreign_key(sql, snapped):
    got = snap_names(sql, JOIN_SCHEMA)
    assert (got[0] if got else None) == snapped


BRIDGE_SCHEMA = Schema(
    [
        _t("student", "stuid", "lname", "fname", "age"),
        _t("has_pet", "stuid", "petid"),
        _t("pets", "petid", "pettype", "pet_age"),
        _t("documents", "document_id", "document_name"),
        _t("paragraphs", "paragraph_id", "document_id", "paragraph_text"),
        _t("concert", "concert_id", "stadium_id", "year"),
        _t("singer_in_concert", "concert_id", "singer_id"),
        _t("stadium", "stadium_id", "name", "location"),
        _t("singer", "singer_id", "name"),
    ],
    [
        ForeignKey("has_pet", ["stuid"], "student", ["stuid"]),
        ForeignKey("has_pet", ["petid"], "pets", ["petid"]),
        ForeignKey("paragraphs", ["document_id"], "documents", ["document_id"]),
        ForeignKey("singer_in_concert", ["concert_id"], "concert", ["concert_id"]),
        ForeignKey("concert", ["stadium_id"], "stadium", ["stadium_id"]),
        ForeignKey("singer_in_concert", ["singer_id"], "singer", ["singer_id"]),
    ],
)


@pytest.mark.parametrize(
    "sql, snapped",
    [
        # two keys away, through the one table between (a many-to-many's table)
        (
            "SELECT lname FROM student WHERE pettype = 'cat' AND age = 3",
            "SELECT student.lname FROM student JOIN has_pet ON student.stuid = has_pet.stuid "
            "JOIN pets ON has_pet.petid = pets.petid WHERE pets.pettype = 'cat' AND student.age = 3",
        ),
        # a near name in the query's own table beats that very name two keys away
        ("SELECT AVG(age) FROM pets", "SELECT AVG(pet_age) FROM pets"),
        # that very name one key away beats a near name in the query's table (document_id)
        (
            "SELECT paragraph_text FROM paragraphs WHERE document_name = 'x'",
            "SELECT paragraphs.paragraph_text FROM paragraphs JOIN documents ON "
            "paragraphs.document_id = documents.document_id WHERE documents.document_name = 'x'",
        ),
        # a join condition compares two tables: the holder is the one not on the other side
        (
            "SELECT T3.name FROM concert AS T1 JOIN singer_in_concert AS T2 ON T1.concert_id = "
            "T2.concert_id JOIN stadium AS T3 ON T2.stadium_id = T3.stadium_id",
            "SELECT T3.name FROM concert AS T1 JOIN singer_in_concert AS T2 ON T1.concert_id = "
            "T2.concert_id JOIN stadium AS T3 ON t1.stadium_id = T3.stadium_id",
        ),
        # T2.name: two tables a key away have it (singer from T2, stadium from T1), whatever
        # the alias written; location's join decides it, snapped once more after the join
        (
            "SELECT T2.name, location FROM concert AS T1 JOIN singer_in_concert AS T2 ON "
            "T1.concert_id = T2.concert_id",
            "SELECT stadium.name, stadium.location FROM concert AS T1 JOIN singer_in_concert AS T2 "
            "ON T1.concert_id = T2.concert_id JOIN stadium ON T1.stadium_id = stadium.stadium_id",
        ),
        # the outer petid, student's nowhere, is the joined key's: equal on both sides; the
        # subquery's has_pet has petid, pets has petid and pettype: pets read instead
        (
            "SELECT fname FROM student WHERE pettype = 'dog' AND NOT petid IN "
            "(SELECT petid FROM has_pet WHERE pettype = 'cat')",
            "SELECT student.fname FROM student JOIN has_pet ON student.stuid = has_pet.stuid "
            "JOIN pets ON has_pet.petid = pets.petid WHERE pets.pettype = 'dog' AND NOT "
            "has_pet.petid IN (SELECT petid FROM pets WHERE pettype = 'cat')",
        ),
        # the same through a key of the subquery's own: joined, not swapped (stuid is has_pet's)
        (
            "SELECT fname FROM student WHERE stuid IN "
            "(SELECT stuid FROM has_pet WHERE pettype = 'cat')",
            "SELECT fname FROM student WHERE stuid IN (SELECT has_pet.stuid FROM has_pet JOIN "
            "pets ON has_pet.petid = pets.petid WHERE pets.pettype = 'cat')",
        ),
        # a column of the SELECT it is inside: a correlated reference, not ours to join
        ("SELECT fname FROM student WHERE EXISTS (SELECT 1 FROM has_pet WHERE lname = 'x')", None),
        # no table near the query's has it
        ("SELECT T1.pettype FROM concert AS T1", None),
        # qualified with a table the FROM lacks ("missing FROM-clause entry"): that table,
        # joined by its key (not stadium, whose name is one key from concert); not where the
        # table named lacks the column
        (
            "SELECT singer.name FROM singer_in_concert JOIN concert ON singer_in_concert."
            "concert_id = concert.concert_id WHERE concert.year = 2014 GROUP BY singer.name",
            "SELECT singer.name FROM singer_in_concert JOIN concert ON singer_in_concert."
            "concert_id = concert.concert_id JOIN singer ON singer_in_concert.singer_id = "
            "singer.singer_id WHERE concert.year = 2014 GROUP BY singer.name",
        ),
        ("SELECT singer.location FROM singer_in_concert", None),
    ],
)
def test_names_nearest_first(sql, snapped):
    got = snap_names(sql, BRIDGE_SCHEMA)
    assert (got[0] if got else None) == snapped


def test_the_joined_in_column_keeps_the_alias_as_written():
    text, changes = snap_names('SELECT "T1".model FROM cars_data AS "T1"', JOIN_SCHEMA)
    assert text == (
        'SELECT car_names.model FROM cars_data AS "T1" JOIN car_names ON "T1".id = car_names.makeid'
    )
    assert changes == ["model → car_names.model (joined)"]


KEY_SCHEMA = Schema(
    [
        Table(
            "car_makers",
            "public",
            "car_makers",
            [Column("id", "integer", is_primary_key=True), Column("maker", "text")],
        ),
        Table(
            "model_list",
            "public",
            "model_list",
            [
                Column("modelid", "integer", is_primary_key=True),
                Column("maker", "integer"),
                Column("model", "text"),
            ],
        ),
        Table(
            "stadium",
            "public",
            "stadium",
            [Column("stadium_id", "integer", is_primary_key=True), Column("name", "text")],
        ),
    ],
    [ForeignKey("model_list", ["maker"], "car_makers", ["id"])],
)


@pytest.mark.parametrize(
    "sql, snapped",
    [
        # <table>id for the table's one key; a key column (an integer foreign key) for a name
        # ending in id, within each SELECT's own tables (the subquery's maker is not the
        # outer SELECT's, whose maker is a name)
        (
            "SELECT maker, id FROM car_makers WHERE makerid IN "
            "(SELECT makerid FROM model_list GROUP BY makerid HAVING COUNT(modelid) > 3)",
            "SELECT maker, id FROM car_makers WHERE id IN "
            "(SELECT maker FROM model_list GROUP BY maker HAVING COUNT(modelid) > 3)",
        ),
        (
            "SELECT name FROM stadium WHERE stadiumid = 1",
            "SELECT name FROM stadium WHERE stadium_id = 1",
        ),
        # not the table's name: not its key
        ("SELECT name FROM stadium WHERE singerid = 1", None),
    ],
)
def test_a_tables_own_identifier_is_its_key(sql, snapped):
    got = snap_names(sql, KEY_SCHEMA)
    assert (got[0] if got else None) == snapped
