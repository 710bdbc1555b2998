"""Retrieval and schema linking without a database: candidate phrases, value ranking, DAIL
selection (skeleton Jaccard, τ), PreSQL links, FK bridge tables, token-budget pruning,
settings validation."""

from __future__ import annotations

import pytest

from nl2sql.core.errors import ConfigError
from nl2sql.core.settings import validate_setting
from nl2sql.core.types import Column, Example, ForeignKey, Schema, Table
from nl2sql.generation.cleaning import clean
from nl2sql.linking._schema_graph import fk_bridges, inferred_joins
from nl2sql.linking.presql_reading import presql_links, presql_token_tables, presql_written_joins
from nl2sql.linking.pruning import estimate_tokens, prune_schema
from nl2sql.linking.schema_linking import link_schema, linking_values, named_key_targets
from nl2sql.model.masking import mask_question
from nl2sql.model.prompts import build_prompt, render_values
from nl2sql.retrieval.example_pool import sql_skeleton
from nl2sql.retrieval.example_selection import dail_select, skeleton_jaccard
from nl2sql.retrieval.values import (
    ValueMatch,
    candidate_phrases,
    merge_matches,
    ngram_phrases,
    quoted_spans,
)

# --- candidate phrases -------------------------------------------------------------------


def test_quoted_spans_ignore_apostrophes_inside_words():
    text = "power of \"Super Strength\" refers to power_name = 'Super Strength'; the hero's 'X-Man'"
    assert quoted_spans(text) == ["Super Strength", "X-Man"]


def test_ngrams_keep_written_form_and_skip_stop_words_and_operators():
    grams = ngram_phrases("List the superpowers of 3-D Man, please")
    assert "3-D Man" in grams and "superpowers" in grams
    assert "the" not in grams and "of 3-D Man" not in grams  # stop word at an edge
    assert all("," not in g for g in grams)
    assert "name = 'Blue" not in ngram_phrases("colour_name = 'Blue'")


def test_ngrams_keep_words_of_any_script_whole():
    grams = ngram_phrases("Welche Sänger kommen aus São Paulo oder Zürich?")
    assert "Sänger" in grams and "São Paulo" in grams and "Zürich" in grams
    assert not any(g in {"S", "ä", "ngerinnen", "rich"} for g in grams)


def test_candidate_phrases_put_evidence_spans_first_without_duplicates():
    ps = candidate_phrases("Which heroes have blue eyes?", "blue eyes refers to colour = 'Blue'")
    assert ps[0].text == "Blue" and ps[0].source == "evidence"
    assert [p.text.lower() for p in ps].count("blue") == 1
    assert any(p.source == "question" and p.text == "blue eyes" for p in ps)


def _vm(value, how, score, phrase="x", source="question", table="t", column="c"):
    return ValueMatch("public", table, column, value, score, how, phrase, source)


def test_merge_ranks_exact_first_then_score_and_dedups():
    ms = [
        _vm("Blu", "trigram", 0.6),
        _vm("Blue", "vector", 0.95),
        _vm("Blue", "exact", 1.0),
        _vm("Navy", "vector", 0.85),
    ]
    out = merge_matches(ms, top_k=2)
    assert [(m.value, m.how) for m in out] == [("Blue", "exact"), ("Navy", "vector")]


def test_values_section_in_prompt():
    p = build_prompt(
        "How many?",
        Schema([]),
        [],
        values=[("colour", "colour", "Blue"), ("colour", "colour", "Red")],
    )
    assert "-- colour.colour: 'Blue', 'Red'" in p
    assert render_values([]) == ""


# --- DAIL selection ----------------------------------------------------------------------


def test_skeleton_jaccard_orders_structures():
    pre = sql_skeleton("SELECT count(*) FROM singer WHERE age > 30")
    same = sql_skeleton("SELECT count(*) FROM book WHERE pages > 100")
    other = sql_skeleton("SELECT name, max(age) FROM singer GROUP BY name ORDER BY 2 DESC LIMIT 1")
    assert skeleton_jaccard(pre, same) == 1.0
    assert 0 < skeleton_jaccard(pre, other) < 0.5
    assert skeleton_jaccard("", pre) == 0.0


