"""Retrieval and schema linking inside PostgreSQL (demo database): trigram and vector value
retrieval, evidence, masking, FK bridges, DAIL selection and the token budget through
``nl2sql.retrieve()`` and ``nl2sql.explain()``. Model answers come from the scripted loopback
server."""

from __future__ import annotations

import json

import psycopg
import pytest

from conftest import add_models
from db.test_safety import SECRETS, analyst_conn, safe_conn  # noqa: F401 (fixtures: two roles)
from nl2sql_indexer.dev.loopback import Rule


def retrieve(db, question, evidence=None, presql=None):
    return db.execute(
        "SELECT nl2sql.retrieve(%s, %s, %s)", (question, evidence, presql)
    ).fetchone()[0]


@pytest.fixture
def settings(db):
    """Set settings for one test; the defaults are put back afterwards."""
    changed = []

    def put(key, value):
        old = db.execute("SELECT value FROM nl2sql.setting WHERE key = %s", (key,)).fetchone()
        changed.append((key, old[0] if old else None))
        db.execute("SELECT nl2sql.set_setting(%s, %s)", (key, value))

    yield put
    for key, old in reversed(changed):
        if old is None:
            db.execute("DELETE FROM nl2sql.setting WHERE key = %s", (key,))
        else:
            db.execute("SELECT nl2sql.set_setting(%s, %s)", (key, old))


def test_trigram_retrieval_finds_a_misspelt_value_and_masks_it(db):
    r = retrieve(db, "How many singers come from the Untied Kingdom?")
    hit = [v for v in r["values"] if v["value"] == "United Kingdom"]
    assert hit and hit[0]["how"] == "trigram" and hit[0]["column"] == "country"
    assert hit[0]["phrase"] == "Untied Kingdom" and 0.5 <= hit[0]["score"] < 1
    assert "Untied" not in r["masked_question"] and "Kingdom" not in r["masked_question"]
    assert "-- singer.country: 'United Kingdom'" in r["presql_prompt"]


def test_vector_retrieval_finds_a_paraphrased_value(db):
    r = retrieve(db, "How many singers are from the USA?")
    hit = [v for v in r["values"] if v["value"] == "United States"]
    assert hit and hit[0]["how"] == "vector" and hit[0]["phrase"] == "USA", r["values"]
    assert hit[0]["score"] >= 0.8


def test_vector_matches_reach_linking_and_finsql_but_not_the_presql_prompt(db):
    """Embedding matches are looked up while PreSQL is out (context.add_vector_values): the
    PreSQL prompt shows exact and trigram matches, the FinSQL prompt all of them."""
    r = retrieve(
        db,
        "How many singers from the USA come from the Untied Kingdom?",
        presql="SELECT count(*) FROM singer",
    )
    how = {v["value"]: v["how"] for v in r["values"]}
    assert how.get("United States") == "vector" and how.get("United Kingdom") == "trigram"
    assert "-- singer.country: 'United Kingdom'" in r["presql_prompt"]
    assert "-- singer.country: 'United States'" not in r["presql_prompt"]
    assert "-- singer.country: 'United States'" in r["finsql_prompt"]


def test_trigram_threshold_is_a_setting(db, settings):
    settings("value_trgm_min", "0.95")
    settings("value_vector_min", "1")
    r = retrieve(db, "How many singers come from the Untied Kingdom?")
    assert not any(v["value"] == "United Kingdom" for v in r["values"])


def test_evidence_spans_are_looked_up(db):
    r = retrieve(
        db,
        "How many singers come from that country?",
        evidence="that country refers to country = 'France'",
    )
    assert r["values"][0]["value"] == "France" and r["values"][0]["source"] == "evidence"
    assert "/* Hint: that country refers to country = 'France' */" in r["presql_prompt"]


