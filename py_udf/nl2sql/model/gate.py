"""The one gate every text bound for a model passes: the asking role's value rules, applied;
only ``Gate.seal`` makes chat messages (docs/internals/model.md "The gate")."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Tokenizer

from ..core.errors import CandidateRefused, GateError
from ..core.names import resolve
from ..core.sqlcheck import constant_values, parse_shared, without_constants
from ..core.types import Example, Schema
from . import prompts
from .masking import literal_phrases, mask_question
from .prompts import ShownSQL

LOCAL_DB = "local"
"""``db_id`` of the examples written for this database (``nl2sql.add_example``'s default)."""
VERIFIED_DB = "verified"
"""``db_id`` of verified queries shown as examples (``verified.as_examples``): this database's."""
_THIS_DATABASE = frozenset({LOCAL_DB, VERIFIED_DB})  # examples whose literals are this data's
WITHHELD = "[value withheld]"
_SEAL = object()
# a double- or single-quoted span of an error message: PostgreSQL does not escape a quote inside
# a quoted value (`"a"b"`), so a span closes only at a quote followed by the end of the line,
# white space or punctuation; a quote left open withholds the rest of the line. An apostrophe
# between two letters ("doesn't", O'Brien unquoted) opens no span
_QUOTED = re.compile(r'"(.*?)"(?=$|[\s,.;:)\]])|(?<![A-Za-z])\'(.*?)\'(?=$|[\s,.;:)\]])')
_OPEN_QUOTE = re.compile(r'"|(?<![A-Za-z])\'|\'(?![A-Za-z])')
_MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class Gated:
    """Chat messages that passed the gate: the only thing ``llm`` sends (made only by ``Gate.seal``)."""

    stage: str  # the stage asking: presql, finsql, repair, multiple_choice, …
    messages: tuple[dict[str, str], ...]  # {"role", "content"} each
    seal: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.seal is not _SEAL:
            raise GateError(
                "nl2sql: model messages must come from gate.Gate.seal "
                "(every text bound for a model passes the gate)"
            )

    def as_list(self) -> list[dict[str, str]]:
        """Return the messages as the openai client takes them.

        Returns:
            A new list of the message dicts.
        """
        return [dict(m) for m in self.messages]


class Gate:
    """One call's gate: the asking role's value rules and a record of what was held back."""

    def __init__(self, schema: Schema, send_values: bool):
        """Read the value rules off the role's schema; clear withheld columns' sample values.

        Args:
            schema: ``catalog.load_schema``'s result for the calling role (changed in place:
                withheld columns lose their sample values).
            send_values: setting ``send_values``.
        """
        self.send_values = bool(send_values)
        self.held: dict[str, dict[str, int]] = {}  # stage -> what was held back -> count
        self._by_table: dict[str, set[str]] = {}
        self._schema = schema
        self._words: frozenset[str] | None = None
        withheld: list[str] = []
        for t in schema.tables:
            for c in t.columns:
                if self.send_values and c.values_allowed:
                    continue
                withheld.append(f"{t.schema}.{t.table}.{c.name}")
                for key in (t.name.lower(), f"{t.schema}.{t.table}".lower(), t.table.lower()):
                    self._by_table.setdefault(key, set()).add(c.name.lower())
                if c.sample_values:
                    self.note("samples", "sample values", len(c.sample_values))
                    c.sample_values = []
        self.withheld_columns = sorted(withheld)  # schema.table.column, values withheld

    def _schema_words(self) -> frozenset[str]:
        """The schema's names (schemas, tables, columns, types), lower-cased; built once."""
        if self._words is None:
            names: set[str] = set()
            for t in self._schema.tables:
                names.update({t.name.lower(), t.table.lower(), t.schema.lower()})
                for c in t.columns:
                    names.update({c.name.lower(), c.data_type.lower()})
            self._words = frozenset(names)
        return self._words

    @property
    def withholding(self) -> bool:
        """True when some column's values are withheld (or ``send_values`` is off)."""
        return not self.send_values or bool(self.withheld_columns)

    def note(self, stage: str, what: str, n: int = 1) -> None:
        """Record that ``n`` items of kind ``what`` were held back from stage ``stage``.

        Args:
            stage: the stage.
            what: what was held back (e.g. ``rows``, ``quoted values in errors``).
            n: how many.
        """
        if n:
            kinds = self.held.setdefault(stage, {})
            kinds[what] = kinds.get(what, 0) + n

    def report(self) -> dict[str, Any]:
        """Say what the gate held back: the trace's ``values_withheld``.

        Returns:
            ``{"send_values": bool, "columns": [schema.table.column, ...], "held": {stage:
            {what: count}}}``.
        """
        return {
            "send_values": self.send_values,
            "columns": list(self.withheld_columns),
            "held": {s: dict(k) for s, k in self.held.items()},
        }

    # ---- the parts ------------------------------------------------------------------------

    def _withheld_in(self, table: str) -> set[str]:
        return self._by_table.get(table.lower(), set())

    def values(self, stage: str, triples: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """Drop the values of withheld columns (all of them with ``send_values = off``).

        Args:
            stage: the asking stage.
            triples: ``(table prompt name, column, value)`` triples.

        Returns:
            The triples that may be sent, in order.
        """
        if not self.send_values:
            self.note(stage, "values", len(triples))
            return []
        keep = [v for v in triples if v[1].lower() not in self._withheld_in(v[0])]
        self.note(stage, "values", len(triples) - len(keep))
        shown = self._rows_hold(keep)
        self.note(stage, "values of rows the role's policy hides", len(keep) - len(shown))
        return shown

    def _rows_hold(self, triples: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """Keep the triples of row-security tables whose value a row the role reads holds."""
        check = self._schema.row_check
        if check is None:
            return triples
        tables: dict[str, list] = {}  # prompt, bare and qualified name -> checked tables
        for t in self._schema.tables:
            if check.applies(t.schema, t.table):
                for key in {t.name.lower(), t.table.lower(), f"{t.schema}.{t.table}".lower()}:
                    tables.setdefault(key, []).append(t)
        asked: dict[tuple[str, str, str], list[str]] = {}  # one lookup per column
        for name, col, value in triples:
            for t in tables.get(name.lower(), []):
                asked.setdefault((t.schema, t.table, col), []).append(value)
        shown = {(*k, v) for k, vals in asked.items() for v in check.visible(*k, vals)}
        return [
            (name, col, value)
            for name, col, value in triples
            if all((t.schema, t.table, col, value) in shown for t in tables.get(name.lower(), []))
        ]

    def examples(self, stage: str, examples: list[Example]) -> list[Example]:
        """Show examples through the SQL path: this database's (``add_example``'s and verified
        queries) that would show withheld values lose their question (the masked one is shown)
        and their literals; other databases' are shown as written.

        Args:
            stage: the asking stage.
            examples: the examples to show, in order.

        Returns:
            New examples whose ``sql`` is ``ShownSQL``, in order.
        """
        out = []
        for e in examples:
            if e.db_id in _THIS_DATABASE and self._must_mask(e.sql):
                self.note(stage, "examples masked")
                out.append(
                    replace(
                        e,
                        question=_masked_question(e),
                        sql=ShownSQL(_without_literals(e.sql)),
                    )
                )
            else:
                out.append(replace(e, sql=ShownSQL(e.sql)))
        return out

    def turns(self, stage: str, turns: tuple) -> tuple:
        """Show earlier turns' SQL through the SQL path (literals replaced when they would show
        withheld values, as ``examples`` does).

        Args:
            stage: the asking stage.
            turns: the earlier turns (``types.Turn``), oldest first.

        Returns:
            New turns whose ``sql`` is ``ShownSQL``, in order.
        """
        out = []
        for t in turns:
            if self._must_mask(t.sql):
                self.note(stage, "turns masked")
                out.append(replace(t, sql=ShownSQL(_without_literals(t.sql))))
            else:
                out.append(replace(t, sql=ShownSQL(t.sql)))
        return tuple(out)

    def sql(
        self, stage: str, sql: str | None, render: Callable[[str], str] | None = None
    ) -> ShownSQL | None:
        """The gate's SQL path: how any SQL text (a candidate, a mined query, the SQL narrate
        shows beside its rows) is shown to a model.

        Args:
            stage: the asking stage.
            sql: the query, or None.
            render: rewrites the masked text for its prompt (mining's ``:name`` parameters);
                None shows it as masked.

        Returns:
            ``sql`` unchanged when it reads no withheld column, else without comments and with
            constants of every form as ``'value'`` or 0 (``SELECT ...`` when it does not parse or
            the result, tokenized again, still holds one: fails closed); None for None.
        """
        if sql is None:
            return None
        if not self._must_mask(sql):
            return ShownSQL(sql)
        self.note(stage, "literals of SQL")
        masked = _without_literals(sql)
        return ShownSQL(render(masked) if render is not None else masked)

    def expression(self, stage: str, text: str | None) -> ShownSQL | None:
        """Show an SQL expression (a business term's) through the SQL path: its literals replaced
        when it names a withheld column (an unqualified name counts for every table), every
        literal with ``send_values`` off.

        Args:
            stage: the asking stage.
            text: the expression, or None.

        Returns:
            The expression as it may be shown; ``(expression withheld)`` when values are withheld
            and it does not parse or its constants cannot be replaced (as ``sql``); None for None.
        """
        if text is None or not self.withholding:
            return None if text is None else ShownSQL(text)
        try:
            tree = parse_shared(f"SELECT {text}")
            names = set().union(*self._by_table.values()) if self._by_table else set()
            if self.send_values and not {c.name.lower() for c in tree.find_all(exp.Column)} & names:
                return ShownSQL(text)
            shown = without_constants(tree, f"SELECT {text}")
        except (CandidateRefused, SqlglotError, RecursionError):
            shown = None
        if shown is None:
            self.note(stage, "expressions withheld")
            return ShownSQL("(expression withheld)")
        self.note(stage, "literals of expressions")
        return ShownSQL(", ".join(e.sql(dialect="postgres") for e in shown.expressions))

    def _must_mask(self, sql: str) -> bool:
        return self.withholding and self._reads_withheld_sql(sql)

    def _reads_withheld_sql(self, sql: str) -> bool:
        if not self.send_values:
            return True
        try:
            tree = parse_shared(sql)
        except (CandidateRefused, SqlglotError, RecursionError):
            return True
        return self._tainted(tree)

    def _withheld_read(self, tree: exp.Expression) -> tuple[set[str], set[str]]:
        """(withheld columns of the relations ``tree`` reads, those relations' aliases)."""
        cols: set[str] = set()
        aliases: set[str] = set()
        for r in resolve(tree).relations:
            w = self._withheld_in(r.key) or self._withheld_in(r.name)
            if w:
                cols |= w
                aliases.add(r.alias)
        return cols, aliases

    def _tainted(self, tree: exp.Expression) -> bool:
        """True when the query may read a withheld column (names, ``*``, whole rows)."""
        cols, aliases = self._withheld_read(tree)
        return bool(cols) and _reads(tree, cols, aliases)

    def output_allowed(self, sql: str | None) -> list[bool] | None:
        """Per output column of ``sql``, whether its values may be sent (the lineage rule of
        result rows: a projection that names a withheld column, ``*`` or a whole row of a
        relation with one is withheld).

        Args:
            sql: the query the rows came from.

        Returns:
            ``[]`` when the query reads no withheld column (every output may be sent); else one
            bool per projection; None when none may (it does not parse, or its lineage is not
            plain: a set operation, a CTE, a derived table or a function in FROM).
        """
        try:
            tree = parse_shared(sql or "")
        except (CandidateRefused, SqlglotError, RecursionError):
            return None
        if not self._tainted(tree):
            return []  # no withheld column read: every output may be sent
        sources = [n.this for n in tree.find_all(exp.From, exp.Join)]
        if (
            not isinstance(tree, exp.Select)
            or tree.find(exp.CTE) is not None
            or any(not isinstance(s, exp.Table) for s in sources)
        ):
            return None  # lineage not plain: set operation, CTE, derived table, function
        withheld, aliases = self._withheld_read(tree)
        return [not _reads(proj, withheld, aliases) for proj in tree.expressions]

    def rows(self, stage: str, sql: str | None, rows: list[str]) -> tuple[list[str], str | None]:
        """Keep from result rows only what may be sent (multiple-choice options).

        Args:
            stage: the asking stage.
            sql: the query the rows came from (its output columns are traced to the schema's).
            rows: its first rows as ``row_to_json`` texts.

        Returns:
            ``(rows, note)``: the rows without withheld output columns (``row_to_json`` text), and
            a note for the prompt naming what was withheld (None when nothing was).
        """
        if not rows:
            return rows, None
        if not self.send_values:
            self.note(stage, "rows", len(rows))
            width = _width(rows[0])
            shape = f"{width} columns; " if width is not None else ""
            return [], f"{shape}rows withheld (cell values are not sent)"
        allowed = self.output_allowed(sql)
        if allowed == []:
            return rows, None
        out: list[str] = []
        dropped: list[str] = []
        for r in rows:
            try:
                pairs = json.loads(r, object_pairs_hook=list)
            except ValueError:  # cut short or not an object: withhold it
                pairs = None
            if not isinstance(pairs, list) or allowed is None or len(allowed) != len(pairs):
                self.note(stage, "rows", 1)
                continue
            keep = [(k, v) for (k, v), ok in zip(pairs, allowed) if ok]
            dropped = [str(k) for (k, _), ok in zip(pairs, allowed) if not ok]
            out.append(json.dumps(dict(keep), ensure_ascii=False, default=str))
        if out:
            self.note(stage, "columns of rows", len(dropped) * len(out))
            return out, (
                f"{len(dropped)} column(s) withheld: {', '.join(dropped)}" if dropped else None
            )
        return [], "rows withheld (they would show withheld columns)"

    def error(
        self, stage: str, text: str | None, sql: str | None, sqlstate: str | None = None
    ) -> str | None:
        """Withhold the data a database error message quotes.

        Args:
            stage: the asking stage.
            text: the error message (the candidate's ``reason``), or None.
            sql: the SQL that raised it: its own words may stay.
            sqlstate: the error's SQLSTATE, when known.

        Returns:
            The message as it may be sent (unchanged when no value is withheld).
        """
        if not text or not self.withholding:
            return text
        line = text.splitlines()[0][:_MAX_ERROR_CHARS]
        if sqlstate and sqlstate.upper().startswith("P0"):
            self.note(stage, "function error messages")
            return f"a function raised an error (SQLSTATE {sqlstate}); its message is withheld"
        words = self._schema_words() | _sql_words(sql)
        n = 0

        def sub(m: re.Match) -> str:
            nonlocal n
            inner = m.group(1) if m.group(1) is not None else m.group(2)
            if inner.lower() in words:
                return m.group(0)
            n += 1
            return f'"{WITHHELD}"'

        out = _QUOTED.sub(sub, line)
        kept = [m.span() for m in _QUOTED.finditer(out)]
        for m in _OPEN_QUOTE.finditer(out):  # a quote outside every closed span: open to the end
            if not any(a <= m.start() < b for a, b in kept):
                out = out[: m.start()] + f'"{WITHHELD}"'
                n += 1
                break
        self.note(stage, "quoted values in errors", n)
        if len(text.splitlines()) > 1:
            self.note(stage, "error detail lines", len(text.splitlines()) - 1)
        return out

    def seal(self, stage: str, prompt: str, system: str | None = None) -> Gated:
        """Wrap a prompt built from gated parts as the chat messages ``llm`` sends.

        Args:
            stage: the asking stage (``presql``, ``finsql``, ``repair``, ``multiple_choice``,
                ``narrate``, or a later stage's name).
            prompt: the user message, built only from parts that passed this gate.
            system: the system message; None for the SQL writers' (``prompts.messages``).

        Returns:
            ``Gated`` messages: the system message and the user message.
        """
        msgs = prompts.messages(prompt)
        if system is not None:
            msgs = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        return Gated(stage, tuple(msgs), _SEAL)


def _reads(tree: exp.Expression, cols: set[str], aliases: set[str]) -> bool:
    """Whether ``tree`` names a column of ``cols``, ``*`` (but ``count(*)``) or a whole row of
    ``aliases``."""
    for node in tree.find_all(exp.Column, exp.Star):
        if isinstance(node, exp.Star) and isinstance(node.parent, exp.Count):
            continue  # count(*) counts rows: no value of any column
        if isinstance(node, exp.Star) or isinstance(node.this, exp.Star):
            return True
        name = node.name.lower()
        if name in cols or (not node.table and name in aliases):
            return True
    return False


def _width(row: str) -> int | None:
    try:
        v = json.loads(row, object_pairs_hook=list)
    except ValueError:
        return None
    return len(v) if isinstance(v, list) else None


def _sql_words(sql: str | None) -> frozenset[str]:
    """The words of an SQL text as sqlglot's tokenizer reads them (strings unquoted), lower."""
    if not sql:
        return frozenset()
    try:
        return frozenset(t.text.lower() for t in Tokenizer().tokenize(sql[: _MAX_ERROR_CHARS * 50]))
    except (SqlglotError, RecursionError, ValueError):
        return frozenset()


def _masked_question(e: Example) -> str:
    """An example's masked question, withheld when it still holds a phrase of a constant of its
    SQL (any form): a verified question is masked by indexed values only, and a row added
    before every form counted by its plain literals only."""
    masked = e.masked_question or ""
    try:
        tree = parse_shared(e.sql)
    except (CandidateRefused, SqlglotError, RecursionError):
        return "(question withheld)"
    phrases = literal_phrases(constant_values(tree))
    if not masked or mask_question(masked, (), phrases) != mask_question(masked):
        return "(question withheld)"
    return masked


def _without_literals(sql: str) -> str:
    """``sql`` as ``without_constants`` shows it, else ``SELECT ...`` (fails closed)."""
    try:
        tree = without_constants(parse_shared(sql), sql)
    except (CandidateRefused, SqlglotError, RecursionError):
        return "SELECT ..."
    return "SELECT ..." if tree is None else tree.sql(dialect="postgres")


def open_gate() -> Gate:
    """A gate over an empty schema with values on, for calls outside a question (tests, benches).

    Returns:
        A ``Gate`` that withholds nothing.
    """
    return Gate(Schema(tables=[]), True)