def _pool():
    sqls = [
        "SELECT name FROM a ORDER BY x DESC LIMIT 1",  # most question-similar
        "SELECT count(*) FROM b WHERE y = 'v'",
        "SELECT name FROM c GROUP BY name HAVING count(*) > 2",
        "SELECT count(*) FROM d WHERE z = 'w'",
    ]
    exs = [Example(i, "db", f"q{i}", s, similarity=1 - i / 10) for i, s in enumerate(sqls)]
    return exs, {e.id: sql_skeleton(e.sql) for e in exs}


def test_tau_filter_changes_the_chosen_examples():
    exs, skels = _pool()
    pre = sql_skeleton("SELECT count(*) FROM t WHERE k = 'v'")
    loose = dail_select(exs, skels, pre, k=2, tau=0.0)
    strict = dail_select(exs, skels, pre, k=2, tau=0.9)
    assert [e.id for e in loose.examples] == [0, 1]  # question similarity order
    assert [e.id for e in strict.examples] == [1, 3]  # only count-with-filter skeletons
    assert strict.how == "dail" and strict.passed == 2
    assert all(e.skeleton_jaccard >= 0.9 for e in strict.examples)


def test_dail_falls_back_to_question_similarity():
    exs, skels = _pool()
    pre = sql_skeleton("SELECT count(*) FROM t WHERE k = 'v'")
    sel = dail_select(exs, skels, pre, k=3, tau=0.9)
    assert [e.id for e in sel.examples] == [1, 3, 0] and sel.how == "dail + fallback"
    none = dail_select(exs, skels, None, k=2, tau=0.9)
    assert [e.id for e in none.examples] == [0, 1] and none.how == "question similarity"


# --- schema linking ----------------------------------------------------------------------


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


def _hero_schema():
    tables = [
        _t("superhero", "id", "superhero_name", "eye_colour_id", "publisher_id"),
        _t("colour", "id", "colour"),
        _t("publisher", "id", "publisher_name"),
        _t("hero_power", "hero_id", "power_id"),
        _t("superpower", "id", "power_name"),
        _t("gender", "id", "gender"),
    ]
    fks = [
        ForeignKey("superhero", ["eye_colour_id"], "colour", ["id"]),
        ForeignKey("superhero", ["publisher_id"], "publisher", ["id"]),
        ForeignKey("hero_power", ["hero_id"], "superhero", ["id"]),
        ForeignKey("hero_power", ["power_id"], "superpower", ["id"]),
    ]
    return Schema(tables, fks)


def test_presql_links_resolve_aliases_and_unqualified_columns():
    tabs, cols = presql_links(
        "SELECT s.superhero_name, colour FROM superhero AS s JOIN colour c "
        "ON s.eye_colour_id = c.id WHERE c.colour = 'Blue'",
        _hero_schema(),
    )
    assert tabs == ["superhero", "colour"]
    assert {
        ("superhero", "superhero_name"),
        ("colour", "colour"),
        ("superhero", "eye_colour_id"),
        ("colour", "id"),
    } <= set(cols)
    assert presql_links("SELEC nonsense", _hero_schema()) == ([], [])


def test_fk_bridge_tables_are_added():
    s = _hero_schema()
    assert fk_bridges(["superpower", "publisher"], s) == [
        ("hero_power", "superpower", "publisher"),
        ("superhero", "superpower", "publisher"),
    ]
    assert fk_bridges(["superhero", "colour"], s) == []
    linked = link_schema(
        s,
        "SELECT power_name FROM superpower",
        [
            _vm(
                "Marvel Comics",
                "exact",
                1.0,
                "Marvel Comics",
                "evidence",
                "publisher",
                "publisher_name",
            )
        ],
        [],
    )
    assert set(linked.tables) == {"superpower", "publisher", "hero_power", "superhero"}
    assert linked.why["hero_power"] == ["fk bridge superpower - publisher"]
    assert "publisher.publisher_name" in linked.columns


