"""Stray columns (issue 42 §5): a column the PreSQL reads from a table that lacks it links the
tables nearest to the PreSQL's tables that have it. Schemas written here, not the bench data."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Column, ForeignKey, Schema, Table
from nl2sql.linking._schema_graph import nearest_with_column
from nl2sql.linking.presql_reading import presql_stray_columns
from nl2sql.linking.schema_linking import link_schema


def _t(name, *cols):
    return Table(
        name=name,
        schema="public",
        table=name,
        columns=[
            Column(c, "integer" if c.endswith("id") else "text", is_primary_key=(c == "id"))
            for c in cols
        ],
    )


def _shop():
    """item -> product -> brand; stock -> item; a far table also holding ``label``;
    ``warehouse`` reached by no key."""
    tables = [
        _t("item", "id", "product_id", "price"),
        _t("product", "id", "label", "brand_id"),
        _t("brand", "id", "brand_name", "label"),
        _t("stock", "id", "item_id", "qty"),
        _t("warehouse", "wid", "label"),
    ]
    fks = [
        ForeignKey("item", ["product_id"], "product", ["id"]),
        ForeignKey("product", ["brand_id"], "brand", ["id"]),
        ForeignKey("stock", ["item_id"], "item", ["id"]),
    ]
    return Schema(tables, fks)


@pytest.mark.parametrize(
    "presql, stray",
    [
        ("SELECT label FROM item WHERE price > 3", ["label"]),  # unqualified, not in item
        ("SELECT i.label, i.brand_name FROM item AS i", ["label", "brand_name"]),  # qualified
        ("SELECT label FROM product", []),  # where it is: not stray
        ("SELECT price AS label FROM item ORDER BY label", []),  # an output alias
        ("SELECT d.label FROM (SELECT price AS label FROM item) AS d", []),  # derived table
        ("WITH c AS (SELECT price FROM item) SELECT label FROM c", []),  # a CTE's column
        ("SELECT label FROM nowhere", ["label"]),  # a table the schema lacks has no columns
        ("SELECT x FROM (SELECT price AS x FROM item) AS d JOIN stock ON 1 = 1", []),
        ("SELECT price FROM (SELECT price FROM item) AS d JOIN stock ON 1 = 1", []),
        ("SELEC nonsense", []),
        (None, []),
    ],
)
def test_stray_columns_are_the_ones_no_table_in_scope_has(presql, stray):
    assert presql_stray_columns(presql, _shop()) == stray


@pytest.mark.parametrize(
    "start, column, nearest",
    [
        (["item"], "label", ["product"]),  # one join away, not brand (two joins away)
        (["stock"], "label", ["product"]),  # two joins away: the nearest holder
        (["product"], "label", ["brand"]),  # the start table itself is never returned
        (["stock"], "brand_name", ["brand"]),
        (["item"], "wid", []),  # only an unreachable table has it
        (["item"], "nothing", []),
        (["orders", "item"], "id", ["product", "stock"]),  # a tie; unknown tables ignored
        (["stock", "brand"], "label", ["product"]),  # from several starts at once
    ],
)
def test_nearest_with_column_walks_the_join_graph(start, column, nearest):
    assert nearest_with_column(_shop(), start, column) == nearest


@pytest.mark.parametrize(
    "presql, linked, reason_table",
    [
        # the misplaced column links its nearest holder; no bridge is needed between them
        ("SELECT label FROM item", {"item", "product"}, "product"),
        # two joins away: the holder and the bridge between them are linked
        ("SELECT label FROM stock", {"stock", "item", "product"}, "product"),
        # two tables hold the column at the same distance: neither is linked
        (
            "SELECT o.id FROM orders AS o JOIN item AS i ON o.x = i.price",
            {"item"},
            None,
        ),
        # a PreSQL that reads its columns where they are links nothing more
        ("SELECT price FROM item", {"item"}, None),
        ("SELECT price AS label FROM item ORDER BY label", {"item"}, None),
        # a table the schema lacks (a PreSQL for another database) next to one it has
        (
            "SELECT label FROM orders WHERE id IN (SELECT product_id FROM item)",
            {"item", "product"},
            "product",
        ),
    ],
)
def test_link_schema_links_the_table_a_stray_column_belongs_to(presql, linked, reason_table):
    got = link_schema(_shop(), presql, [], [])
    assert set(got.tables) == linked
    if reason_table:
        assert f"stray column label -> {reason_table}" in got.why[reason_table]
        assert f"{reason_table}.label" in got.columns
