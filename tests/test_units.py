"""Pure-Python stages, no database: masking, SQL checks and cleaning, skeletons, prompts, vote."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT
from nl2sql.examples import make_entry, parse_benchmark_json, sql_skeleton
from nl2sql.masking import MASK, inflections, mask_question, name_words
from nl2sql.prompts import build_prompt, render_schema
from nl2sql.cleaning import clean_model_output
from nl2sql.errors import CandidateRefused
from nl2sql.sqlcheck import (check_candidate,
                             has_top_level_order, referenced_tables, parse_one, transpile)
from nl2sql.types import Candidate, Column, Example, ForeignKey, Schema, Table
from nl2sql.selection import select
from nl2sql.vote import result_signature, row_from_json


# --- masking -----------------------------------------------------------------------------

def test_name_words_split_snake_and_camel_case():
    assert name_words("songReleaseYear") == ["song", "release", "year"]
    assert name_words("singer_in_concert") == ["singer", "in", "concert"]


def test_inflections_cover_plural_forms():
    assert {"city", "cities"} <= inflections("city")
    assert {"singer", "singers"} <= inflections("singers")
    assert {"class", "classes"} <= inflections("class")


def test_masking_replaces_table_column_names_plurals_and_values():
    q = "How many singers from France released a song in 2014?"
    m = mask_question(q, names=["singer", "country", "song_release_year"], values=["France"])
    assert "singers" not in m and "France" not in m and "2014" not in m and "song" not in m
    assert m.startswith("How many <mask>")
    # adjacent masked words collapse into one mask
    assert f"{MASK} {MASK}" not in m


def test_masking_keeps_question_structure_words():
    m = mask_question("What is the average capacity of all stadiums?", names=["stadium", "capacity"])
    assert m == "What is the average <mask> of all <mask> ?"


def test_masking_multiword_values_and_quotes():
    m = mask_question("Which concerts have the theme 'Summer Nights'?", names=["concert", "theme"],
                      values=["Summer Nights"])
    assert "Summer" not in m and "Nights" not in m


# --- SQL checks --------------------------------------------------------------------------

@pytest.mark.parametrize("sql,needle", [
    ("DROP TABLE singer", "not a query"),
    ("DELETE FROM singer", "not a query"),
    ("SELECT * INTO copy FROM singer", "Into"),
    ("WITH d AS (DELETE FROM singer RETURNING *) SELECT * FROM d", "Delete"),
    ("SELECT * FROM singer FOR UPDATE", "locking"),
    ("SELECT 1; SELECT 2", "exactly one"),
    ("SELECT pg_sleep(100)", "pg_sleep"),
    ("SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
    ("SELECT nextval('s')", "nextval"),
    ("SELECT * FROM pg_authid", "unknown relation"),
    ("", "empty"),
    ("SELEC oops", "not a query"),
    ("SELECT * FROM (", "parse"),
])
def test_check_refuses_with_a_reason(sql, needle):
    with pytest.raises(CandidateRefused) as e:
        check_candidate(sql, {"singer", "concert"})
    assert needle.lower() in str(e.value).lower()


def test_check_accepts_queries_with_ctes_and_set_operations():
    ok = {"WITH a AS (SELECT name FROM singer) SELECT * FROM a": ["singer"],
          "SELECT name FROM singer UNION SELECT concert_name FROM concert": ["concert", "singer"],
          "SELECT count(*) FROM public.singer": ["public.singer"]}
    for sql, tables in ok.items():
        tree = check_candidate(sql, {"singer", "concert", "public.singer"})
        assert sorted(referenced_tables(tree)) == tables  # the CTE name is not a relation
        assert parse_one(tree.sql(dialect="postgres")) == tree  # what runs is what was checked


def test_referenced_tables_excludes_ctes_and_keeps_order():
    tree = parse_one("WITH x AS (SELECT * FROM concert) SELECT * FROM singer s JOIN x ON true "
                     "JOIN stadium ON true")
    assert sorted(referenced_tables(tree)) == ["concert", "singer", "stadium"]


def test_clean_model_output_rules():
    assert clean_model_output("```sql\nSELECT 1;\n```") == "SELECT 1"
    assert clean_model_output("Sure! Here is the query:\nSELECT a FROM t") == "SELECT a FROM t"
    assert clean_model_output("SELECT a\\_b FROM t;") == "SELECT a_b FROM t"
    assert clean_model_output(None) == ""
    # a lone closing fence after the SQL, and prose after it that contains "with"
    assert clean_model_output("SELECT a FROM t;\n```") == "SELECT a FROM t"
    assert clean_model_output("SELECT a FROM t;\n```\n\nThis query works with full_name 'x'.") \
        == "SELECT a FROM t"
    assert clean_model_output("WITH x AS (SELECT 1) SELECT * FROM x") == "WITH x AS (SELECT 1) SELECT * FROM x"


def test_top_level_order_detection():
    assert has_top_level_order("SELECT a FROM t ORDER BY a")
    assert not has_top_level_order("SELECT a FROM (SELECT a FROM t ORDER BY a) s")


def test_transpile_sqlite_to_postgres():
    out = transpile('SELECT name FROM dogs WHERE breed = "Poodle" LIMIT 5', "sqlite")
    assert "'Poodle'" in out and "LIMIT 5" in out
    with pytest.raises(CandidateRefused):
        transpile("SELECT FROM WHERE", "sqlite")


# --- examples ----------------------------------------------------------------------------

def test_sql_skeleton_drops_identifiers_and_literals():
    a = sql_skeleton("SELECT count(*) FROM singer WHERE age > 30")
    b = sql_skeleton("SELECT count(*) FROM book WHERE pages > 300")
    c = sql_skeleton("SELECT name FROM singer ORDER BY age DESC LIMIT 1")
    assert a == b and a != c and "singer" not in a and "30" not in a


def test_make_entry_masks_with_the_examples_own_schema():
    e = make_entry("library", "How many books did 'Penguin' publish?",
                   "SELECT count(*) FROM book WHERE publisher = 'Penguin'",
                   {"book": ["book_id", "title", "publisher"]})
    assert "Penguin" not in e.masked_question and "books" not in e.masked_question


def test_benchmark_loader_reports_failures():
    data = "\n".join(json.dumps(x) for x in [
        {"db_id": "a", "question": "How many?", "query": "SELECT count(*) FROM t"},
        {"db_id": "a", "question": "bad", "query": "SELECT FROM WHERE ("},
        {"db_id": "a", "question": "", "SQL": "SELECT 1"},
    ])
    entries, failures = parse_benchmark_json(data)
    assert len(entries) == 1 and [f["index"] for f in failures] == [1, 2]


# --- prompts -----------------------------------------------------------------------------

def _schema():
    singer = Table("singer", "public", "singer", [
        Column("singer_id", "integer", True, None, ["1", "2", "3"]),
        Column("name", "text", False, "full name", ["Ann", "Bo", "Cy"]),
        Column("stadium_id", "integer")], comment="people who sing")
    stadium = Table("stadium", "public", "stadium", [Column("stadium_id", "integer", True)])
    return Schema([singer, stadium], [ForeignKey("singer", ["stadium_id"], "stadium", ["stadium_id"])])


def test_prompt_has_schema_values_fks_examples_instruction_and_question_last():
    ex = [Example(1, "lib", "How many books are there?", "SELECT count(*) FROM book")]
    p = build_prompt("How many singers?", _schema(), ex, n_values=3)
    assert "CREATE TABLE singer" in p and "values: 'Ann', 'Bo', 'Cy'" in p and "values: 1, 2, 3" in p
    assert "singer(stadium_id) REFERENCES stadium(stadium_id)" in p
    assert "minimize SQL execution time while ensuring correctness" in p
    assert p.index("How many books") < p.index("minimize") < p.index("How many singers?")
    assert p.rstrip().endswith("How many singers? */")
    assert "full name" in p and "people who sing" in p


def test_schema_subset_keeps_only_linked_tables_and_their_fks():
    sub = _schema().subset({"singer"})
    assert sub.table_names() == ["singer"] and sub.foreign_keys == []
    assert "stadium" not in render_schema(sub).split("CREATE TABLE singer")[0]


# --- vote (selection.select with no threshold) --------------------------------------------------------------------------------

def _cand(src, h, ms, status="ok"):
    return Candidate(source=src, model=src, raw_text="x", sql=f"SELECT '{src}'", status=status,
                     result_hash=h, exec_ms=ms, row_count=1)


def test_vote_majority_wins_and_fastest_member_is_returned():
    v = select([_cand("a", "h1", 5.0), _cand("b", "h1", 1.0), _cand("c", "h2", 0.1)], threshold=0)
    assert v.winner_hash == "h1" and v.sql == "SELECT 'b'" and abs(v.confidence - 2 / 3) < 1e-9


def test_vote_tie_goes_to_fastest_group():
    v = select([_cand("slow", "h1", 50.0), _cand("fast", "h2", 2.0)], threshold=0)
    assert v.sql == "SELECT 'fast'" and "tie" in v.reason


def test_vote_ignores_failed_candidates():
    v = select([_cand("e1", None, 1.0, "error"), _cand("e2", None, 1.0, "refused"),
                _cand("ok", "h", 3.0)], threshold=0)
    assert v.sql == "SELECT 'ok'" and v.confidence == 1.0
    assert select([_cand("e", None, 1.0, "error")], threshold=0).sql is None


def test_result_signature_is_a_multiset_and_normalizes_numbers():
    r1 = [row_from_json('{"a": 1, "b": "x"}'), row_from_json('{"a": 2, "b": "y"}')]
    r2 = [row_from_json('{"n": 2.0, "m": "y"}'), row_from_json('{"n": 1.000000, "m": "x"}')]
    assert result_signature(r1) == result_signature(r2)
    assert result_signature(r1, ordered=True) != result_signature(r2, ordered=True)
    assert result_signature(r1) != result_signature(r1[:1])
    # duplicate column names are kept
    assert row_from_json('{"name": "a", "name": "b"}') == ("a", "b")


def test_local_cluster_refuses_a_non_empty_folder_and_leaves_it_as_it_was(tmp_path):
    """A mistyped datadir (e.g. a data folder) must not be chowned, chmodded or initdb'ed."""
    from nl2sql_indexer.cluster import ClusterError, LocalCluster

    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    (folder / "questions.jsonl").write_text("{}\n")
    before = folder.stat()
    with pytest.raises(ClusterError, match="not empty"):
        LocalCluster(folder).init()
    after = folder.stat()
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid,
                                                           before.st_gid)
    assert sorted(p.name for p in folder.iterdir()) == ["questions.jsonl"]