def test_fk_bridge_tables_join_presql_tables(db):
    r = retrieve(
        db,
        "Which singers sang in which stadium?",
        presql="SELECT singer.name, stadium.name FROM singer, stadium",
    )
    assert set(r["linked_tables"]) >= {"singer", "stadium", "concert", "singer_in_concert"}
    assert any(w.startswith("fk bridge") for w in r["linking"]["why"]["concert"])
    assert "singer.name" in r["linked_columns"] and "stadium.name" in r["linked_columns"]
    assert "CREATE TABLE singer_in_concert" in r["finsql_prompt"]


def test_dail_tau_changes_the_finsql_examples(db, settings):
    q = "How many concerts were held in each year?"
    presql = "SELECT year, count(*) FROM concert GROUP BY year"
    settings("dail_tau", "0")
    loose = retrieve(db, q, presql=presql)["selection"]
    settings("dail_tau", "0.8")
    strict = retrieve(db, q, presql=presql)["selection"]
    assert [e["id"] for e in loose["examples"]] != [e["id"] for e in strict["examples"]]
    passed = [e for e in strict["examples"] if e["skeleton_jaccard"] >= 0.8]
    assert passed and all("group by" in e["sql"].lower() for e in passed)
    assert strict["examples"][: len(passed)] == passed  # passing examples come first


def test_token_budget_prunes_presql_schema_and_keeps_value_tables(db, settings):
    full = retrieve(db, "Which singers from France performed at Riverside Arena?")
    assert not full["pruning"]["pruned"]
    settings("prompt_token_budget", "1200")
    r = retrieve(db, "Which singers from France performed at Riverside Arena?")
    assert r["pruning"]["pruned"] and r["pruning"]["tokens"] <= 1200 < r["pruning"]["tokens_full"]
    assert {"singer", "stadium"} <= set(r["presql_tables"])
    assert len(r["presql_tables"]) < 4


def test_explain_shows_masked_question_values_links_and_why(db, llm):
    add_models(db, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response="SELECT name FROM singer WHERE country = 'France'"))
    trace = db.execute("SELECT nl2sql.explain('Which singers come from France?')").fetchone()[0]
    assert trace["masked_question"] == "Which <mask> come from <mask> ?"
    assert any(v["value"] == "France" and v["how"] == "exact" for v in trace["values"])
    assert trace["linked_tables"] == ["singer"]
    assert "presql" in trace["linking"]["why"]["singer"]
    assert any(
        w.startswith("value singer.country = 'France'") for w in trace["linking"]["why"]["singer"]
    )
    assert "singer.country" in trace["linked_columns"]
    assert trace["selection"]["how"] in {"dail", "dail + fallback"}
    assert "-- singer.country: 'France'" in trace["finsql"]["prompt"]
    assert trace["sql"] is not None


def test_retrieve_rejects_an_empty_question(db):
    with pytest.raises(psycopg.Error) as e:
        retrieve(db, "   ")
    assert "question is empty" in str(e.value)


def test_retrieve_as_an_ordinary_role_shows_only_what_it_may_read(safe_conn, analyst_conn):  # noqa: F811
    q = "Which employee is in band omega, and what is the private phone of the front desk?"
    presql = "SELECT p.employee_label FROM payroll p JOIN contact c ON true"
    mine = analyst_conn.execute("SELECT nl2sql.retrieve(%s, NULL, %s)", (q, presql)).fetchone()[0]
    text = json.dumps(mine)
    for s in SECRETS:
        assert s.lower() not in text.lower(), f"retrieve shows {s!r} to an ordinary role"
    assert "contact" in mine["linked_tables"] and "payroll" not in mine["linked_tables"]
    assert any(v["value"] == "Front desk" for v in mine["values"])
    # the superuser's retrieval does find the secret value: the test can tell the difference
    su = safe_conn.execute("SELECT nl2sql.retrieve(%s, NULL, %s)", (q, presql)).fetchone()[0]
    assert (
        any(v["value"] == "Band-Omega-9" for v in su["values"]) and "payroll" in su["linked_tables"]
    )


