"""prompts: the reference-enhanced prompt (PET-SQL §3.1) and schema subsets."""

from __future__ import annotations

from nl2sql.core.types import Column, Example, ForeignKey, Schema, Table
from nl2sql.model.gate import open_gate
from nl2sql.model.prompts import build_prompt, render_schema


def _schema():
    singer = Table(
        "singer",
        "public",
        "singer",
        [
            Column("singer_id", "integer", True, None, ["1", "2", "3"]),
            Column("name", "text", False, "full name", ["Ann", "Bo", "Cy"]),
            Column("stadium_id", "integer"),
        ],
        comment="people who sing",
    )
    stadium = Table("stadium", "public", "stadium", [Column("stadium_id", "integer", True)])
    return Schema(
        [singer, stadium], [ForeignKey("singer", ["stadium_id"], "stadium", ["stadium_id"])]
    )


def test_prompt_has_schema_instruction_values_fks_examples_and_question_last():
    """The schema and the instruction lead (the part every question on one schema shares: a
    server's prompt cache keeps it), then the question's values and examples, the question last."""
    ex = [Example(1, "lib", "How many books are there?", "SELECT count(*) FROM book")]
    values = [("singer", "name", "Ann")]
    p = build_prompt(
        "How many singers?", _schema(), open_gate().examples("finsql", ex), 3, None, values
    )
    assert (
        "CREATE TABLE singer" in p and "values: 'Ann', 'Bo', 'Cy'" in p and "values: 1, 2, 3" in p
    )
    singer = p[p.index("CREATE TABLE singer") : p.index("CREATE TABLE stadium")]
    assert "  FOREIGN KEY (stadium_id) REFERENCES stadium(stadium_id)\n);" in singer
    assert "minimize SQL execution time while ensuring correctness" in p
    assert p.index("CREATE TABLE stadium") < p.index("minimize") < p.index("-- singer.name")
    assert p.index("-- singer.name") < p.index("How many books") < p.index("How many singers?")
    other = build_prompt("How many stadiums?", _schema(), [], 3)
    shared = p[: p.index("minimize")]
    assert other.startswith(shared) and other.index("minimize") == len(shared)
    assert p.rstrip().endswith("How many singers? */")
    assert "full name" in p and "people who sing" in p


def test_schema_subset_keeps_only_linked_tables_and_their_fks():
    sub = _schema().subset({"singer"})
    assert sub.table_names() == ["singer"] and sub.foreign_keys == []
    assert "stadium" not in render_schema(sub).split("CREATE TABLE singer")[0]
