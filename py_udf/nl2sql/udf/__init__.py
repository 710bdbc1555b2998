"""The door from SQL into Python: every PL/Python body of ``sql/idempotent`` calls one entry
point of this package (``nl2sql._boot`` aside; ``tests/unit/test_one_door.py`` checks it).

Each entry point backs one SQL function of the same name (docs/sql-reference.md: arguments,
errors, privileges; ``_reindex_*`` as ``reindex_*``, ``_log_query`` as ``write_log``). Its first
argument is ``plpy``, PL/Python's module (SPI access), the others are the SQL function's. It
calls one function of a subpackage and turns that function's errors into ``plpy.error`` with a
message saying what went wrong and a hint saying what to do (``_door``). By what they serve:
``_questions`` (asking), ``_reindex`` (indexing), ``_admin`` (everything else).
"""

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
from ._questions import ask, explain, narrate, nl2sql, retrieve
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
