"""The join rules (``rules.joins``), each SQL in → its rewrite or sentence out, and the cases
each must leave alone: tables compared off the one key that links them (moved onto it), a key's
column joined to a table it does not refer to (the table between joined), a join that was not
needed (dropped), an inner join held NULL for a negated question (made LEFT), an IN subquery
whose column is the outer query's (said; read from the one related table that has its columns)."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Column, ForeignKey, Schema, Table

from ._apply import apply, said


def _table(name: str, columns: list[str], key: str | None = None, schema: str = "public"):
    return Table(name, schema, name.split(".")[-1], [Column(c, "text", c == key) for c in columns])


SCHEMA = Schema(
    tables=[
        _table("continents", ["contid", "continent"], "contid"),
        _table("countries", ["countryid", "countryname", "continent"], "countryid"),
        _table("car_makers", ["id", "maker", "country"], "id"),
        _table("kinds", ["kind_code", "label"], "kind_code"),
        _table("templates", ["template_id", "kind_code", "version"], "template_id"),
        _table("documents", ["document_id", "template_id", "title"], "document_id"),
        _table("people", ["id", "name"], "id"),
        _table("friend", ["student_id", "friend_id"]),
        _table("sales.orders", ["order_id", "Buyer"], "order_id", schema="sales"),
        _table("staff", ["staff_id", "role_code", "city", "state"], "staff_id"),
        _table("owners", ["owner_id", "first_name", "city", "state"], "owner_id"),
    ],
    foreign_keys=[
        ForeignKey("countries", ["continent"], "continents", ["contid"]),
        ForeignKey("car_makers", ["country"], "countries", ["countryid"]),
        ForeignKey("templates", ["kind_code"], "kinds", ["kind_code"]),
        ForeignKey("documents", ["template_id"], "templates", ["template_id"]),
        ForeignKey("friend", ["student_id"], "people", ["id"]),
        ForeignKey("friend", ["friend_id"], "people", ["id"]),
        ForeignKey("sales.orders", ["Buyer"], "people", ["id"]),
    ],
)


@pytest.mark.parametrize(
    "sql, moved, change",
    [
        # an IN subquery selecting the other table's own key: moved onto the referring column
        (
            "SELECT countryname FROM countries WHERE NOT countryid IN (SELECT id FROM car_makers)",
            "SELECT countryname FROM countries WHERE NOT countryid IN "
            "(SELECT country FROM car_makers)",
            "id → country",
        ),
        # a join whose referring side is right and referred side wrong (aliases kept)
        (
            "SELECT T1.countryname FROM countries AS T1 JOIN car_makers AS T2 "
            "ON T1.continent = T2.country",
            "SELECT T1.countryname FROM countries AS T1 JOIN car_makers AS T2 "
            "ON T1.countryid = T2.country",
            "T1.continent → T1.countryid",
        ),
        # the key's own column on the right, the wrong one on the left; a WHERE's comparison
        (
            "SELECT d.title FROM documents AS d, templates AS t WHERE d.document_id = t.template_id",
            "SELECT d.title FROM documents AS d, templates AS t WHERE d.template_id = t.template_id",
            "d.document_id → d.template_id",
        ),
        # a table of another schema; a mixed-case column quoted
        (
            "SELECT p.name FROM people AS p JOIN sales.orders AS o ON p.id = o.order_id",
            'SELECT p.name FROM people AS p JOIN sales.orders AS o ON p.id = o."Buyer"',
            'o.order_id → o."Buyer"',
        ),
    ],
)
def test_tables_compared_off_their_key_are_moved_onto_it(sql, moved, change):
    for state in ("rows", "empty"):
        fixed = apply("off_key_link", sql, SCHEMA, state=state)
        assert (fixed.sql, fixed.changes, fixed.final) == (moved, (change,), True)
        assert "refers to" in fixed.sentence and "refers to" in said(sql, SCHEMA, state=state)
    assert apply("off_key_link", moved, SCHEMA) is None  # the rewrite is on the key: nothing left


@pytest.mark.parametrize(
    "sql",
    [
        # the key's own pair, either way round
        "SELECT 1 FROM countries AS a JOIN car_makers AS b ON a.countryid = b.country",
        "SELECT 1 FROM car_makers WHERE country IN (SELECT countryid FROM countries)",
        # neither side is the key's column: which to move is not shown
        "SELECT 1 FROM countries AS a JOIN car_makers AS b ON a.countryname = b.maker",
        # two keys link the tables (friend → people twice): not the one key
        "SELECT 1 FROM people AS p JOIN friend AS f ON p.name = f.friend_id",
        # no key links the tables (continents and car_makers meet through countries)
        "SELECT 1 FROM continents AS c JOIN car_makers AS m ON c.contid = m.id",
        # one table with itself; a column no table holds; a table the schema lacks
        "SELECT 1 FROM countries AS a JOIN countries AS b ON a.countryid = b.continent",
        "SELECT 1 FROM countries AS a JOIN car_makers AS b ON a.countryid = b.nothing",
        "SELECT 1 FROM elsewhere AS a JOIN car_makers AS b ON a.countryid = b.id",
        # a literal, not a column; SQL that does not parse; none
        "SELECT 1 FROM car_makers WHERE country = 3",
        "SELECT FROM WHERE (",
        None,
    ],
)
def test_comparisons_on_the_key_or_unclear_are_left(sql):
    assert apply("off_key_link", sql, SCHEMA) is None


@pytest.mark.parametrize(
    "sql, found",
    [
        # a column the subquery's table lacks: the outer query's
        (
            "SELECT title FROM documents WHERE template_id IN "
            "(SELECT template_id FROM kinds WHERE label = 'x')",
            ("template_id", "kinds"),
        ),
        # qualified with the outer query's alias; under NOT; in a join's subquery
        (
            "SELECT d.title FROM documents AS d WHERE NOT d.template_id IN "
            "(SELECT d.template_id FROM kinds AS k)",
            ("d.template_id", "kinds"),
        ),
        (
            "SELECT t.version FROM templates AS t JOIN documents AS d "
            "ON t.template_id = d.template_id WHERE t.kind_code IN "
            "(SELECT kind_code FROM documents, people)",
            ("kind_code", "documents, people"),
        ),
        # the subquery's own columns, qualified or not; its own alias; a join inside it
        (
            "SELECT title FROM documents WHERE template_id IN (SELECT template_id FROM templates)",
            None,
        ),
        (
            "SELECT title FROM documents AS d WHERE d.template_id IN "
            "(SELECT t.template_id FROM templates AS t JOIN kinds AS k ON t.kind_code = k.kind_code)",
            None,
        ),
        # a table the schema lacks; an expression; two columns; a list, not a subquery
        ("SELECT title FROM documents WHERE template_id IN (SELECT template_id FROM other)", None),
        (
            "SELECT title FROM documents WHERE template_id IN (SELECT max(template_id) FROM kinds)",
            None,
        ),
        ("SELECT title FROM documents WHERE template_id IN (1, 2)", None),
        ("SELECT title FROM documents WHERE (", None),
    ],
)
def test_an_in_subquery_selecting_the_outer_querys_column_is_found(sql, found):
    bound = apply("outer_bound", sql, SCHEMA)
    assert (bound is not None) == (found is not None)
    if found:
        assert f"selects {found[0]}, which none of its tables ({found[1]}) has" in bound.sentence
        assert bound.sql is None
    # the relations' findings (the empty result's) say it, or another relation problem
    assert (said(sql, SCHEMA, state="empty") is not None) == (found is not None)
    assert apply("outer_bound", sql, None) is None  # without the schema, nothing to read


@pytest.mark.parametrize(
    "sql, alone",
    [
        # joined on a column staff lacks; everything else is staff's: staff alone
        (
            "SELECT T2.role_code, T2.city FROM staff AS T1 JOIN owners AS T2 "
            "ON T1.owner_id = T2.owner_id WHERE T2.city LIKE '%West%' ORDER BY T2.state",
            "SELECT T1.role_code, T1.city FROM staff AS T1 WHERE T1.city LIKE '%West%' "
            "ORDER BY T1.state",
        ),
        # unqualified columns, no aliases, the kept table the joined one
        (
            "SELECT DISTINCT first_name FROM staff JOIN owners ON staff.owner_id = owners.owner_id "
            "ORDER BY first_name",
            "SELECT DISTINCT first_name FROM owners ORDER BY first_name",
        ),
        # what it counts or groups may be the join's rows: left to the model
        (
            "SELECT first_name, count(*) FROM staff JOIN owners ON staff.owner_id = owners.owner_id "
            "GROUP BY first_name",
            None,
        ),
        (
            "SELECT T2.state FROM staff AS T1 JOIN owners AS T2 ON T1.x = T2.owner_id GROUP BY 1",
            None,
        ),
        # both tables hold every other column: which one is meant is not shown
        ("SELECT T2.state FROM owners AS T1 JOIN staff AS T2 ON T1.owner_id = T2.owner_id", None),
        # neither holds them all; the join's columns exist (the error is elsewhere)
        (
            "SELECT T1.role_code, T2.first_name FROM staff AS T1 JOIN owners AS T2 "
            "ON T1.owner_id = T2.owner_id",
            None,
        ),
        ("SELECT T1.role_code FROM staff AS T1 JOIN owners AS T2 ON T1.city = T2.city", None),
        # a subquery, two joins, USING, a table the schema lacks, no parse
        (
            "SELECT role_code FROM staff AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id "
            "WHERE city IN (SELECT city FROM owners)",
            None,
        ),
        (
            "SELECT T1.role_code FROM staff AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id "
            "JOIN people AS p ON p.id = T2.owner_id",
            None,
        ),
        ("SELECT role_code FROM staff JOIN owners USING (owner_id)", None),
        ("SELECT role_code FROM staff AS a JOIN other AS b ON a.owner_id = b.owner_id", None),
        ("SELECT FROM (", None),
    ],
)
def test_a_join_on_a_column_its_table_lacks_is_dropped_when_one_table_holds_the_rest(sql, alone):
    fixed = apply("unjoined", sql, SCHEMA, state="failed")
    assert (fixed and fixed.sql) == alone
    if alone:
        assert fixed.changes[0].endswith("dropped") and not fixed.final


@pytest.mark.parametrize(
    "sql, through",
    [
        # the key's column read first, the table it does not refer to joined: countries between
        (
            "SELECT T2.continent, count(*) FROM car_makers AS T1 JOIN continents AS T2 "
            "ON T1.country = T2.contid GROUP BY T2.continent",
            "SELECT T2.continent, COUNT(*) FROM car_makers AS T1 JOIN countries AS countries "
            "ON T1.country = countries.countryid JOIN continents AS T2 "
            "ON countries.continent = T2.contid GROUP BY T2.continent",
        ),
        # the mirror: continents read first, the key's table joined
        (
            "SELECT continents.continent FROM continents JOIN car_makers "
            "ON continents.contid = car_makers.country",
            "SELECT continents.continent FROM continents JOIN countries AS countries "
            "ON continents.contid = countries.continent JOIN car_makers "
            "ON countries.countryid = car_makers.country",
        ),
        # a query already calling another table "countries": a fresh alias; an unqualified
        # column the added table also has, qualified with its own table first
        (
            "SELECT continent FROM continents INNER JOIN car_makers AS countries "
            "ON contid = country",
            "SELECT continents.continent FROM continents JOIN countries AS countries_2 "
            "ON contid = countries_2.continent INNER JOIN car_makers AS countries "
            "ON countries_2.countryid = country",
        ),
        # on the key already; an outer join; a WHERE's comparison; two keys' columns compared
        (
            "SELECT 1 FROM countries JOIN car_makers ON countries.countryid = car_makers.country",
            None,
        ),
        ("SELECT 1 FROM continents LEFT JOIN car_makers ON contid = car_makers.country", None),
        ("SELECT 1 FROM continents, car_makers WHERE contid = car_makers.country", None),
        (
            "SELECT 1 FROM car_makers AS m JOIN countries AS c ON m.country = c.continent",
            None,
        ),
        # the key's table refers to no column of the joined one: nothing to put between
        ("SELECT 1 FROM car_makers AS m JOIN kinds AS k ON m.country = k.kind_code", None),
    ],
)
def test_a_keys_column_joined_to_another_table_gets_the_table_between(sql, through):
    fixed = apply("bridged", sql, SCHEMA)
    assert (fixed and fixed.sql) == through
    if through:
        assert fixed.changes[0].startswith("JOIN countries added between") and fixed.final
        assert apply("bridged", through, SCHEMA) is None


def test_a_keys_column_compared_with_a_table_it_does_not_refer_to_is_said():
    # no table bridges them: the model is told which table the key refers to
    sql = "SELECT m.maker FROM car_makers AS m JOIN kinds AS k ON m.country = k.kind_code"
    found = apply("bridged", sql, SCHEMA)
    assert found.sql is None  # no table between to join
    assert (
        found.sentence
        == said(sql, SCHEMA, state="empty")
        == (
            "the query compares m.country with k.kind_code, but car_makers.country refers "
            "to countries.countryid: join countries between them"
        )
    )


@pytest.mark.parametrize(
    "question, sql, left",
    [
        # a negated question, an inner join held NULL: the anti-join's LEFT JOIN
        (
            "Find the number of professionals who have not treated any dogs.",
            "SELECT COUNT(T1.professional_id) FROM professionals AS T1 INNER JOIN treatments AS T2 "
            "ON T1.professional_id = T2.professional_id WHERE T2.dog_id IS NULL",
            "SELECT COUNT(T1.professional_id) FROM professionals AS T1 LEFT JOIN treatments AS T2 "
            "ON T1.professional_id = T2.professional_id WHERE T2.dog_id IS NULL",
        ),
        # without an alias, beside another table's condition; "without", "n't"
        (
            "Which countries have no car makers?",
            "SELECT countryname FROM countries JOIN car_makers "
            "ON countryid = car_makers.country WHERE car_makers.id IS NULL AND countryid > 2",
            "SELECT countryname FROM countries LEFT JOIN car_makers "
            "ON countryid = car_makers.country WHERE car_makers.id IS NULL AND countryid > 2",
        ),
        # no negation; already LEFT; the NULL column of the FROM table; unqualified; under OR;
        # another condition on the joined table; IS NOT NULL; no WHERE
        (
            "Which professionals treated dogs?",
            "SELECT 1 FROM p JOIN t ON p.a = t.a WHERE t.b IS NULL",
            None,
        ),
        ("no dogs", "SELECT 1 FROM p LEFT JOIN t ON p.a = t.a WHERE t.b IS NULL", None),
        ("no dogs", "SELECT 1 FROM p JOIN t ON p.a = t.a WHERE p.b IS NULL", None),
        ("no dogs", "SELECT 1 FROM p JOIN t ON p.a = t.a WHERE b IS NULL", None),
        ("no dogs", "SELECT 1 FROM p JOIN t ON p.a = t.a WHERE t.b IS NULL OR p.c = 1", None),
        ("no dogs", "SELECT 1 FROM p JOIN t ON p.a = t.a WHERE t.b IS NULL AND t.c = 1", None),
        ("no dogs", "SELECT 1 FROM p JOIN t ON p.a = t.a WHERE NOT t.b IS NULL", None),
        ("no dogs", "SELECT 1 FROM p JOIN t ON p.a = t.a", None),
    ],
)
def test_an_inner_join_held_null_in_a_negated_question_is_made_left(question, sql, left):
    found = apply("anti_joined", sql, SCHEMA, question)
    assert (found and found.sql) == left
    if left:
        assert found.changes[0].endswith("IS NULL)") and found.final
        assert "LEFT JOIN it" in said(sql, SCHEMA, question, state="empty")
        # the rewrite without the schema; the sentence with it only (as the relations' are)
        assert apply("anti_joined", sql, None, question).sentence is None


@pytest.mark.parametrize(
    "sql, home",
    [
        # the outer column read from the one related table that has every column it names
        (
            "SELECT title FROM documents WHERE template_id IN "
            "(SELECT template_id FROM kinds WHERE kind_code = 'BK')",
            "SELECT title FROM documents WHERE template_id IN "
            "(SELECT template_id FROM templates WHERE kind_code = 'BK')",
        ),
        # the one table is the outer query's own (the IN would compare it with itself)
        (
            "SELECT countryname FROM countries WHERE countryid IN "
            "(SELECT countryid FROM car_makers GROUP BY countryid HAVING count(*) > 2)",
            None,
        ),
        # no related table has every column; the subquery's own column; a join inside it
        (
            "SELECT title FROM documents WHERE template_id IN (SELECT template_id FROM kinds WHERE label = 'x')",
            None,
        ),
        (
            "SELECT title FROM documents WHERE template_id IN (SELECT template_id FROM templates)",
            None,
        ),
        (
            "SELECT title FROM documents WHERE template_id IN "
            "(SELECT template_id FROM kinds JOIN people ON kinds.label = people.name)",
            None,
        ),
    ],
)
def test_an_in_subquery_selecting_the_outer_column_is_read_from_its_home(sql, home):
    fixed = apply("rehomed", sql, SCHEMA)
    assert (fixed and fixed.sql) == home
    if home:
        assert fixed.changes == ("FROM kinds → templates (IN subquery)",) and fixed.final
