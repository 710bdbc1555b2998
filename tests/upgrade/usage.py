"""What a DBA and an analyst do with an installed nl2sql, and the rows they own: shared by the
upgrade and the dump/restore tests (a helper module, not a test module)."""

from __future__ import annotations

from conftest import add_models
from nl2sql_indexer.dev.loopback import Rule

Q1, SQL1 = "How many singers do we have?", "SELECT count(*) FROM singer"
Q2, SQL2 = "List the names of all stadiums.", "SELECT name FROM stadium"

USER_ROWS = {
    "model": "SELECT name, base_url, model, api_key_env, temperature, timeout_s, max_tokens, "
    "position, enabled, dialect FROM nl2sql.model ORDER BY name",
    "setting": "SELECT key, value FROM nl2sql.setting ORDER BY key",
    "example": "SELECT id, db_id, question, sql, source, embedding IS NOT NULL FROM nl2sql.example "
    "WHERE source <> 'builtin' ORDER BY id",
    "example_relation": "SELECT * FROM nl2sql.example_relation ORDER BY 1, 2, 3",
    "value_policy": "SELECT * FROM nl2sql.value_policy ORDER BY 1, 2, 3",
    "query_log": "SELECT id, created_at, role_name, question, sql, confidence, error, trace "
    "FROM nl2sql.query_log ORDER BY id",
}


def user_rows(conn) -> dict[str, list]:
    return {name: conn.execute(q).fetchall() for name, q in USER_ROWS.items()}


def configure_and_use(conn, llm, prefix: str) -> None:
    """What a DBA and an analyst do with an installed nl2sql: two models, changed settings,
    examples, a value policy, questions asked (log rows)."""
    conn.execute("SELECT nl2sql.reindex()")
    add_models(conn, llm, [f"{prefix}-a", f"{prefix}-b"])
    conn.execute("SELECT nl2sql.set_setting('k_examples', '5')")
    conn.execute("SELECT nl2sql.set_setting('candidate_timeout_ms', '4000')")
    conn.execute("SELECT nl2sql.set_setting('send_values', 'on')")  # a default, set explicitly
    conn.execute(
        "SELECT nl2sql.add_example('How many stadiums are there?', 'SELECT count(*) FROM stadium')"
    )
    conn.execute(
        "SELECT nl2sql.add_example('Which singers are from France?', "
        "'SELECT name FROM singer WHERE country = ''France''', 'other_db')"
    )
    conn.execute("SELECT nl2sql.set_value_policy('singer', false, 'name')")
    for q, sql in ((Q1, SQL1), (Q2, SQL2)):
        for m in (f"{prefix}-a", f"{prefix}-b"):
            llm.add_rule(Rule(model=m, question=q, response=sql))
        assert conn.execute("SELECT nl2sql(%s)", (q,)).fetchone()[0].lower() == sql.lower()