def _text_mirror_is_exact(db):
    """nl2sql.cell_value_text holds each distinct string of nl2sql.cell_value with its count."""
    return (
        db.execute(
            "SELECT count(*) FROM (SELECT value, count(*)::int AS n FROM nl2sql.cell_value "
            "GROUP BY value) a FULL JOIN nl2sql.cell_value_text t USING (value) "
            "WHERE a.n IS DISTINCT FROM t.n"
        ).fetchone()[0]
        == 0
    )


def test_distinct_string_mirror_follows_inserts_updates_deletes_and_truncate(db):
    """The trigram lookup searches nl2sql.cell_value_text; its triggers keep it equal to the
    distinct strings of the value index, with counts, whatever writes the index."""
    assert _text_mirror_is_exact(db)
    db.execute("BEGIN")
    try:
        db.execute(
            "INSERT INTO nl2sql.cell_value (schema_name, table_name, column_name, value, "
            "embedding) SELECT schema_name, table_name, column_name || '_x', value, embedding "
            "FROM nl2sql.cell_value WHERE value IN ('United Kingdom', 'Paris')"
        )
        db.execute(
            "INSERT INTO nl2sql.cell_value (schema_name, table_name, column_name, value, "
            "embedding) SELECT schema_name, table_name, column_name, 'Mirror Test Value', "
            "embedding FROM nl2sql.cell_value WHERE value = 'United Kingdom' LIMIT 1"
        )
        assert _text_mirror_is_exact(db)
        n = db.execute(
            "SELECT n FROM nl2sql.cell_value_text WHERE value = 'United Kingdom'"
        ).fetchone()[0]
        assert n >= 2
        db.execute(
            "UPDATE nl2sql.cell_value SET value = 'Mirror Test Renamed' "
            "WHERE value = 'Mirror Test Value'"
        )
        assert _text_mirror_is_exact(db)
        assert not db.execute(
            "SELECT 1 FROM nl2sql.cell_value_text WHERE value = 'Mirror Test Value'"
        ).fetchall()
        db.execute(
            "DELETE FROM nl2sql.cell_value WHERE column_name LIKE '%\\_x' "
            "OR value = 'Mirror Test Renamed'"
        )
        assert _text_mirror_is_exact(db)
        assert (
            db.execute(
                "SELECT n FROM nl2sql.cell_value_text WHERE value = 'United Kingdom'"
            ).fetchone()[0]
            == n // 2
        )
        db.execute("TRUNCATE nl2sql.cell_value")
        assert db.execute("SELECT count(*) FROM nl2sql.cell_value_text").fetchone()[0] == 0
    finally:
        db.execute("ROLLBACK")
    assert _text_mirror_is_exact(db)


def _trigram_reference(conn, phrases, t):
    """Every (phrase number, table, column, value, score) the role's visible values give with
    similarity >= t, computed without any index (the definition the lookup must equal)."""
    return sorted(
        conn.execute(
            "SELECT p.n::int, v.table_name::text, v.column_name::text, v.value, "
            "round(similarity(v.value, p.x)::numeric, 4) FROM unnest(%s::text[]) WITH ORDINALITY "
            "p(x, n) JOIN nl2sql.visible_cell_value v ON similarity(v.value, p.x) >= %s",
            (phrases, t),
        ).fetchall()
    )


