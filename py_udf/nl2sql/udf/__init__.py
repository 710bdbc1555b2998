"""The door from SQL into Python: one entry point per SQL function (docs/internals/ops.md "One
door from SQL"): ``_questions``, ``_reindex``, ``_admin``; errors become ``plpy.error``."""

from ._admin import (
    add_example,
    add_instruction,
    add_template,
    add_term,
    add_verified_query,
    approve_mined,
    calibrate,
    evaluate,
    feedback,
    load_examples,
    mine_queries,
    remove_term,
    set_setting,
    write_log,
)
from ._questions import ask, explain, explain_sql, narrate, nl2sql, retrieve
from ._reindex import (
    reindex,
    reindex_begin,
    reindex_changed,
    reindex_finish,
    reindex_plan,
    reindex_table,
    set_value_policy,
)

__all__ = [
    "add_example",
    "add_instruction",
    "add_template",
    "add_term",
    "add_verified_query",
    "approve_mined",
    "ask",
    "calibrate",
    "evaluate",
    "explain",
    "explain_sql",
    "feedback",
    "load_examples",
    "mine_queries",
    "narrate",
    "nl2sql",
    "reindex",
    "reindex_begin",
    "reindex_changed",
    "reindex_finish",
    "reindex_plan",
    "reindex_table",
    "remove_term",
    "retrieve",
    "set_setting",
    "set_value_policy",
    "write_log",
]
