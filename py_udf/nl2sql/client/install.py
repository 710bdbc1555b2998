"""``nl2sql install``, ``upgrade`` and ``uninstall``: schema nl2sql in a database without
PL/Python, from the same SQL sources as the extension (``data/beside.json``, built by
scripts/build_extension.py), each statement read with PostgreSQL's parser
(``client._statements``). docs/install.md, "PostgreSQL without PL/Python"."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

from ..core.errors import InstallError
from ._statements import kept_statements

__all__ = ["MIN_PGVECTOR", "InstallError", "Sources", "install", "uninstall", "upgrade"]

MIN_PGVECTOR = (0, 7, 0)
"""pgvector's first version with halfvec (sql/incremental/023-value-halfvec.sql: the value
index's ``halfvec(384)`` and ``USING hnsw (embedding halfvec_cosine_ops)``); hnsw came in 0.5."""

SCHEMA_COMMENT = "nl2sql {version}, installed beside the database (nl2sql install)"
"""The comment of schema nl2sql: every role may read it, and the client's version check reads
the version from it (keep the shape: ``nl2sql <version>, installed beside the database``)."""


@dataclass(frozen=True)
class Sources:
    """The SQL sources, built: version, head.sql, incremental [(name, body)], idempotent and
    beside [(name, text)]."""

    version: str
    head: str
    incremental: list[tuple[str, str]]
    idempotent: list[tuple[str, str]]
    beside: list[tuple[str, str]]

    def outside(self) -> set[tuple[str, str]]:
        """The functions the sources create outside schema nl2sql.

        Returns:
            {(schema, name)}, e.g. {("public", "nl2sql")}.
        """
        found: set[tuple[str, str]] = set()
        for _, text in self.idempotent + self.beside:
            found |= kept_statements(text).outside
        return found

    @classmethod
    def load(cls) -> Sources:
        """Read ``nl2sql/data/beside.json`` from the installed package.

        Returns:
            The sources.
        """
        doc = json.loads(resources.files("nl2sql").joinpath("data/beside.json").read_text())
        return cls(
            doc["version"],
            doc["head"],
            [tuple(x) for x in doc["incremental"]],
            [tuple(x) for x in doc["idempotent"]],
            [tuple(x) for x in doc["beside"]],
        )