def test_trigram_lookup_by_string_length_equals_the_definition(safe_conn, analyst_conn):  # noqa: F811
    """A phrase that only short strings can match (similarity(v, p) <= trigrams(p) /
    trigrams(v)) is searched in the partial index of strings of at most 20 trigrams
    (sql/incremental/014-lookup-knn.sql); longer ones in the whole index. Either way the
    trigram matches are exactly those of the definition, at every threshold, for the owner and
    for a role that may not read some columns (misspelt short values of a withheld column are
    not returned)."""
    phrases = [
        "Frnce",
        "Kingdm",
        "Untied Kingdom",
        "Zorblx",
        "Zorblax Quuxingtn",
        "PHONE-SECRET-555",
        "Front dsk",
        "desk",
        "Paris",
        "a",
        "Band-Omega",
    ]
    sql = (
        "SELECT i, table_name::text, column_name::text, value, round(score::numeric, 4) FROM "
        "nl2sql._match_values(current_user, NULL, %s, NULL, %s, 2, 1000) WHERE how = 'trigram'"
    )
    for t in (0.3, 0.5, 0.8):
        for conn in (safe_conn, analyst_conn):
            got = sorted(conn.execute(sql, (phrases, t)).fetchall())
            assert got == _trigram_reference(conn, phrases, t), (t, conn.info.user)
    owner = {r[3] for r in safe_conn.execute(sql, (phrases, 0.3))}
    seen = {r[3] for r in analyst_conn.execute(sql, (phrases, 0.3))}
    assert {"France", "Front desk", "Zorblax Quuxington", "PHONE-SECRET-5551"} <= owner
    assert {"France", "Front desk"} <= seen
    assert not seen & {"Zorblax Quuxington", "PHONE-SECRET-5551", "Band-Omega-9"}
    # both paths were taken: short phrases by the partial index, the others by the whole one
    n_short = safe_conn.execute(
        "SELECT count(*) FROM unnest(%s::text[]) x WHERE "
        "coalesce(array_length(show_trgm(x), 1), 0) / 0.5 <= 20",
        (phrases,),
    ).fetchone()[0]
    assert 0 < n_short < len(phrases)
    assert (
        safe_conn.execute(
            "SELECT count(*) FILTER (WHERE n_trgm <> coalesce(array_length(show_trgm(value), 1), 0)) "
            "FROM nl2sql.cell_value_text"
        ).fetchone()[0]
        == 0
    )


def test_trigram_match_of_a_string_many_columns_hold_reads_the_first_visible_rows(
    safe_conn,  # noqa: F811 - fixtures imported from test_safety
    analyst_conn,  # noqa: F811
):
    """A string that many columns hold gives per_phrase trigram matches: its rows in index (id)
    order, the first ones the role may see (sql/incremental/015-lookup-rows-by-id.sql); rows of
    columns the role may not read or whose values are withheld are passed over, not counted."""
    cols = [
        ("payroll", "wage_band"),
        ("payroll", "employee_label"),
        ("contact", "private_phone"),
        ("venue", "secret_code"),
        ("contact", "display_name"),
        ("venue", "venue_name"),
        ("memo", "memo_text"),
    ]
    emb = safe_conn.execute("SELECT embedding FROM nl2sql.cell_value LIMIT 1").fetchone()[0]
    sql = (
        "SELECT table_name || '.' || column_name, value FROM nl2sql._match_values("
        "current_user, NULL, %s, NULL, 0.5, 2, %s) WHERE how = 'trigram' ORDER BY 1"
    )
    try:
        for t, c in cols:  # in this order: ids ascending
            safe_conn.execute(
                "INSERT INTO nl2sql.cell_value (schema_name, table_name, "
                "column_name, value, embedding) VALUES ('public', %s, %s, "
                "'Quasar Status Word', %s)",
                (t, c, emb),
            )
        owner = safe_conn.execute(sql, (["Quasar Statis Word"], 2)).fetchall()
        seen = analyst_conn.execute(sql, (["Quasar Statis Word"], 2)).fetchall()
        everything = analyst_conn.execute(sql, (["Quasar Statis Word"], 10)).fetchall()
    finally:
        safe_conn.execute("DELETE FROM nl2sql.cell_value WHERE value = 'Quasar Status Word'")
    assert owner == [
        ("payroll.employee_label", "Quasar Status Word"),
        ("payroll.wage_band", "Quasar Status Word"),
    ]
    assert seen == [
        ("contact.display_name", "Quasar Status Word"),
        ("venue.venue_name", "Quasar Status Word"),
    ]
    assert [r[0] for r in everything] == [
        "contact.display_name",
        "memo.memo_text",
        "venue.venue_name",
    ]


