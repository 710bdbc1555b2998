"""The candidate check without a server: the adversarial corpus against the shape check, the
volatility and function checks with a scripted pg_proc lookup, the allowlist and the denied
families and signatures. tests/db/test_safety.py runs the corpus and the rest of safety inside
PostgreSQL."""

from __future__ import annotations

import pytest

from adversarial_corpus import CORPUS, FUNCTION_REFUSAL, ORDINARY
from nl2sql.core.sqlcheck import CandidateRefused, check_candidate, parse_one
from nl2sql.generation.db_checks import (
    VOLATILE_ALLOWLIST,
    check_functions,
    denied_by_name,
    denied_by_signature,
    function_names,
)

KNOWN = {"singer", "stadium", "concert", "singer_in_concert"}


def test_corpus_has_at_least_fifty_statements_with_unique_ids():
    assert len(CORPUS) >= 50
    assert len({c[0] for c in CORPUS}) == len(CORPUS)
    assert {c[2] for c in CORPUS} == {"shape", "refused", "denied", "contained", "lock"}


@pytest.mark.parametrize("cid,sql", [(c[0], c[1]) for c in CORPUS if c[2] == "shape"])
def test_shape_check_refuses_corpus_statement(cid, sql):
    with pytest.raises(CandidateRefused):
        check_candidate(sql, KNOWN)


@pytest.mark.parametrize("cid,sql", [(c[0], c[1]) for c in CORPUS if c[2] == "refused"])
def test_volatility_check_refuses_what_the_shape_check_lets_through(cid, sql):
    tree = check_candidate(sql, KNOWN)  # a plain SELECT: the shape check cannot know
    volatile_in_pg_proc = {
        "currval",
        "setseed",
        "pg_notify",
        "pg_stat_reset_shared",
        "lo_creat",
        "pg_stat_reset",
        "pg_try_advisory_lock",
        "adv_writer",
        "random",
    }
    with pytest.raises(CandidateRefused, match=FUNCTION_REFUSAL):
        check_functions(tree, lambda names: names & volatile_in_pg_proc)


def test_function_names_cover_qualified_and_portable_nodes():
    names = function_names(
        parse_one(
            "SELECT pg_catalog.pg_sleep(1), random(), count(*), gen_random_uuid() FROM singer"
        )
    )
    assert {"pg_sleep", "random", "count", "gen_random_uuid"} <= names


def test_allowlisted_volatile_function_passes_and_others_do_not():
    seen: list[set[str]] = []

    def lookup(names: set[str]) -> set[str]:
        seen.append(set(names))
        return names & {"random", "clock_timestamp", "gen_random_uuid"}

    check_functions(parse_one("SELECT name FROM singer ORDER BY random() LIMIT 1"), lookup)
    assert "random" in VOLATILE_ALLOWLIST and "random" not in seen[-1]
    with pytest.raises(CandidateRefused, match=r"gen_random_uuid\(\)"):
        check_functions(parse_one("SELECT gen_random_uuid()"), lookup)


# input argument types of every overload, as pg_proc holds them (PostgreSQL 15)
PG_PROC_SIGS = {
    "table_to_xml": [["regclass", "boolean", "boolean", "text"]],
    "cursor_to_xml": [["refcursor", "integer", "boolean", "boolean", "text"]],
    "obj_description": [["oid"], ["oid", "name"]],
    "adv_rowcount": [["regclass"]],
    "max": [["integer"], ["oid"], ["text"]],
    "to_tsvector": [["text"], ["regconfig", "text"]],
    "count": [[], ['"any"']],
}


def _scripted_denied(names: set[str]) -> dict[str, str]:
    out = {}
    for n in names:
        why = denied_by_name(n) or denied_by_signature(PG_PROC_SIGS.get(n, []))
        if why:
            out[n] = why
    return out