def _one(conn: psycopg.Connection, query: str, params=None):
    """The first column of the first row of ``query`` (None without rows)."""
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def _version_tuple(text: str) -> tuple[int, ...]:
    """``'0.8.0'`` → (0, 8, 0); parts that are not numbers count as 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in text.split(".")[:3])


def _check_extensions(conn: psycopg.Connection, db: str) -> None:
    """Refuse where the extension nl2sql is installed, or pgvector or pg_trgm is missing or
    pgvector is older than MIN_PGVECTOR."""
    exts = dict(conn.execute("SELECT extname, extversion FROM pg_catalog.pg_extension").fetchall())
    if "nl2sql" in exts:
        raise InstallError(
            f"nl2sql: the extension nl2sql {exts['nl2sql']} is installed in database {db}: a "
            "database has one mode, the extension (inside the server) or the install beside it; "
            "keep using the extension, or DROP EXTENSION nl2sql first"
        )
    need = ".".join(map(str, MIN_PGVECTOR))
    if "vector" not in exts:
        raise InstallError(
            f"nl2sql: pgvector is not created in database {db}: run CREATE EXTENSION vector "
            f"(pgvector {need} or later; on a managed service as its administrative role), then "
            "nl2sql install again"
        )
    if _version_tuple(exts["vector"]) < MIN_PGVECTOR:
        raise InstallError(
            f"nl2sql: pgvector {exts['vector']} in database {db} is too old: nl2sql needs "
            f"{need} or later (halfvec and hnsw indexes); run ALTER EXTENSION vector UPDATE"
        )
    if "pg_trgm" not in exts:
        raise InstallError(
            f"nl2sql: pg_trgm is not created in database {db}: run CREATE EXTENSION pg_trgm, "
            "then nl2sql install again"
        )


def _installed_version(conn: psycopg.Connection) -> str | None:
    """The version that last installed or upgraded schema nl2sql here, None when there is no
    schema nl2sql; raises InstallError for a schema nl2sql that is not nl2sql's or that the
    role does not own."""
    if _one(conn, "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'nl2sql'") is None:
        return None
    if _one(conn, "SELECT pg_catalog.to_regclass('nl2sql.migration')") is None:
        raise InstallError(
            "nl2sql: schema nl2sql exists but holds no nl2sql install (no nl2sql.migration): "
            "rename or drop that schema first"
        )
    if not _one(
        conn,
        "SELECT pg_catalog.pg_has_role(current_user, nspowner, 'MEMBER') "
        "FROM pg_catalog.pg_namespace WHERE nspname = 'nl2sql'",
    ):
        raise InstallError(
            f"nl2sql: role {_one(conn, 'SELECT current_user')} does not own schema nl2sql in "
            f"database {_one(conn, 'SELECT current_database()')}: run this as its owner (the "
            "role that ran nl2sql install) or a member of it"
        )
    return _one(
        conn,
        "SELECT applied_at_version FROM nl2sql.migration ORDER BY applied_at DESC LIMIT 1",
    )


def _check_privileges(
    conn: psycopg.Connection, db: str, exists: bool, outside: set[tuple[str, str]]
) -> None:
    """Refuse a role that may not create schema nl2sql (when it does not ``exist``; its owner
    is checked by ``_installed_version``) or the functions that live outside it
    (``public.nl2sql``)."""
    role = _one(conn, "SELECT current_user")
    if not exists:
        if not _one(conn, "SELECT pg_catalog.has_database_privilege(current_database(), 'CREATE')"):
            raise InstallError(
                f"nl2sql: role {role} may not create schemas in database {db} (it lacks CREATE "
                f"on the database): GRANT CREATE ON DATABASE {db} TO {role}, or install as the "
                "database's owner"
            )
    for schema in sorted({s for s, _ in outside}):
        if not _one(conn, "SELECT pg_catalog.has_schema_privilege(%s, 'CREATE')", (schema,)):
            raise InstallError(
                f"nl2sql: role {role} may not create functions in schema {schema} of database "
                f"{db} (nl2sql() lives there): GRANT CREATE ON SCHEMA {schema} TO {role}"
            )


def _search_path(conn: psycopg.Connection) -> None:
    """As CREATE EXTENSION sets it: nl2sql, then the schemas of vector and pg_trgm, then
    pg_temp (functions declared ``SET search_path FROM CURRENT`` keep it)."""
    schemas = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT n.nspname FROM pg_catalog.pg_extension e "
            "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname IN ('vector', 'pg_trgm') AND n.nspname <> 'nl2sql' ORDER BY 1"
        )
    ]
    path = ", ".join(sql.Identifier(s).as_string(conn) for s in ["nl2sql", *schemas, "pg_temp"])
    conn.execute(f"SET LOCAL search_path = {path}")
    conn.execute("SET LOCAL check_function_bodies = off")  # as pg_dump: bodies refer ahead
    # pg_trgm's library loaded, so that its settings are known: a function's SET of a setting
    # not yet known (a placeholder) is refused to a role that is not a superuser
    conn.execute("SELECT similarity('a', 'a')")


def _run(conn: psycopg.Connection, text: str) -> list[str]:
    """Run the statements of one source that a database without PL/Python runs; returns the
    names of the PL/Python functions stubbed."""
    kept = kept_statements(text)
    for stmt in kept.statements:
        conn.execute(stmt, prepare=False)
    return kept.stubbed


def _apply(conn: psycopg.Connection, src: Sources, say: Callable[[str], None]) -> None:
    """head.sql, the incremental files not yet recorded in nl2sql.migration (then recorded),
    every idempotent file, then sql/beside/."""
    _run(conn, src.head)
    done = dict(conn.execute("SELECT name, body FROM nl2sql.migration").fetchall())
    unknown = sorted(set(done) - {name for name, _ in src.incremental})
    if unknown:
        raise InstallError(
            f"nl2sql: this database holds migrations this nl2sql {src.version} does not know "
            f"({', '.join(unknown)}): a newer nl2sql installed it; upgrade the Python package"
        )
    new = 0
    for name, body in src.incremental:
        if name in done:
            if done[name] != body:
                say(f"warning: migration {name} changed after it ran")
            continue
        _run(conn, body)
        conn.execute(
            "INSERT INTO nl2sql.migration (name, applied_at_version, body) VALUES (%s, %s, %s)",
            (name, src.version, body),
        )
        new += 1
    say(f"incremental files applied: {new} (of {len(src.incremental)})")
    stubbed: list[str] = []
    for _, text in src.idempotent:
        stubbed += _run(conn, text)
    for _, text in src.beside:
        _run(conn, text)
    replaced = {
        r[0]
        for r in conn.execute(
            "SELECT 'nl2sql.' || p.proname FROM pg_catalog.pg_proc p WHERE p.pronamespace = "
            "'nl2sql'::regnamespace AND p.prosrc NOT LIKE '%runs in PL/Python, which this%'"
        )
    }
    left = sorted({s for s in stubbed if s not in replaced})
    say(f"functions that run beside the database (nl2sql command, Python API): {len(left)}")
    conn.execute(
        sql.SQL("COMMENT ON SCHEMA nl2sql IS {}").format(
            sql.Literal(SCHEMA_COMMENT.format(version=src.version))
        )
    )


def _ddl_tracking(conn: psycopg.Connection, say: Callable[[str], None]) -> None:
    """Say whether DDL tracking (event triggers: a superuser's) is on."""
    n = _one(
        conn,
        "SELECT count(*) FROM pg_catalog.pg_event_trigger WHERE evtname LIKE 'nl2sql_ddl_%'",
    )
    if n:
        say("DDL tracking: on (event triggers nl2sql_ddl_command_end, nl2sql_ddl_sql_drop)")
    else:
        say(
            "DDL tracking: off: creating event triggers needs a superuser, which this role is "
            "not (as on managed services); nl2sql reindex compares the catalog with the index "
            "and re-indexes what changed"
        )


def _session(dsn: str | psycopg.Connection, say: Callable[[str], None]):
    """A connection of our own (not autocommit) that relays the server's warnings to ``say``."""
    if isinstance(dsn, psycopg.Connection):
        return dsn
    try:
        conn = psycopg.connect(dsn, autocommit=False)
    except psycopg.OperationalError as e:
        raise InstallError(f"nl2sql: cannot connect: {str(e).strip()}") from None
    conn.add_notice_handler(
        lambda d: (
            say(f"{d.severity.lower()}: {d.message_primary}")
            if d.severity == "WARNING" and "DDL tracking" not in d.message_primary
            else None
        )
    )
    return conn


def _install(dsn, say: Callable[[str], None], upgrading: bool) -> str:
    """Install (``upgrading`` False) or upgrade schema nl2sql in one transaction."""
    src = Sources.load()
    conn = _session(dsn, say)
    try:
        db = _one(conn, "SELECT current_database()")
        _check_extensions(conn, db)
        have = _installed_version(conn)
        if have is not None and not upgrading:
            raise InstallError(
                f"nl2sql: nl2sql {have} is already installed in database {db}: run nl2sql upgrade"
            )
        if have is None and upgrading:
            raise InstallError(
                f"nl2sql: nl2sql is not installed in database {db}: run nl2sql install"
            )
        _check_privileges(conn, db, have is not None, src.outside())
        _search_path(conn)
        if have is None:
            conn.execute("CREATE SCHEMA nl2sql")
        _apply(conn, src, say)
        _ddl_tracking(conn, say)
        conn.commit()
    except psycopg.Error as e:
        conn.rollback()
        raise InstallError(
            f"nl2sql: {'upgrade' if upgrading else 'install'} failed, nothing was changed: "
            f"{e.diag.message_primary or e}"
        ) from None
    finally:
        if not isinstance(dsn, psycopg.Connection):
            conn.close()
    say(f"nl2sql {src.version} {'upgraded' if upgrading else 'installed'} in database {db}")
    return src.version


def install(dsn: str | psycopg.Connection, say: Callable[[str], None] = print) -> str:
    """Create schema nl2sql in a database without PL/Python (vector and pg_trgm created).

    Args:
        dsn: a libpq connection string, or a connection (not autocommit) to use.
        say: receives each line of the install's output.

    Returns:
        The version installed.

    Raises:
        InstallError: the extension nl2sql is installed there; pgvector or pg_trgm is missing
            or pgvector is too old; the role may not create the schema; nl2sql is already
            installed; a statement failed (nothing is left changed).
    """
    return _install(dsn, say, upgrading=False)


def upgrade(dsn: str | psycopg.Connection, say: Callable[[str], None] = print) -> str:
    """Apply the incremental files not yet applied and re-run every idempotent one.

    Args:
        dsn: a libpq connection string, or a connection (not autocommit) to use.
        say: receives each line of the output.

    Returns:
        The version now installed.

    Raises:
        InstallError: as ``install``; nl2sql is not installed; the role does not own the schema.
    """
    return _install(dsn, say, upgrading=True)


def _drop_outside(
    conn: psycopg.Connection, outside: set[tuple[str, str]], say: Callable[[str], None]
) -> None:
    """Drop every overload of the functions the sources create outside schema nl2sql."""
    for schema, name in sorted(outside):
        for (sig,) in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p "
            "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname = %s",
            (schema, name),
        ).fetchall():
            conn.execute(f"DROP FUNCTION {sig}")
            say(f"dropped function {sig}")