def test_value_links_skip_schema_words_subphrases_and_presql_resolved_values():
    s = _hero_schema()
    vals = [
        _vm("Power", "exact", 1.0, "power", "question", "superpower", "power_name"),
        _vm(
            "Super Strength", "exact", 1.0, "Super Strength", "question", "superpower", "power_name"
        ),
        _vm("Strength", "exact", 1.0, "Strength", "question", "gender", "gender"),
        _vm("Blue", "exact", 1.0, "blue", "question", "colour", "colour"),
        _vm("Blue", "exact", 1.0, "blue", "question", "publisher", "publisher_name"),
        _vm("Bluebird", "trigram", 0.5, "blue", "question", "publisher", "publisher_name"),
        _vm("Male", "exact", 1.0, "male", "evidence_ngram", "gender", "gender"),
    ]
    kept = linking_values(s, vals, 0.9, {("colour", "colour")})
    assert [(v.value, v.table) for v in kept] == [
        ("Super Strength", "superpower"),
        ("Blue", "colour"),
    ]


def test_similar_columns_link_their_tables_with_a_reason():
    linked = link_schema(
        _hero_schema(), "SELECT id FROM colour", [], [("public", "gender", "gender", 0.71)]
    )
    assert linked.tables == ["colour", "gender"]
    assert linked.why["gender"] == ["column similarity gender.gender 0.71"]


# --- linking never loses what PreSQL found -------------------------------------------------


def test_tables_of_an_unparsable_presql_are_read_from_its_tokens():
    s = _hero_schema()
    cut_off = "SELECT T1.superhero_name FROM superhero AS T1 JOIN publisher AS T2 ON T1.publisher_id = 'Mar"
    prose = "The heroes are in table superhero; join hero_power and superpower. SELECT"
    assert presql_links(cut_off, s) == ([], [])  # no tree
    assert presql_token_tables(cut_off, s) == ["superhero", "publisher"]
    assert presql_token_tables(prose, s) == []  # prose names tables, reads none
    # a string literal naming a table is not a table read
    assert presql_token_tables("SELECT * FROM superhero WHERE x = 'colour' AND (", s) == [
        "superhero"
    ]
    linked = link_schema(s, cut_off, [], [])
    assert linked.tables == ["superhero", "publisher"]
    assert linked.why["publisher"] == ["presql tokens"]


def test_a_presql_naming_no_table_keeps_the_schema_the_presql_saw():
    s = _hero_schema()
    seen = s.subset({"superhero", "colour", "gender"})  # a pruned PreSQL prompt
    for presql in (None, "", "I cannot answer this question.", "SELECT count(*) FROM"):
        linked = link_schema(
            s, presql, [], [("public", "publisher", "publisher_name", 0.7)], presql_schema=seen
        )
        assert set(seen.table_names()) <= set(linked.tables), presql
        assert linked.why["colour"] == ["presql schema (no table read from PreSQL)"]
    # without a pruned schema: the whole schema, never a narrower one
    assert set(link_schema(s, "no SQL here", [], []).tables) == set(s.table_names())
    # a PreSQL that reads a table is linked as before, not widened
    assert link_schema(s, "SELECT * FROM gender", [], [], presql_schema=seen).tables == ["gender"]


# A PreSQL that is not a query (issue 31 §8): prose naming tables must not narrow the schema
# FinSQL sees to those tables (another model could answer from the whole of it)
PROSE_PRESQL = [
    ("sentence", "The heroes are in table superhero; join hero_power and superpower."),
    ("sentence ending in a keyword", "Use superhero and publisher. SELECT"),
    ("lone table name", "superhero"),
    ("table then verb", "superhero holds the heroes, publisher their publishers"),
    (
        "markdown",
        "**Explanation**: count the rows of `superhero`.\n\n- `superhero` holds heroes\n"
        "- join `publisher` on publisher_id",
    ),
    ("refusal", "I cannot answer this: the superhero table has no column for that."),
    ("apology naming a table", "Sorry, publisher is not enough to answer."),
    ("describe", "DESCRIBE superhero"),
]


