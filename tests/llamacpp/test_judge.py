"""The judge (``selection = judge``) through llama-server: the candidates come from scripted
loopback models (three groups of two, so the vote is unsure whatever Gemma writes), and the
judge is Gemma 3 270M on the real server. Gemma is a small *base* model: nothing here asserts
that its verdict is right, only that the judge step runs over the real server's protocol (both
orders asked, its replies recorded whatever their shape) and that the answer is one of the
candidates.
"""

from __future__ import annotations

from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.loopback import Rule

DB = "nl2sql_llamacpp_judge"
ANSWERS = {  # loopback model -> its scripted SQL: three groups of two
    "a": "SELECT count(*) FROM singer",
    "b": "SELECT count(*) FROM singer",
    "c": "SELECT count(*) FROM concert",
    "d": "SELECT count(*) FROM concert",
    "e": "SELECT count(*) FROM stadium",
    "f": "SELECT count(*) FROM stadium",
}


def test_the_judge_runs_against_llama_server_and_answers_with_a_candidate(
    llama_server, llm, cluster
):
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    try:
        conn.execute(demo_sql())
        conn.execute("CREATE EXTENSION nl2sql CASCADE")
        conn.execute("SELECT nl2sql.reindex()")
        llm.clear()
        for i, (name, sql) in enumerate(ANSWERS.items()):
            llm.add_rule(Rule(model=name, response=sql))
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, priority => %s)",
                (name, name, llm.base_url, i),
            )
        conn.execute(
            "SELECT nl2sql.add_model('gemma', 'gemma-3-270m', base_url => %s, "
            "timeout_s => 180, max_tokens => 48, priority => 9)",
            (llama_server.base_url,),
        )
        for k, v in [
            ("selection", "judge"),
            ("selection_model", "gemma"),
            ("tie_break", "priority"),
            ("repair_rounds", "0"),
            ("model_rounds", "two"),
        ]:
            conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
        q = "How many singers do we have?"
        trace = conn.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
    finally:
        conn.close()
    j = trace["judge"]
    assert j["model"] == "gemma" and j["skipped"] is None and j["top_share"] < 0.6
    assert set(j["prompts"]) == {"AB", "BA"}
    for order in ("AB", "BA"):  # every sample came back from the server, any shape
        assert order in j["errors"] or len(j["replies"][order]) == 2, j
        assert len(j["verdicts"][order]) == len(j["replies"][order])
        assert all(v in ("A", "B", "TIE", None) for v in j["verdicts"][order])
    assert j["winner"] in ("vote", "second") and j["why"]
    executed = {c["sql"] for c in trace["candidates"] if c["status"] == "ok"}
    assert trace["sql"] in executed and trace.get("error") is None
    # its FinSQL call and its judge calls (one per order at least) are counted
    assert trace["tokens"]["by_model"]["gemma"]["calls"] >= 3