def uninstall(dsn: str | psycopg.Connection, say: Callable[[str], None] = print) -> None:
    """Drop schema nl2sql (with its event triggers, which depend on its functions) and the
    pg_cron job ``nl2sql.schedule_reindex`` made.

    Args:
        dsn: a libpq connection string, or a connection (not autocommit) to use.
        say: receives each line of the output.

    Raises:
        InstallError: the extension nl2sql is installed there (DROP EXTENSION it); nl2sql is
            not installed; the role does not own the schema; the drop failed.
    """
    conn = _session(dsn, say)
    try:
        db = _one(conn, "SELECT current_database()")
        if _one(conn, "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'nl2sql'"):
            raise InstallError(
                f"nl2sql: the extension nl2sql is installed in database {db}: remove it with "
                "DROP EXTENSION nl2sql"
            )
        if _installed_version(conn) is None:
            raise InstallError(f"nl2sql: nl2sql is not installed in database {db}")
        _drop_outside(conn, Sources.load().outside(), say)
        if _one(conn, "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron'"):
            conn.execute("SAVEPOINT cron")
            try:
                if _one(conn, "SELECT nl2sql.unschedule_reindex()"):
                    say("pg_cron job of nl2sql.schedule_reindex removed")
            except psycopg.Error as e:
                conn.execute("ROLLBACK TO SAVEPOINT cron")
                say(f"warning: the pg_cron job could not be removed: {e.diag.message_primary}")
        conn.execute("DROP SCHEMA nl2sql CASCADE")
        conn.commit()
    except psycopg.Error as e:
        conn.rollback()
        raise InstallError(f"nl2sql: uninstall failed: {e.diag.message_primary or e}") from None
    finally:
        if not isinstance(dsn, psycopg.Connection):
            conn.close()
    say(f"nl2sql removed from database {db} (schema nl2sql dropped)")