@pytest.mark.parametrize("text", [t for _, t in PROSE_PRESQL], ids=[n for n, _ in PROSE_PRESQL])
def test_a_presql_that_is_not_a_query_does_not_narrow_the_schema(text):
    s = _hero_schema()
    seen = s.subset({"superhero", "colour", "gender", "publisher"})  # the PreSQL prompt's
    cleaned = clean(text)
    linked = link_schema(s, cleaned.sql or None, [], [], presql_schema=seen, presql_text=text)
    assert set(seen.table_names()) <= set(linked.tables), (text, linked.why)
    assert "presql tokens" not in str(linked.why) and "'presql'" not in str(linked.why)


REAL_PRESQL = [
    ("parsed", "SELECT superhero_name FROM superhero", {"superhero"}),
    ("fenced", "```sql\nSELECT power_name FROM superpower\n```", {"superpower"}),
    (
        "after a sentence",
        "Here is the query:\nSELECT T1.superhero_name FROM superhero AS T1 JOIN publisher AS T2 "
        "ON T1.publisher_id = T2.id",
        {"superhero", "publisher"},
    ),
    (
        "cut off",
        "SELECT T1.superhero_name FROM superhero AS T1 JOIN publisher AS T2 ON T1.x = 'Mar",
        {"superhero", "publisher"},
    ),
    ("cte", "WITH g AS (SELECT id FROM gender) SELECT count(*) FROM g", {"gender"}),
]


@pytest.mark.parametrize(
    "text,tables", [(t, x) for _, t, x in REAL_PRESQL], ids=[n for n, _, _ in REAL_PRESQL]
)
def test_a_presql_that_is_a_query_still_narrows_the_schema(text, tables):
    s = _hero_schema()
    cleaned = clean(text)
    linked = link_schema(s, cleaned.sql or None, [], [], presql_schema=s, presql_text=text)
    assert set(linked.tables) == tables, linked.why


def test_a_value_in_several_key_columns_does_not_link_their_tables():
    s = _hero_schema()
    code = [
        _vm("7", "exact", 1.0, "7", "question", "superhero", "publisher_id"),
        _vm("7", "exact", 1.0, "7", "question", "publisher", "id"),
        _vm("7", "exact", 1.0, "7", "question", "colour", "colour"),
    ]
    kept = linking_values(s, code, 0.9)
    assert [(v.table, v.column) for v in kept] == [("colour", "colour")]
    # a value in one key column only still links (a code the question names)
    one = [_vm("7", "exact", 1.0, "7", "question", "hero_power", "power_id")]
    assert [v.table for v in linking_values(s, one, 0.9)] == ["hero_power"]


# --- token budget ------------------------------------------------------------------------


def _big_schema(n_groups=60):
    tables, fks = [], []
    for g in range(n_groups):
        for kind in ("order", "customer", "order_line"):
            tables.append(
                _t(
                    f"shop{g}_{kind}",
                    "id",
                    "name",
                    "status",
                    "city",
                    "created_at",
                    "amount",
                    "description",
                    "customer_id" if kind == "order" else "order_id",
                )
            )
        fks.append(ForeignKey(f"shop{g}_order", ["customer_id"], f"shop{g}_customer", ["id"]))
        fks.append(ForeignKey(f"shop{g}_order_line", ["order_id"], f"shop{g}_order", ["id"]))
    return Schema(tables, fks)


