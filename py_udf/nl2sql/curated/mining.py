"""Query-log mining: ``nl2sql.mine_queries(limit)`` turns the most frequent read-only queries of
``pg_stat_statements`` into question/SQL pairs that wait for a DBA's approval.

The statements of this database (``dbid``), most calls first, are read from the
``pg_stat_statements`` view (its extension must be created in the database and the library
preloaded). Each one is parsed with sqlglot and skipped, with a counted reason, when it is not
one query (``dml``, ``ddl``, ``utility``, ``unparsable``), reads nl2sql's own schema or calls its
functions (``nl2sql``), reads the system catalogs (``catalog``), reads no relation
(``no_table``), reads a relation that is not indexed or that the calling role may not read
(``not_indexed``), fails the candidate check (``refused``: the same check as
``add_verified_query``), has a parameter no template can bind (``parameters``), its text is
hidden from the calling role (``hidden``) or it was mined before (``already_mined``).

Normalised statements: pg_stat_statements replaces constants by ``$1``, ``$2``…; such a
statement becomes a **template** (``verified.add_template``'s kind): each ``$n`` is renamed to a
named parameter ``:name`` after the column it is compared with (``:country``; ``:limit``,
``:offset`` for LIMIT/OFFSET counts) and typed from that column (``verified.template_slots``:
text and numeric columns only). A statement without parameters is a plain **query**.

For each kept statement one model (the first configured: the PreSQL writer) is asked, through
the gate (``gate.Gate``: the calling role's value rules; the SQL shown with its literals replaced
when it reads a withheld column; sample values of withheld columns cleared), to write the
question it answers (a template's question shows each ``:name``). The pair is stored in
``nl2sql.mined_query`` as *pending*: nothing pending is used by retrieval or prompts. A DBA
approves it (``nl2sql.approve_mined``: a query goes into the example pool and the verified
queries, a template into the templates) or rejects it (``nl2sql.reject_mined``).

Source: query-log mining for text-to-SQL example pools (questions written for logged SQL, as in
SQL-to-text data augmentation, e.g. Guo et al. 2018, "Question generation from SQL queries
improves neural semantic parsing"); the queries come from PostgreSQL's pg_stat_statements.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlglot import exp

from ..core import spi
from ..core.errors import CandidateRefused, ConfigError
from ..core.sqlcheck import parse_single, referenced_tables, to_sql
from ..core.types import Schema

HIDDEN_TEXT = "<insufficient privilege>"
"""What pg_stat_statements shows instead of another role's statement text to a role that is
neither superuser nor member of pg_read_all_stats."""
MAX_QUERY_CHARS = 20000
"""Longest statement text considered (longer ones are skipped as ``too_long``)."""
MAX_QUESTION_CHARS = 500
"""Longest question kept from a model's reply."""
PARALLEL_CALLS = 8
"""Questions asked of the model at once."""
CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})
_DML = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Copy, exp.TruncateTable)
_DDL = tuple(
    t
    for t in (
        exp.Create,
        exp.Drop,
        exp.Alter,
        getattr(exp, "Grant", None),
        getattr(exp, "Revoke", None),
        getattr(exp, "Comment", None),
    )
    if t is not None
)
_QUERY = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")  # a parameter name (a column's name), not SQL


SYSTEM_MESSAGE = (
    "You write the natural-language question that an SQL query answers, for the example pool "
    "of a text-to-SQL system. Reply with the question only, on one line, in plain English, "
    "without SQL."
)


@dataclass
class LoggedStatement:
    """One statement of ``pg_stat_statements`` (summed over the roles that ran it).

    Attributes:
        queryid: pg_stat_statements' ``queryid``.
        query: the statement's text as shown (constants normalised to ``$n``).
        calls: how many times it ran in this database.
    """

    queryid: int | None
    query: str
    calls: int


