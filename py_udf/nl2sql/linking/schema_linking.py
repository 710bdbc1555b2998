"""Schema linking (docs/internals/retrieval.md). Source: PET-SQL (Li et al. 2024) §3.3 (R_s
0.98, Tables 5/6); OpenSearch-SQL (Xie et al. 2024) §3.4; MCS-SQL (Lee et al. 2024) §3.1."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..core.types import Schema, Table
from ..model.masking import inflections, name_words, tokenize
from ._schema_graph import (
    entity_forms,
    fk_bridges,
    named_references,
    nearest_with_column,
    single_column_keys,
    table_lookup,
)
from .presql_reading import (
    presql_join_groups,
    presql_links,
    presql_stray_columns,
    presql_token_tables,
    presql_written_joins,
)


@dataclass
class Linked:
    """The linked schema: ``tables``, ``columns`` (``table.column``) in link order, and ``why``:
    table -> reasons (``presql``, ``value t.c = 'v' (exact 1.00)``, ``fk bridge a - b``)."""

    tables: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    why: dict[str, list[str]] = field(default_factory=dict)

    def add_table(self, table: str, reason: str) -> None:
        """Link ``table`` (once) and record ``reason`` for it (once).

        Args:
            table: the table's prompt name.
            reason: why it is linked (shown in the trace).
        """
        if table not in self.tables:
            self.tables.append(table)
        reasons = self.why.setdefault(table, [])
        if reason not in reasons:
            reasons.append(reason)

    def add_column(self, table: str, column: str, reason: str) -> None:
        """Link ``table.column`` (and its table) and record ``reason`` for the table.

        Args:
            table: the table's prompt name.
            column: the column's name.
            reason: why it is linked (recorded for the table).
        """
        self.add_table(table, reason)
        name = f"{table}.{column}"
        if name not in self.columns:
            self.columns.append(name)

    def to_json(self) -> dict:
        """Return the linked schema as a JSON-able dict for the trace.

        Returns:
            ``{"tables": [...], "columns": [...], "why": {table: [reasons]}}`` (the lists and dict
            themselves, not copies).
        """
        return {"tables": self.tables, "columns": self.columns, "why": self.why}


def schema_words(schema: Schema) -> frozenset[str]:
    """Collect the words of every table and column name with their singular/plural forms.

    Args:
        schema: the schema (``catalog.load_schema``).

    Returns:
        frozenset[str]: lower-cased ``masking.name_words`` and their ``masking.inflections``.
    """
    return _schema_words(
        tuple(n for t in schema.tables for n in [t.table] + [c.name for c in t.columns])
    )


@lru_cache(maxsize=16)
def _schema_words(names: tuple[str, ...]) -> frozenset[str]:
    out: set[str] = set()
    for n in names:
        for w in name_words(n):
            out |= inflections(w)
    return frozenset(out)


def _contains(longer: list[str], shorter: list[str]) -> bool:
    n = len(shorter)
    return n < len(longer) and any(longer[i : i + n] == shorter for i in range(len(longer) - n + 1))


def linking_values(
    schema: Schema,
    values: list,
    value_min: float,
    presql_columns: set[tuple[str, str]] = frozenset(),
) -> list:
    """Select the matched values that link their column (OpenSearch-SQL §3.4).

    Args:
        schema: the schema the values were retrieved from (``catalog.load_schema``).
        values: ``values.ValueMatch`` list.
        value_min: float in [0, 1], the least score of a non-exact match.
        presql_columns: (table prompt name, column name) pairs PreSQL reads, lower-cased.

    Returns:
        The ValueMatch objects that link, in input order.
    """
    words = schema_words(schema)
    names = {(t.schema, t.table): t.name.lower() for t in schema.tables}

    def toks(text: str) -> list[str]:
        return [t.lower() for t in tokenize(text) if t[0].isalnum()]

    exact_phrases = [toks(v.phrase) for v in values if v.how == "exact"]
    explained = {
        v.value.lower()
        for v in values
        if (names.get((v.schema, v.table)), v.column.lower()) in presql_columns
    }
    keys = _key_columns(schema)
    in_keys: dict[str, set[tuple[str | None, str]]] = {}
    for v in values:
        col = (names.get((v.schema, v.table)), v.column.lower())
        if col in keys:
            in_keys.setdefault(v.value.lower(), set()).add(col)
    out = []
    for v in values:
        if v.source == "evidence_ngram" or not (v.how == "exact" or v.score >= value_min):
            continue
        if (
            len(in_keys.get(v.value.lower(), ())) > 1
            and (names.get((v.schema, v.table)), v.column.lower()) in keys
        ):
            continue
        tk = toks(v.phrase)
        if v.source == "question" and tk and all(t in words for t in tk):
            continue
        if any(_contains(longer, tk) for longer in exact_phrases):
            continue
        if (
            v.value.lower() in explained
            and (names.get((v.schema, v.table)), v.column.lower()) not in presql_columns
        ):
            continue
        out.append(v)
    return out


def link_schema(
    schema: Schema,
    presql: str | None,
    values: list,
    similar_columns: list,
    value_min: float = 0.9,
    presql_schema: Schema | None = None,
    presql_text: str | None = None,
    question: str | None = None,
    semantic: list[tuple[str, str]] = (),
) -> Linked:
    """Link the schema: PreSQL's tables and columns, matched values, the semantic model's objects
    the question names, similar columns, FK bridges (over the model's relationships too).

    Args:
        schema: the schema the calling role may see (``catalog.load_schema``).
        presql: the PreSQL's text, or None.
        values: ``values.ValueMatch`` list.
        similar_columns: (schema, table, column, similarity) tuples above the caller's threshold.
        value_min: float in [0, 1], the least score of a non-exact value match that links.
        presql_schema: the schema the PreSQL prompt showed; None for ``schema``.
        presql_text: the PreSQL as the model wrote it (its tokens name tables when it starts as
            a query and ``presql`` names none); None for ``presql``.
        question: the question, for ``named_key_targets``; None skips them.
        semantic: ``(table prompt name, reason)`` of the semantic objects the question names
            (``semantic.model.SemanticModel.links``).

    Returns:
        Linked with the reasons per table.
    """
    lookup = table_lookup(schema)
    linked = Linked()
    tabs, cols = presql_links(presql, schema)
    _link_presql_tables(linked, schema, lookup, tabs, (presql, presql_text), presql_schema)
    for t, c in cols:
        linked.add_column(t, c, "presql")
    pre_cols = {(t.lower(), c.lower()) for t, c in cols}
    _link_value_columns(linked, schema, lookup, values, value_min, pre_cols)
    _link_stray_columns(linked, schema, lookup, presql, tabs)
    for t, why in named_key_targets(schema, pre_cols, question):
        if t not in linked.tables:
            linked.add_table(t, why)
    for t, why in semantic:
        if t.lower() in lookup:
            linked.add_table(lookup[t.lower()].name, why)
    _link_similar_columns(linked, schema, lookup, similar_columns, tabs)
    _link_fk_bridges(linked, schema, presql, tabs)
    return linked


def _link_presql_tables(
    linked: Linked,
    schema: Schema,
    lookup: dict[str, Table],
    tabs: list[str],
    texts: tuple[str | None, str | None],
    presql_schema: Schema | None,
) -> None:
    """Link PreSQL's parsed tables; else the tables the tokens of a text that starts as a
    query name (``texts``: the cleaned PreSQL, then the model's own text); else every table of
    the schema the PreSQL prompt showed (``presql_schema`` or ``schema``): prose never narrows."""
    for t in tabs:
        linked.add_table(t, "presql")
    for text in dict.fromkeys(x for x in texts if x and not tabs):
        found = presql_token_tables(text, schema)
        for t in found:
            linked.add_table(t, "presql tokens")
        if found:
            break
    if not linked.tables:
        for t in (presql_schema or schema).tables:
            if t.name.lower() in lookup:
                linked.add_table(t.name, "presql schema (no table read from PreSQL)")


def _link_stray_columns(
    linked: Linked, schema: Schema, lookup: dict[str, Table], presql: str | None, tabs: list[str]
) -> None:
    """Link, for each column PreSQL reads from a table that lacks it (``presql_stray_columns``),
    the table nearest to PreSQL's tables that has it (``nearest_with_column``), when one table
    alone is nearest (a name such as ``id`` that several hold links nothing). The rule
    came from the commonest linking miss on the visible data (docs/benchmarks.md, "Stray
    columns"): with 13 systems' recorded SQL as PreSQL on 9 Spider databases, 66 of 209 gold
    tables left out held a column the PreSQL had put in another table (3 of 142 after); on
    superhero with 11 models' SQL, all 5 (none after)."""
    for col in presql_stray_columns(presql, schema):
        nearest = nearest_with_column(schema, tabs, col)
        for t in nearest if len(nearest) == 1 else []:
            name = next(c.name for c in lookup[t.lower()].columns if c.name.lower() == col)
            linked.add_column(t, name, f"stray column {col} -> {t}")


def _link_value_columns(
    linked: Linked,
    schema: Schema,
    lookup: dict[str, Table],
    values: list,
    value_min: float,
    pre_cols: set[tuple[str, str]],
) -> None:
    """Link the columns of the matched cell values that ``linking_values`` keeps."""
    for v in linking_values(schema, values, value_min, pre_cols):
        tb = lookup.get(f"{v.schema}.{v.table}".lower())
        if tb is not None:
            linked.add_column(
                tb.name,
                v.column,
                f"value {tb.name}.{v.column} = {v.value!r} ({v.how} {v.score:.2f})",
            )


def _link_similar_columns(
    linked: Linked, schema: Schema, lookup: dict[str, Table], similar_columns: list, tabs: list[str]
) -> None:
    """Link the columns similar to the question, except key columns whose other end PreSQL
    reads (``_key_partners``)."""
    partners = _key_partners(schema)
    pre_tables = {t.lower() for t in tabs}
    for s, t, c, sim in similar_columns:
        tb = lookup.get(f"{s}.{t}".lower())
        if tb is None:
            continue
        if partners.get((tb.name.lower(), c.lower()), set()) & pre_tables:
            continue  # a key column whose other end PreSQL reads: the question names that
        linked.add_column(tb.name, c, f"column similarity {tb.name}.{c} {sim:.2f}")


def _link_fk_bridges(linked: Linked, schema: Schema, presql: str | None, tabs: list[str]) -> None:
    """Link the FK bridge tables: within each group PreSQL joins (along its written joins),
    then between all linked tables."""
    written = presql_written_joins(presql, schema)
    for group in presql_join_groups(presql, schema):
        for b, a, z in fk_bridges(group, schema, edges=written):
            linked.add_table(b, f"fk bridge {a} - {z}")
    for b, a, z in fk_bridges(list(linked.tables), schema, tabs):
        linked.add_table(b, f"fk bridge {a} - {z}")


def named_key_targets(
    schema: Schema, presql_columns: set[tuple[str, str]], question: str | None
) -> list[tuple[str, str]]:
    """Find the tables the question names that PreSQL reaches only through a key column
    (``car_makers.country`` -> countries; docs/internals/retrieval.md, "Key targets").

    Args:
        schema: the schema the calling role may see (``catalog.load_schema``).
        presql_columns: (table prompt name, column name) pairs PreSQL reads, lower-cased.
        question: the question, or None (then nothing is found).

    Returns:
        (referenced table prompt name, reason) pairs, each table once, in foreign-key order.
    """
    if not question:
        return []
    words = {w.lower() for w in tokenize(question) if w[0].isalnum()}
    by_name = {t.name: t for t in schema.tables}
    keys = [(fk.table, c, fk.ref_table) for fk in schema.foreign_keys for c in fk.columns]
    keys += named_references(schema, single_column_keys(schema))
    out: dict[str, str] = {}
    for table, col, ref_name in keys:
        ref = by_name.get(ref_name)
        if ref is None or ref_name in out or (table.lower(), col.lower()) not in presql_columns:
            continue
        names = name_words(ref.table)
        if (
            names
            and col.lower() in entity_forms(names)
            and all(inflections(w) & words for w in names)
        ):
            out[ref_name] = f"key {table}.{col} -> {ref_name} named in the question"
    return list(out.items())


def _key_columns(schema: Schema) -> set[tuple[str, str]]:
    """(table, column) of either end of every foreign key, lower-cased."""
    out: set[tuple[str, str]] = set()
    for fk in schema.foreign_keys:
        out |= {(fk.table.lower(), c.lower()) for c in fk.columns}
        out |= {(fk.ref_table.lower(), c.lower()) for c in fk.ref_columns}
    return out


def _key_partners(schema: Schema) -> dict[tuple[str, str], set[str]]:
    """(table, column) of each foreign-key column -> the tables at its other end (lower-cased)."""
    out: dict[tuple[str, str], set[str]] = {}
    for fk in schema.foreign_keys:
        for c, rc in zip(fk.columns, fk.ref_columns):
            out.setdefault((fk.table.lower(), c.lower()), set()).add(fk.ref_table.lower())
            out.setdefault((fk.ref_table.lower(), rc.lower()), set()).add(fk.table.lower())
    return out