def test_budget_prunes_a_large_schema_but_keeps_linked_tables():
    s = _big_schema()
    render = lambda sc: build_prompt("Which customers of shop 7 ordered most?", sc, [])  # noqa: E731
    assert estimate_tokens(render(s)) > 3000
    scores = {t.name: 0.2 for t in s.tables}
    scores["shop7_customer"] = 0.8  # best match; its order table is an FK neighbour
    pruned, info = prune_schema(s, scores, 1000, render, keep=["shop42_order_line"])
    names = pruned.table_names()
    assert info["pruned"] and estimate_tokens(render(pruned)) <= 1000 == info["budget"]
    assert {"shop7_customer", "shop7_order", "shop42_order_line"} <= set(names)
    assert len(names) < len(s.tables) / 4
    small = Schema(s.tables[:2], [])
    same, info2 = prune_schema(small, scores, 3000, render)
    assert same is small and not info2["pruned"]


def test_estimate_tokens_is_documented_ratio():
    assert (
        estimate_tokens("") == 0
        and estimate_tokens("x" * 35) == 10
        and estimate_tokens("abcd") == 2
    )


# --- masking with retrieved values, settings ---------------------------------------------


def test_masking_uses_retrieved_value_phrases_even_misspelt():
    m = mask_question(
        "How many singers come from Untied States?",
        names=["singer", "country"],
        values=["Untied States"],
    )
    assert m == "How many <mask> come from <mask> ?"


@pytest.mark.parametrize(
    "key,bad",
    [
        ("dail_tau", "1.5"),
        ("value_trgm_min", "abc"),
        ("prompt_token_budget", "100"),
        ("value_top_k", "-1"),
    ],
)
def test_retrieval_settings_are_validated(key, bad):
    with pytest.raises(ConfigError) as e:
        validate_setting(key, bad)
    assert key in str(e.value)
    assert validate_setting("dail_tau", " 0.7 ") == "0.7"


def test_pool_question_masks_partial_mentions_of_its_literals():
    from nl2sql.retrieval.example_pool import literal_phrases, make_entry

    assert {"Band-Omega-9", "Band Omega", "Omega 9", "Band", "Omega"} <= set(
        literal_phrases(["Band-Omega-9"])
    )
    e = make_entry(
        "hr",
        "Which employee is in band omega?",
        "SELECT employee_label FROM payroll WHERE wage_band = 'Band-Omega-9'",
    )
    assert e.masked_question == "Which <mask> is in <mask> ?"


def test_presql_tables_are_bridged_within_a_join_not_across_set_operation_branches():
    s = _hero_schema()
    joined = link_schema(
        s, "SELECT p.power_name FROM superpower p JOIN publisher b ON p.id = b.id", [], []
    )
    assert set(joined.tables) == {"superpower", "publisher", "hero_power", "superhero"}
    assert joined.why["hero_power"] == ["fk bridge superpower - publisher"]
    union = link_schema(
        s, "SELECT power_name FROM superpower UNION SELECT publisher_name FROM publisher", [], []
    )
    assert union.tables == ["superpower", "publisher"]


def test_a_similar_key_column_whose_other_end_presql_reads_does_not_link():
    s = _hero_schema()
    linked = link_schema(
        s,
        "SELECT superhero_name, eye_colour_id FROM superhero",
        [],
        [("public", "colour", "id", 0.8), ("public", "gender", "gender", 0.7)],
    )
    assert linked.tables == ["superhero", "gender"]
    # the same column links when PreSQL does not read the other end of its key
    other = link_schema(s, "SELECT gender FROM gender", [], [("public", "colour", "id", 0.8)])
    assert "colour" in other.tables


def _undeclared_keys_schema(declare_model_key=False):
    """Four tables; only spec -> version is a declared key; model and version share a
    same-named, same-typed column; maker and spec share only their primary key ``id``."""

    def t(name, pk, *cols):
        return Table(
            name=name,
            schema="public",
            table=name,
            columns=[
                Column(c, "integer" if c.endswith("id") else "text", is_primary_key=(c == pk))
                for c in cols
            ],
        )

    tables = [
        t("maker", "id", "id", "name"),
        t("model", "model_id", "model_id", "maker_id", "model_name"),
        t("version", "version_id", "version_id", "model_name", "make"),
        t("spec", "id", "id", "weight"),
    ]
    fks = [ForeignKey("spec", ["id"], "version", ["version_id"])]
    if declare_model_key:
        fks.append(ForeignKey("version", ["model_name"], "model", ["model_name"]))
    return Schema(tables, fks)