@dataclass
class MinedCandidate:
    """A statement kept for mining: what the model is asked about and what is stored.

    Attributes:
        statement: the logged statement.
        kind: ``query`` (no parameters) or ``template`` (``$n`` renamed to ``:name``).
        sql: the SQL to store and approve (PostgreSQL; a template's with ``:name``).
        parameters: a template's parameters (``verified.Slot`` as dicts), in SQL order.
        tables: ``schema.table`` names it reads (lower-cased, as ``referenced_tables``).
    """

    statement: LoggedStatement
    kind: str
    sql: str
    parameters: list[dict[str, Any]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# pure: selecting and normalising candidates
# --------------------------------------------------------------------------------------------


def classify(query: str, own_functions: frozenset[str]) -> tuple[exp.Expression | None, str | None]:
    """Parse a logged statement and say why it is no candidate, if it is not.

    Args:
        query: the statement text.
        own_functions: lower-cased names of the nl2sql extension's functions.

    Returns:
        ``(tree, None)`` for one query (SELECT or set operation) over relations that are not
        nl2sql's or the catalogs'; ``(tree or None, reason)`` otherwise, the reason one of
        ``hidden``, ``too_long``, ``unparsable``, ``dml``, ``ddl``, ``utility``, ``nl2sql``,
        ``catalog``, ``no_table``.
    """
    if query.strip() == HIDDEN_TEXT:
        return None, "hidden"
    if len(query) > MAX_QUERY_CHARS:
        return None, "too_long"
    try:
        tree = parse_single(query)
    except (CandidateRefused, RecursionError):
        return None, "unparsable"
    if isinstance(tree, _DML) or tree.find(*_DML) is not None:
        return tree, "dml"
    if isinstance(tree, _DDL):
        return tree, "ddl"
    if not isinstance(tree, _QUERY) or tree.find(exp.Into, exp.Command) is not None:
        return tree, "utility"
    from ..generation.safety import function_names

    tables = list(tree.find_all(exp.Table))
    if any(t.db.lower() == "nl2sql" for t in tables) or function_names(tree) & own_functions:
        return tree, "nl2sql"
    if any(
        t.db.lower() in CATALOG_SCHEMAS or (not t.db and t.name.lower().startswith("pg_"))
        for t in tables
    ):
        return tree, "catalog"
    if not referenced_tables(tree):
        return tree, "no_table"
    return tree, None


def parameter_name(column: list[str] | tuple | None, node: exp.Expression, taken: set[str]) -> str:
    """A template parameter's name: its column's name (``limit``/``offset`` for those counts),
    made unique with a number.

    Args:
        column: ``[schema, table, column]`` it is compared with, or None.
        node: the parameter node (its parent tells LIMIT from OFFSET).
        taken: names already used (the new one is added).

    Returns:
        The name, a plain lower-case identifier (``p`` when the column's name is not one).
    """
    if column:
        base = column[2].lower()
    else:
        base = "offset" if isinstance(node.parent, exp.Offset) else "limit"
    if not _NAME.fullmatch(base):
        base = "p"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def as_template(tree: exp.Expression, schema: Schema) -> tuple[str, str, list]:
    """Turn a normalised statement's ``$n`` parameters into named, typed template parameters.

    Each ``$n`` becomes ``:name`` (``parameter_name``; the same ``$n`` the same name) and is
    typed by ``verified.template_slots`` from the column it is compared with.

    Args:
        tree: the parsed statement; not changed.
        schema: the calling role's schema.

    Returns:
        ``(kind, sql, slots)``: ``query`` with the SQL as is and no slots when it has no
        parameter, else ``template``, the SQL with ``:name`` parameters and its
        ``verified.Slot`` list.

    Raises:
        CandidateRefused: a parameter is not compared with a text or numeric column (nor a
            LIMIT/OFFSET count), so no question could bind it.
    """
    from .verified import parameter_sites, template_slots

    tree = tree.copy()
    params = list(tree.find_all(exp.Parameter, bfs=False))
    if not params:
        return "query", to_sql(tree), []
    for p in params:
        p.replace(exp.Placeholder(this=f"_p{p.name}"))
    sites = {
        ph.name: col
        for ph, col, _ in parameter_sites(tree, schema)
        if isinstance(ph, exp.Placeholder)
    }
    taken: set[str] = set()
    names: dict[str, str] = {}
    for ph in list(tree.find_all(exp.Placeholder, bfs=False)):
        if ph.name not in names:
            names[ph.name] = parameter_name(sites.get(ph.name), ph, taken)
        ph.replace(exp.Placeholder(this=names[ph.name]))
    slots = template_slots(tree, schema, " ".join(f":{n}" for n in names.values()))
    return "template", template_text(tree), slots


def template_text(tree: exp.Expression) -> str:
    """PostgreSQL text of a template whose parameters are named placeholders, each written
    ``:name`` (the form ``add_template`` takes; sqlglot's PostgreSQL writes ``%(name)s``).

    Args:
        tree: the template's tree; not changed.

    Returns:
        The SQL text.
    """

    def named(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Placeholder) and node.name:
            return exp.Var(this=f":{node.name}")
        return node

    return to_sql(tree.copy().transform(named))


def clean_question(reply: str | None) -> str:
    """The question in a model's reply: its first non-empty line, without a ``Question:``
    label, quotes or surrounding markup, at most ``MAX_QUESTION_CHARS`` characters.

    Args:
        reply: the model's text.

    Returns:
        The question, or ``''`` when there is none.
    """
    for line in (reply or "").replace("\x00", "").splitlines():
        line = line.strip().strip("`*# ").strip()
        if line.lower().startswith("question:"):
            line = line[len("question:") :].strip()
        line = line.strip("\"'“”").strip()
        if line:
            return line[:MAX_QUESTION_CHARS]
    return ""


def check_question(question: str, cand: MinedCandidate) -> str | None:
    """Say what is wrong with a written question, if anything.

    Args:
        question: the cleaned question.
        cand: the candidate it was written for.

    Returns:
        None when usable; else why not (empty, or a template's question that does not show
        each parameter exactly once as ``:name``).
    """
    if not question:
        return "the model wrote no question"
    if cand.kind == "template":
        from .verified import _MARKER

        names = [p["name"] for p in cand.parameters]
        shown = _MARKER.findall(question)
        missing = [n for n in names if n not in shown]
        extra = sorted(set(shown) - set(names))
        if missing or extra:
            return (
                "the question must show each parameter as :name"
                + (f"; missing {', '.join(':' + n for n in missing)}" if missing else "")
                + (f"; not a parameter {', '.join(':' + n for n in extra)}" if extra else "")
            )
    return None


def relevant_schema(schema: Schema, tables: list[str]) -> Schema:
    """The part of the role's schema a mined query reads (its tables, their foreign keys).

    Args:
        schema: the role's schema (after the gate cleared withheld sample values).
        tables: names the query reads (``referenced_tables``).

    Returns:
        A ``Schema`` with those tables and the foreign keys between them.
    """
    want = {n.lower() for n in tables}
    keep = [
        t
        for t in schema.tables
        if t.name.lower() in want or f"{t.schema}.{t.table}".lower() in want
    ]
    names = {t.name for t in keep}
    fks = [f for f in schema.foreign_keys if f.table in names and f.ref_table in names]
    return Schema(tables=keep, foreign_keys=fks)


def question_prompt(gate, cand: MinedCandidate, schema: Schema) -> str:
    """The user message asking for the question a mined query answers.

    Every part passes the gate: the tables as the role sees them (sample values of withheld
    columns already cleared by ``Gate.__init__``) and the SQL (``Gate.sql``: literals replaced
    when it reads a withheld column).

    Args:
        gate: the call's ``gate.Gate``.
        cand: the candidate.
        schema: the role's schema (the gate's).

    Returns:
        The prompt text.
    """
    from ..model.prompts import render_schema

    shown = gate.sql("mining", cand.sql)
    if shown != cand.sql and cand.kind == "template":
        shown = template_text(parse_single(shown))  # parameters as :name again
    parts = [
        "/* Tables the query reads: */",
        render_schema(relevant_schema(schema, cand.tables)),
        "/* SQL query from this database's query log: */",
        shown,
    ]
    if cand.kind == "template":
        names = ", ".join(f":{p['name']}" for p in cand.parameters)
        parts.append(
            f"/* {names} are parameters: values a user gives. Show each one in the "
            f"question exactly as written, where its value goes (e.g. 'Which singers "
            f"from :country are older than :age?'). */"
        )
    parts.append(
        "/* Write the one question a user of this database would ask that this query "
        "answers exactly. Reply with the question only. */"
    )
    return "\n".join(parts)


def tally(skipped: dict[str, int], reason: str) -> None:
    """Count one skipped statement under ``reason``.

    Args:
        skipped: reason → count, changed in place.
        reason: why it was skipped.
    """
    skipped[reason] = skipped.get(reason, 0) + 1


# --------------------------------------------------------------------------------------------
# the database side
# --------------------------------------------------------------------------------------------


def stat_relation(plpy) -> str:
    """The qualified name of this database's ``pg_stat_statements`` view, checked readable.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        ``schema.pg_stat_statements``, quoted.

    Raises:
        ConfigError: the extension is not created in this database, or its library is not
            preloaded; the message says what to do.
    """
    how = (
        "add pg_stat_statements to shared_preload_libraries in postgresql.conf (e.g. "
        "shared_preload_libraries = 'pg_cron,pg_stat_statements'), restart the server, then "
        "run CREATE EXTENSION pg_stat_statements; in this database"
    )
    rows = spi.query(
        plpy,
        "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN "
        "pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_stat_statements'",
    )
    if not rows:
        raise ConfigError(
            f"nl2sql.mine_queries: pg_stat_statements is not installed in this database: {how}"
        )
    rel = plpy.quote_ident(rows[0]["nspname"]) + ".pg_stat_statements"
    try:
        with plpy.subtransaction():
            spi.run(plpy, f"SELECT count(*) FROM {rel}")
    except plpy.SPIError as e:
        if getattr(e, "sqlstate", None) == "57014":  # the user cancelled
            raise
        raise ConfigError(
            f"nl2sql.mine_queries: pg_stat_statements cannot be read "
            f"({str(e).splitlines()[0]}): {how}"
        ) from None
    return rel


def own_functions(plpy) -> frozenset[str]:
    """Lower-cased names of the functions of the nl2sql extension.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        The names.
    """
    rows = spi.query(
        plpy,
        "SELECT DISTINCT lower(p.proname) AS n FROM pg_catalog.pg_depend d "
        "JOIN pg_catalog.pg_proc p ON p.oid = d.objid "
        "JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid "
        "WHERE e.extname = 'nl2sql' AND d.deptype = 'e' "
        "AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass",
    )
    return frozenset(r["n"] for r in rows)


def logged_statements(plpy, rel: str) -> list[LoggedStatement]:
    """This database's statements of ``pg_stat_statements``, most calls first.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        rel: ``stat_relation``'s name.

    Returns:
        One ``LoggedStatement`` per queryid (calls summed over roles), and one per statement
        whose queryid and text pg_stat_statements hides from the calling role (queryid None,
        text ``HIDDEN_TEXT``), most calls first.
    """
    db = (
        "dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = "
        "pg_catalog.current_database())"
    )
    rows = spi.run(
        plpy,
        f"SELECT queryid, query, calls FROM ("
        f"SELECT queryid, min(query) AS query, sum(calls)::int8 AS calls "
        f"FROM {rel} WHERE {db} AND queryid IS NOT NULL GROUP BY queryid "
        f"UNION ALL SELECT NULL, '{HIDDEN_TEXT}', calls FROM {rel} "
        f"WHERE {db} AND queryid IS NULL) s ORDER BY calls DESC, queryid",
    )
    return [LoggedStatement(r["queryid"], r["query"] or "", int(r["calls"])) for r in rows]


def prepare(
    plpy, st: LoggedStatement, schema: Schema, own: frozenset[str]
) -> tuple[MinedCandidate | None, str | None, str | None]:
    """Decide whether a logged statement is a candidate, and build it.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        st: the statement.
        schema: the calling role's schema.
        own: ``own_functions``.

    Returns:
        ``(candidate, None, None)``, or ``(None, reason, detail)`` with the skip reason and, for
        ``refused``/``parameters``, the check's message.
    """
    from ..core.catalog import known_relations
    from ..generation.safety import check_candidate_in_db
    from .verified import _dummy, fill

    tree, reason = classify(st.query, own)
    if reason:
        return None, reason, None
    known = known_relations(schema)
    if any(n not in known for n in referenced_tables(tree)):
        return None, "not_indexed", None
    try:
        kind, sql, slots = as_template(tree, schema)
    except CandidateRefused as e:
        return None, "parameters", str(e)
    try:
        checked = fill(sql, slots, {s.name: _dummy(s) for s in slots}) if slots else sql
        check_candidate_in_db(plpy, checked, schema)
    except CandidateRefused as e:
        return None, "refused", str(e)
    return (
        MinedCandidate(st, kind, sql, [asdict(s) for s in slots], referenced_tables(tree)),
        None,
        None,
    )


def _known(plpy) -> tuple[set, set]:
    """(queryids, SQL texts) of mined rows not to mine again (every status but ``failed``)."""
    rows = spi.query(
        plpy, "SELECT queryid, query, sql FROM nl2sql.mined_query WHERE status <> 'failed'"
    )
    return (
        {r["queryid"] for r in rows if r["queryid"] is not None},
        {r["query"] for r in rows} | {r["sql"] for r in rows},
    )


def store(plpy, cand: MinedCandidate, question: str | None, model: str, error: str | None) -> int:
    """Insert a mined pair (``pending``, or ``failed`` with its error), or update a failed one.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        cand: the candidate.
        question: the model's question, or None when it failed.
        model: the model's name.
        error: why it failed, or None.

    Returns:
        The row's id (0 when a row of the same SQL was decided meanwhile).
    """
    rows = spi.query(
        plpy,
        "INSERT INTO nl2sql.mined_query AS m (queryid, query, kind, sql, parameters, "
        "question, calls, status, model, error) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, "
        "$9, $10) ON CONFLICT ((md5(sql))) DO UPDATE SET queryid = EXCLUDED.queryid, "
        "query = EXCLUDED.query, question = EXCLUDED.question, calls = EXCLUDED.calls, "
        "status = EXCLUDED.status, model = EXCLUDED.model, error = EXCLUDED.error, "
        "mined_at = now() WHERE m.status = 'failed' RETURNING m.id",
        [
            cand.statement.queryid,
            cand.statement.query,
            cand.kind,
            cand.sql,
            json.dumps(cand.parameters),
            question,
            cand.statement.calls,
            "failed" if error else "pending",
            model,
            error,
        ],
        ["int8", "text", "text", "text", "text", "text", "int8", "text", "text", "text"],
    )
    return rows[0]["id"] if rows else 0


def select_candidates(
    plpy,
    statements: list[LoggedStatement],
    schema: Schema,
    own: frozenset[str],
    limit: int,
    skipped: dict[str, int],
) -> tuple[list[MinedCandidate], int]:
    """Walk the statements (most calls first) until ``limit`` candidates are found.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        statements: ``logged_statements``.
        schema: the calling role's schema.
        own: ``own_functions``.
        limit: most candidates.
        skipped: reason → count, filled in.

    Returns:
        ``(candidates, considered)``: the candidates and how many statements were looked at.
    """
    ids, texts = _known(plpy)
    out: list[MinedCandidate] = []
    considered = 0
    for st in statements:
        if len(out) >= limit:
            break
        considered += 1
        if st.queryid in ids or st.query in texts:
            tally(skipped, "already_mined")
            continue
        cand, reason, _ = prepare(plpy, st, schema, own)
        if cand is None:
            tally(skipped, reason)
        elif cand.sql in texts:
            tally(skipped, "already_mined")
        else:
            texts.add(cand.sql)
            out.append(cand)
    return out, considered


def mine(plpy, limit: int) -> dict[str, Any]:
    """Mine the query log: backs ``nl2sql.mine_queries(limit)``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        limit: most statements to write a question for (1..1000).

    Returns:
        ``{"considered", "mined", "skipped": {reason: n}, "failed": [{"id", "queryid", "sql",
        "error"}], "model"}``: statements looked at, pairs stored as pending, skips by reason,
        the statements the model gave no usable question for (stored as ``failed``).

    Raises:
        ConfigError: pg_stat_statements is missing, no model is configured, or ``limit`` is
            out of range.
        NotIndexedError: nothing the role may read is indexed.
    """
    import functools

    from ..core.catalog import caller_schema
    from ..core.settings import get_settings
    from ..generation.safety import statement_remaining_s
    from ..model.config import get_models
    from ..model.gate import Gate
    from ..model.llm import call_models

    if limit is None or not 1 <= int(limit) <= 1000:
        raise ConfigError(f"nl2sql.mine_queries: limit must be between 1 and 1000, not {limit}")
    rel = stat_relation(plpy)
    st = get_settings(plpy)
    model = get_models(plpy, st)[0]
    schema = caller_schema(plpy)
    gate = Gate(schema, st.send_values)
    skipped: dict[str, int] = {}
    cands, considered = select_candidates(
        plpy, logged_statements(plpy, rel), schema, own_functions(plpy), int(limit), skipped
    )
    mined, failed = 0, []
    for i in range(0, len(cands), PARALLEL_CALLS):
        batch = cands[i : i + PARALLEL_CALLS]
        calls = [
            (model, gate.seal("mining", question_prompt(gate, c, schema), SYSTEM_MESSAGE))
            for c in batch
        ]
        replies = call_models(
            calls, functools.partial(spi.cancel_point, plpy), statement_remaining_s(plpy)
        )
        for c, r in zip(batch, replies):
            q = clean_question(r.text)
            err = r.error or check_question(q, c)
            rid = store(plpy, c, None if err else q, model.name, err)
            if err:
                failed.append(
                    {"id": rid, "queryid": c.statement.queryid, "sql": c.sql, "error": err}
                )
            else:
                mined += 1
    return {
        "considered": considered,
        "mined": mined,
        "skipped": skipped,
        "failed": failed,
        "model": model.name,
    }


def pending_row(plpy, mined_id: int) -> dict[str, Any]:
    """A mined pair by id, for approval.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        mined_id: its id.

    Returns:
        ``{id, kind, sql, question, status}``.

    Raises:
        ConfigError: no such id, or it was approved already.
    """
    rows = spi.query(
        plpy,
        "SELECT id, kind, sql, question, status FROM nl2sql.mined_query WHERE id = $1",
        [mined_id],
        ["int8"],
    )
    if not rows:
        raise ConfigError(
            f"nl2sql.approve_mined: no mined query with id {mined_id}; see "
            f"SELECT * FROM nl2sql.mined_queries"
        )
    r = dict(rows[0])
    if r["status"] == "approved":
        raise ConfigError(f"nl2sql.approve_mined: mined query {mined_id} is approved already")
    return r


def mark_approved(
    plpy, mined_id: int, question: str, example_id: int | None, verified_id: int | None
) -> None:
    """Record a pair's approval (the question as approved, what it became).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        mined_id: its id.
        question: the approved question.
        example_id: the example pool row it became (queries), or None.
        verified_id: the verified query or template it became.
    """
    spi.query(
        plpy,
        "UPDATE nl2sql.mined_query SET status = 'approved', question = $2, "
        "error = NULL, example_id = $3, verified_id = $4, decided_at = now(), "
        "decided_by = current_user WHERE id = $1",
        [mined_id, question, example_id, verified_id],
        ["int8", "text", "int8", "int8"],
    )
