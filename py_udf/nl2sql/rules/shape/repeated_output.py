"""``repeated_output``: a select list naming the same expression twice (``SELECT c.name,
c.name``), which no question asks for: the model meant another column. Said to the model.

Source: seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md).
"""

from __future__ import annotations

from sqlglot import exp

from .._context import Context, Outcome

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Say the first select-list expression a SELECT names twice (in a SELECT of one table,
    with or without its qualifier: ``SELECT name, singer.name FROM singer``).

    Args:
        tree: the candidate's shared parse (read only), or None.
        ctx: the candidate (not read beyond its parse).

    Returns:
        The sentence naming the expression, or None when every output differs (or there is no
        SELECT). An output holding a literal is not compared: its text could carry a cell value
        into the repair prompt past the gate.
    """
    if not isinstance(tree, exp.Select):
        return None
    # the FROM by its type: sqlglot names its key "from" or "from_" by version
    froms = [v for v in tree.args.values() if isinstance(v, exp.From)]
    one_table = not tree.args.get("joins") and [type(f.this) for f in froms] == [exp.Table]
    seen: set[str] = set()
    for e in tree.expressions:
        inner = e.this if isinstance(e, exp.Alias) else e
        # a literal's text may be a cell value (value alignment): never quoted to a model here
        if isinstance(inner, exp.Star) or inner.find(exp.Literal):
            continue
        key = _output_key(inner, one_table)
        if key in seen:
            twice = inner.sql(dialect="postgres")
            return Outcome(
                "repeated_output",
                sentence=(
                    f"the select list names {twice} twice; select each column the question "
                    "asks for, once"
                ),
            )
        seen.add(key)
    return None


def _output_key(e: exp.Expression, one_table: bool) -> str:
    """An output's text as PostgreSQL folds it; a column's without its qualifier when the SELECT
    reads one table (the qualifier can only name it)."""
    if one_table and isinstance(e, exp.Column):
        e = exp.column(e.args["this"].copy())
    return e.sql(dialect="postgres", normalize=True)