def test_same_named_columns_join_tables_the_foreign_keys_leave_apart():
    s = _undeclared_keys_schema()
    # model/version: same name and type, no key path; maker/spec: only id = id (both keys)
    assert inferred_joins(s) == [("model", "version", "model_name")]
    assert fk_bridges(["model", "spec"], s) == [("version", "model", "spec")]
    # a declared key connects them already: nothing is inferred
    assert inferred_joins(_undeclared_keys_schema(declare_model_key=True)) == []


def test_a_semi_join_subquery_is_bridged_to_its_outer_select():
    s = _undeclared_keys_schema()
    semi = link_schema(
        s,
        "SELECT model_name FROM model WHERE model_id IN (SELECT id FROM spec WHERE weight < 3000)",
        [],
        [],
    )
    assert set(semi.tables) == {"model", "spec", "version"}
    assert semi.why["version"] == ["fk bridge model - spec"]
    eq = link_schema(
        s,
        "SELECT model_name FROM model WHERE model_id = "
        "(SELECT id FROM spec ORDER BY weight LIMIT 1)",
        [],
        [],
    )
    assert "version" in eq.tables
    # a subquery that only computes a bound is no join: nothing is bridged
    bound = link_schema(
        s, "SELECT model_name FROM model WHERE maker_id < (SELECT AVG(weight) FROM spec)", [], []
    )
    assert set(bound.tables) == {"model", "spec"}


def _named_keys_schema(customer_type="integer", declare=False, second_customers=False):
    """customers/orders/lines: ``orders.customer`` holds a customer's id under the entity's
    name; ``lines.order_id -> orders`` is the only declared key (plus, with ``declare``,
    orders.customer -> customers)."""

    def t(name, pk, **cols):
        return Table(
            name=name,
            schema="public",
            table=name,
            columns=[Column(c, ty, is_primary_key=(c == pk)) for c, ty in cols.items()],
        )

    tables = [
        t("customers", "id", id="integer", full_name="text"),
        t("orders", "order_id", order_id="integer", customer=customer_type, total="numeric"),
        t("lines", "line_id", line_id="integer", order_id="integer", qty="integer"),
    ]
    if second_customers:
        tables.append(t("vip_customers", "id", id="integer", since="date"))
    fks = [ForeignKey("lines", ["order_id"], "orders", ["order_id"])]
    if declare:
        fks.append(ForeignKey("orders", ["customer"], "customers", ["id"]))
    return Schema(tables, fks)


def test_a_column_named_after_a_table_infers_a_join():
    s = _named_keys_schema()
    assert inferred_joins(s) == [("customers", "orders", "customer")]
    assert fk_bridges(["customers", "lines"], s) == [("orders", "customers", "lines")]
    # a declared key, another type than the primary key's, or two tables that fit the name:
    # nothing is inferred
    assert inferred_joins(_named_keys_schema(declare=True)) == []
    assert inferred_joins(_named_keys_schema(customer_type="text")) == []
    assert inferred_joins(_named_keys_schema(second_customers=True)) == []


def test_a_key_presql_reads_links_the_table_the_question_names():
    s = _named_keys_schema(declare=True)
    presql = "SELECT count(*) FROM (SELECT customer FROM orders GROUP BY customer HAVING count(*) > 2) AS t"
    linked = link_schema(s, presql, [], [], question="How many customers have more than 2 orders?")
    assert linked.tables == ["orders", "customers"]
    assert linked.why["customers"] == ["key orders.customer -> customers named in the question"]
    # the question does not name the referenced table: nothing is added
    assert link_schema(s, presql, [], [], question="How many buyers ordered twice?").tables == [
        "orders"
    ]
    # a key named as an identifier (order_id) answers "which ids": its table is not added
    ids = "SELECT order_id FROM lines GROUP BY order_id HAVING count(*) > 1"
    assert named_key_targets(s, {("lines", "order_id")}, "Which orders have several lines?") == []
    assert link_schema(s, ids, [], [], question="Which orders have several lines?").tables == [
        "lines"
    ]