def test_exact_match_of_a_value_many_columns_hold_keeps_the_first_hundred(safe_conn):  # noqa: F811
    """An exact match returns at most 100 rows a phrase: the first ones in id order (a value
    that 1,000 columns hold was read in full, 68 ms); fewer rows are all returned."""
    cols = [f"c{i:03d}" for i in range(105)]
    sql = (
        "SELECT column_name::text FROM nl2sql._match_values(current_user, %s, NULL, NULL, "
        "0.5, 2, 3) WHERE how = 'exact'"
    )
    safe_conn.execute("CREATE TABLE wide_status (" + ", ".join(f"{c} text" for c in cols) + ")")
    try:
        row = ", ".join(["'Quasar Everywhere'"] * len(cols))
        safe_conn.execute(f"INSERT INTO wide_status VALUES ({row})")
        safe_conn.execute("SELECT nl2sql.reindex()")
        first = [
            r[0]
            for r in safe_conn.execute(
                "SELECT column_name::text FROM nl2sql.cell_value WHERE value = 'Quasar Everywhere' "
                "ORDER BY id LIMIT 100"
            )
        ]
        got = [r[0] for r in safe_conn.execute(sql, (["quasar everywhere"],))]
        few = [r[0] for r in safe_conn.execute(sql, (["Front desk"],))]
    finally:
        safe_conn.execute("DROP TABLE wide_status")
        safe_conn.execute("SELECT nl2sql.reindex()")
    assert len(first) == 100 and sorted(got) == sorted(first)
    assert few == ["display_name"]


def test_one_lookup_for_all_phrases_equals_one_lookup_per_phrase(db):
    """nl2sql._match_values answers all phrases of a question in one statement; each phrase's
    matches (exact, trigram, vector) are those it gets when looked up alone."""
    phrases = ["Untied Kingdom", "France", "United Kingdom", "singers", "Kingdom", "Nowhere At All"]
    vec = db.execute(
        "SELECT embedding::text FROM nl2sql.cell_value WHERE value = 'United States' LIMIT 1"
    ).fetchone()[0]
    vecs = [None, vec, None, None, None, vec]
    sql = (
        "SELECT how, i, schema_name, table_name, column_name, value, score FROM "
        "nl2sql._match_values(current_user, %s, %s, %s::vector[], 0.5, 0.8, 3)"
    )
    together = sorted(db.execute(sql, (phrases, phrases, vecs)).fetchall())
    alone = sorted(
        (how, k + 1, *rest)
        for k, p in enumerate(phrases)
        for how, _, *rest in db.execute(sql, ([p], [p], [vecs[k]])).fetchall()
    )
    assert together == alone
    assert {r[0] for r in together} == {"exact", "trigram", "vector"}


def test_value_vectors_are_halfvec_and_the_nearest_value_search_reads_the_hnsw_index(db):
    """sql/incremental/023-value-halfvec.sql: nl2sql.cell_value.embedding is halfvec(384) with
    an hnsw halfvec_cosine_ops index, and the nearest-value search as nl2sql._match_values
    writes it (the question's vector cast to halfvec) is served by that index, finding the
    value whose vector it is."""
    kind = db.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'nl2sql.cell_value'::regclass AND attname = 'embedding'"
    ).fetchone()[0]
    assert kind == "halfvec(384)"
    vec = db.execute(
        "SELECT embedding::text FROM nl2sql.cell_value WHERE value = 'United States' LIMIT 1"
    ).fetchone()[0]
    query = (
        "SELECT value FROM nl2sql.cell_value "
        "ORDER BY embedding <=> %s::vector::halfvec(384) LIMIT 12"
    )
    db.execute("SET enable_seqscan = off")
    try:
        plan = "\n".join(r[0] for r in db.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, (vec,)))
        top = db.execute(query, (vec,)).fetchone()[0]
    finally:
        db.execute("RESET enable_seqscan")
    assert "Index Scan using cell_value_embedding_hnsw" in plan, plan
    assert top == "United States"
    found = db.execute(
        "SELECT value FROM nl2sql._match_values(current_user, NULL, NULL, %s::vector[], "
        "0.5, 0.99, 3) WHERE how = 'vector'",
        ([vec],),
    ).fetchall()
    assert ("United States",) in found