@pytest.mark.parametrize("cid,sql", [(c[0], c[1]) for c in CORPUS if c[2] == "denied"])
def test_function_check_refuses_denied_corpus_statement_naming_the_function(cid, sql):
    tree = parse_one(sql)
    with pytest.raises(CandidateRefused, match="only functions over values") as e:
        check_functions(tree, lambda names: set(), _scripted_denied)
    assert any(f"{n}()" in str(e.value) for n in function_names(tree)), str(e.value)


@pytest.mark.parametrize("sql", ORDINARY)
def test_function_check_lets_ordinary_value_functions_through(sql):
    tree = parse_one(sql)
    asked: list[set[str]] = []

    def denied(names: set[str]) -> dict[str, str]:
        asked.append(set(names))
        return _scripted_denied(names)

    assert check_functions(tree, lambda names: set(), denied) is None  # no CandidateRefused
    assert asked == [function_names(tree)]  # every function was looked up, none refused
    assert _scripted_denied(function_names(tree)) == {}


def test_denied_families_and_signatures():
    for n in (
        "table_to_xml",
        "query_to_xml",
        "cursor_to_xml",
        "schema_to_xml",
        "database_to_xml",
        "table_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "pg_stat_get_activity",
        "pg_stat_get_backend_activity",
        "pg_stat_statements",
        "pg_ls_dir",
        "pg_read_file",
        "pg_file_write",
        "pg_relation_size",
        "pg_relation_filepath",
        "pg_get_viewdef",
        "lo_get",
        "dblink",
        "dblink_exec",
    ):
        assert denied_by_name(n), n
    for n in (
        "count",
        "upper",
        "date_trunc",
        "json_agg",
        "pg_typeof",
        "pg_size_pretty",
        "similarity",
        "regexp_replace",
        "lower",
        "longest",
    ):
        assert denied_by_name(n) is None, n
    assert "regclass" in denied_by_signature([["regclass", "boolean"], ["text"]])
    assert "refcursor" in denied_by_signature([["refcursor", "integer"]])
    assert denied_by_signature([["oid"], ["oid", "name"]])  # catalog objects only
    assert denied_by_signature([["integer"], ["oid"]]) is None  # max(oid) beside max(int)
    assert denied_by_signature([["text"], ["regconfig", "text"]]) is None  # to_tsvector
    assert denied_by_signature([]) is None


def test_operator_and_column_notation_calls_of_volatile_functions_are_seen():
    from nl2sql.generation.db_checks import check_operators

    ops = {"###": "nl2sql_adv_volatile_op"}
    for sql, ok in [
        ("SELECT 1 OPERATOR(public.###) 2", False),
        ("SELECT 1 = 2", True),
        ("SELECT s.nl2sql_adv_row_volatile FROM singer s", False),
        ("SELECT s.name FROM singer s", True),
    ]:
        tree = parse_one(sql)
        try:
            check_operators(
                tree,
                lambda names: {n: ops[n] for n in names if n in ops},
                lambda names: names & {"nl2sql_adv_row_volatile"},
            )
            refused = False
        except CandidateRefused:
            refused = True
        assert refused is not ok, sql


def test_check_memo_asks_each_name_once_per_question():
    # CheckMemo: a name looked up for one candidate is not looked up again for the next
    from nl2sql.generation.db_checks import CheckMemo

    asked: list[list[str]] = []

    def volatile(plpy, names):
        asked.append(list(names))
        return {n for n in names if n == "random"}

    memo = CheckMemo(plpy=None)
    assert set(memo.ask("volatile", volatile, {"random", "upper"})) == {"random"}
    assert set(memo.ask("volatile", volatile, {"upper", "random"})) == {"random"}
    assert set(memo.ask("volatile", volatile, {"upper", "lower"})) == set()
    assert asked == [["random", "upper"], ["lower"]]
    # each kind of lookup apart: the same name asked of another lookup is asked again
    assert memo.ask("denied", lambda plpy, names: {"upper": "why"}, {"upper"}) == {"upper": "why"}