def test_a_join_presql_wrote_needs_no_bridge_unless_it_equates_two_primary_keys():
    s = _hero_schema()
    written = "SELECT c.colour FROM colour c JOIN publisher p ON c.colour = p.publisher_name"
    assert presql_written_joins(written, s) == [("colour", "publisher")]
    assert link_schema(s, written, [], []).tables == ["colour", "publisher"]
    ids = "SELECT c.colour FROM colour c JOIN publisher p ON c.id = p.id"
    assert presql_written_joins(ids, s) == []
    assert set(link_schema(s, ids, [], []).tables) == {"colour", "publisher", "superhero"}


def test_trigram_lookups_skip_long_ngrams_and_phrases_inside_an_exact_match():
    """fuzzy_phrases: question n-grams of 4 words, phrases inside an exactly matched phrase and
    n-grams across the border of a multi-word exact match get no trigram lookup; quoted spans
    keep theirs whatever their length; a phrase that only shares letters with a match (not
    whole words), or overlaps a one-word exact match, keeps its lookup."""
    from nl2sql.retrieval.values import fuzzy_phrases

    q = 'Which heroes of Marvel Comics Group Inc live in "Gotham City North Side" or Ron?'
    phrases = candidate_phrases(q)
    texts = [p.text for p in phrases]
    before = {texts[i] for i in fuzzy_phrases(phrases)}
    assert "Gotham City North Side" in before  # quoted span, 4 words
    assert "Marvel Comics Group Inc" in texts and "Marvel Comics Group Inc" not in before
    assert {"Marvel Comics Group", "Marvel Comics", "Marvel", "Ron"} <= before
    exact = [
        ValueMatch(
            "public",
            "publisher",
            "name",
            "Marvel Comics Group",
            1.0,
            "exact",
            "Marvel Comics Group",
            "question",
        ),
        ValueMatch("public", "hero", "name", "Ronaldo", 0.6, "trigram", "Ron", "question"),
    ]
    after = {texts[i] for i in fuzzy_phrases(phrases, exact)}
    assert not after & {"Marvel Comics Group", "Marvel Comics", "Comics Group", "Marvel"}
    assert not after & {"Group Inc", "Comics Group Inc", "heroes of Marvel"}  # across its border
    assert {"Ron", "Inc", "Gotham City North Side"} <= after  # a weak trigram match skips nothing
    strong = [
        ValueMatch(
            "public",
            "city",
            "name",
            "Gotham City North",
            0.8,
            "trigram",
            "Gotham City North",
            "question",
        )
    ]
    after = {texts[i] for i in fuzzy_phrases(phrases, strong)}
    assert not after & {"Gotham City", "City North", "North", "Gotham City North", "North Side"}
    assert {"Gotham City North Side", "Side"} <= after  # contains it, or lies outside it
    one_word = [ValueMatch("public", "hero", "name", "Inc", 1.0, "exact", "Inc", "question")]
    assert "Group Inc" in {texts[i] for i in fuzzy_phrases(phrases, one_word)}


def test_trigram_lookups_skip_question_phrases_that_only_name_the_schema():
    """fuzzy_phrases with the schema's name words: a question n-gram of schema words only (and
    stop words) names a table or column, not a value ("orchestras" scores 0.5 by trigrams against
    'Kirov Orchestra'), and gets no trigram lookup; an n-gram with another word, and a quoted
    span, keep theirs; without the schema's words nothing is left out for this reason."""
    from nl2sql.retrieval.values import fuzzy_phrases

    phrases = candidate_phrases('Show the orchestras of Kirov and the "orchestra" records')
    texts = [p.text for p in phrases]
    words = frozenset({"orchestra", "orchestras", "record", "records", "id"})
    kept = [texts[i] for i in fuzzy_phrases(phrases, (), words)]
    assert "orchestras" not in kept and "records" not in kept and "orchestras of" not in kept
    assert "orchestras of Kirov" in kept and "Kirov" in kept
    assert [p.source for p in phrases if p.text == "orchestra"] == ["quoted"]
    assert "orchestra" in kept  # quoted: the asker marked it as a value
    everything = {texts[i] for i in fuzzy_phrases(phrases)}
    assert {"orchestras", "records"} <= everything