def test_one_value_lookup_is_served_by_the_exact_trigram_and_hnsw_indexes(db):
    """The tiered lookup nl2sql._match_values (exact, trigram, vector in one statement) reads
    the value index through its indexes: the plans of its statement (auto_explain, nested)
    name the btree on (lower(value), id), a trigram gin index of cell_value_text and the
    halfvec hnsw index, and no sequential scan of either table."""
    vec = db.execute(
        "SELECT embedding::text FROM nl2sql.cell_value WHERE value = 'United States' LIMIT 1"
    ).fetchone()[0]
    plans: list[str] = []

    def keep(diag):
        plans.append(diag.message_primary or "")

    db.execute("LOAD 'auto_explain'")
    db.execute(
        "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; "
        "SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; "
        "SET client_min_messages = log"
    )
    db.add_notice_handler(keep)
    try:
        rows = db.execute(
            "SELECT how, value FROM nl2sql._match_values(current_user, %s, %s, %s::vector[], "
            "0.5, 0.8, 3)",
            (["France", "Untied Kingdom"], ["France", "Untied Kingdom"], [vec, None]),
        ).fetchall()
    finally:
        db.remove_notice_handler(keep)
        db.execute("RESET client_min_messages; SET auto_explain.log_min_duration = -1")
    assert ("exact", "France") in rows and ("vector", "United States") in rows
    assert ("trigram", "United Kingdom") in rows
    plan = "\n".join(p for p in plans if "cell_value" in p)
    assert "Index Scan using cell_value_embedding_hnsw" in plan, plan
    assert "cell_value_lower_id" in plan, plan
    assert "cell_value_text_trgm" in plan, plan
    assert "cell_value_text_words" in plan, plan
    assert "Seq Scan on cell_value" not in plan, plan


def _trigram_scans(db, phrase: str) -> tuple[list, list[str]]:
    """``_match_values``' trigram rows for one phrase, and the plan lines of its trigram
    index scans (auto_explain, nested, analyzed)."""
    plans: list[str] = []
    db.execute("LOAD 'auto_explain'")
    db.execute(
        "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; "
        "SET auto_explain.log_analyze = on; SET client_min_messages = log"
    )
    db.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
    try:
        rows = db.execute(
            "SELECT value, score FROM nl2sql._match_values(current_user, NULL, %s, NULL, 0.5, "
            "1.1, 3) WHERE how = 'trigram'",
            ([phrase],),
        ).fetchall()
    finally:
        db.execute("RESET client_min_messages; SET auto_explain.log_min_duration = -1")
    lines = [x for p in plans for x in p.splitlines() if "cell_value_text_trgm" in x]
    return rows, lines


@pytest.mark.parametrize(
    "phrase, value, trigram_read",
    [
        ("Untied Kingdom", "United Kingdom", False),  # "kingdom" is a word of the index
        ("Unitedd Kingdomm", "United Kingdom", True),  # no word known: the trigram indexes
        ("France Kingdom", None, False),  # known words, nothing similar: no trigram scan
    ],
)
def test_words_first_then_trigrams_for_unknown_words(db, phrase, value, trigram_read):
    """A phrase is looked up by the words it shares with the strings (the word index), scored
    by trigram similarity; the trigram indexes are read only when the words found nothing and
    the phrase has a word no string holds (sql/incremental/026-lookup-words.sql)."""
    rows, lines = _trigram_scans(db, phrase)
    assert (value in [r[0] for r in rows]) if value else rows == [], rows
    assert lines, "the plan names a trigram index"
    read = any("never executed" not in x for x in lines)
    assert read == trigram_read, lines
