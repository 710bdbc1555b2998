"""What every entry point shares: ``entry_point``, ``fail``, ``as_sql_errors``."""

from __future__ import annotations

import functools
from typing import NoReturn

from .. import version
from ..core import spi
from ..core.errors import (
    CandidateRefused,
    ConfigError,
    EmbeddingError,
    NotIndexedError,
    VersionMismatch,
)
from ..core.settings import lookup
from ..embedding import client as embed_client
from ..embedding import index_model
from ..net import deadline as net_deadline

MODELS_HINT = "see README.md, section 'Models', and docs/sql-reference.md"
CURATED_HINT = (
    "pass one read-only SELECT (or, for a term, an SQL expression) over indexed tables the "
    "caller may read; see docs/curated.md, 'Verified queries, templates and business context'"
)


def fail(plpy, msg: str, hint: str | None = None) -> NoReturn:
    """Raise the SQL error the caller sees (``plpy.error``), with a hint when given.

    Args:
        plpy: PL/Python's module.
        msg: what went wrong.
        hint: what to do, or None.

    Raises:
        plpy.Error: always.
    """
    if hint:
        plpy.error(msg, hint=hint)
    plpy.error(msg)


def schema_names(schemas: list[str] | None) -> list[str] | None:
    """An SQL ``text[]`` of schema names as a list; None when NULL or empty.

    Args:
        schemas: the SQL argument.

    Returns:
        The names, or None (setting ``schemas`` applies).
    """
    return list(schemas) if schemas else None


def install_cancel_point(plpy) -> None:
    """Give ``net.deadline`` this backend's cancel point, so that a network read never holds the
    main thread where a cancel cannot land (docs/internals/net.md); beside the database
    (``client._plpy``: it reads its own statement clock) Ctrl-C interrupts a read by itself.

    Args:
        plpy: PL/Python's module, or the client's stand-in.
    """
    inside = not hasattr(plpy, "statement_remaining_s")
    net_deadline.install(functools.partial(spi.cancel_point, plpy) if inside else None)


def entry_point(fn):
    """Decorate an entry point: ``version.check``, then the embedder of setting ``embedder``.

    Args:
        fn: the entry point; its first parameter is ``plpy``.

    Returns:
        The wrapped function, same signature.

    Raises:
        plpy.Error: (from the wrapper) the versions differ; the hint says what to run.
    """

    @functools.wraps(fn)
    def wrapper(plpy, *args, **kwargs):
        install_cancel_point(plpy)
        try:
            version.check(plpy)
        except VersionMismatch as e:
            fail(plpy, str(e), getattr(e, "hint", None))
        _configure_embedder(plpy)
        return fn(plpy, *args, **kwargs)

    return wrapper


def _configure_embedder(plpy) -> str:
    """Point this backend's embeddings at the shared process or in-process per ``embedder`` (a
    stored value that does not parse counts as the default, so ``set_setting`` can repair it)."""
    keys = ("embedder", "embedding_precision", index_model.KEY, index_model.ENDPOINT_KEY)
    keys += (index_model.VALUE_KEY,)
    rows = spi.query(
        plpy, "SELECT key, value FROM nl2sql.setting WHERE key = ANY($1)", [list(keys)], ["text[]"]
    )
    got = {r["key"]: r["value"] for r in rows}
    mode, prec = (_parsed(k, got.get(k)) for k in keys[:2])
    # beside the database there is no server process to share: the client names its embedder
    mode = getattr(plpy, "embedder", None) or mode
    embed_client.configure(mode)
    # the index's model when one is recorded: its vectors are only compared with its own
    index_model.configure(
        plpy,
        got.get(index_model.KEY),
        got.get(index_model.ENDPOINT_KEY),
        prec,
        got.get(index_model.VALUE_KEY),
    )
    return mode


def _parsed(key: str, text: str | None):
    """A setting's stored text parsed, or its default when none is stored or it does not parse
    (so ``set_setting`` can repair it)."""
    decl = lookup(key)
    try:
        return decl.parse(text) if text is not None else decl.default
    except ConfigError:
        return decl.default


def as_sql_errors(plpy, what: str, fn, *args):
    """Call ``fn(plpy, *args)``; its input errors become one SQL error naming ``nl2sql.<what>``
    (kept as is when the message names its function already), with the error's ``hint``.

    Args:
        plpy: PL/Python's module.
        what: the SQL function's name, for the message.
        fn: the subpackage's function.
        *args: its arguments after ``plpy``.

    Returns:
        What ``fn`` returns.

    Raises:
        plpy.Error: ``fn`` raised ``CandidateRefused``, ``ValueError`` (``ConfigError``),
            ``NotIndexedError`` or ``EmbeddingError``.
    """
    try:
        return fn(plpy, *args)
    except CandidateRefused as e:
        fail(plpy, f"nl2sql.{what}: {e}", CURATED_HINT)
    except (ValueError, NotIndexedError) as e:
        msg = str(e) if str(e).startswith("nl2sql") else f"nl2sql.{what}: {e}"
        fail(plpy, msg, getattr(e, "hint", None))
    except EmbeddingError as e:
        fail(plpy, f"nl2sql: {e}")