def _scripted_string_matches(monkeypatch, question, phrase, value, score):
    """Run retrieval.string_matches on ``question`` with match_values scripted: only a trigram
    lookup that includes ``phrase`` finds something (``value`` at ``score``). Returns the
    matches and the lookups made (("exact",) or the phrases of each trigram lookup)."""
    from nl2sql.retrieval import values as retrieval

    phrases = candidate_phrases(question)
    texts = [p.text for p in phrases]
    calls = []

    def fake_match_values(plpy, phrases, *, fuzzy=(), exact=True, trgm_min=0.5, **kw):
        calls.append(("exact",) if exact else tuple(texts[i] for i in fuzzy))
        if exact or phrase not in calls[-1]:
            return []
        return [ValueMatch("public", "event", "name", value, score, "trigram", phrase, "question")]

    monkeypatch.setattr(retrieval, "match_values", fake_match_values)
    return retrieval.string_matches(None, phrases, 0.5), calls


def test_string_matches_looks_up_the_longest_phrases_first(monkeypatch):
    """string_matches: exact lookups, then the 3-word n-grams by trigrams, then only the shorter
    phrases that a strong trigram match of the first round did not resolve."""
    found, calls = _scripted_string_matches(
        monkeypatch,
        "Which events are in Macquarie Tranaction Ancestral?",
        "Macquarie Tranaction Ancestral",
        "Macquarie Transaction Ancestral",
        0.85,
    )
    assert [m.value for m in found] == ["Macquarie Transaction Ancestral"]
    assert calls[0] == ("exact",)
    assert set(calls[1]) == {"Macquarie Tranaction Ancestral"}  # the 3-word n-grams
    assert set(calls[2]) == {"events"}  # its parts are resolved
    assert len(calls) == 3


def test_vector_lookups_skip_phrases_a_resolved_mention_covers_or_crosses():
    """vector_phrases: no embedding lookup for phrases inside an exact match, across its border
    ("orders did Zack", "Tian place"), or made only of schema words; the other unmatched
    phrases keep theirs, up to the limit."""
    from nl2sql.retrieval.values import vector_phrases

    phrases = candidate_phrases("How many orders did Zack Neal Tian place near Lakeside?")
    texts = [p.text for p in phrases]
    exact = [
        ValueMatch(
            "public",
            "customer",
            "name",
            "Zack Neal Tian",
            1.0,
            "exact",
            "Zack Neal Tian",
            "question",
        )
    ]
    chosen = [texts[i] for i in vector_phrases(phrases, exact, {"order"}, 8)]
    assert not set(chosen) & {
        "orders did Zack",
        "Neal Tian place",
        "Tian place",
        "Zack Neal",
        "Neal",
        "orders",
        "Zack Neal Tian",
    }
    assert {"place", "Lakeside", "place near Lakeside"} <= set(chosen)
    assert len(vector_phrases(phrases, exact, {"order"}, 2)) == 2


def test_string_matches_looks_up_content_ngrams_before_those_with_stop_words(monkeypatch):
    """string_matches: a 3-word n-gram without stop words goes first; once it matches strongly,
    the 3-word n-gram across its border ("category of Sprinter") is never looked up."""
    _, calls = _scripted_string_matches(
        monkeypatch,
        "What is the category of Sprinter Brougton Uphold?",
        "Sprinter Brougton Uphold",
        "Sprinter Broughton Uphold",
        0.8,
    )
    assert calls[1] == ("Sprinter Brougton Uphold",)
    assert not any("category of Sprinter" in c for c in calls)
    assert set(calls[2]) == {"category"} and len(calls) == 3
